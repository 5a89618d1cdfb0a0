#include "session/exploration.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include <unistd.h>

#include "core/error.h"
#include "core/sha256.h"
#include "export/tflite.h"
#include "export/tflite_integer.h"
#include "io/image_folder.h"
#include "io/model_loader.h"
#include "io/synthetic_data.h"
#include "runtime/input_channel_maxima.h"
#include "runtime/op_registry.h"
#include "runtime/pre_activation_minima.h"
#include "session/integer_evaluation.h"

namespace qs {

namespace {

// Why a model of half-precision weights cannot run here, or "": a quantized
// run holds each quantized weight fake-quantized in float32, so the float32
// size of those weights must fit in half the machine's memory (a 7B-parameter
// bf16 checkpoint needs 28 GB to run quantized, nothing to be explored weight
// by weight). The float model itself runs on the mapped weights (a Gemm widens
// a strip at a time).
std::string widenedWeightsTooLarge(const Model& model)
{
    if (!model.widenHalfInitializers)
        return {};
    uint64_t widened = 0;
    for (const NamedTensor& init : model.initializers())
        if (init.tensor.dtype() == DType::F16 || init.tensor.dtype() == DType::BF16)
            widened += uint64_t(init.tensor.numel()) * sizeof(float);
    const long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || pageSize <= 0)
        return {};
    const uint64_t memory = uint64_t(pages) * uint64_t(pageSize);
    if (widened <= memory / 2)
        return {};
    char text[200];
    std::snprintf(
        text, sizeof text,
        ": running it quantized needs %.1f GiB of float32 weights, more than half of this machine's %.1f GiB; "
        "its weights can still be quantized and exported",
        double(widened) / double(1ull << 30), double(memory) / double(1ull << 30));
    return model.sourcePath.string() + text;
}

double secondsSince(std::chrono::steady_clock::time_point start)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string layerName(const Model& model, size_t layer)
{
    return "layer '" + model.layers[layer].modulePath + "'";
}

// Whether two plans quantize every layer's weight the same way: then the
// weights computed for one are the weights of the other.
bool sameWeights(const QuantizationPlan& a, const QuantizationPlan& b)
{
    if (a.layers().size() != b.layers().size())
        return false;
    for (size_t i = 0; i < a.layers().size(); ++i) {
        const LayerQuantization &x = a.layers()[i], &y = b.layers()[i];
        if (x.layer != y.layer || x.weight != y.weight || x.weightRounding != y.weightRounding ||
            x.weightSeed != y.weightSeed || x.weightAxes != y.weightAxes || x.weightAlgorithm != y.weightAlgorithm ||
            x.problem.empty() != y.problem.empty())
            return false;
    }
    return true;
}

} // namespace

// ---- loading

LoadedModel loadExplorationModel(const std::filesystem::path& path, const LoadOptions& options,
                                 const CancellationToken& cancel, const ProgressCallback& progress)
{
    const auto start = std::chrono::steady_clock::now();
    auto report = [&progress](double fraction, std::string_view step) {
        if (progress)
            progress(fraction, step);
    };
    LoadedModel loaded;
    loaded.path = path;
    loaded.mode = options.mode;
    report(0.05, "reading the model");
    Model model = loadModel(path);
    cancel.check();
    if (options.mode == QuantizationMode::Odml) {
        report(0.5, "folding batch normalizations");
        loaded.batchNorms = foldBatchNorms(std::move(model));
        model = std::move(loaded.batchNorms.model);
        loaded.batchNorms.model = Model();
    }
    if (options.interpreter) {
        report(0.6, "checking the ops");
        if (model.weightsOnly) {
            loaded.whyNotRunnable = path.string() + ": a weights-only checkpoint (" + model.format +
                                    ") has no graph to run; this needs a model with a graph (ONNX)";
        } else if (std::string why = widenedWeightsTooLarge(model); !why.empty()) {
            loaded.whyNotRunnable = std::move(why);
        } else {
            loaded.unsupportedOps = unsupportedOps(model);
            try {
                // A copy (tensors share their storage): the model stays when the runtime refuses it.
                loaded.interpreter = std::make_shared<const Interpreter>(Model(model)); // names the ops it lacks
            } catch (const Error& e) {
                loaded.whyNotRunnable = e.what();
            }
        }
    }
    cancel.check();
    if (options.hash) {
        report(0.8, "hashing the file");
        loaded.sha256 = sha256OfModel(path);
    }
    // One model object: with an interpreter, the interpreter's own (the plan,
    // the hooks and the interpreter then agree on every node by construction).
    loaded.model = loaded.interpreter ? std::shared_ptr<const Model>(loaded.interpreter, &loaded.interpreter->model())
                                      : std::make_shared<const Model>(std::move(model));
    loaded.seconds = secondsSince(start);
    report(1.0, "loaded");
    return loaded;
}

// ---- data

