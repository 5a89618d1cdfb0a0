#pragma once
// One exploration (DESIGN.md, "Session"): a model, the rules applied to it, the
// data settings, and every result computed from them, each stamped with the
// rules generation it belongs to. The app's Workspace and every CLI command
// that quantizes drive this class; neither holds a pipeline of its own.
//
// Edits go in once (setRules, setCalibrationData, ...) and come back as what
// they made stale. Long stages are jobs in two halves, so a GUI can run them on
// a worker thread and a CLI in line:
//
//     WeightJob job = exploration.weightJob();          // owner thread: a snapshot of the inputs
//     WeightResult r = job.run(cancel, progress);       // any thread: reads only the snapshot
//     exploration.apply(std::move(r));                  // owner thread: false if superseded
//
// The class is not thread-safe: edits, job creation and apply() happen on one
// thread (the GUI thread, or the CLI's only thread). Jobs share the immutable
// inputs they snapshot (shared_ptr<const ...>), so a job outlives any edit.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/cancellation.h"
#include "export/tflite.h"
#include "export/tflite_integer.h"
#include "graph/batch_norm_folding.h"
#include "graph/model.h"
#include "io/data_source.h"
#include "quantization/equalization.h"
#include "quantization/high_bias_absorption.h"
#include "quantization/quantization_plan.h"
#include "quantization/smoothing.h"
#include "quantization/weight_quantizer.h"
#include "rules/ruleset.h"
#include "runtime/activation_calibration.h"
#include "runtime/interpreter.h"
#include "session/evaluation.h"
#include "session/session_file.h"

