#include "quantization/rule_resolution.h"

namespace qs {

RuleResolution resolveRules(const RuleSet& rules, const Model& model)
{
    std::vector<RuleTarget> targets;
    targets.reserve(model.layers.size());
    for (const QuantizableLayer& layer : model.layers)
        targets.push_back({layer.modulePath, layer.opType});
    return rules.resolve(targets);
}

} // namespace qs