std::unique_ptr<DataSource> ExplorationSnapshot::openData(const DataConfig& config,
                                                          std::vector<ExplorationWarning>* warnings) const
{
    // Without a model (data chosen before one is open) the configuration's own batch size applies.
    BatchSizing sizing;
    sizing.batchSize = config.batchSize;
    if (model)
        sizing = batchSizingFor(*model, batchSize, config.batchSize);
    DataSourceOptions options = sizing.apply();
    options.sequenceLength = config.sequenceLength;
    std::unique_ptr<DataSource> data;
    switch (config.kind) {
    case DataConfig::Kind::File:
        try {
            data = openDataSource(config.path, options, model.get());
        } catch (const Error& e) {
            if (std::string_view(e.what()).find(config.path.string()) != std::string_view::npos)
                throw;
            throw Error(config.path.string() + ": " + e.what());
        }
        break;
    case DataConfig::Kind::ImageFolder:
        if (!decoder)
            throw Error(config.path.string() + ": image folders are read by the app (no image decoder here)");
        data = std::make_unique<ImageFolderSource>(config.path, config.recipe, decoder, options, model.get());
        break;
    case DataConfig::Kind::Synthetic:
        if (!model)
            throw Error("synthetic data needs a model");
        data = std::make_unique<SyntheticDataSource>(*model, config.syntheticSamples, config.syntheticSeed, options);
        break;
    }
    if (!data)
        throw Error("unknown data kind");
    if (warnings && data->droppedRows()) {
        ExplorationWarning w;
        w.kind = ExplorationWarning::Kind::DroppedRows;
        w.text = config.path.string() + ": the model's input '" + sizing.fixedBy + "' takes batches of exactly " +
                 std::to_string(sizing.batchSize) + " rows: the last " + std::to_string(data->droppedRows()) + " of " +
                 std::to_string(data->rowCount()) + " rows are left out";
        warnings->push_back(std::move(w));
    }
    return data;
}

// ---- jobs

WeightResult WeightJob::run(const CancellationToken& cancel, const ProgressCallback& progress) const
{
    const auto start = std::chrono::steady_clock::now();
    auto next = in.weights ? std::make_shared<WeightQuantizer>(*in.weights) // shares the unchanged layers' results
                           : std::make_shared<WeightQuantizer>();
    WeightResult r;
    r.generation = in.generation;
    r.statistics = in.statistics;
    r.recomputed =
        next->update(*in.model, *in.plan, cancel, progress, in.statistics ? &in.statistics->hessians() : nullptr);
    r.weights = std::move(next);
    r.seconds = secondsSince(start);
    return r;
}

CalibrationResult CalibrationJob::run(const CancellationToken& cancel, const ProgressCallback& progress) const
{
    const auto start = std::chrono::steady_clock::now();
    CalibrationResult r;
    r.generation = in.generation;
    if (in.calibration->kind == DataConfig::Kind::Synthetic)
        r.warnings.push_back({ExplorationWarning::Kind::SyntheticData,
                              {},
                              {},
                              {},
                              "calibrating on synthetic data: the ranges are not representative of real inputs"});
    const std::unique_ptr<DataSource> data = in.openData(*in.calibration, &r.warnings);
    const Interpreter* calibrated = in.interpreter.get();
    const bool absorb = absorption && !absorption->pairs.empty() && !absorptionCurrent;
    const bool smooth = smoothing && !smoothing->inputs.empty() && (!smoothingCurrent || absorb);
    // Progress: each phase an equal share.
    const int phases = 1 + int(absorb) + int(smooth);
    int phase = 0;
    auto share = [&progress, phases](int k) -> ProgressCallback {
        if (!progress)
            return {};
        return [&progress, k, phases](double f, std::string_view step) { progress((k + f) / phases, step); };
    };
    std::shared_ptr<const Interpreter> smoothingBase = floatInterpreter;
    // Phase 0 (high_bias_absorption): the equalized model's pre-activation minima, then the absorbed copy.
    if (absorb) {
        const auto minima =
            preActivationMinima(*equalizedInterpreter, *absorption, *data, options.maxBatches, cancel, share(phase++));
        cancel.check();
        auto absorbed = std::make_shared<const HighBiasAbsorption>(
            absorbHighBiases(equalizedInterpreter->model(), *absorption, minima));
        r.absorbedInterpreter =
            std::make_shared<const Interpreter>(absorbedModel(equalizedInterpreter->model(), *absorbed));
        r.absorbedModel = std::shared_ptr<const Model>(r.absorbedInterpreter, &r.absorbedInterpreter->model());
        r.equalizedModel = std::shared_ptr<const Model>(equalizedInterpreter, &equalizedInterpreter->model());
        r.absorption = std::move(absorbed);
        smoothingBase = r.absorbedInterpreter;
        calibrated = r.absorbedInterpreter.get();
    }
    // Phase 1 (smooth_alpha): the float model's per-channel maxima, then the smoothed copy.
    if (smooth) {
        const auto maxima =
            inputChannelMaxima(*smoothingBase, *smoothing, *data, options.maxBatches, cancel, share(phase++));
        cancel.check();
        auto smoothed = std::make_shared<const SmoothQuant>(smoothLayers(smoothingBase->model(), *smoothing, maxima));
        r.smoothedInterpreter = std::make_shared<const Interpreter>(smoothedModel(smoothingBase->model(), *smoothed));
        r.smoothedModel = std::shared_ptr<const Model>(r.smoothedInterpreter, &r.smoothedInterpreter->model());
        r.floatModel = std::shared_ptr<const Model>(smoothingBase, &smoothingBase->model());
        r.smoothing = std::move(smoothed);
        calibrated = r.smoothedInterpreter.get();
    }
    const ProgressCallback calibrationProgress = phases > 1 ? share(phase) : progress;
    // Phase 2: the calibration of the (smoothed) model every later stage runs on.
    r.statistics = std::make_shared<const ActivationStatistics>(
        calibrateActivations(*calibrated, *in.plan, *data, options, cancel, calibrationProgress));
    r.seconds = secondsSince(start);
    return r;
}

