#include "rules/ruleset.h"

#include <fstream>
#include <sstream>
#include <system_error>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "rules/schema.h"

namespace qs {

using Json = nlohmann::ordered_json;

namespace {

// Deeper JSON than any rule file needs is refused while parsing.
constexpr int kMaxJsonDepth = 32;

[[noreturn]] void fail(std::string_view source, const std::string& what)
{
    throw Error(std::string(source) + ": " + what);
}

// Parses strictly (no trailing content) and refuses duplicate keys, which
// nlohmann::json would otherwise resolve silently to the last one.
Json parseRuleFile(std::string_view text, std::string_view source)
{
    struct Frame {
        bool isObject;
        std::vector<std::string> keys; // objects: keys seen so far
        std::string key;               // objects: the key being read
        size_t elements = 0;           // arrays: elements started so far
    };
    std::vector<Frame> frames;
    const auto startElement = [&] {
        if (!frames.empty() && !frames.back().isObject)
            ++frames.back().elements;
    };
    const auto where = [&]() -> std::string {
        if (frames.size() == 1)
            return "in the top-level object";
        if (frames.size() == 3 && frames[0].key == "rules" && !frames[1].isObject)
            return "in rule " + std::to_string(frames[1].elements - 1);
        return "in an object at depth " + std::to_string(frames.size());
    };
    const Json::parser_callback_t callback = [&](int depth, Json::parse_event_t event, Json& parsed) {
        using E = Json::parse_event_t;
        if (depth > kMaxJsonDepth)
            fail(source, "JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
        switch (event) {
        case E::object_start:
        case E::array_start:
            startElement();
            frames.push_back({event == E::object_start, {}, {}, 0});
            break;
        case E::key: {
            Frame& f = frames.back();
            const auto& key = parsed.get_ref<const std::string&>();
            for (const auto& seen : f.keys)
                if (seen == key)
                    fail(source, "duplicate key \"" + key + "\" " + where() + "; keep one of them");
            f.keys.push_back(key);
            f.key = key;
            break;
        }
        case E::object_end:
        case E::array_end:
            frames.pop_back();
            break;
        case E::value:
            startElement();
            break;
        }
        return true;
    };
    try {
        return Json::parse(text.begin(), text.end(), callback);
    } catch (const Json::exception& e) { // parse_error, and out_of_range for a number like 1e400
        // "[json.exception.parse_error.101] parse error at line 3, column 5: ..." without the tag.
        std::string message = e.what();
        if (const size_t tag = message.find("] "); tag != std::string::npos)
            message.erase(0, tag + 2);
        fail(source, "invalid JSON: " + message);
    }
}

} // namespace

RuleSet::RuleSet(std::vector<QuantizationRule> rules) : rules_(std::move(rules))
{
    for (size_t i = 0; i < rules_.size(); ++i)
        rules_[i].validate(i);
}

RuleSet RuleSet::fromJson(std::string_view text, std::string_view sourceName)
{
    const Json root = parseRuleFile(text, sourceName);
    if (!root.is_object())
        fail(sourceName,
             std::string("expected a JSON object {\"version\": 1, \"rules\": [...]}, got ") + root.type_name());
    for (const auto& [key, value] : root.items())
        if (key != "version" && key != "rules")
            fail(sourceName, "unknown key \"" + key + "\" at the top level; a rule file has \"version\" and \"rules\"");

    const auto version = root.find("version");
    if (version == root.end())
        fail(sourceName, "missing \"version\"; add \"version\": 1");
    if (!version->is_number_integer() || version->get<int64_t>() != kVersion)
        fail(sourceName, "unsupported version " + version->dump() + "; this Quantscope reads \"version\": 1");

    const auto rules = root.find("rules");
    if (rules == root.end())
        fail(sourceName, "missing \"rules\"; add \"rules\": [ {...}, ... ]");
    if (!rules->is_array())
        fail(sourceName, std::string("\"rules\" must be a list of rule objects, got ") + rules->type_name());

    RuleSet set;
    set.rules_.reserve(rules->size());
    for (const auto& item : *rules) {
        try {
            set.rules_.push_back(ruleFromJson(item, set.rules_.size()));
        } catch (const Error& e) {
            fail(sourceName, e.what());
        }
    }
    return set;
}

RuleSet RuleSet::load(const std::filesystem::path& file)
{
    const std::string name = file.string();
    std::error_code ec;
    const auto status = std::filesystem::status(file, ec);
    if (!std::filesystem::exists(status))
        fail(name, "no such rule file");
    if (!std::filesystem::is_regular_file(status))
        fail(name, "not a regular file");
    const std::uintmax_t bytes = std::filesystem::file_size(file, ec);
    if (ec)
        fail(name, "cannot read: " + ec.message());
    if (bytes > kMaxFileBytes)
        fail(name, std::to_string(bytes) + " bytes; a rule file may have at most " + std::to_string(kMaxFileBytes));
    std::ifstream in(file, std::ios::binary);
    if (!in)
        fail(name, "cannot open for reading (check its permissions)");
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad())
        fail(name, "read error");
    return fromJson(text.str(), name);
}

std::string RuleSet::toJson() const
{
    Json root = Json::object();
    root["version"] = kVersion;
    root["rules"] = Json::array();
    for (const auto& rule : rules_)
        root["rules"].push_back(ruleToJson(rule));
    return root.dump(2) + "\n";
}

void RuleSet::save(const std::filesystem::path& file) const
{
    const std::string text = toJson();
    writeFileAtomically(file, text.data(), text.size());
}

std::optional<size_t> RuleSet::firstMatch(std::string_view modulePath, std::string_view opType) const
{
    for (size_t i = 0; i < rules_.size(); ++i)
        if (rules_[i].matches(modulePath, opType))
            return i;
    return std::nullopt;
}

RuleResolution RuleSet::resolve(std::span<const RuleTarget> layers) const
{
    RuleResolution r;
    r.matchCount.assign(rules_.size(), 0);
    r.ruleOfLayer.reserve(layers.size());
    for (const auto& layer : layers) {
        const auto rule = firstMatch(layer.modulePath, layer.opType);
        r.ruleOfLayer.push_back(rule);
        if (rule)
            ++r.matchCount[*rule];
    }
    for (size_t i = 0; i < rules_.size(); ++i)
        if (r.matchCount[i] == 0)
            r.unusedRules.push_back(i);
    return r;
}

std::vector<RuleExplanation> RuleSet::explain(std::string_view modulePath, std::string_view opType) const
{
    std::vector<RuleExplanation> out;
    std::optional<size_t> applying;
    const std::string path(modulePath), op(opType);
    for (size_t i = 0; i < rules_.size(); ++i) {
        const QuantizationRule& rule = rules_[i];
        RuleExplanation e;
        e.rule = i;
        const std::string head = "rule " + std::to_string(i) + ": ";
        const std::string pattern = "module_path \"" + rule.modulePath.text() + "\"";
        if (!rule.matchesPath(modulePath)) {
            e.verdict = RuleVerdict::PathMismatch;
            e.text = head + pattern + " does not match the whole path \"" + path + "\"";
        } else if (!rule.listsOpType(opType)) {
            e.verdict = RuleVerdict::OpTypeNotListed;
            std::string listed;
            for (const auto& t : rule.opTypes)
                listed += (listed.empty() ? "" : ", ") + t;
            e.text = head + "op_types [" + listed + "] does not list " + op;
        } else if (applying) {
            e.verdict = RuleVerdict::Shadowed;
            e.shadowedBy = applying;
            e.text = head + "matches, but rule " + std::to_string(*applying) + " comes first and applies";
        } else {
            e.verdict = RuleVerdict::Applies;
            applying = i;
            e.text = head + "applies: " + pattern + " matches \"" + path + "\"" +
                     (rule.opTypes.empty() ? std::string() : " and op_types lists " + op);
        }
        out.push_back(std::move(e));
    }
    return out;
}

} // namespace qs
