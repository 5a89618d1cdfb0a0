#pragma once
// The rule schema: one table of the fields a rule may have. Reading a rule from
// JSON, writing it back, the error messages, the GUI's rule editor and
// docs/rules.md all come from this table; a field exists nowhere else.

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "rules/rule.h"

namespace qs {

struct RuleField {
    std::string_view name;         // JSON key, e.g. "weight_qtype"
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
