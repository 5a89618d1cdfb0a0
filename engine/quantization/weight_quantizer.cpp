#include "quantization/weight_quantizer.h"

#include <algorithm>
#include <mutex>
#include <optional>

#include <tbb/parallel_for.h>

#include "core/block_layout.h"
#include "core/mapped_file.h"
#include "numerics/qtype.h"
#include "quant/kernels.h"
#include "quantization/adaround.h"
#include "quantization/awq.h"
#include "quantization/bias_correction.h"
#include "quantization/gptq.h"

namespace qs {

WeightQuantizer::Key WeightQuantizer::keyOf(const Model& model, const LayerQuantization& lq,
                                            const LayerHessians* hessians)
{
    const QuantizableLayer& layer = model.layers.at(lq.layer);
    const Tensor* w = model.initializer(layer.weightName);
    std::shared_ptr<const InputHessian> hessian;
    if (lq.readsCalibrationInputs() && hessians)
        if (const auto it = hessians->find(lq.layer); it != hessians->end())
            hessian = it->second;
    return {*lq.weight,
            lq.weightRounding,
            lq.weightSeed,
            layer.weightName,
            w ? w->rawData() : nullptr,
            w ? w->shape() : Shape{},
            w ? w->dtype() : DType::F32,
            lq.weightAlgorithm,
            std::move(hessian),
            lq.biasCorrection};
}

QuantizedWeight WeightQuantizer::quantize(const Model& model, const LayerQuantization& lq, const InputHessian* hessian,
                                          const CancellationToken& cancel)
{
    const QuantizableLayer& layer = model.layers.at(lq.layer);
    if (!lq.weight)
        throw Error("layer '" + layer.modulePath + "': its rule sets no weight_qtype");
    const Tensor* weight = model.initializer(layer.weightName);
    if (!weight)
        throw Error("layer '" + layer.modulePath + "': weight '" + layer.weightName + "' is not in the model");

    QuantizedWeight q;
    q.layer = lq.layer;
    q.spec = *lq.weight;
    q.rounding = lq.weightRounding;
    q.seed = lq.weightSeed;
    q.transposedAxes = lq.weightAxes;
    q.algorithm = lq.weightAlgorithm;

    // Tiles and microscaling blocks run along the last axis: quantize the
    // weight with its contraction axis moved there, and move it back after.
    const bool halfFloat = weight->dtype() == DType::F16 || weight->dtype() == DType::BF16;
    Tensor x = halfFloat && q.transposedAxes.empty() ? *weight : weight->toFloat32();
    QuantizationSpec spec = q.spec;
    if (!q.transposedAxes.empty()) {
        x = x.permuted(q.transposedAxes);
        const int channel = normalizeAxis(spec.axis, x.rank(), "channel axis");
        spec.axis =
            int(std::find(q.transposedAxes.begin(), q.transposedAxes.end(), channel) - q.transposedAxes.begin());
    }
    // A grouped Conv's statistics hold one Hessian per group; the algorithms round each group's rows
    // against its own (gptq.h, awq.h, adaround.h).
    if (hessian && q.algorithm.kind != WeightAlgorithmKind::Rtn && hessian->groups() != calibrationGroups(layer))
        throw Error("layer '" + layer.modulePath + "': its calibration statistics are of " +
                    std::to_string(hessian->groups()) + " group(s) of inputs, the layer has " +
                    std::to_string(calibrationGroups(layer)) + "; run calibration again");
    Tensor fake;
    std::optional<Tensor> clipReference; // what the saturation ranges apply to, when not x
    if (q.algorithm.kind == WeightAlgorithmKind::Awq) {
        if (!hessian || hessian->rows() == 0)
            throw Error("algorithm " + q.algorithm.toString() +
                        " needs the layer's calibration inputs: run calibration (quantscope-cli: --calib DATA)");
        if (layer.contractionAxes.empty())
            throw Error("layer '" + layer.modulePath + "': algorithm awq needs the weight's input channel axis");
        // The rule's own round-to-nearest, in the axis order it quantizes in.
        const std::vector<int> axes = q.transposedAxes;
        const GridRounding roundOnGrid = [&](const Tensor& own) {
            const Tensor t = axes.empty() ? own : own.permuted(axes);
            TensorQuantization tq = computeQuantization(t, spec, layer.weightName);
            Tensor f = fakeQuantize(t, tq.params, Rounding::Nearest, 0, layer.weightName);
            return std::pair(std::move(tq), axes.empty() ? std::move(f) : f.permuted(inversePermutation(axes)));
        };
        std::optional<AwqClipGroups> groups;
        if (q.algorithm.awqClip)
            groups = awqClipGroups(weight->shape(), axes, spec, layer.weightName);
        AwqResult a =
            awqQuantize(*weight, layer.channelAxis, layer.contractionAxes.front(), q.algorithm, hessian->hessians(),
                        hessian->meanAbs(), roundOnGrid, layer.weightName, cancel, groups ? &*groups : nullptr);
        q.quantization = std::move(a.quantization);
        q.awqAlpha = a.alpha;
        q.inputScale = std::move(a.inputScale);
        q.grid = std::move(a.grid);
        // In the quantized axis order, as x. The saturation figure counts the weights clipping cut.
        fake = axes.empty() ? std::move(a.rounded) : a.rounded.permuted(axes);
        clipReference = axes.empty() ? std::move(a.scaled) : a.scaled.permuted(axes);
    } else if (q.algorithm.kind == WeightAlgorithmKind::Gptq || q.algorithm.kind == WeightAlgorithmKind::Adaround) {
        if (!hessian || hessian->rows() == 0)
            throw Error("algorithm " + q.algorithm.toString() +
                        " needs the layer's calibration inputs: run calibration (quantscope-cli: --calib DATA)");
        if (q.algorithm.kind == WeightAlgorithmKind::Gptq) {
            GptqResult g = gptqQuantize(x, spec, q.algorithm, hessian->hessians(), layer.weightName, cancel);
            q.quantization = std::move(g.quantization);
            fake = std::move(g.rounded);
        } else {
            AdaroundResult a = adaroundQuantize(x, spec, q.algorithm, hessian->hessians(), layer.weightName, cancel);
            q.quantization = std::move(a.quantization);
            fake = std::move(a.rounded);
        }
    } else {
        q.quantization = computeQuantization(x, spec, layer.weightName, cancel);
        fake = fakeQuantize(x, q.quantization.params, q.rounding, q.seed, layer.weightName);
    }

    const Tensor original = x.toFloat32();
    q.metrics = errorMetrics(original.values<float>(), fake.values<float>());
    q.metrics.fractionClipped =
        fractionClipped((clipReference ? *clipReference : original).values<float>(), q.quantization.params.layout,
                        q.quantization.saturation); // every saturating value
    // Per-group ranges are held for the charts, for every layer of the model: a
    // q4_0 model has a group per 32 weights. The saturation ranges served the
    // figure above; a GGUF block's range is its own data's (TensorQuantization).
    q.quantization.saturation = {};
    if (isGgufBlock(q.spec.qtype))
        q.quantization.ranges = {};
    q.fakeQuant = q.transposedAxes.empty() ? std::move(fake) : fake.permuted(inversePermutation(q.transposedAxes));
    if (lq.biasCorrection) {
        if (!hessian || hessian->rows() == 0)
            throw Error("bias_correction needs the layer's calibration inputs: run calibration (quantscope-cli: "
                        "--calib DATA)");
        const Node& node = model.scopeGraph(layer.scope).nodes.at(*layer.node);
        const Tensor* bias =
            node.inputs.size() > 2 && !node.inputs[2].empty() ? model.initializer(node.inputs[2]) : nullptr;
        const Eigen::VectorXd delta = biasCorrection(*weight, q.fakeQuant, layer.channelAxis, hessian->mean(),
                                                     layer.weightName, layer.opType == "Conv" ? layer.groups : 1);
        q.correctedBias = correctedBias(bias, delta, layer.weightName);
    }
    return q;
}

Tensor WeightQuantizer::fakeQuantOf(const Model& model, const QuantizedWeight& w)
{
    if (w.fakeQuant.rawData())
        return w.fakeQuant;
    const QuantizableLayer& layer = model.layers.at(w.layer);
    if (w.algorithm.kind != WeightAlgorithmKind::Rtn)
        throw Error("layer '" + layer.modulePath + "': the " + w.algorithm.toString() +
                    " weight was not kept, and only its algorithm can recompute it");
    const Tensor* weight = model.initializer(layer.weightName);
    if (!weight)
        throw Error("layer '" + layer.modulePath + "': weight '" + layer.weightName + "' is not in the model");
    // As quantize() computes it: in the quantized axis order, from the same parameters.
    const bool halfFloat = weight->dtype() == DType::F16 || weight->dtype() == DType::BF16;
    Tensor x = halfFloat && w.transposedAxes.empty() ? *weight : weight->toFloat32();
    if (!w.transposedAxes.empty())
        x = x.permuted(w.transposedAxes);
    Tensor fake = fakeQuantize(x, w.quantization.params, w.rounding, w.seed, layer.weightName);
    return w.transposedAxes.empty() ? fake : fake.permuted(inversePermutation(w.transposedAxes));
}

std::vector<size_t> WeightQuantizer::update(const Model& model, const QuantizationPlan& plan,
                                            const CancellationToken& cancel, const ProgressCallback& progress,
                                            const LayerHessians* hessians)
{
    // What the plan wants, and which of it must be computed.
    std::map<size_t, const LayerQuantization*> wanted;
    for (const LayerQuantization& lq : plan.layers())
        if (lq.weight && lq.problem.empty())
            wanted[lq.layer] = &lq;
    for (auto it = keys_.begin(); it != keys_.end();) {
        if (wanted.count(it->first)) {
            ++it;
            continue;
        }
        weights_.erase(it->first);
        problems_.erase(it->first);
        it = keys_.erase(it);
    }
    // A layer that shares an earlier layer's weight (the plan has checked that
    // both quantize it alike) gets that layer's result, computed once.
    auto ownerOf = [&](size_t layer) -> std::optional<size_t> {
        const std::optional<size_t> owner = model.layers.at(layer).sharesWeightOf;
        return owner && wanted.count(*owner) ? owner : std::nullopt;
    };
    std::vector<std::pair<const LayerQuantization*, Key>> todo;
    for (const auto& [layer, lq] : wanted) {
        if (ownerOf(layer))
            continue;
        Key key = keyOf(model, *lq, hessians);
        auto it = keys_.find(layer);
        if (it == keys_.end() || !(it->second == key))
            todo.emplace_back(lq, std::move(key));
    }

    struct Outcome {
        std::shared_ptr<const QuantizedWeight> weight;
        std::string problem;
        bool done = false;
    };
    std::vector<Outcome> outcomes(todo.size());
    std::mutex progressMutex;
    size_t finished = 0;
    tbb::parallel_for(size_t(0), todo.size(), [&](size_t i) {
        if (cancel.isCancelled())
            return;
        try {
            QuantizedWeight w = quantize(model, *todo[i].first, todo[i].second.hessian.get(), cancel);
            if (!retainFakeQuant_ && w.algorithm.kind == WeightAlgorithmKind::Rtn) {
                // A pass over weights that are not run: neither the tensor nor the pages it was read from
                // (a mapped checkpoint's) are needed again.
                w.fakeQuant = Tensor();
                if (const Tensor* t = model.initializer(model.layers.at(w.layer).weightName))
                    releaseResidentPages(*t);
            }
            outcomes[i].weight = std::make_shared<const QuantizedWeight>(std::move(w));
        } catch (const Cancelled&) {
            return; // nothing valid is cached for it
        } catch (const Error& e) {
            outcomes[i].problem = e.what();
        }
        outcomes[i].done = true;
        if (progress) {
            std::lock_guard lock(progressMutex);
            ++finished;
            progress(double(finished) / double(todo.size()),
                     "quantizing weights " + std::to_string(finished) + "/" + std::to_string(todo.size()));
        }
    });

    std::vector<size_t> recomputed;
    for (size_t i = 0; i < todo.size(); ++i) {
        const size_t layer = todo[i].first->layer;
        if (!outcomes[i].done) {
            // Cancelled before it ran: nothing valid is cached for it.
            weights_.erase(layer);
            problems_.erase(layer);
            keys_.erase(layer);
            continue;
        }
        if (outcomes[i].weight) {
            weights_[layer] = std::move(outcomes[i].weight);
            problems_.erase(layer);
        } else {
            weights_.erase(layer);
            problems_[layer] = std::move(outcomes[i].problem);
        }
        keys_.insert_or_assign(layer, std::move(todo[i].second));
        recomputed.push_back(layer);
    }
    for (const auto& [layer, lq] : wanted) {
        const std::optional<size_t> owner = ownerOf(layer);
        if (!owner)
            continue;
        const auto key = keys_.find(*owner);
        const auto weight = weights_.find(*owner);
        const auto problem = problems_.find(*owner);
        const bool changed = !keys_.count(layer) || key == keys_.end() || !(keys_.at(layer) == key->second) ||
                             find(layer) != find(*owner);
        weights_.erase(layer);
        problems_.erase(layer);
        keys_.erase(layer);
        if (key == keys_.end())
            continue; // the owner was cancelled before it ran
        keys_.insert_or_assign(layer, key->second);
        if (weight != weights_.end())
            weights_[layer] = weight->second;
        if (problem != problems_.end())
            problems_[layer] = problem->second;
        if (changed)
            recomputed.push_back(layer);
    }
    std::sort(recomputed.begin(), recomputed.end());
    cancel.check();
    return recomputed;
}

std::shared_ptr<const QuantizedWeight> WeightQuantizer::find(size_t layer) const
{
    auto it = weights_.find(layer);
    return it == weights_.end() ? nullptr : it->second;
}

} // namespace qs
