#pragma once
// The rule schema: one table of the fields a rule may have. Reading a rule from
// JSON, writing it back, the error messages, the GUI's rule editor and
// docs/rules.md all come from this table; a field exists nowhere else.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "rules/rule.h"

namespace qs {

// What kind of value a field holds: the GUI picks its editor, parses typed
// text and shows the absent value from this, never from the prose below.
enum class RuleFieldKind : uint8_t {
    Regex,        // an RE2 pattern matched against the whole module path (module_path)
    OpTypeList,   // a list of op type names (op_types)
    QType,        // a qtype name from allowedValues, or null: float (weight_qtype, act_qtype)
    Method,       // a method string, which may carry arguments ("percentile,99.9", "gptq,0.01")
    Choice,       // one of allowedValues (granularity, scale_restriction, rounding)
    Bool,         // true or false
    OptionalBool, // true, false, or null: the method decides (symmetric)
    Number,       // a number above `minimum` (tile_size), or null
    Integer,      // a whole number of at least `minimum` (rounding_seed)
    IntegerList,  // a list of whole numbers (act_batch_axes)
};

struct RuleField {
    std::string_view name;         // JSON key, e.g. "weight_qtype"
    RuleFieldKind kind;            // the kind of value
    bool nullable;                 // null is accepted (and means the default)
    std::string_view absentText;   // what a table cell shows when the field is absent ("float", "all", "per_channel")
    double minimum;                // Number: values must be greater; Integer: at least this; else unused
    std::string_view jsonType;     // what the JSON value must be, e.g. "string or null"
    std::string_view defaultValue; // the value when the field is absent, as shown to users
    std::string_view description;  // one line for docs and tooltips
    // The accepted values, generated from the engine's tables (qtypes, calibration
    // methods, restrictions ...); empty for free-form fields.
    std::vector<std::string> (*allowedValues)();
    // Sets the field of `rule` from `value`; throws Error saying what is wrong
    // with the value (without the rule index, which the caller adds).
    void (*read)(QuantizationRule& rule, const nlohmann::ordered_json& value);
    // Writes the field into `object` unless it holds the default.
    void (*write)(const QuantizationRule& rule, nlohmann::ordered_json& object);
};

// Every field, in the order rule files and docs list them.
std::span<const RuleField> ruleFields();
// The field named `name`, or nullptr.
const RuleField* findRuleField(std::string_view name);

// Reads rule number `index` (0-based, as in the file's "rules" list) from a JSON
// object and validates it. Throws Error `rule <index>, field "<name>": ...` for an
// unknown field, a wrong JSON type, an unknown value, an invalid regex (with its
// position) or a combination that cannot work.
QuantizationRule ruleFromJson(const nlohmann::ordered_json& object, size_t index);
// The rule as a JSON object with its fields in table order; fields holding their
// default are omitted, so ruleFromJson(ruleToJson(r)) == r.
nlohmann::ordered_json ruleToJson(const QuantizationRule& rule);

} // namespace qs