namespace qs {

class ImageDecoder;

// Something the user should know of, worded once here; the CLI prints `text`
// after "warning: ", the app puts it in its log (and the rule table shows the
// rule ones in place).
struct ExplorationWarning {
    enum class Kind : uint8_t {
        Model,         // the loader's own warning (no layer found, a folded constant ...)
        KeptBatchNorm, // ODML: a BatchNormalization neither folded nor decomposed
        UnusedRule,    // a rule that matches no layer
        LayerProblem,  // a rule that cannot apply to a layer as written: the layer stays float
        LayerNote,     // a part of a rule that does not apply to a layer while the rest does
        WeightProblem, // a weight that could not be quantized (NaN/Inf, a spec it cannot take)
        DroppedRows,   // rows of a fixed-batch model's data left out after the last whole batch
        SyntheticData, // calibration on synthetic data: ranges not representative
        RuleConflict,  // rules that quantize a shared weight differently (the plan is then float)
    };
    Kind kind = Kind::Model;
    std::optional<size_t> layer; // index into Model::layers
    std::optional<size_t> rule;  // index into the rule set
    std::string field;           // the rule field at fault, when one is
    std::string text;            // one line, ready to show
};

// What an edit made stale. Results of older generations stay readable (the
// app shows them as stale) until a job of the current generation replaces them.
struct Staleness {
    bool plan = false;        // the plan was rebuilt (layer assignments, match counts)
    bool weights = false;     // the weights no longer match the plan: weightJob() recomputes what changed
    bool statistics = false;  // the calibration statistics no longer cover what the plan observes
    bool evaluation = false;  // the evaluation is of other rules or data
    bool sensitivity = false; // the sensitivity ranking was dropped
};

// How a model is opened.
struct LoadOptions {
    QuantizationMode mode = QuantizationMode::Ptq; // ODML also folds BatchNormalization (as the LiteRT converter)
    bool interpreter = true;                       // build the runtime for the model when it can run it
    bool hash = false;                             // SHA-256 of the file (session files compare it)
};

// A loaded model, before it joins an exploration (loading runs on a worker).
struct LoadedModel {
    std::filesystem::path path; // as given (messages name it so)
    QuantizationMode mode = QuantizationMode::Ptq;
    std::shared_ptr<const Model> model;
    std::shared_ptr<const Interpreter> interpreter; // null when the model cannot run: see whyNotRunnable
    std::string whyNotRunnable;                     // empty when the interpreter exists or was not asked for
    std::vector<std::string> unsupportedOps;        // ops the runtime lacks
    std::string sha256;                             // when LoadOptions::hash
    BatchNormFolding batchNorms;                    // ODML only (its model is moved out)
    double seconds = 0;
};

// Opens `path` (any format the loaders take). Throws Error naming the file.
LoadedModel loadExplorationModel(const std::filesystem::path& path, const LoadOptions& options = {},
                                 const CancellationToken& cancel = {}, const ProgressCallback& progress = {});

// The inputs of a job, shared and immutable: what it reads while the
// exploration goes on being edited.
struct ExplorationSnapshot {
    uint64_t generation = 0;
    std::shared_ptr<const Model> model;
    std::shared_ptr<const Interpreter> interpreter;
    std::shared_ptr<const RuleSet> rules;
    std::shared_ptr<const QuantizationPlan> plan;
    std::shared_ptr<const WeightQuantizer> weights;
    std::shared_ptr<const ActivationStatistics> statistics;
    std::optional<DataConfig> calibration, evaluation;
    std::optional<int64_t> batchSize;            // requested batch size (CLI --batch-size)
    std::shared_ptr<const ImageDecoder> decoder; // for image-folder data; may be null
    // Opens `config`'s batches for the model (a fixed batch dimension wins over
    // config.batchSize; an explicit batchSize that contradicts it is an Error
    // naming the input). Errors name the file. Rows a fixed batch leaves out
    // are added to `warnings` when given.
    std::unique_ptr<DataSource> openData(const DataConfig& config,
                                         std::vector<ExplorationWarning>* warnings = nullptr) const;
};

struct WeightResult {
    uint64_t generation = 0;
    std::shared_ptr<const WeightQuantizer> weights;
    std::shared_ptr<const ActivationStatistics> statistics; // whose Hessians the gptq and awq layers used
    std::vector<size_t> recomputed;                         // layers recomputed, model order
    double seconds = 0;
};
struct WeightJob {
    ExplorationSnapshot in;
    WeightResult run(const CancellationToken& cancel = {}, const ProgressCallback& progress = {}) const;
};

struct CalibrationResult {
    uint64_t generation = 0;
    std::shared_ptr<const ActivationStatistics> statistics;
    std::vector<ExplorationWarning> warnings;
    double seconds = 0;
    // Set when the job smoothed the model first (smooth_alpha rules): the
    // smoothing with its scales, the float model it rewrote, and the smoothed
    // model (and its interpreter) the statistics are of.
    std::shared_ptr<const SmoothQuant> smoothing;
    std::shared_ptr<const Model> floatModel, smoothedModel;
    std::shared_ptr<const Interpreter> smoothedInterpreter;
    // Set when the job absorbed high biases first (high_bias_absorption rules):
    // the absorption with its c per channel, the equalized model it rewrote, and
    // the absorbed model (and its interpreter) smoothing and calibration ran on.
    std::shared_ptr<const HighBiasAbsorption> absorption;
    std::shared_ptr<const Model> equalizedModel, absorbedModel;
    std::shared_ptr<const Interpreter> absorbedInterpreter;
};
// With smooth_alpha rules, calibration has two phases: (1) the float model
// (loaded, or equalized) runs over the calibration data for the per-channel
// maxima of the smoothed activations, and the smoothing rewrites a copy of it;
// (2) the usual calibration runs on that smoothed copy. Phase 1 is skipped when
// the smoothing held is of the same targets and data (`smoothingCurrent`).
// With high_bias_absorption rules a phase comes before both: the equalized
// model runs over the calibration data for the minima of the absorbing layers'
// outputs, and the absorption rewrites a copy of it (then smoothing, when asked,
// is recomputed on that copy). Skipped when the absorption held is current.
struct CalibrationJob {
    ExplorationSnapshot in;
    CalibrationOptions options;
    std::shared_ptr<const SmoothQuant> smoothing;        // the targets (and, when current, the scales); may be null
    std::shared_ptr<const Interpreter> floatInterpreter; // phase 1 runs on it
    bool smoothingCurrent = false;                       // in.interpreter is already the smoothed model
    std::shared_ptr<const HighBiasAbsorption> absorption;    // the targets; may be null
    std::shared_ptr<const Interpreter> equalizedInterpreter; // the absorption phase runs on it
    bool absorptionCurrent = false;                          // floatInterpreter is already the absorbed model
    CalibrationResult run(const CancellationToken& cancel = {}, const ProgressCallback& progress = {}) const;
};

struct EvaluationRun {
    uint64_t generation = 0;
    std::string rulesJson; // the rules it ran with (an undo back to them makes it current again)
    std::shared_ptr<const EvaluationResult> result;
    std::vector<ExplorationWarning> warnings;
    double seconds = 0;
};
// ODML mode: the LiteRT program whose outputs the output figures are — how the export writes
// grouped convolutions (as `--export-tflite` does) and whose int8 arithmetic runs it.
struct LiteRtSimulation {
    TfliteGroupedConv groupedConv = TfliteGroupedConv::Native;                  // TfliteOptions::groupedConv
    TfliteTransposeConvBias transposeConvBias = TfliteTransposeConvBias::Input; // TfliteOptions::transposeConvBias
    TfliteArithmetic arithmetic = TfliteArithmetic::Xnnpack;                    // LiteRT.js's by default
};

struct EvaluationJob {
    ExplorationSnapshot in;
    EvaluationOptions options;
    LiteRtSimulation litert; // ODML mode: the integer program's form and arithmetic
    // In ODML mode with calibration data, the output figures are the integer
    // program's (EvaluationResult::outputSimulation).
    EvaluationRun run(const CancellationToken& cancel = {}, const ProgressCallback& progress = {}) const;

private:
    void evaluateOdmlProgram(EvaluationResult& result, DataSource& data, const CancellationToken& cancel,
                             const ProgressCallback& progress) const;
};

struct SensitivityRun {
    uint64_t generation = 0;
    std::shared_ptr<const SensitivityResult> result;
    std::vector<ExplorationWarning> warnings;
    double seconds = 0;
};
// With `algorithm`, every quantized layer's weight is rounded by it instead of
// by its rule's algorithm (QuantizationPlan::withAlgorithm): the job then
// calibrates for the layers' inputs first when the snapshot's statistics lack
// them, rounds the weights whose rounding changed, and ranks with those.
struct SensitivityJob {
    ExplorationSnapshot in;
    SensitivityKind kind = SensitivityKind::OneLayer;
    EvaluationOptions options;
    std::optional<WeightAlgorithm> algorithm;
    SensitivityRun run(const CancellationToken& cancel = {}, const ProgressCallback& progress = {}) const;
};

class Exploration {
public:
    // `decoder` reads image-folder data (the app passes Qt's); null refuses image folders.
    explicit Exploration(std::shared_ptr<const ImageDecoder> decoder = nullptr);

