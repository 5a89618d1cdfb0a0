#include "quantization/weight_bytes.h"

#include <cmath>

#include "core/dtype.h"
#include "numerics/qtype.h"

namespace qs {

int64_t quantizedWeightBytes(const QuantizedWeight& w, int64_t elements)
{
    const QuantParams& p = w.quantization.params;
    const QType t = p.qtype;
    if (hasOwnBlockScales(t)) {
        const auto bytes = int64_t(std::ceil(double(elements) * bitsPerWeight(t) / 8.0));
        return bytes + (t == QType::NvFp4 ? 4 : 0);
    }
    const int64_t codes = (elements * qtypeInfo(t).bits + 7) / 8;
    if (isLut(t))
        return codes + int64_t(p.lut.size()) * 4; // float32 table entries, 2^bits per group
    return codes + int64_t(p.scales.size()) * 4 + int64_t(p.zeroPoints.size());
}

WeightBytes layerWeightBytes(const Model& model, const QuantizationPlan& plan, const WeightQuantizer& weights,
                             size_t layer)
{
    const QuantizableLayer& l = model.layers.at(layer);
    WeightBytes b;
    b.floatBytes = l.parameterCount * int64_t(dtypeSize(l.weightDType));
    b.quantizedBytes = b.floatBytes;
    const LayerQuantization* lq = plan.forLayer(layer);
    if (!lq || !lq->problem.empty() || !lq->weight)
        return b;
    if (const auto w = weights.find(layer))
        b.quantizedBytes = quantizedWeightBytes(*w, l.parameterCount);
    return b;
}

WeightBytes totalWeightBytes(const Model& model, const QuantizationPlan& plan, const WeightQuantizer& weights)
{
    WeightBytes total;
    for (size_t i = 0; i < model.layers.size(); ++i) {
        if (model.layers[i].sharesWeightOf)
            continue;
        const WeightBytes b = layerWeightBytes(model, plan, weights, i);
        total.floatBytes += b.floatBytes;
        total.quantizedBytes += b.quantizedBytes;
    }
    return total;
}

} // namespace qs
