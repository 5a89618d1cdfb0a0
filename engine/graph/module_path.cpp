#include "graph/module_path.h"

#include <algorithm>
#include <cctype>
#include <unordered_set>

#include "core/error.h"
#include "rules/regex_syntax.h"

namespace qs {
namespace {

std::vector<std::string_view> splitNonEmpty(std::string_view text, std::string_view separators)
{
    std::vector<std::string_view> parts;
    size_t start = 0;
    while (start <= text.size()) {
        const size_t end = std::min(text.find_first_of(separators, start), text.size());
        if (end > start)
            parts.push_back(text.substr(start, end - start));
        start = end + 1;
    }
    return parts;
}

std::string joinPath(const std::vector<std::string_view>& parts)
{
    std::string path;
    for (std::string_view p : parts) {
        if (!path.empty())
            path += '/';
        path += p;
    }
    return path;
}

// `Conv`, or `Conv_3` as the exporter names the second, third... op of a type in one scope.
bool isOpTypeComponent(std::string_view component, std::string_view opType)
{
    if (opType.empty() || !component.starts_with(opType))
        return false;
    const std::string_view rest = component.substr(opType.size());
    if (rest.empty())
        return true;
    return rest.size() > 1 && rest[0] == '_' && std::all_of(rest.begin() + 1, rest.end(), [](char c) {
               return std::isdigit(static_cast<unsigned char>(c));
           });
}

bool endsWithAny(std::string_view text, std::initializer_list<std::string_view> suffixes, std::string_view* matched)
{
    for (std::string_view s : suffixes)
        if (text.size() > s.size() && text.ends_with(s)) {
            *matched = s;
            return true;
        }
    return false;
}

// The first 60 bytes of a long path (cut at a UTF-8 character boundary) and "...".
std::string pathExcerpt(std::string_view path)
{
    constexpr size_t kShown = 60;
    if (path.size() <= kShown)
        return std::string(path);
    size_t end = kShown;
    while (end > 0 && (static_cast<unsigned char>(path[end]) & 0xC0) == 0x80)
        --end;
    return std::string(path.substr(0, end)) + "...";
}

} // namespace

std::string modulePathFromNodeName(std::string_view nodeName, std::string_view opType)
{
    std::vector<std::string_view> raw = splitNonEmpty(nodeName, "/");
    if (!raw.empty() && isOpTypeComponent(raw.back(), opType))
        raw.pop_back();
    // The PyTorch exporter names a nested scope by its dotted name from the
    // enclosing module, so the parent's name repeats: `layer1/layer1.0`.
    std::vector<std::string_view> collapsed;
    for (size_t i = 0; i < raw.size(); ++i) {
        std::string_view c = raw[i];
        if (i > 0) {
            const std::string_view previous = raw[i - 1];
            if (c.size() > previous.size() + 1 && c.starts_with(previous) && c[previous.size()] == '.')
                c.remove_prefix(previous.size() + 1);
        }
        for (std::string_view part : splitNonEmpty(c, "."))
            collapsed.push_back(part);
    }
    return joinPath(collapsed);
}

std::string modulePathFromParameterName(std::string_view tensorName)
{
    if (tensorName.find("::") != std::string_view::npos)
        return {};
    std::string_view name = tensorName;
    // TensorFlow variable names end in an output index: `dense/kernel:0`.
    if (const size_t colon = name.rfind(':'); colon != std::string_view::npos && colon + 1 < name.size() &&
                                              std::all_of(name.begin() + long(colon) + 1, name.end(), [](char c) {
                                                  return std::isdigit(static_cast<unsigned char>(c));
                                              }))
        name = name.substr(0, colon);
    std::string_view suffix;
    if (endsWithAny(
            name, {".weight", ".bias", "_weight", "_bias", ".kernel", "/kernel", "/bias", "_kernel", ".gamma", ".beta"},
            &suffix))
        name.remove_suffix(suffix.size());
    return joinPath(splitNonEmpty(name, "./"));
}

std::string checkpointModulePath(std::string_view tensorName)
{
    std::vector<std::string_view> parts = splitNonEmpty(tensorName, "./");
    if (parts.size() > 1)
        parts.pop_back();
    return joinPath(parts);
}

std::vector<std::string> uniqueModulePaths(std::vector<std::string> paths)
{
    // Suffixes never take a path that appears anywhere in the input, so a later
    // layer's own path is not stolen by an earlier duplicate.
    for (const std::string& path : paths)
        if (path.size() > kMaxModulePathLength)
            throw Error("module path \"" + pathExcerpt(path) + "\" is " + std::to_string(path.size()) +
                        " bytes long; module paths may have at most " + std::to_string(kMaxModulePathLength) +
                        " (shorten the tensor, node or layer name it comes from)");
    const std::unordered_set<std::string> original(paths.begin(), paths.end());
    std::unordered_set<std::string> taken;
    for (std::string& path : paths) {
        if (taken.insert(path).second)
            continue;
        for (size_t k = 1;; ++k) {
            std::string candidate = path + '_' + std::to_string(k);
            if (!original.contains(candidate) && taken.insert(candidate).second) {
                path = std::move(candidate);
                break;
            }
        }
    }
    return paths;
}

} // namespace qs
