#pragma once
// Model-level analysis: the float model and its fake-quantized version run side
// by side on evaluation batches; per layer the activation error isolated (only
// this layer quantized) and accumulated (everything quantized, the view of
// ONNX Runtime's QDQ debugger), per graph output SQNR and cosine, with labels
// top-1 (and top-5 where the output has more than 5 classes) accuracy of both.
// Sensitivity: one layer quantized at a time, and all but one, ranked by
// output degradation. What the layer table's activation columns, the per-layer
// error chart and `quantscope-cli quantize --eval` report show.
//
// This lives in `session`, not `analysis`: it drives the runtime, which itself
// uses analysis (tensor quantization, metrics) for its hooks.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "graph/language_model.h"
#include "quant/metrics.h"
#include "core/cancellation.h"
#include "io/data_source.h"
#include "runtime/activation_calibration.h"
#include "runtime/interpreter.h"
#include "quantization/quantization_plan.h"
#include "quantization/weight_quantizer.h"

namespace qs {

// Sums over all evaluated elements (double), so a metric over many batches is
// the metric of their concatenation.
class ErrorAccumulator {
public:
    void add(std::span<const float> reference, std::span<const float> measured);
    int64_t count() const { return sums_.count; }
    // mse, sqnrDb, maxAbsError and cosine as quant/metrics.h defines them;
    // fractionClipped is 0.
    ErrorMetrics metrics() const { return sums_.metrics(); }

private:
    ErrorSums sums_;
};

struct LayerEvaluation {
    size_t layer = 0;                   // index into Model::layers
    std::optional<ErrorMetrics> weight; // the weight's own error (weight quantized)
    // At the layer's output: the layer alone quantized (weight and input
    // activation) on the float model's inputs, against the float output.
    std::optional<ErrorMetrics> isolated;
    // At the layer's output: everything quantized, against the float run.
    // Neither is measured for a layer inside an If/Loop/Scan body (its output
    // is one tensor per iteration): such a row has its weight's metrics only.
    std::optional<ErrorMetrics> accumulated;
};

struct OutputEvaluation {
    std::string name;     // graph output
    ErrorMetrics metrics; // quantized against float over all batches
};

// Classification hits of one batch: logits [N, C, ...] (classes = the
// elements of a row) against integer labels [N] or [N, 1]. A sample hits
// top-k when fewer than k classes rank above its label; ties rank the lower
// class index first (as numpy's argmax and a stable sort do). Outputs with
// at most 5 classes have no top-5. Throws Error naming `outputName` for
// logits that are not [N, ...] with N rows, and `labelsName` and the row for
// a label that is not an integer class index in [0, C).
struct ClassificationHits {
    int64_t samples = 0;
    int64_t top1 = 0;
    std::optional<int64_t> top5;
};
ClassificationHits classificationHits(const Tensor& logits, const Tensor& labels, const std::string& outputName,
                                      const std::string& labelsName = "labels");


// Next-token negative log-likelihood summed over batches: for each row and
// each position t < T - 1, log-sum-exp(logits[t]) - logits[t][ids[t + 1]], in
// double precision. perplexity() = exp(sum / tokens).
struct NextTokenLoss {
    double sum = 0.0;
    int64_t tokens = 0;
    // Throws Error naming `outputName` for logits that are not [N, T, V] with
    // the ids' [N, T], and `idsName` for an id outside [0, V).
    void add(const Tensor& logits, const Tensor& ids, const std::string& outputName, const std::string& idsName);
    double perplexity() const;
};

struct Perplexity {
    double floatValue = 0.0;
    double quantizedValue = 0.0;
    int64_t tokens = 0; // predicted tokens: rows × (sequence − 1)
};

// How often the quantized model's top-1 class is the float model's, label-free:
// over the rows of the scored output ([N, C...]: one row per sample, its classes
// all the other elements; a causal language model's logits [N, T, V]: one row
// per token position). The top-1 of a row is its first largest value; a NaN row
// of the quantized model never agrees.
struct TopOneAgreement {
    int64_t rows = 0;
    int64_t agreeing = 0;
    double fraction() const { return rows ? double(agreeing) / double(rows) : 0.0; }
};

// Adds one batch: `floatOut` and `quantizedOut` of one shape, rows of `classes`
// elements (the caller says how the output is cut into rows). Throws Error naming
// `outputName` when the shapes differ or do not split into rows of `classes`.
void addTopOneAgreement(TopOneAgreement& agreement, const Tensor& floatOut, const Tensor& quantizedOut,
                        int64_t classes, const std::string& outputName);

struct Accuracy {
    int64_t samples = 0;
    double floatTop1 = 0, quantizedTop1 = 0; // fractions in [0, 1]
    std::optional<double> floatTop5, quantizedTop5;
};

// Metrics as the JSON reports write them: {mse, sqnr_db, max_abs_error,
// cosine}; sqnr_db is null when infinite (+inf when mse is 0, else -inf: the
// float values are all zero).
nlohmann::json errorMetricsJson(const ErrorMetrics& m);
// errorMetricsJson read back (fractionClipped is 0); throws Error naming `field`.
ErrorMetrics errorMetricsFromJson(const nlohmann::json& j, const std::string& field);

struct EvaluationResult {
    std::vector<LayerEvaluation> layers; // plan layers, model order
    std::vector<OutputEvaluation> outputs;
    std::optional<Accuracy> accuracy; // when the data has labels
    std::optional<Perplexity> perplexity; // for a causal language model (causalLanguageModel())
    // On the scored output (the logits of a causal language model) when its rows
    // have at least 2 classes; none otherwise.
    std::optional<TopOneAgreement> agreement;
    int64_t batches = 0;
    int64_t samples = 0;
    // What the output figures (outputs, accuracy's quantized top-1/top-5, agreement) were
    // computed with: "fake_quant" (the plan's float fake-quant run, QuantizationHook) or
    // "integer" (ODML mode: the LiteRT program the export writes, run by the integer
    // simulation, session/integer_evaluation.h). The per-layer figures are fake-quant always.
    std::string outputSimulation = "fake_quant";
    std::string outputSimulationNote;               // why an ODML evaluation's outputs stayed fake-quant
    std::string outputArithmetic;                   // "integer": whose arithmetic (tfliteArithmeticName)
    std::vector<OutputEvaluation> fakeQuantOutputs; // "integer": the fake-quant outputs it replaced
    nlohmann::json toJson() const;
    // Reads toJson()'s document back (session files); an infinite SQNR, stored
    // as null, comes back +inf when the MSE is 0 and −inf otherwise. Throws
    // Error naming the field for a malformed document.
    static EvaluationResult fromJson(const nlohmann::json& j);
};

struct EvaluationOptions {
    std::optional<int64_t> maxBatches;
    bool isolated = true;     // also compute the per-layer isolated error (one extra kernel call per layer)
    bool accumulated = true;  // also compute the per-layer accumulated error
    std::string labelsOutput; // graph output the labels are scored against; default the first output
};

// The static activation parameters a hooked run of `plan` needs: from
// `statistics` (null when the plan has no static activation); an Error naming
// the first value that needs calibration when statistics are missing or do
// not cover it.
std::map<size_t, StaticActivation> requiredStaticActivations(const Model& model, const QuantizationPlan& plan,
                                                             const ActivationStatistics* statistics);

// The graph output labels are scored against: `labelsOutput`, or the first
// output when empty; an Error naming it when the model has no such output.
std::string scoredOutput(const Model& model, const std::string& labelsOutput);

// Runs `data` (rewound first) float and fake-quantized. `statistics` must
// cover the plan's static activations (ActivationStatistics::covers); null
// when there are none. Progress per batch; Cancelled on cancellation.
EvaluationResult evaluate(const Interpreter& interpreter, const QuantizationPlan& plan, const WeightQuantizer& weights,
                          const ActivationStatistics* statistics, DataSource& data,
                          const EvaluationOptions& options = {}, const CancellationToken& cancel = {},
                          const ProgressCallback& progress = {});

enum class SensitivityKind : uint8_t {
    OneLayer,  // only this layer quantized
    AllButOne, // every plan layer quantized except this one
};

struct LayerSensitivity {
    size_t layer = 0;
    ErrorMetrics output;        // at the (first, or labelsOutput) graph output, against float
    std::optional<double> top1; // quantized top-1 when the data has labels
    std::optional<double> perplexity; // quantized perplexity, for a causal language model
};

struct SensitivityResult {
    SensitivityKind kind = SensitivityKind::OneLayer;
    // Most sensitive first: OneLayer by lowest output SQNR; AllButOne by
    // highest output SQNR (leaving the layer float helps most). For a causal
    // language model by perplexity instead: OneLayer highest first, AllButOne
    // lowest first.
    std::vector<LayerSensitivity> ranking;
    std::optional<double> floatPerplexity; // for a causal language model: the baseline of the increases
    // Set when the run rounded every layer's weight by one algorithm instead of
    // by its rule's (QuantizationPlan::withAlgorithm); none: the rules' own.
    std::optional<WeightAlgorithm> algorithm;
    std::vector<KeptRounding> keptRounding; // with `algorithm`: the layers that kept their rule's rounding, and why
    nlohmann::json toJson() const;
};

SensitivityResult sensitivity(const Interpreter& interpreter, const QuantizationPlan& plan,
                              const WeightQuantizer& weights, const ActivationStatistics* statistics, DataSource& data,
                              SensitivityKind kind, const EvaluationOptions& options = {},
                              const CancellationToken& cancel = {}, const ProgressCallback& progress = {});

} // namespace qs