// ODML mode: the output figures of the LiteRT program `quantize --export-tflite` writes (the
// same calibration data and batches), run by the integer simulation. A model the exporter
// refuses keeps the fake-quant figures, and the result says why.
void EvaluationJob::evaluateOdmlProgram(EvaluationResult& result, DataSource& data, const CancellationToken& cancel,
                                        const ProgressCallback& progress) const
{
    try {
        const std::unique_ptr<DataSource> calib = in.openData(*in.calibration);
        TfliteOptions tflite;
        tflite.odml.maxBatches = in.calibration->maxBatches;
        tflite.groupedConv = litert.groupedConv;
        tflite.transposeConvBias = litert.transposeConvBias;
        const TfliteModel built = buildTflite(*in.interpreter, *in.plan, *in.weights, *calib, tflite, cancel);
        const TfliteIntegerExecutor program = TfliteIntegerExecutor::fromBytes(
            built.bytes, in.model->sourcePath.filename().string() + " (LiteRT export)", litert.arithmetic);
        evaluateIntegerProgram(*in.interpreter, program, data, options, result, cancel, progress);
        result.outputArithmetic = tfliteArithmeticName(litert.arithmetic);
    } catch (const Cancelled&) {
        throw;
    } catch (const Error& e) {
        result.outputSimulation = "fake_quant";
        result.outputSimulationNote = std::string("the output figures are the fake-quant simulation's, not the "
                                                  "integer program's: ") +
                                      e.what();
    }
}

EvaluationRun EvaluationJob::run(const CancellationToken& cancel, const ProgressCallback& progress) const
{
    const auto start = std::chrono::steady_clock::now();
    EvaluationRun r;
    r.generation = in.generation;
    r.rulesJson = in.rules->toJson();
    const std::unique_ptr<DataSource> data = in.openData(*in.evaluation, &r.warnings);
    EvaluationResult result =
        qs::evaluate(*in.interpreter, *in.plan, *in.weights, in.statistics.get(), *data, options, cancel, progress);
    if (in.plan->mode() == QuantizationMode::Odml && in.calibration && in.statistics)
        evaluateOdmlProgram(result, *data, cancel, progress);
    r.result = std::make_shared<const EvaluationResult>(std::move(result));
    r.seconds = secondsSince(start);
    return r;
}

SensitivityRun SensitivityJob::run(const CancellationToken& cancel, const ProgressCallback& progress) const
{
    const auto start = std::chrono::steady_clock::now();
    SensitivityRun r;
    r.generation = in.generation;
    if (!algorithm) {
        const std::unique_ptr<DataSource> data = in.openData(*in.evaluation, &r.warnings);
        r.result = std::make_shared<const SensitivityResult>(qs::sensitivity(
            *in.interpreter, *in.plan, *in.weights, in.statistics.get(), *data, kind, options, cancel, progress));
        r.seconds = secondsSince(start);
        return r;
    }
    // The plan with the algorithm switched on; its weights (and, when the held
    // statistics lack the inputs it reads, a calibration first); then the ranking.
    std::vector<KeptRounding> kept;
    const QuantizationPlan plan = in.plan->withAlgorithm(*in.model, *algorithm, &kept);
    auto part = [&progress](double offset, double width) -> ProgressCallback {
        if (!progress)
            return {};
        return [&progress, offset, width](double f, std::string_view step) { progress(offset + f * width, step); };
    };
    std::shared_ptr<const ActivationStatistics> statistics = in.statistics;
    if (!statistics || !statistics->covers(plan)) {
        if (!in.calibration)
            throw Error("a sensitivity run with algorithm " + std::string(algorithm->name()) +
                        " needs calibration data (the layers' inputs): set calibration data first");
        const std::unique_ptr<DataSource> calib = in.openData(*in.calibration, &r.warnings);
        CalibrationOptions calibration;
        calibration.maxBatches = in.calibration->maxBatches;
        calibration.histograms = KeptHistograms::AsPlanNeeds;
        statistics = std::make_shared<const ActivationStatistics>(
            calibrateActivations(*in.interpreter, plan, *calib, calibration, cancel, part(0, 0.2)));
    }
    auto weights = std::make_shared<WeightQuantizer>(*in.weights); // shares the layers whose rounding is unchanged
    weights->update(*in.model, plan, cancel, part(0.2, 0.3), &statistics->hessians());
    const std::unique_ptr<DataSource> data = in.openData(*in.evaluation, &r.warnings);
    SensitivityResult result = qs::sensitivity(*in.interpreter, plan, *weights, statistics.get(), *data, kind, options,
                                               cancel, part(0.5, 0.5));
    result.algorithm = algorithm;
    result.keptRounding = std::move(kept);
    r.result = std::make_shared<const SensitivityResult>(std::move(result));
    r.seconds = secondsSince(start);
    return r;
}

