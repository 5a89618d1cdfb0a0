#pragma once
// What `run` and `quantize` share: a model loaded with a rule file, the rules
// resolved into a plan, the weights fake-quantized and, when a rule asks for a
// static activation scale, the activations calibrated on --calib data. Each
// stage is timed; problems the user should know of (unused rules, layers a
// rule cannot apply to) become warnings.

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/cancellation.h"
#include "graph/batch_norm_folding.h"
#include "graph/model.h"
#include "io/data_source.h"
#include "rules/ruleset.h"
#include "runtime/activation_calibration.h"
#include "runtime/interpreter.h"
#include "runtime/quantization_plan.h"
#include "runtime/weight_quantizer.h"

namespace qs::cli {

struct ModelQuantizationOptions {
    std::filesystem::path modelFile;
    std::optional<std::filesystem::path> rulesFile; // none: the model runs float
    QuantizationMode mode = QuantizationMode::Ptq;
    std::optional<std::filesystem::path> calibFile;
    std::optional<int64_t> batchSize; // --batch-size; default the model's fixed batch dim, else 32
    std::optional<int64_t> maxBatches;
    bool needsInterpreter = true; // the model will be run (calibration, evaluation, run)
};

struct StageTimes {
    double load = 0, weights = 0, calibration = 0; // seconds
};

class ModelQuantization {
public:
    // Loads the rule file first (a bad rule file is reported before a long
    // model load), then the model (in ODML mode with its batch norms folded,
    // as the LiteRT converter folds them); resolves the rules; quantizes the weights;
    // calibrates when the plan has static activations. Throws Error naming
    // the rule whose static activation has no --calib, the file at fault, or
    // the layer whose weight cannot be quantized.
    explicit ModelQuantization(const ModelQuantizationOptions& options);

    const Model& model() const { return interpreter_ ? interpreter_->model() : *model_; }
    // Null unless options.needsInterpreter.
    const Interpreter* interpreter() const { return interpreter_.get(); }
    const std::optional<RuleSet>& rules() const { return rules_; }
    const QuantizationPlan& plan() const { return plan_; }
    const WeightQuantizer& weights() const { return weights_; }
    // Set when the plan has static activations.
    const ActivationStatistics* statistics() const { return statistics_ ? &*statistics_ : nullptr; }
    // Lines for stderr: unused rules, layers left float and why.
    const std::vector<std::string>& warnings() const { return warnings_; }
    const StageTimes& times() const { return times_; }
    // ODML mode: the BatchNormalization nodes folded into the layer before
    // them, written as Mul and Add, or kept (graph/batch_norm_folding.h);
    // empty in other modes. The model above is the folded one.
    const std::vector<FoldedBatchNorm>& foldedBatchNorms() const { return foldedBatchNorms_; }
    const std::vector<FoldedBatchNorm>& decomposedBatchNorms() const { return decomposedBatchNorms_; }
    const std::vector<KeptBatchNorm>& keptBatchNorms() const { return keptBatchNorms_; }

private:
    std::unique_ptr<Model> model_; // without an interpreter
    std::unique_ptr<Interpreter> interpreter_;
    std::optional<RuleSet> rules_;
    QuantizationPlan plan_;
    WeightQuantizer weights_;
    std::optional<ActivationStatistics> statistics_;
    std::vector<std::string> warnings_;
    StageTimes times_;
    std::vector<FoldedBatchNorm> foldedBatchNorms_, decomposedBatchNorms_;
    std::vector<KeptBatchNorm> keptBatchNorms_;
};

// Opens --calib or --eval data for `model` (its inputs decide the arrays) in
// batches of batchSizingFor(model, batchSize), naming the file in errors that
// do not name it already. Rows left out after the last whole batch of a model
// with a fixed batch dimension are a warning on stderr.
std::unique_ptr<DataSource> openModelData(const std::filesystem::path& file, const Model& model,
                                          std::optional<int64_t> batchSize);

// Progress on stderr when it is a terminal ("\r" updates, cleared at 1.0);
// nothing otherwise.
ProgressCallback terminalProgress();

// Seconds since `start` (a steady_clock time point as double seconds).
double secondsSince(double start);
double nowSeconds();

} // namespace qs::cli
