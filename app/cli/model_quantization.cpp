#include "cli/model_quantization.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <unistd.h>

#include "cli/input_shapes.h"
#include "core/error.h"

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

void printWarnings(const std::vector<ExplorationWarning>& warnings)
{
    for (const ExplorationWarning& w : warnings)
        std::fprintf(stderr, "warning: %s\n", w.text.c_str());
}

DataConfig fileData(const std::filesystem::path& file, std::optional<int64_t> maxBatches, int64_t sequenceLength)
{
    DataConfig config;
    config.kind = DataConfig::Kind::File;
    config.path = file;
    config.maxBatches = maxBatches;
    config.sequenceLength = sequenceLength;
    return config;
}

LoadedModel loadModel(const ModelQuantizationOptions& options)
{
    LoadOptions load;
    load.mode = options.mode;
    load.interpreter = options.needsInterpreter;
    LoadedModel loaded = loadExplorationModel(options.modelFile, load, {}, terminalProgress());
    if (options.needsInterpreter && !loaded.interpreter)
        throw Error(loaded.whyNotRunnable);
    return loaded;
}

Exploration openExploration(const ModelQuantizationOptions& options, StageTimes* times, const LoadedModel* preloaded)
{
    StageTimes local;
    StageTimes& t = times ? *times : local;
    std::optional<RuleSet> rules;
    if (options.rulesFile)
        rules = RuleSet::load(*options.rulesFile);
    LoadedModel loaded = preloaded ? *preloaded : loadModel(options);
    t.load = loaded.seconds;
    Exploration exploration;
    exploration.setModel(std::move(loaded));
    // A --batch-size the model cannot take is said before any work.
    cliBatchSizing(exploration.model(), options.batchSize);
    exploration.setRequestedBatchSize(options.batchSize);
    if (options.calibFile)
        exploration.setCalibrationData(fileData(*options.calibFile, options.maxBatches, options.sequenceLength));
    if (!rules) {
        printWarnings(exploration.warnings());
        return exploration;
    }

    const std::string rulesName = options.rulesFile->string();
    exploration.setRules(std::move(*rules), rulesName);
    printWarnings(exploration.warnings());
    if (const auto eq = exploration.equalization())
        for (const EqualizedPair& p : eq->pairs) {
            const auto [low, high] = std::minmax_element(p.scales.begin(), p.scales.end());
            std::fprintf(stderr, "equalize: %s -> %s%s: %zu channels, scales %.4g to %.4g (%d sweeps)\n",
                         exploration.model().layers[p.first].modulePath.c_str(),
                         exploration.model().layers[p.second].modulePath.c_str(),
                         p.through.empty() ? "" : (" through " + p.through).c_str(), p.scales.size(), *low, *high,
                         eq->sweeps);
        }
    if (exploration.needsCalibration() && !options.calibFile)
        for (const LayerQuantization& lq : exploration.plan()->layers()) {
            if (!lq.problem.empty())
                continue;
            const std::string layer = exploration.model().layers[lq.layer].modulePath;
            if (lq.activation && lq.activation->staticScale)
                throw Error(rulesName + ": rule " + std::to_string(lq.rule) + " sets act_static_scale (layer '" +
                            layer + "'); static activation scales need calibration data: give --calib DATA");
            if (lq.highBiasAbsorption && exploration.absorptionPending())
                throw Error(rulesName + ": rule " + std::to_string(lq.rule) + " sets high_bias_absorption (layer '" +
                            layer +
                            "'), which reads its output's per-channel minima from calibration: give --calib "
                            "DATA");
            if (lq.smoothAlpha > 0 && exploration.smoothingPending())
                throw Error(rulesName + ": rule " + std::to_string(lq.rule) + " sets smooth_alpha (layer '" + layer +
                            "'), which reads the activations' per-channel maxima from calibration: give --calib DATA");
            if (lq.weight && lq.readsCalibrationInputs())
                throw Error(rulesName + ": rule " + std::to_string(lq.rule) + " sets " +
                            (lq.weightAlgorithm.needsCalibration() ? "algorithm " + lq.weightAlgorithm.toString()
                                                                   : std::string("bias_correction")) +
                            " (layer '" + layer + "'), which reads the layer's calibration inputs: give --calib DATA");
        }
    const Model& m = exploration.model();
    auto calibrate = [&] {
        if (!exploration.interpreter())
            throw Error(options.modelFile.string() +
                        ": static activation scales and algorithms gptq, awq and adaround need a "
                        "model with a graph to run");
        // One run of fixed rules: histograms only where a rule's method reads them.
        const CalibrationResult calibration =
            exploration.calibrate(KeptHistograms::AsPlanNeeds, {}, terminalProgress());
        printWarnings(calibration.warnings);
        t.calibration = calibration.seconds;
        if (const auto hb = calibration.absorption)
            for (const AbsorptionPair& p : hb->pairs) {
                const auto absorbed =
                    std::count_if(p.absorbed.begin(), p.absorbed.end(), [](double c) { return c > 0; });
                std::fprintf(stderr, "high_bias_absorption: %s -> %s: %lld of %lld channels, c up to %.4g\n",
                             exploration.model().layers[p.first].modulePath.c_str(),
                             exploration.model().layers[p.second].modulePath.c_str(), static_cast<long long>(absorbed),
                             static_cast<long long>(p.channels),
                             p.absorbed.empty() ? 0.0 : *std::max_element(p.absorbed.begin(), p.absorbed.end()));
            }
        if (const auto sq = calibration.smoothing)
            for (const SmoothedInput& in : sq->inputs) {
                const auto [low, high] = std::minmax_element(in.scales.begin(), in.scales.end());
                std::string layers;
                for (size_t l : in.layers)
                    layers += (layers.empty() ? "" : ", ") + exploration.model().layers[l].modulePath;
                std::fprintf(stderr, "smooth_alpha %.3g: %s (1/s into %s '%s'): %lld channels, scales %.4g to %.4g\n",
                             in.alpha, layers.c_str(), in.producerOp.c_str(), in.producer.c_str(),
                             static_cast<long long>(in.channels), *low, *high);
            }
    };
    // An algorithm such as gptq rounds the weights from the calibration's Hessians: calibration first.
    const bool calibrateFirst = exploration.weightsNeedCalibration();
    if (calibrateFirst)
        calibrate();

    t.weights = exploration.updateWeights({}, terminalProgress()).seconds;
    for (const auto& [layer, why] : exploration.weights()->problems())
        throw Error("layer '" + m.layers[layer].modulePath + "' (weight '" + m.layers[layer].weightName + "'): " + why);

    if (exploration.needsCalibration() && !calibrateFirst)
        calibrate();
    return exploration;
}

} // namespace qs::cli