// ---- the exploration

Exploration::Exploration(std::shared_ptr<const ImageDecoder> decoder)
    : decoder_(std::move(decoder)), rules_(std::make_shared<const RuleSet>())
{
}

void Exploration::setModel(LoadedModel loaded)
{
    loaded_ = std::move(loaded);
    model_ = floatModel_ = equalizedModel_ = loaded_.model;
    interpreter_ = floatInterpreter_ = equalizedInterpreter_ = loaded_.interpreter;
    equalization_.reset();
    absorption_.reset();
    absorptionData_.reset();
    smoothing_.reset();
    smoothingData_.reset();
    mode_ = loaded_.mode;
    ++generation_;
    modelGeneration_ = generation_;
    // The fake-quantized weights are kept only for a model that runs (the hook
    // reads them on every run); otherwise the cache holds parameters and metrics.
    auto weights = std::make_shared<WeightQuantizer>();
    weights->setRetainFakeQuant(loaded_.interpreter != nullptr);
    weights_ = std::move(weights);
    weightsGeneration_ = 0;
    statistics_.reset();
    evaluationResult_.reset();
    evaluationRules_.clear();
    evaluationGeneration_ = 0;
    sensitivity_.reset();
    plan_.reset();
    std::string conflict;
    if (model_) {
        try {
            plan_ = std::make_shared<const QuantizationPlan>(QuantizationPlan::build(*model_, *rules_, mode_));
            takeEqualization(equalize(plan_.get()));
            takeAbsorptionTargets();
            takeSmoothingTargets();
        } catch (const Error& e) {
            // Rules that contradict themselves on this model's shared weights:
            // the model opens float until the rules are edited, and says why.
            conflict = e.what();
            plan_ = std::make_shared<const QuantizationPlan>(QuantizationPlan::build(*model_, RuleSet(), mode_));
        }
    }
    rebuildWarnings();
    if (!conflict.empty())
        warnings_.push_back(
            {ExplorationWarning::Kind::RuleConflict, {}, {}, {}, conflict + "; every layer stays float"});
}

Exploration::NamedTensor Exploration::namedTensor(const std::string& name) const
{
    if (!model_)
        throw Error("no model is open");
    const std::string file = loaded_.path.string();
    for (size_t i = 0; i < model_->layers.size(); ++i) {
        const QuantizableLayer& layer = model_->layers[i];
        if (layer.weightName != name && layer.modulePath != name)
            continue;
        const Tensor* t = model_->initializer(layer.weightName);
        if (!t)
            throw Error(file + ": layer '" + layer.modulePath + "' has no weight initializer '" + layer.weightName +
                        "'");
        return {t->toFloat32().clone(), i, layer.channelAxis};
    }
    const Tensor* t = model_->initializer(name);
    if (!t)
        throw Error(file + ": no initializer or layer module path '" + name +
                    "' (quantscope-cli inspect lists the layers and their weights)");
    if (t->dtype() == DType::Bool || t->empty())
        throw Error(file + ": tensor '" + name + "' is " + (t->empty() ? "empty" : "boolean") +
                    "; quantization needs numeric values");
    return {t->toFloat32().clone(), std::nullopt, std::nullopt};
}

Staleness Exploration::setRules(RuleSet rules, std::string source)
{
    auto next = std::make_shared<const RuleSet>(std::move(rules));
    std::shared_ptr<const QuantizationPlan> plan;
    Equalized equalized;
    if (model_) {
        plan = std::make_shared<const QuantizationPlan>(QuantizationPlan::build(*loaded_.model, *next, mode_));
        equalized = equalize(plan.get());
    }
    Staleness s;
    s.plan = true;
    const bool weightsWereCurrent = weightsCurrent();
    rules_ = std::move(next);
    rulesSource_ = std::move(source);
    ++generation_;
    if (plan) {
        // The weights of the old plan are the new plan's when no layer's weight quantization changed.
        if (weightsWereCurrent && plan_ && sameWeights(*plan_, *plan))
            weightsGeneration_ = generation_;
        plan_ = std::move(plan);
        const bool newFloatModel = takeEqualization(std::move(equalized));
        const bool newAbsorption = takeAbsorptionTargets();
        if (takeSmoothingTargets() || newFloatModel || newAbsorption) {
            // Another float model: its weights, statistics and results are all new.
            weightsGeneration_ = 0;
            if (statistics_) {
                statistics_.reset();
                s.statistics = true;
            }
        }
    }
    s.weights = !weightsCurrent();
    // Statistics that do not cover the plan, or of a model smooth_alpha now asks to smooth first.
    s.statistics = statistics_ && plan_ && (!statistics_->covers(*plan_) || smoothingPending() || absorptionPending());
    if (sensitivity_) {
        // A ranking is of the rules it ran with; it would be shown as current.
        sensitivity_.reset();
        s.sensitivity = true;
    }
    if (evaluationResult_) {
        // An evaluation of exactly these rules (an undo back to them) is current again.
        if (evaluationRules_ == rules_->toJson())
            evaluationGeneration_ = generation_;
        s.evaluation = evaluationGeneration_ != generation_;
    }
    rebuildWarnings();
    return s;
}

