#include "cli/arguments.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace qs::cli {
namespace {

std::string joined(const std::vector<std::string>& items, const char* separator)
{
    std::string s;
    for (size_t i = 0; i < items.size(); ++i)
        s += (i ? separator : "") + items[i];
    return s;
}

} // namespace

std::string helpText(const CommandSpec& spec)
{
    std::string text = "usage: quantscope-cli " + spec.synopsis + "\n\n" + spec.summary + "\n\nOptions:\n";
    std::vector<std::pair<std::string, std::string>> rows;
    for (const OptionSpec& o : spec.options) {
        std::string left = o.name;
        if (!o.valueName.empty()) {
            left += ' ';
            left += o.valueName;
        }
        std::string right = o.help;
        if (!o.choices.empty()) {
            right += ' ';
            right += joined(o.choices, "|");
        }
        if (o.required)
            right += " [required]";
        if (o.repeatable)
            right += " [repeatable]";
        rows.emplace_back(left, right);
    }
    rows.emplace_back("--help", "show this help and exit");
    size_t width = 0;
    for (const auto& row : rows)
        width = std::max(width, row.first.size());
    for (const auto& [left, right] : rows)
        text += "  " + left + std::string(width - left.size() + 2, ' ') + right + "\n";
    if (!spec.notes.empty())
        text += "\n" + spec.notes + (spec.notes.back() == '\n' ? "" : "\n");
    return text;
}

Arguments::Arguments(const CommandSpec& spec, std::span<const std::string> argv) : spec_(spec)
{
    for (size_t i = 0; i < argv.size(); ++i) {
        const std::string& arg = argv[i];
        if (arg == "--help" || arg == "-h") {
            help_ = true;
            return;
        }
        if (arg.size() > 1 && arg[0] == '-') {
            std::string name = arg, inlineValue;
            bool hasInline = false;
            if (const size_t eq = arg.find('='); eq != std::string::npos) {
                name = arg.substr(0, eq);
                inlineValue = arg.substr(eq + 1);
                hasInline = true;
            }
            const auto it = std::find_if(spec.options.begin(), spec.options.end(),
                                         [&](const OptionSpec& o) { return o.name == name; });
            if (it == spec.options.end())
                throw UsageError("unknown option '" + name + "' for " + spec.name);
            if (values_.count(name) && !it->repeatable)
                throw UsageError("option '" + name + "' given twice");
            if (it->valueName.empty()) {
                if (hasInline)
                    throw UsageError("option '" + name + "' takes no value");
                values_[name] = "";
                continue;
            }
            std::string value;
            if (hasInline) {
                value = inlineValue;
            } else {
                if (i + 1 >= argv.size() || (argv[i + 1].size() > 1 && argv[i + 1].rfind("--", 0) == 0))
                    throw UsageError("option '" + name + "' needs a value " + it->valueName);
                value = argv[++i];
            }
            if (!it->choices.empty() && std::find(it->choices.begin(), it->choices.end(), value) == it->choices.end())
                throw UsageError("option '" + name + "' got '" + value + "'; expected one of " +
                                 joined(it->choices, ", "));
            values_[name] = value;
            repeated_[name].push_back(value);
            continue;
        }
        if (spec.positionalName.empty() || positionals_.size() >= spec.positionalCount)
            throw UsageError("unexpected argument '" + arg + "'");
        positionals_.push_back(arg);
    }
    for (const OptionSpec& o : spec.options)
        if (o.required && !values_.count(o.name))
            throw UsageError("missing required option " + o.name + " " + o.valueName);
}

std::optional<std::string> Arguments::value(const std::string& name) const
{
    const auto it = values_.find(name);
    if (it == values_.end())
        return std::nullopt;
    return it->second;
}

std::vector<std::string> Arguments::values(const std::string& name) const
{
    const auto it = repeated_.find(name);
    return it == repeated_.end() ? std::vector<std::string>{} : it->second;
}

std::string Arguments::valueOr(const std::string& name, const std::string& fallback) const
{
    return value(name).value_or(fallback);
}

std::optional<int64_t> Arguments::integer(const std::string& name, int64_t min, int64_t max) const
{
    const auto text = value(name);
    if (!text)
        return std::nullopt;
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(text->c_str(), &end, 10);
    if (text->empty() || *end != '\0' || errno == ERANGE || v < min || v > max)
        throw UsageError("option '" + name + "' needs an integer in [" + std::to_string(min) + ", " +
                         std::to_string(max) + "], got '" + *text + "'");
    return v;
}

std::optional<uint64_t> Arguments::unsignedInteger(const std::string& name) const
{
    const auto text = value(name);
    if (!text)
        return std::nullopt;
    errno = 0;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(text->c_str(), &end, 10);
    if (text->empty() || (*text)[0] == '-' || *end != '\0' || errno == ERANGE)
        throw UsageError("option '" + name + "' needs a non-negative integer, got '" + *text + "'");
    return v;
}

std::optional<double> Arguments::number(const std::string& name) const
{
    const auto text = value(name);
    if (!text)
        return std::nullopt;
    errno = 0;
    char* end = nullptr;
    const double v = std::strtod(text->c_str(), &end);
    if (text->empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v))
        throw UsageError("option '" + name + "' needs a number, got '" + *text + "'");
    return v;
}

} // namespace qs::cli
