#pragma once
// Fake-quantized weights, computed once per layer and rule and cached: an edit
// of the rules recomputes only the layers whose quantization changed. What the
// quantization hook feeds the interpreter, what the layer table's weight
// columns show and what the exporters write.

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/cancellation.h"
#include "graph/model.h"
#include "quant/metrics.h"
#include "quantization/input_hessian.h"
#include "quantization/quantization_plan.h"
#include "quantization/tensor_quantization.h"

namespace qs {

struct QuantizedWeight {
    size_t layer = 0;
    QuantizationSpec spec; // as in the plan
    Rounding rounding = Rounding::Nearest;
    uint64_t seed = 0;
    // How the weight was rounded (the plan's weightAlgorithm). Rtn: fakeQuant is
    // the float weight through the parameters. Any other: fakeQuant is the
    // algorithm's choice, always retained (it cannot be recomputed from the
    // parameters), and the codes every export writes are quantize(fakeQuant).
    WeightAlgorithm algorithm;
    // Scales and clipping ranges (no saturation ranges, which only the metrics
    // need; no ranges for a GGUF block type, whose ranges are each block's data
    // range with 0, as weightDistribution computes them). For a tiled or microscaling weight whose
    // contraction axis is not last, the layout is over the weight transposed so
    // that it is (axis i of that tensor = axis transposedAxes[i] of the weight,
    // as LayerQuantization::weightAxes); empty transposedAxes = the weight's own axes.
    TensorQuantization quantization;
    std::vector<int> transposedAxes;
    // float32, the weight's own shape and axis order; empty when the quantizer
    // does not retain it (rtn only) (WeightQuantizer::setRetainFakeQuant): fakeQuantOf()
    // gives it either way.
    Tensor fakeQuant;
    // awq only: `quantization` is of the weight scaled by s along its input
    // channels; grid = Q(W·s) (float32, the weight's shape: what the exports
    // encode) and inputScale = s (float32, the weight's rank, 1 on every axis but
    // the input channels'); fakeQuant = grid / inputScale, float32, bit for bit.
    Tensor grid;
    Tensor inputScale;
    double awqAlpha = 0; // awq: the exponent chosen
    // bias_correction: float32 [O], the layer's bias (zeros when it has none) plus
    // (W − fakeQuant)·E[x] over the calibration inputs; what the simulation and the
    // exports use as the layer's bias. Empty otherwise.
    Tensor correctedBias;
    ErrorMetrics metrics; // against the float weight, fractionClipped included
};

class WeightQuantizer {
public:
    // Brings the cache in line with `plan`: layers that are new or whose spec,
    // rounding or seed changed are recomputed (in parallel across layers),
    // layers no longer quantized are dropped, the rest are kept as they are.
    // A layer sharing an earlier layer's weight (QuantizableLayer::sharesWeightOf)
    // holds that layer's result, computed once (QuantizedWeight::layer names the
    // first reader). Returns the layers recomputed (in layer order). Progress is reported per
    // layer, from worker threads, one call at a time. A layer whose weight cannot be quantized
    // (NaN/Inf, a spec the weight cannot take) is not cached: problems() says
    // why. Checks `cancel` between layers; on Cancelled the cache keeps what
    // was complete. A layer whose algorithm reads calibration inputs (gptq)
    // takes its Hessian from `hessians` (the calibration's): without one it is a
    // problem saying to calibrate; a new calibration (another Hessian object)
    // recomputes it.
    std::vector<size_t> update(const Model& model, const QuantizationPlan& plan, const CancellationToken& cancel = {},
                               const ProgressCallback& progress = {}, const LayerHessians* hessians = nullptr);

    // The cached weight of a model layer, or null (float, or a problem).
    std::shared_ptr<const QuantizedWeight> find(size_t layer) const;
    const std::map<size_t, std::shared_ptr<const QuantizedWeight>>& weights() const { return weights_; }
    // Layer -> why its weight could not be quantized.
    const std::map<size_t, std::string>& problems() const { return problems_; }

    // The fake-quantized weight of one plan layer, computed now (what update()
    // caches). `hessian` is the layer's, for gptq and awq. Throws Error naming the weight.
    static QuantizedWeight quantize(const Model& model, const LayerQuantization& layer,
                                    const InputHessian* hessian = nullptr, const CancellationToken& cancel = {});

    // Whether update() keeps each weight's fake-quantized tensor (default) or
    // only its parameters and metrics. A model that is never run (a weights-only
    // or too-large checkpoint, a CLI command with no data) needs no float32 copy
    // of every weight: without them the cache costs kilobytes, and exports and
    // charts recompute a weight's tensor when they need it (fakeQuantOf).
    void setRetainFakeQuant(bool retain) { retainFakeQuant_ = retain; }
    bool retainsFakeQuant() const { return retainFakeQuant_; }
    // `w`'s fake-quantized tensor: the cached one, or recomputed from its
    // parameters (the same values, bit for bit) when it was not retained.
    static Tensor fakeQuantOf(const Model& model, const QuantizedWeight& w);

private:
    // What a cached result was computed from: the spec, rounding and seed, and
    // which tensor (name, storage, shape and dtype: a reloaded model is new data).
    struct Key {
        QuantizationSpec spec;
        Rounding rounding = Rounding::Nearest;
        uint64_t seed = 0;
        std::string weightName;
        const void* data = nullptr;
        Shape shape;
        DType dtype = DType::F32;
        WeightAlgorithm algorithm;
        std::shared_ptr<const InputHessian> hessian; // the calibration it was computed from (gptq, awq, bias)
        bool biasCorrection = false;
        bool operator==(const Key&) const = default; // every field: a new one cannot be forgotten
    };
    static Key keyOf(const Model& model, const LayerQuantization& layer, const LayerHessians* hessians);

    std::map<size_t, std::shared_ptr<const QuantizedWeight>> weights_;
    std::map<size_t, std::string> problems_;
    std::map<size_t, Key> keys_; // for cached weights and for problems alike
    bool retainFakeQuant_ = true;
};

} // namespace qs