    // ---- the model
    // Starts over on `loaded`: results and data settings of another model are
    // dropped; the rules stay and are resolved against the new layers.
    void setModel(LoadedModel loaded);
    bool hasModel() const { return model_ != nullptr; }
    const Model& model() const { return *model_; }
    std::shared_ptr<const Model> modelPtr() const { return model_; }
    const LoadedModel& loaded() const { return loaded_; }
    // With `equalize` rules, model(), modelPtr() and interpreter() are the
    // equalized model (quantization/equalization.h): the float model every stage,
    // evaluation and export runs on. loaded().model stays the file's.
    std::shared_ptr<const Interpreter> interpreter() const { return interpreter_; }
    // The cross-layer equalization of the current rules: the pairs equalized and
    // those skipped, with why; null when no rule sets equalize.
    std::shared_ptr<const CrossLayerEqualization> equalization() const { return equalization_; }
    // With high_bias_absorption rules, once a calibration has run, model(),
    // modelPtr() and interpreter() are the equalized model with the absorbed
    // biases (quantization/high_bias_absorption.h; smoothing, if any, on top). The
    // absorption of the current rules: the pairs (c per channel once calibrated)
    // and those skipped, with why; null when no equalized pair asks for it.
    std::shared_ptr<const HighBiasAbsorption> absorption() const { return absorption_; }
    // Whether the rules absorb high biases not yet computed from the current calibration data.
    bool absorptionPending() const;
    // With smooth_alpha rules, model(), modelPtr() and interpreter() are, once a
    // calibration has run, the smoothed model (quantization/smoothing.h; on top of
    // the equalized one). The smoothing of the current rules: the activations
    // smoothed (scales once calibrated) and the layers skipped, with why; null
    // when no rule sets smooth_alpha.
    std::shared_ptr<const SmoothQuant> smoothing() const { return smoothing_; }
    // Whether the rules smooth layers whose smoothing is not yet computed from
    // the current calibration data (a calibration computes it).
    bool smoothingPending() const;
    QuantizationMode mode() const { return mode_; }
    // A tensor of the model by a name a user types: a layer's module path or
    // weight name (then `layer` and its channel axis are set), or any
    // initializer. As float32, its own copy. Throws Error naming the model
    // file for a name it lacks, or a tensor with no numeric values.
    struct NamedTensor {
        Tensor values;
        std::optional<size_t> layer;
        std::optional<int> channelAxis;
    };
    NamedTensor namedTensor(const std::string& name) const;

