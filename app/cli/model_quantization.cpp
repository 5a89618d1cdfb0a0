#include "cli/model_quantization.h"

#include <chrono>
#include <cstdio>
#include <unistd.h>

#include "cli/input_shapes.h"
#include "core/error.h"
#include "io/model_loader.h"

namespace qs::cli {

double nowSeconds()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double secondsSince(double start)
{
    return nowSeconds() - start;
}

ProgressCallback terminalProgress()
{
    if (::isatty(STDERR_FILENO) != 1)
        return {};
    return [](double fraction, std::string_view step) {
        if (fraction >= 1.0) {
            std::fprintf(stderr, "\r%-78s\r", "");
            return;
        }
        std::fprintf(stderr, "\r%3d%% %-72.72s", int(fraction * 100.0), std::string(step).c_str());
        std::fflush(stderr);
    };
}

std::unique_ptr<DataSource> openModelData(const std::filesystem::path& file, const Model& model,
                                          std::optional<int64_t> batchSize)
{
    const BatchSizing sizing = cliBatchSizing(model, batchSize);
    std::unique_ptr<DataSource> data;
    try {
        data = openDataSource(file, sizing.apply(), &model);
    } catch (const Error& e) {
        if (std::string_view(e.what()).find(file.string()) != std::string_view::npos)
            throw;
        throw Error(file.string() + ": " + e.what());
    }
    if (data->droppedRows())
        std::fprintf(stderr,
                     "warning: %s: the model's input '%s' takes batches of exactly %lld rows: the last %lld of "
                     "%lld rows are left out\n",
                     file.string().c_str(), sizing.fixedBy.c_str(), static_cast<long long>(sizing.batchSize),
                     static_cast<long long>(data->droppedRows()), static_cast<long long>(data->rowCount()));
    return data;
}

ModelQuantization::ModelQuantization(const ModelQuantizationOptions& options)
{
    double start = nowSeconds();
    if (options.rulesFile)
        rules_ = RuleSet::load(*options.rulesFile);
    Model loaded = loadModel(options.modelFile);
    if (options.mode == QuantizationMode::Odml) {
        BatchNormFolding folding = foldBatchNorms(std::move(loaded));
        loaded = std::move(folding.model);
        foldedBatchNorms_ = std::move(folding.folded);
        decomposedBatchNorms_ = std::move(folding.decomposed);
        keptBatchNorms_ = std::move(folding.kept);
        for (const KeptBatchNorm& kept : keptBatchNorms_)
            warnings_.push_back(options.modelFile.string() + ": BatchNormalization '" + kept.batchNorm +
                                "' is neither folded nor written as Mul and Add: " + kept.reason);
    }
    if (options.needsInterpreter) {
        if (loaded.weightsOnly)
            throw Error(options.modelFile.string() + ": a weights-only checkpoint (" + loaded.format +
                        ") has no graph to run; this needs a model with a graph (ONNX)");
        interpreter_ = std::make_unique<Interpreter>(std::move(loaded));
    } else {
        model_ = std::make_unique<Model>(std::move(loaded));
    }
    times_.load = secondsSince(start);
    const Model& m = model();
    cliBatchSizing(m, options.batchSize); // a --batch-size the model cannot take is said before any work
    for (const std::string& w : m.warnings)
        warnings_.push_back(options.modelFile.string() + ": " + w);
    if (!rules_)
        return;

    plan_ = QuantizationPlan::build(m, *rules_, options.mode);
    const std::string rulesName = options.rulesFile->string();
    for (size_t r : plan_.resolution().unusedRules)
        warnings_.push_back(rulesName + ": rule " + std::to_string(r) + " (module_path '" +
                            rules_->rules()[r].modulePath.text() + "') matches no layer");
    for (const LayerQuantization& lq : plan_.layers()) {
        if (!lq.problem.empty())
            warnings_.push_back("layer '" + m.layers[lq.layer].modulePath + "' stays float: " + lq.problem);
        if (!lq.note.empty())
            warnings_.push_back("layer '" + m.layers[lq.layer].modulePath + "': " + lq.note);
        if (lq.problem.empty() && lq.activation && lq.activation->staticScale && !options.calibFile)
            throw Error(rulesName + ": rule " + std::to_string(lq.rule) + " sets act_static_scale (layer '" +
                        m.layers[lq.layer].modulePath +
                        "'); static activation scales need calibration data: give "
                        "--calib DATA");
    }

    start = nowSeconds();
    weights_.update(m, plan_, {}, terminalProgress());
    times_.weights = secondsSince(start);
    for (const auto& [layer, why] : weights_.problems())
        throw Error("layer '" + m.layers[layer].modulePath + "' (weight '" + m.layers[layer].weightName + "'): " + why);

    bool needsCalibration = false;
    for (const LayerQuantization& lq : plan_.layers())
        needsCalibration = needsCalibration || (lq.problem.empty() && lq.activation && lq.activation->staticScale);
    if (!needsCalibration)
        return;
    if (!interpreter_)
        throw Error(options.modelFile.string() + ": static activation scales need a model with a graph to run");
    start = nowSeconds();
    const std::unique_ptr<DataSource> calib = openModelData(*options.calibFile, m, options.batchSize);
    CalibrationOptions calibration;
    calibration.maxBatches = options.maxBatches;
    // One run of fixed rules: histograms only where a rule's method reads them.
    calibration.histograms = KeptHistograms::AsPlanNeeds;
    statistics_ = calibrateActivations(*interpreter_, plan_, *calib, calibration, {}, terminalProgress());
    times_.calibration = secondsSince(start);
}

} // namespace qs::cli
