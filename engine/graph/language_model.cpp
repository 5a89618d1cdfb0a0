#include "graph/language_model.h"

namespace qs {

std::optional<CausalLanguageModel> causalLanguageModel(const Model& model)
{
    if (model.weightsOnly || model.inputs.size() != 1)
        return std::nullopt;
    const ValueInfo& in = model.inputs.front();
    if (in.name != "input_ids" || in.dtype != DType::I64 || !in.shape || in.shape->size() != 2)
        return std::nullopt;
    for (const ValueInfo& out : model.outputs)
        if (out.name == "logits" && out.shape && out.shape->size() == 3 && out.dtype && isFloatingDType(*out.dtype))
            return CausalLanguageModel{in.name, out.name};
    return std::nullopt;
}

} // namespace qs