    // ---- rules
    // Takes a new rule set (`source` names it in warnings: the rule file).
    // Resolves it once and rebuilds the plan. Throws Error, leaving everything
    // as it was, when the rules contradict themselves on a shared weight.
    Staleness setRules(RuleSet rules, std::string source = {});
    const RuleSet& rules() const { return *rules_; }
    const std::string& rulesSource() const { return rulesSource_; }
    // Bumped by every setRules and setModel.
    uint64_t generation() const { return generation_; }
    // Null until a model and rules are both set.
    std::shared_ptr<const QuantizationPlan> plan() const { return plan_; }
    // Unused rules, layer problems and notes of the current plan, and the model's own warnings.
    const std::vector<ExplorationWarning>& warnings() const { return warnings_; }

    // ---- data
    Staleness setCalibrationData(std::optional<DataConfig> config);
    Staleness setEvaluationData(std::optional<DataConfig> config);
    const std::optional<DataConfig>& calibrationData() const { return calibration_; }
    const std::optional<DataConfig>& evaluationData() const { return evaluation_; }
    // A batch size asked for explicitly (the CLI's --batch-size); none: the
    // model's fixed batch dimension, else each DataConfig's own.
    void setRequestedBatchSize(std::optional<int64_t> batchSize) { batchSize_ = batchSize; }

    // ---- stages (see the header comment for the job pattern)
    ExplorationSnapshot snapshot() const;

    WeightJob weightJob() const;
    // Takes a finished weight job's result; false when a newer one is held.
    bool apply(WeightResult result);
    std::shared_ptr<const WeightQuantizer> weights() const { return weights_; }
    uint64_t weightsGeneration() const { return weightsGeneration_; }
    // Current: of the current rules and, when a layer's algorithm reads
    // calibration inputs (gptq, awq), of the current calibration.
    bool weightsCurrent() const;
    // Whether a layer's weight algorithm reads calibration inputs (gptq, awq): then
    // calibration comes before the weights, and a new calibration makes them stale.
    bool weightsNeedCalibration() const;

    // Whether the plan quantizes an activation with a static scale, or a layer's
    // weight algorithm reads calibration inputs (calibration needed).
    bool needsCalibration() const;
    // Throws Error when there is no runnable model or no calibration data.
    CalibrationJob calibrationJob(KeptHistograms histograms = KeptHistograms::All) const;
    bool apply(CalibrationResult result);
    std::shared_ptr<const ActivationStatistics> statistics() const { return statistics_; }
    // Statistics restored from a session file (the calibration they record is reused).
    void setStatistics(std::shared_ptr<const ActivationStatistics> statistics);
    // ODML mode: the form and arithmetic of the integer program the next evaluations run.
    void setLiteRtSimulation(LiteRtSimulation simulation) { litert_ = simulation; }

    // Throws Error saying what is missing: a runnable model, evaluation data,
    // the current rules' weights, calibration for static activation scales.
    EvaluationJob evaluationJob() const;
    bool apply(EvaluationRun run);
    std::shared_ptr<const EvaluationResult> evaluation() const { return evaluationResult_; }
    // The generation the evaluation counts as: the current one when it was
    // computed from rules equal to the current ones.
    uint64_t evaluationGeneration() const { return evaluationGeneration_; }
    // The rule document (RuleSet::toJson) the evaluation ran with.
    const std::string& evaluationRules() const { return evaluationRules_; }

    // `algorithm`: rank with every layer rounded by it (SensitivityJob); one
    // that reads calibration inputs needs calibration data (Error saying so).
    SensitivityJob sensitivityJob(SensitivityKind kind, std::optional<WeightAlgorithm> algorithm = {}) const;
    bool apply(SensitivityRun run);
    std::shared_ptr<const SensitivityResult> sensitivity() const { return sensitivity_; }

