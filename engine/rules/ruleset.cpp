#include "rules/ruleset.h"

#include <atomic>
#include <fstream>
#include <sstream>
#include <system_error>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "rules/regex_syntax.h"
#include "rules/schema.h"

namespace qs {

using Json = nlohmann::ordered_json;

namespace {

// Deeper JSON than any rule file needs is refused while parsing.
constexpr int kMaxJsonDepth = 32;
// An object with more keys than this is refused while parsing: a rule has 15
// fields, and nlohmann's ordered objects look keys up one by one, so a hostile
// object with 100k keys would take quadratic time.
constexpr size_t kMaxObjectKeys = 64;

[[noreturn]] void fail(std::string_view source, const std::string& what)
{
    throw Error(std::string(source) + ": " + what);
}

// A rule file as parsed: each element of the top-level "rules" list is turned
// into a rule as soon as it has been read, and dropped from the JSON tree, so
// memory holds the rules and one rule's JSON, not the whole file's tree.
struct ParsedRuleFile {
    Json root;                            // the file without the elements of "rules"
    std::vector<QuantizationRule> rules;  // the rules read, in order
    std::optional<std::string> ruleError; // the first rule that could not be read; later ones are skipped
};

// Parses strictly (no trailing content) and refuses duplicate keys, which
// nlohmann::json would otherwise resolve silently to the last one.
ParsedRuleFile parseRuleFile(std::string_view text, std::string_view source)
{
    struct Frame {
        bool isObject;
        std::vector<std::string> keys; // objects: keys seen so far (at most kMaxObjectKeys)
        std::string key;               // objects: the key being read
        size_t elements = 0;           // arrays: elements started so far
    };
    std::vector<Frame> frames;
    ParsedRuleFile parsed;
    // Whether frames[1] is the list of rules (the value of the top-level "rules").
    const auto inRuleList = [&] {
        return frames.size() >= 2 && frames[0].isObject && frames[0].key == "rules" && !frames[1].isObject;
    };
    const auto startElement = [&] {
        if (frames.empty() || frames.back().isObject)
            return;
        ++frames.back().elements;
        if (frames.size() == 2 && inRuleList() && frames[1].elements > RuleSet::kMaxRules)
            fail(source, "more than " + std::to_string(RuleSet::kMaxRules) + " rules; a rule file may have at most " +
                             std::to_string(RuleSet::kMaxRules));
    };
    const auto readRule = [&](const Json& value) {
        if (parsed.ruleError)
            return;
        try {
            parsed.rules.push_back(ruleFromJson(value, parsed.rules.size()));
        } catch (const Error& e) {
            parsed.ruleError = e.what();
        }
    };
    const auto where = [&]() -> std::string {
        if (frames.size() == 1)
            return "in the top-level object";
        if (frames.size() == 3 && inRuleList())
            return "in rule " + std::to_string(frames[1].elements - 1);
        return "in an object at depth " + std::to_string(frames.size());
    };
    const Json::parser_callback_t callback = [&](int depth, Json::parse_event_t event, Json& value) {
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
            const auto& key = value.get_ref<const std::string&>();
            for (const auto& seen : f.keys)
                if (seen == key)
                    fail(source, "duplicate key \"" + excerptAround(key, 0) + "\" " + where() + "; keep one of them");
            if (f.keys.size() == kMaxObjectKeys)
                fail(source, "an object with more than " + std::to_string(kMaxObjectKeys) + " keys " + where() +
                                 "; a rule has at most " + std::to_string(ruleFields().size()) + " fields");
            f.keys.push_back(key);
            f.key = key;
            break;
        }
        case E::object_end:
        case E::array_end: {
            const bool isRule = frames.size() == 3 && inRuleList();
            frames.pop_back();
            if (isRule) {
                readRule(value);
                return false; // keep it out of the tree
            }
            break;
        }
        case E::value:
            startElement();
            if (frames.size() == 2 && inRuleList()) { // a rule that is not an object: readRule says so
                readRule(value);
                return false;
            }
            break;
        }
        return true;
    };
    try {
        parsed.root = Json::parse(text.begin(), text.end(), callback);
    } catch (const Json::exception& e) { // parse_error, and out_of_range for a number like 1e400
        // "[json.exception.parse_error.101] parse error at line 3, column 5: ..." without the tag.
        std::string message = e.what();
        if (const size_t tag = message.find("] "); tag != std::string::npos)
            message.erase(0, tag + 2);
        fail(source, "invalid JSON: " + message);
    }
    return parsed;
}

// How explain() quotes a pattern or path: whole when short, else its start.
std::string inQuotes(std::string_view text)
{
    std::string quoted = "\"";
    quoted += excerptAround(text, 0);
    quoted += '"';
    return quoted;
}

} // namespace

RuleSet::RuleSet(std::vector<QuantizationRule> rules) : rules_(std::move(rules))
{
    for (size_t i = 0; i < rules_.size(); ++i)
        rules_[i].validate(i);
}

RuleSet RuleSet::fromJson(std::string_view text, std::string_view sourceName)
{
    ParsedRuleFile parsed = parseRuleFile(text, sourceName);
    const Json& root = parsed.root;
    if (!root.is_object())
        fail(sourceName,
             std::string("expected a JSON object {\"version\": 1, \"rules\": [...]}, got ") + root.type_name());
    for (const auto& [key, value] : root.items())
        if (key != "version" && key != "rules")
            fail(sourceName, "unknown key \"" + excerptAround(key, 0) +
                                 "\" at the top level; a rule file has \"version\" and \"rules\"");

    const auto version = root.find("version");
    if (version == root.end())
        fail(sourceName, "missing \"version\"; add \"version\": 1");
    if (!version->is_number_integer() || version->get<int64_t>() != kVersion)
        fail(sourceName,
             "unsupported version " + excerptAround(version->dump(), 0) + "; this Quantscope reads \"version\": 1");

    const auto rules = root.find("rules");
    if (rules == root.end())
        fail(sourceName, "missing \"rules\"; add \"rules\": [ {...}, ... ]");
    if (!rules->is_array())
        fail(sourceName, std::string("\"rules\" must be a list of rule objects, got ") + rules->type_name());
    if (parsed.ruleError)
        fail(sourceName, *parsed.ruleError);

    RuleSet set;
    set.rules_ = std::move(parsed.rules);
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

namespace {
std::atomic<uint64_t> resolutions{0};
}

uint64_t RuleSet::resolutionCount()
{
    return resolutions.load(std::memory_order_relaxed);
}

RuleResolution RuleSet::resolve(std::span<const RuleTarget> layers) const
{
    resolutions.fetch_add(1, std::memory_order_relaxed);
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
        const std::string pattern = "module_path " + inQuotes(rule.modulePath.text());
        if (!rule.matchesPath(modulePath)) {
            e.verdict = RuleVerdict::PathMismatch;
            e.text = head + pattern + " does not match the whole path " + inQuotes(path);
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
            e.text = head + "applies: " + pattern + " matches " + inQuotes(path) +
                     (rule.opTypes.empty() ? std::string() : " and op_types lists " + op);
        }
        out.push_back(std::move(e));
    }
    return out;
}

} // namespace qs
