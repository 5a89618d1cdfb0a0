#pragma once
// An ordered list of rules, read from and written to a rule file
// `{"version": 1, "rules": [ {...}, ... ]}` (DESIGN.md, "Rules"). Rules are tried
// in order; the first whose module_path fully matches the layer's path and whose
// op_types lists its op applies; a layer no rule matches stays float.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rules/rule.h"

namespace qs {

// A layer as rules see it.
struct RuleTarget {
    std::string modulePath; // e.g. "layer1/0/conv1"
    std::string opType;     // e.g. "Conv"
};

// Which rule each layer gets, and how often each rule was chosen.
struct RuleResolution {
    std::vector<std::optional<size_t>> ruleOfLayer; // per layer: the index of the applying rule, or none (float)
    std::vector<size_t> matchCount;                 // per rule: layers it applies to
    std::vector<size_t> unusedRules;                // rules that apply to no layer, in order
};

// Why one rule does or does not apply to a layer.
enum class RuleVerdict : uint8_t {
    Applies,         // the first rule that matches: this one quantizes the layer
    PathMismatch,    // module_path does not match the whole path
    OpTypeNotListed, // the path matches, but op_types does not list the op
    Shadowed,        // matches, but an earlier rule matched first
};

struct RuleExplanation {
    size_t rule = 0;
    RuleVerdict verdict = RuleVerdict::PathMismatch;
    std::optional<size_t> shadowedBy; // Shadowed: the earlier rule that applies
    std::string text;                 // one line for a tooltip, e.g. `rule 1: shadowed by rule 0`
};

class RuleSet {
public:
    // The only version of the rule file format.
    static constexpr int kVersion = 1;
    // Rule files larger than this are refused before they are read.
    static constexpr std::uintmax_t kMaxFileBytes = 16u << 20;
    // A rule file with more rules is refused while it is read. A 16 MiB file of
    // short rules has about 200k; a compiled pattern takes about 2 KiB, so this
    // bounds a rule set to roughly 600 MB even when every rule has its own pattern.
    static constexpr size_t kMaxRules = size_t(1) << 18;

    RuleSet() = default;
    // Validates every rule (see QuantizationRule::validate).
    explicit RuleSet(std::vector<QuantizationRule> rules);

    // Reads a rule file in time linear in its size: each rule is read as soon as
    // the parser has it. Every error names `sourceName` (the file path, or
    // "<string>"): bad JSON (with line and column), trailing content, a duplicate
    // key, an object with more than 64 keys, a missing or unsupported "version",
    // "rules" not a list, more than kMaxRules rules, or a bad rule (the first one).
    static RuleSet fromJson(std::string_view text, std::string_view sourceName = "<string>");
    // fromJson on a file's content; a missing or unreadable file is an Error naming it.
    static RuleSet load(const std::filesystem::path& file);
    // The rule file text (2-space indented, fields in schema order, defaults omitted).
    std::string toJson() const;
    // Writes toJson() through a temporary file in the same folder renamed into place.
    void save(const std::filesystem::path& file) const;

    const std::vector<QuantizationRule>& rules() const { return rules_; }
    size_t size() const { return rules_.size(); }
    bool empty() const { return rules_.empty(); }

    // The index of the first rule that applies to the layer, or none.
    std::optional<size_t> firstMatch(std::string_view modulePath, std::string_view opType) const;
    // firstMatch for every layer, with per-rule match counts and the unused rules.
    RuleResolution resolve(std::span<const RuleTarget> layers) const;
    // How many times resolve() has run in this process: the tests count the
    // resolutions one edit costs (one, done by the session).
    static uint64_t resolutionCount();
    // For every rule, why it does or does not apply to the layer.
    std::vector<RuleExplanation> explain(std::string_view modulePath, std::string_view opType) const;

    bool operator==(const RuleSet&) const = default;

private:
    std::vector<QuantizationRule> rules_;
};

} // namespace qs