Staleness Exploration::setCalibrationData(std::optional<DataConfig> config)
{
    Staleness s;
    s.statistics = calibration_ != config && statistics_; // statistics of other data
    calibration_ = std::move(config);
    return s;
}

Staleness Exploration::setEvaluationData(std::optional<DataConfig> config)
{
    Staleness s;
    s.evaluation = evaluation_ != config && evaluationResult_; // an evaluation of other data
    evaluation_ = std::move(config);
    return s;
}

Exploration::Equalized Exploration::equalize(const QuantizationPlan* plan) const
{
    Equalized e{nullptr, loaded_.model, loaded_.interpreter};
    if (!plan || !loaded_.model || loaded_.model->weightsOnly ||
        std::none_of(plan->layers().begin(), plan->layers().end(),
                     [](const LayerQuantization& lq) { return lq.equalize; }))
        return e;
    auto eq = std::make_shared<const CrossLayerEqualization>(equalizeLayers(*loaded_.model, *plan));
    e.equalization = eq;
    if (eq->pairs.empty())
        return e;
    // The same pairs and scales as now: the same model.
    if (equalization_ && equalization_->pairs.size() == eq->pairs.size() &&
        std::equal(eq->pairs.begin(), eq->pairs.end(), equalization_->pairs.begin(),
                   [](const EqualizedPair& a, const EqualizedPair& b) {
                       return a.first == b.first && a.second == b.second && a.scales == b.scales;
                   })) {
        e.model = equalizedModel_;
        e.interpreter = equalizedInterpreter_;
        return e;
    }
    Model m = equalizedModel(*loaded_.model, *eq);
    if (loaded_.interpreter) {
        e.interpreter = std::make_shared<const Interpreter>(std::move(m));
        e.model = std::shared_ptr<const Model>(e.interpreter, &e.interpreter->model());
    } else {
        e.model = std::make_shared<const Model>(std::move(m));
        e.interpreter = nullptr;
    }
    return e;
}

bool Exploration::takeEqualization(Equalized e)
{
    equalization_ = std::move(e.equalization);
    if (e.model == equalizedModel_)
        return false;
    model_ = floatModel_ = equalizedModel_ = std::move(e.model);
    interpreter_ = floatInterpreter_ = equalizedInterpreter_ = std::move(e.interpreter);
    smoothingData_.reset();  // a smoothing of another float model
    absorptionData_.reset(); // an absorption of another equalized model
    modelGeneration_ = generation_;
    return true;
}

bool Exploration::takeSmoothingTargets()
{
    std::shared_ptr<const SmoothQuant> next;
    if (plan_ && floatModel_ && !floatModel_->weightsOnly &&
        std::any_of(plan_->layers().begin(), plan_->layers().end(),
                    [](const LayerQuantization& lq) { return lq.smoothAlpha > 0; }))
        next = std::make_shared<const SmoothQuant>(smoothingTargets(*floatModel_, *plan_));
    const bool smoothed = model_ != floatModel_;
    // The same activations, layers, producers and alphas: the smoothing held (and its model) still holds.
    if (smoothed && next && smoothing_ && next->sameTargets(*smoothing_)) {
        auto kept = std::make_shared<SmoothQuant>(*smoothing_);
        kept->skipped = next->skipped;
        smoothing_ = std::move(kept);
        return false;
    }
    smoothing_ = std::move(next);
    smoothingData_.reset();
    if (!smoothed)
        return false;
    model_ = floatModel_;
    interpreter_ = floatInterpreter_;
    modelGeneration_ = generation_;
    return true;
}

bool Exploration::takeAbsorptionTargets()
{
    std::shared_ptr<const HighBiasAbsorption> next;
    if (plan_ && equalization_ && !equalization_->pairs.empty() && loaded_.model && !loaded_.model->weightsOnly)
        next = std::make_shared<const HighBiasAbsorption>(absorptionTargets(*loaded_.model, *plan_, *equalization_));
    if (next && next->pairs.empty() && next->skipped.empty())
        next.reset();
    const bool absorbed = floatModel_ != equalizedModel_;
    // The same pairs on the same equalized model: the absorption held (and its model) still holds.
    if (absorbed && next && absorption_ && next->sameTargets(*absorption_)) {
        auto kept = std::make_shared<HighBiasAbsorption>(*absorption_);
        kept->skipped = next->skipped;
        absorption_ = std::move(kept);
        return false;
    }
    absorption_ = std::move(next);
    absorptionData_.reset();
    if (!absorbed)
        return false;
    model_ = floatModel_ = equalizedModel_;
    interpreter_ = floatInterpreter_ = equalizedInterpreter_;
    smoothingData_.reset();
    modelGeneration_ = generation_;
    return true;
}

