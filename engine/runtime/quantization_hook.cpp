#include "runtime/quantization_hook.h"

#include "core/block_layout.h"
#include "numerics/qtype.h"
#include "quant/kernels.h"
#include "quant/microscaling.h"
#include "runtime/tensor_cast.h"

namespace qs {

namespace {

// Whether the layer's node reads a bias (Conv B, Gemm C): input 2, present.
bool hasBiasInput(const Model& model, const QuantizableLayer& layer)
{
    if (!layer.node)
        return false;
    const Node& node = model.scopeGraph(layer.scope).nodes.at(*layer.node);
    return node.inputs.size() > 2 && !node.inputs[2].empty();
}

// `y` plus `bias` (float32, one value per channel) along `axis`, in float32, in y's dtype.
Tensor plusChannelBias(const Tensor& y, const Tensor& bias, int axis)
{
    Tensor out = y.toFloat32();
    if (out.rawData() == y.rawData())
        out = Tensor::fromVector(DType::F32, y.shape(),
                                 std::vector<float>(y.values<float>().begin(), y.values<float>().end()));
    axis = normalizeAxis(axis, out.rank(), "channel axis");
    const int64_t length = out.shape()[size_t(axis)];
    if (length != bias.numel())
        throw Error("bias correction: the output " + shapeToString(y.shape()) + " has " + std::to_string(length) +
                    " channels on axis " + std::to_string(axis) + ", the corrected bias " +
                    std::to_string(bias.numel()));
    int64_t inner = 1;
    for (size_t a = size_t(axis) + 1; a < out.shape().size(); ++a)
        inner *= out.shape()[a];
    const auto b = bias.values<float>();
    auto o = out.mutableValues<float>();
    for (size_t k = 0; k < o.size(); ++k)
        o[k] = o[k] + b[size_t((int64_t(k) / inner) % length)];
    return castTensor(out, y.dtype());
}

} // namespace

Tensor fakeQuantizeActivation(const Tensor& x, const ActivationQuantization& a,
                              const StaticActivation* staticActivation, bool inPlace, const Range* extremes)
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
        // The range from the extremes its writer gathered, else from the tensor itself.
        const BlockLayout layout = BlockLayout::perTensor(input.shape());
        const std::vector<Range> ranges =
            extremes && calibratesFromExtremes(a.method)
                ? std::vector<Range>{calibrateRangeOfExtremes(extremes->min, extremes->max, a.method, a.target,
                                                              a.value)}
                : calibrateRanges(input.toFloat32().values<float>(), layout, a.method, a.target, a.value);
        params = quantParamsFromRanges(a.target.qtype, layout, ranges, calibrationSymmetric(a.method, a.target),
                                       a.target.options, a.value);
    }
    // Overwritten where the caller owns x: an activation's pass without
    // allocating and first touching a second tensor of its size. Only when its
    // range was calibrated on it (not static), which found any NaN or Inf as an
    // Error naming the element (or its writer found none: `extremes`):
    // overwritten, that element would be gone.
    if (inPlace && !staticActivation && x.dtype() == DType::F32 && a.rounding == Rounding::Nearest &&
        !isGgufBlock(params.qtype) && !isLut(params.qtype)) {
        Tensor out = x;
        fakeQuantizeInto(x, params, out.mutableValues<float>(), a.rounding, a.seed, a.value);
        return out;
    }
    const Tensor fake = fakeQuantize(input, params, a.rounding, a.seed, a.value);
    return castTensor(fake, x.dtype());
}

QuantizationHook::QuantizationHook(const Model& model, const QuantizationPlan& plan, const WeightQuantizer& weights,
                                   const std::map<size_t, StaticActivation>& staticActivations)
    : model_(model), plan_(plan), weightCache_(weights), static_(staticActivations)
{
    for (const LayerQuantization& lq : plan_.layers()) {
        if (lq.biasCorrection && lq.problem.empty() && !hasBiasInput(model_, model_.layers.at(lq.layer)))
            addsAfterNode_ = true;
        if (const std::optional<ActivationQuantization>& a = lq.activation;
            a && lq.problem.empty() && !a->staticScale && !isMicroscaling(a->target.qtype) &&
            calibratesFromExtremes(a->method))
            rangedFromExtremes_.insert(a->value);
    }
}

bool QuantizationHook::observesNode(size_t scope, size_t nodeIndex) const
{
    return plan_.forNode(scope, nodeIndex) ||
           (next_ && (scope == 0 || next_->seesSubgraphs()) && next_->observesNode(scope, nodeIndex));
}

bool QuantizationHook::wantsExtremesOf(std::string_view value) const
{
    return (activations_ && rangedFromExtremes_.contains(value)) || (next_ && next_->wantsExtremesOf(value));
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
                // bias_correction: the corrected bias replaces the layer's own (bias-less layers: afterNode).
                if (lq->biasCorrection && cached->layer == lq->layer && cached->correctedBias.rawData() &&
                    event.inputs.size() > 2 && !event.inputs[2].empty())
                    event.inputs[2] = castTensor(cached->correctedBias, event.inputs[2].dtype());
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
                const bool owned = a.input < event.ownedInputs.size() && event.ownedInputs[a.input];
                const Range* extremes = a.input < event.inputExtremes.size() ? event.inputExtremes[a.input] : nullptr;
                slot = fakeQuantizeActivation(slot, a, s, owned, extremes);
            }
        }
    }
    if (next_ && (event.scope == 0 || next_->seesSubgraphs()))
        next_->beforeNode(event);
}

void QuantizationHook::afterNode(NodeEvent& event)
{
    if (addsAfterNode_ && weights_ && !event.outputs.empty() && event.outputs[0].rawData())
        if (const LayerQuantization* lq = plan_.forNode(event.scope, event.nodeIndex);
            lq && lq->biasCorrection && lq->problem.empty() && isWeightEnabled(lq->layer) &&
            !hasBiasInput(model_, model_.layers[lq->layer]))
            if (const auto cached = weightCache_.find(lq->layer);
                cached && cached->layer == lq->layer && cached->correctedBias.rawData()) {
                // Conv [N, C, ...]: channels on axis 1; Gemm [M, N]: the last axis.
                const int axis = model_.layers[lq->layer].opType == "Conv" ? 1 : -1;
                event.outputs[0] = plusChannelBias(event.outputs[0], cached->correctedBias, axis);
            }
    if (next_ && (event.scope == 0 || next_->seesSubgraphs()))
        next_->afterNode(event);
}

} // namespace qs
