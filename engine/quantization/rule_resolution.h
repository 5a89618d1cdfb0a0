#pragma once
// Rules resolved over a model's quantizable layers.

#include "graph/model.h"
#include "rules/ruleset.h"

namespace qs {

// Per layer of `model.layers` (same order): the index of the rule that applies,
// or none (stays float); per rule: how many layers it matched; the unused rules.
RuleResolution resolveRules(const RuleSet& rules, const Model& model);

} // namespace qs