bool Exploration::absorptionPending() const
{
    return absorption_ && !absorption_->pairs.empty() && (!absorptionData_ || absorptionData_ != calibration_);
}

bool Exploration::smoothingPending() const
{
    return smoothing_ && !smoothing_->inputs.empty() && (!smoothingData_ || smoothingData_ != calibration_);
}

void Exploration::rebuildWarnings()
{
    warnings_.clear();
    if (!model_)
        return;
    const Model& m = *model_;
    const std::string file = loaded_.path.empty() ? std::string() : loaded_.path.string() + ": ";
    for (const std::string& w : m.warnings)
        warnings_.push_back({ExplorationWarning::Kind::Model, {}, {}, {}, file + w});
    for (const KeptBatchNorm& kept : loaded_.batchNorms.kept)
        warnings_.push_back({ExplorationWarning::Kind::KeptBatchNorm,
                             {},
                             {},
                             {},
                             file + "BatchNormalization '" + kept.batchNorm +
                                 "' is neither folded nor written as Mul and Add: " + kept.reason});
    if (!plan_)
        return;
    const std::string rulesName = rulesSource_.empty() ? std::string("rules") : rulesSource_;
    if (smoothing_)
        for (const SkippedSmoothing& k : smoothing_->skipped)
            warnings_.push_back(
                {ExplorationWarning::Kind::LayerNote, k.layer,
                 plan_->forLayer(k.layer) ? std::optional<size_t>(plan_->forLayer(k.layer)->rule) : std::nullopt,
                 "smooth_alpha", layerName(m, k.layer) + ": not smoothed: " + k.reason});
    if (absorption_)
        for (const SkippedPair& p : absorption_->skipped)
            warnings_.push_back(
                {ExplorationWarning::Kind::LayerNote, p.first,
                 plan_->forLayer(p.first) ? std::optional<size_t>(plan_->forLayer(p.first)->rule) : std::nullopt,
                 "high_bias_absorption", layerName(m, p.first) + ": " + p.reason});
    if (equalization_)
        for (const SkippedPair& p : equalization_->skipped)
            warnings_.push_back(
                {ExplorationWarning::Kind::LayerNote, p.first,
                 plan_->forLayer(p.first) ? std::optional<size_t>(plan_->forLayer(p.first)->rule) : std::nullopt,
                 "equalize", layerName(m, p.first) + ": not equalized with the next layer: " + p.reason});
    for (size_t r : plan_->resolution().unusedRules)
        warnings_.push_back({ExplorationWarning::Kind::UnusedRule,
                             {},
                             r,
                             "module_path",
                             rulesName + ": rule " + std::to_string(r) + " (module_path '" +
                                 rules_->rules()[r].modulePath.text() + "') matches no layer"});
    for (const LayerQuantization& lq : plan_->layers()) {
        if (!lq.problem.empty())
            warnings_.push_back({ExplorationWarning::Kind::LayerProblem,
                                 lq.layer,
                                 lq.rule,
                                 {},
                                 layerName(m, lq.layer) + " stays float: " + lq.problem});
        if (!lq.note.empty())
            warnings_.push_back(
                {ExplorationWarning::Kind::LayerNote, lq.layer, lq.rule, {}, layerName(m, lq.layer) + ": " + lq.note});
    }
}

ExplorationSnapshot Exploration::snapshot() const
{
    ExplorationSnapshot s;
    s.generation = generation_;
    s.model = model_;
    s.interpreter = interpreter_;
    s.rules = rules_;
    s.plan = plan_;
    s.weights = weights_;
    s.statistics = statistics_;
    s.calibration = calibration_;
    s.evaluation = evaluation_;
    s.batchSize = batchSize_;
    s.decoder = decoder_;
    return s;
}

WeightJob Exploration::weightJob() const
{
    if (!model_ || !plan_)
        throw Error("no model is open");
    return WeightJob{snapshot()};
}

bool Exploration::apply(WeightResult result)
{
    if (!model_ || result.generation < weightsGeneration_ || result.generation < modelGeneration_)
        return false;
    weights_ = std::move(result.weights);
    weightsGeneration_ = result.generation;
    weightsStatistics_ = std::move(result.statistics);
    return true;
}

bool Exploration::weightsNeedCalibration() const
{
    if (!plan_)
        return false;
    // Smoothed weights come from the calibration's first phase, absorbed biases from the phase before.
    if (smoothing_ && !smoothing_->inputs.empty())
        return true;
    if (absorption_ && !absorption_->pairs.empty())
        return true;
    return std::any_of(plan_->layers().begin(), plan_->layers().end(), [](const LayerQuantization& lq) {
        return lq.problem.empty() && lq.weight && lq.readsCalibrationInputs();
    });
}

