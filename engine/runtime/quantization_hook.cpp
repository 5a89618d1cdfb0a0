#include "runtime/quantization_hook.h"

#include "core/block_layout.h"
#include "numerics/qtype.h"
#include "quant/kernels.h"
#include "quant/microscaling.h"
#include "runtime/tensor_cast.h"

namespace qs {

Tensor fakeQuantizeActivation(const Tensor& x, const ActivationQuantization& a,
                              const StaticActivation* staticActivation)
{
    const bool kernelDType = x.dtype() == DType::F32 || x.dtype() == DType::F16 || x.dtype() == DType::BF16;
    const Tensor input = kernelDType ? x : x.toFloat32();
    QuantParams params;
    if (staticActivation) {
        // One scale for the whole tensor, whatever this batch's shape.
        params = staticActivation->params;
        params.layout = BlockLayout::perTensor(input.shape());
    } else if (isMicroscaling(a.target.qtype)) {
        params = microscalingParams(input, a.target.qtype, a.blockAxis, a.value);
    } else {
        const Tensor xf = input.toFloat32();
        const BlockLayout layout = BlockLayout::perTensor(xf.shape());
        const std::vector<Range> ranges = calibrateRanges(xf.values<float>(), layout, a.method, a.target, a.value);
        params = quantParamsFromRanges(a.target.qtype, layout, ranges, calibrationSymmetric(a.method, a.target),
                                       a.target.options, a.value);
    }
    const Tensor fake = fakeQuantize(input, params, a.rounding, a.seed, a.value);
    return castTensor(fake, x.dtype());
}

QuantizationHook::QuantizationHook(const Model& model, const QuantizationPlan& plan, const WeightQuantizer& weights,
                                   const std::map<size_t, StaticActivation>& staticActivations)
    : model_(model), plan_(plan), weightCache_(weights), static_(staticActivations)
{
}

void QuantizationHook::setEnabledLayers(std::optional<std::vector<bool>> enabledByModelLayer)
{
    if (enabledByModelLayer && enabledByModelLayer->size() != model_.layers.size())
        throw Error("the enabled-layers mask has " + std::to_string(enabledByModelLayer->size()) +
                    " entries, but the model has " + std::to_string(model_.layers.size()) + " layers");
    enabled_ = std::move(enabledByModelLayer);
    weightEnabled_.clear();
    if (!enabled_)
        return;
    auto groupOf = [&](size_t l) { return model_.layers[l].sharesWeightOf.value_or(l); };
    weightEnabled_.assign(model_.layers.size(), false);
    for (size_t l = 0; l < model_.layers.size(); ++l)
        if ((*enabled_)[l])
            weightEnabled_[groupOf(l)] = true;
    for (size_t l = 0; l < model_.layers.size(); ++l)
        weightEnabled_[l] = weightEnabled_[groupOf(l)];
}

bool QuantizationHook::isWeightEnabled(size_t modelLayer) const
{
    return !enabled_ || (modelLayer < weightEnabled_.size() && weightEnabled_[modelLayer]);
}

bool QuantizationHook::isEnabled(size_t modelLayer) const
{
    return !enabled_ || (modelLayer < enabled_->size() && (*enabled_)[modelLayer]);
}

void QuantizationHook::beforeNode(NodeEvent& event)
{
    const LayerQuantization* lq = plan_.forNode(event.scope, event.nodeIndex);
    if (lq && lq->problem.empty() && (isEnabled(lq->layer) || isWeightEnabled(lq->layer))) {
        const QuantizableLayer& layer = model_.layers[lq->layer];
        if (weights_ && lq->weight && isWeightEnabled(lq->layer) && layer.weightInput &&
            *layer.weightInput < event.inputs.size()) {
            Tensor& slot = event.inputs[*layer.weightInput];
            if (const auto cached = weightCache_.find(lq->layer)) {
                // Recomputed per run when the quantizer does not retain it (the session retains it
                // whenever the model runs, so this is the exception).
                const Tensor fake = WeightQuantizer::fakeQuantOf(model_, *cached);
                if (fake.shape() != slot.shape())
                    throw Error("layer '" + layer.modulePath + "': the cached weight has shape " +
                                shapeToString(fake.shape()) + " but the node reads " + shapeToString(slot.shape()) +
                                "; update the weight quantizer for this model");
                slot = castTensor(fake, slot.dtype());
            } else if (!weightCache_.problems().count(lq->layer)) {
                throw Error("layer '" + layer.modulePath + "': weight '" + layer.weightName +
                            "' has not been quantized; update the weight quantizer with this plan first");
            }
        }
        if (activations_ && lq->activation && isEnabled(lq->layer) && lq->activation->input < event.inputs.size()) {
            const ActivationQuantization& a = *lq->activation;
            Tensor& slot = event.inputs[a.input];
            if (isFloatingDType(slot.dtype()) && !slot.empty()) {
                const StaticActivation* s = nullptr;
                if (a.staticScale) {
                    auto it = static_.find(lq->layer);
                    if (it == static_.end())
                        throw Error("activation '" + a.value + "' of layer '" + layer.modulePath +
                                    "' has a static scale (act_static_scale) but no calibrated range; it needs "
                                    "calibration: run activation calibration first");
                    s = &it->second;
                }
                slot = fakeQuantizeActivation(slot, a, s);
            }
        }
    }
    if (next_ && (event.scope == 0 || next_->seesSubgraphs()))
        next_->beforeNode(event);
}

void QuantizationHook::afterNode(NodeEvent& event)
{
    if (next_ && (event.scope == 0 || next_->seesSubgraphs()))
        next_->afterNode(event);
}

} // namespace qs