    // In-line runs for callers without a worker thread (the CLI): job, run, apply.
    WeightResult updateWeights(const CancellationToken& cancel = {}, const ProgressCallback& progress = {});
    CalibrationResult calibrate(KeptHistograms histograms, const CancellationToken& cancel = {},
                                const ProgressCallback& progress = {});
    EvaluationRun evaluate(const CancellationToken& cancel = {}, const ProgressCallback& progress = {});
    SensitivityRun runSensitivity(SensitivityKind kind, std::optional<WeightAlgorithm> algorithm = {},
                                  const CancellationToken& cancel = {}, const ProgressCallback& progress = {});

    // ---- session files
    // The session: model path and hash, `rulesAsWritten` (the editor's rows,
    // invalid ones included), data settings and cached results.
    SessionFile sessionFile(nlohmann::ordered_json rulesAsWritten) const;
    // Restores the data settings and, when the model file is the one the
    // session was saved with, its cached results (statistics; the evaluation,
    // current when its rules are the current ones). Call after setModel and
    // setRules. Returns lines for the log (results dropped and why).
    std::vector<std::string> restoreResults(const SessionFile& session);

private:
    void rebuildWarnings();
    // The equalization `plan` asks of the loaded model, and the model and
    // interpreter it gives (the loaded ones when no pair is equalized).
    struct Equalized {
        std::shared_ptr<const CrossLayerEqualization> equalization;
        std::shared_ptr<const Model> model;
        std::shared_ptr<const Interpreter> interpreter;
    };
    Equalized equalize(const QuantizationPlan* plan) const;
    // Takes `e`; true when the model changed (results of the old one are then dropped).
    bool takeEqualization(Equalized e);
    // Takes the smoothing targets of the current plan on the float model; when
    // they differ from the held ones, the model goes back to the float one
    // (true: its weights and statistics are then dropped).
    bool takeSmoothingTargets();
    // Takes the absorption targets of the current plan and equalization; when
    // they differ from the held ones, the float model goes back to the equalized
    // one (true: its weights and statistics are then dropped).
    bool takeAbsorptionTargets();

    std::shared_ptr<const ImageDecoder> decoder_;
    LoadedModel loaded_;
    std::shared_ptr<const Model> model_; // floatModel_, or its smoothed copy
    std::shared_ptr<const Interpreter> interpreter_;
    std::shared_ptr<const Model> floatModel_; // equalizedModel_, or its copy with absorbed high biases
    std::shared_ptr<const Interpreter> floatInterpreter_;
    std::shared_ptr<const Model> equalizedModel_; // the loaded model, or its equalized copy
    std::shared_ptr<const Interpreter> equalizedInterpreter_;
    std::shared_ptr<const CrossLayerEqualization> equalization_;
    std::shared_ptr<const HighBiasAbsorption> absorption_;
    std::optional<DataConfig> absorptionData_; // the data floatModel_'s absorption is of; none: not absorbed yet
    std::shared_ptr<const SmoothQuant> smoothing_;
    std::optional<DataConfig> smoothingData_; // the data model_'s smoothing is of; none: not smoothed yet
    uint64_t modelGeneration_ = 0; // the generation model_ was last replaced at
    QuantizationMode mode_ = QuantizationMode::Ptq;

    std::shared_ptr<const RuleSet> rules_;
    std::string rulesSource_;
    uint64_t generation_ = 0;
    std::shared_ptr<const QuantizationPlan> plan_;
    std::vector<ExplorationWarning> warnings_;

    std::optional<DataConfig> calibration_, evaluation_;
    std::optional<int64_t> batchSize_;

    std::shared_ptr<const WeightQuantizer> weights_;
    uint64_t weightsGeneration_ = 0;
    std::shared_ptr<const ActivationStatistics> weightsStatistics_; // the calibration the weights used
    std::shared_ptr<const ActivationStatistics> statistics_;
    LiteRtSimulation litert_;
    std::shared_ptr<const EvaluationResult> evaluationResult_;
    uint64_t evaluationGeneration_ = 0;
    std::string evaluationRules_;
    std::shared_ptr<const SensitivityResult> sensitivity_;
};

} // namespace qs