bool Exploration::weightsCurrent() const
{
    return weights_ && weightsGeneration_ == generation_ &&
           (!weightsNeedCalibration() || weightsStatistics_ == statistics_);
}

bool Exploration::needsCalibration() const
{
    if (!plan_)
        return false;
    return weightsNeedCalibration() ||
           std::any_of(plan_->layers().begin(), plan_->layers().end(), [](const LayerQuantization& lq) {
               return lq.problem.empty() && lq.activation && lq.activation->staticScale;
           });
}

CalibrationJob Exploration::calibrationJob(KeptHistograms histograms) const
{
    if (!model_)
        throw Error("no model is open");
    if (!interpreter_)
        throw Error(loaded_.whyNotRunnable.empty() ? "the model cannot run" : loaded_.whyNotRunnable);
    if (!calibration_)
        throw Error("no calibration data is set");
    CalibrationJob job;
    job.in = snapshot();
    job.options.maxBatches = calibration_->maxBatches;
    job.options.histograms = histograms;
    job.smoothing = smoothing_;
    job.floatInterpreter = floatInterpreter_;
    job.smoothingCurrent = !smoothingPending();
    job.absorption = absorption_;
    job.equalizedInterpreter = equalizedInterpreter_;
    job.absorptionCurrent = !absorptionPending();
    return job;
}

bool Exploration::apply(CalibrationResult result)
{
    if (!model_ || !result.statistics || (result.generation && result.generation < modelGeneration_))
        return false;
    if (result.absorption) {
        // An absorption of other targets or of another equalized model is dropped with its statistics.
        if (!absorption_ || !result.absorption->sameTargets(*absorption_) || result.equalizedModel != equalizedModel_)
            return false;
    } else if (absorptionPending()) {
        return false; // statistics of a model whose high biases are not absorbed yet
    }
    if (result.smoothing) {
        // A smoothing of other targets or of another float model is dropped with its statistics.
        const auto base = result.absorption ? result.absorbedModel : floatModel_;
        if (!smoothing_ || !result.smoothing->sameTargets(*smoothing_) || result.floatModel != base)
            return false;
    } else if (smoothingPending() && !result.absorption) {
        return false; // statistics of a model that is not the one smoothing asks for
    }
    if (result.absorption) {
        auto taken = std::make_shared<HighBiasAbsorption>(*result.absorption);
        taken->skipped = absorption_->skipped;
        absorption_ = std::move(taken);
        absorptionData_ = calibration_;
        model_ = floatModel_ = std::move(result.absorbedModel);
        interpreter_ = floatInterpreter_ = std::move(result.absorbedInterpreter);
        smoothingData_.reset();
        modelGeneration_ = generation_;
        weightsGeneration_ = 0; // weights of the model before absorption
    }
    if (result.smoothing) {
        auto taken = std::make_shared<SmoothQuant>(*result.smoothing);
        taken->skipped = smoothing_->skipped;
        smoothing_ = std::move(taken);
        smoothingData_ = calibration_;
        model_ = std::move(result.smoothedModel);
        interpreter_ = std::move(result.smoothedInterpreter);
        modelGeneration_ = generation_;
        weightsGeneration_ = 0; // weights of the unsmoothed model
    }
    statistics_ = std::move(result.statistics);
    return true;
}

void Exploration::setStatistics(std::shared_ptr<const ActivationStatistics> statistics)
{
    statistics_ = std::move(statistics);
}

EvaluationJob Exploration::evaluationJob() const
{
    if (!model_)
        throw Error("no model is open");
    if (!interpreter_)
        throw Error(loaded_.whyNotRunnable.empty() ? "the model cannot run" : loaded_.whyNotRunnable);
    if (!evaluation_)
        throw Error("no evaluation data is set");
    if (!weightsCurrent())
        throw Error("the weights of the current rules are still being computed; try again in a moment");
    if (needsCalibration() && !(statistics_ && statistics_->covers(*plan_)))
        throw Error("these rules quantize activations with static scales: run calibration first");
    if (smoothingPending())
        throw Error("these rules set smooth_alpha: run calibration first (it computes the smoothing)");
    if (absorptionPending())
        throw Error("these rules set high_bias_absorption: run calibration first (it computes the absorbed biases)");
    EvaluationJob job{snapshot(), {}, litert_};
    job.options.maxBatches = evaluation_->maxBatches;
    return job;
}

bool Exploration::apply(EvaluationRun run)
{
    if (!model_ || !run.result)
        return false;
    evaluationResult_ = std::move(run.result);
    evaluationRules_ = std::move(run.rulesJson);
    // Rules edited while it ran: the result is kept, shown stale.
    evaluationGeneration_ = evaluationRules_ == rules_->toJson() ? generation_ : run.generation;
    return true;
}

SensitivityJob Exploration::sensitivityJob(SensitivityKind kind, std::optional<WeightAlgorithm> algorithm) const
{
    EvaluationJob e = evaluationJob();
    if (algorithm && algorithm->needsCalibration() && !calibration_)
        throw Error("a sensitivity run with algorithm " + std::string(algorithm->name()) +
                    " rounds each layer's weights from its calibration inputs: set calibration data first");
    return SensitivityJob{std::move(e.in), kind, e.options, algorithm};
}

