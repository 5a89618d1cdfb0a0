#pragma once
// `compare-methods MODEL --tensor NAME --algorithms`: one layer's weight rounded
// by every algorithm under the layer's own rule — rtn, gptq, awq and adaround
// (the rule's options when it names that algorithm, else the defaults), each with
// bias_correction off and on, and lutN at the rule's bit width — side by side:
// the weight's SQNR, the layer's output error on the calibration inputs with
// only this layer quantized, and the time the rounding took.
//
// Each variant is the layer's rule with `algorithm`, `bias_correction` (and for
// lutN `weight_qtype`) replaced, planned as the pipeline plans it: a variant the
// plan or the rule refuses for this layer is listed with the reason, not run.
//
// The output error comes from the layer's calibration statistics (quantization/
// input_hessian.h: M = E[x xᵀ] = H / 2 and μ = E[x] over the rows the weight
// contracts with), with the weight as a matrix W [O, F] (output channels by the
// contraction features, in the Hessian's order) and ΔW = W − Ŵ:
//   output MSE  = (tr(ΔW M ΔWᵀ) − [bias_correction] ‖ΔW μ‖²) / O
//   output SQNR = 10 log10(tr(W M Wᵀ) / (O · output MSE))
// i.e. the mean squared change of the layer's output before its bias, per output
// element and calibration row (bias_correction adds ΔW μ to the bias: the error
// that remains is ΔW (x − μ)). A grouped Conv's traces are sums over its groups,
// each group's rows with its own M_g and μ_g (its output channels contract only
// their group's inputs).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/cancellation.h"
#include "graph/model.h"
#include "quant/metrics.h"
#include "quantization/input_hessian.h"
#include "rules/ruleset.h"

namespace qs {

struct AlgorithmRow {
    std::string variant;   // "rtn", "gptq,0.01,1 + bias_correction", "lut4", ...
    std::string algorithm; // the algorithm's canonical text
    bool biasCorrection = false;
    std::string qtype;       // the weight_qtype it ran with
    std::string skipped;     // why this variant does not apply to the layer (then no figures)
    ErrorMetrics weight;     // the rounded weight against the float weight
    double outputMse = 0;    // see the header comment
    double outputSqnrDb = 0; // +inf when the output is exact
    double seconds = 0;      // wall time of the rounding (WeightQuantizer::quantize)
};

struct AlgorithmComparison {
    size_t layer = 0;
    std::string modulePath;
    std::string weightName;
    std::string rule;            // the layer's rule, as JSON
    int64_t calibrationRows = 0; // input rows the statistics hold
    std::vector<AlgorithmRow> rows;
};

// The rule set that gives layer `layer` its calibration statistics: its own
// rule (first, for its path only) with algorithm gptq on an integer type of the
// rule's bits (int8 for lut8), the rest as they are. Throws Error naming the
// layer when no rule quantizes its weight.
RuleSet rulesReadingInputsOf(const Model& model, const RuleSet& rules, size_t layer);

// Every variant on layer `layer` of `model` under `rules` (the layer's rule),
// the output error from `inputs` (its calibration statistics). Throws Error
// naming the layer when no rule quantizes its weight; Cancelled between variants.
AlgorithmComparison compareAlgorithms(const Model& model, const RuleSet& rules, size_t layer,
                                      const InputHessian& inputs, const CancellationToken& cancel = {});

} // namespace qs
