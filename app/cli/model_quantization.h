#pragma once
// How `run` and `quantize` set up the engine's Exploration (session/exploration.h)
// from their options: the rule file read first (a bad one is reported before a
// long model load), the model (ODML: with its batch norms folded), the rules
// resolved into a plan, the weights fake-quantized and, when a rule asks for a
// static activation scale, the activations calibrated on --calib. Each stage
// is timed. The pipeline itself is the Exploration's; this file only turns
// command-line options into its inputs and its warnings into stderr lines.

#include <filesystem>
#include <optional>
#include <string>

#include "core/cancellation.h"
#include "session/exploration.h"

namespace qs::cli {

struct ModelQuantizationOptions {
    std::filesystem::path modelFile;
    std::optional<std::filesystem::path> rulesFile; // none: the model runs float
    QuantizationMode mode = QuantizationMode::Ptq;
    std::optional<std::filesystem::path> calibFile;
    std::optional<int64_t> batchSize; // --batch-size; default the model's fixed batch dim, else 32
    std::optional<int64_t> maxBatches;
    int64_t sequenceLength = 0; // --seq-len: tokens per row of text data (0: the default)
    bool needsInterpreter = true; // the model will be run (calibration, evaluation, run)
};

struct StageTimes {
    double load = 0, weights = 0, calibration = 0; // seconds
};

// The exploration of `options`, with its weights quantized and, when the plan
// has static activations, its activations calibrated. Warnings (unused rules,
// layers left float and why, rows a fixed batch leaves out) go to stderr.
// Throws Error naming the rule whose static activation has no --calib, the
// file at fault, or the layer whose weight cannot be quantized.
// With `preloaded`, that model is used instead of loading options.modelFile
// again (compare-rules: one model, two rule sets).
Exploration openExploration(const ModelQuantizationOptions& options, StageTimes* times = nullptr,
                            const LoadedModel* preloaded = nullptr);

// options.modelFile opened as openExploration would (its mode, an interpreter
// when options.needsInterpreter; Error with why it cannot run otherwise).
LoadedModel loadModel(const ModelQuantizationOptions& options);

// --calib or --eval DATA as the exploration reads it: a file, at most `maxBatches` batches.
DataConfig fileData(const std::filesystem::path& file, std::optional<int64_t> maxBatches, int64_t sequenceLength = 0);

// "warning: <text>" on stderr for each.
void printWarnings(const std::vector<ExplorationWarning>& warnings);

// Progress on stderr when it is a terminal ("\r" updates, cleared at 1.0);
// nothing otherwise.
ProgressCallback terminalProgress();

// Seconds since `start` (a steady_clock time point as double seconds).
double secondsSince(double start);
double nowSeconds();

} // namespace qs::cli