bool Exploration::apply(SensitivityRun run)
{
    if (!model_ || !run.result || run.generation != generation_)
        return false; // a ranking of other rules is never shown
    sensitivity_ = std::move(run.result);
    return true;
}

WeightResult Exploration::updateWeights(const CancellationToken& cancel, const ProgressCallback& progress)
{
    WeightResult r = weightJob().run(cancel, progress);
    WeightResult copy{r.generation, r.weights, r.statistics, r.recomputed, r.seconds};
    apply(std::move(r));
    return copy;
}

CalibrationResult Exploration::calibrate(KeptHistograms histograms, const CancellationToken& cancel,
                                         const ProgressCallback& progress)
{
    CalibrationResult r = calibrationJob(histograms).run(cancel, progress);
    CalibrationResult copy = r;
    copy.warnings.clear();
    apply(std::move(copy));
    return r;
}

EvaluationRun Exploration::evaluate(const CancellationToken& cancel, const ProgressCallback& progress)
{
    EvaluationRun r = evaluationJob().run(cancel, progress);
    apply(EvaluationRun{r.generation, r.rulesJson, r.result, {}, r.seconds});
    return r;
}

SensitivityRun Exploration::runSensitivity(SensitivityKind kind, std::optional<WeightAlgorithm> algorithm,
                                           const CancellationToken& cancel, const ProgressCallback& progress)
{
    SensitivityRun r = sensitivityJob(kind, algorithm).run(cancel, progress);
    apply(SensitivityRun{r.generation, r.result, {}, r.seconds});
    return r;
}

// ---- session files

SessionFile Exploration::sessionFile(nlohmann::ordered_json rulesAsWritten) const
{
    SessionFile s;
    s.modelPath = std::filesystem::absolute(loaded_.path);
    s.modelSha256 = loaded_.sha256;
    s.mode = std::string(quantizationModeName(mode_));
    s.rules = std::move(rulesAsWritten);
    s.calibrationData = calibration_;
    s.evaluationData = evaluation_;
    if (statistics_)
        s.activationStatistics = statistics_->toJson();
    if (evaluationResult_) {
        s.evaluation = evaluationResult_->toJson();
        s.rulesOfResults = nlohmann::ordered_json::parse(evaluationRules_);
    }
    return s;
}

std::vector<std::string> Exploration::restoreResults(const SessionFile& s)
{
    std::vector<std::string> log;
    calibration_ = s.calibrationData;
    evaluation_ = s.evaluationData;
    if (!model_)
        return log;
    if (!s.modelSha256.empty() && s.modelSha256 != loaded_.sha256) {
        log.push_back("The model file changed since the session was saved (SHA-256 differs): cached results are "
                      "dropped.");
        return log;
    }
    if (s.modelSha256 != loaded_.sha256)
        return log;
    const bool smoothed = (smoothing_ && !smoothing_->inputs.empty()) || (absorption_ && !absorption_->pairs.empty());
    if (smoothed && !s.activationStatistics.is_null())
        log.push_back("Cached statistics dropped: the rules set smooth_alpha or high_bias_absorption, which a new "
                      "calibration computes (session files do not hold them)");
    try {
        if (!s.activationStatistics.is_null() && !smoothed)
            statistics_ =
                std::make_shared<const ActivationStatistics>(ActivationStatistics::fromJson(s.activationStatistics));
    } catch (const Error& e) {
        log.push_back(std::string("Cached statistics dropped: ") + e.what());
    }
    // The cached evaluation comes back whole, stale unless its rules are the current ones.
    if (s.evaluation.is_null())
        return log;
    try {
        EvaluationResult restored = EvaluationResult::fromJson(s.evaluation);
        // Rows of layers this model does not have (a session file edited by hand) are dropped, and said so.
        const size_t rows = restored.layers.size();
        std::erase_if(restored.layers, [&](const LayerEvaluation& l) { return l.layer >= model_->layers.size(); });
        if (restored.layers.size() != rows)
            log.push_back("Cached evaluation: " + std::to_string(rows - restored.layers.size()) + " of " +
                          std::to_string(rows) + " layer row(s) name layers the model does not have (it has " +
                          std::to_string(model_->layers.size()) + "); they were dropped");
        std::string rulesText = s.rulesOfResults.dump(); // as saved, if it no longer parses
        bool current = false;
        try {
            rulesText = RuleSet::fromJson(s.rulesOfResults.dump()).toJson();
            current = !s.rulesOfResults.is_null() && rulesText == rules_->toJson();
        } catch (const Error&) {
            current = false; // rules that no longer parse: the results are stale
        }
        evaluationResult_ = std::make_shared<const EvaluationResult>(std::move(restored));
        evaluationRules_ = rulesText;
        evaluationGeneration_ = current ? generation_ : generation_ - 1;
    } catch (const Error& e) {
        log.push_back(std::string("Cached evaluation dropped: ") + e.what());
    }
    return log;
}

} // namespace qs
