// quantscope-cli bench-model: the interpreter's latency on one model, on seeded
// random inputs of the model's input shapes (what tests/ort compares with ONNX
// Runtime on the same model and thread count).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <tbb/global_control.h>

#include "cli/commands.h"
#include "core/dtype.h"
#include "core/error.h"
#include "io/model_loader.h"
#include "runtime/interpreter.h"
#include "runtime/tensor_cast.h"

namespace qs::cli {
namespace {

constexpr uint32_t kSeed = 20240229;

// Fixed dimensions as declared; symbolic ones take the batch size, unknown ones 1.
Shape inputShape(const ValueInfo& input, int64_t batch, const std::string& modelFile)
{
    if (!input.shape)
        throw Error(modelFile + ": input '" + input.name + "' has no declared rank; its shape cannot be chosen");
    Shape shape;
    for (const Dim& d : *input.shape)
        shape.push_back(d.isFixed() ? *d.size : (d.isSymbolic() ? batch : 1));
    return shape;
}

// Normal floats for float inputs; integers in [0, 10) for integer inputs (indices, token ids).
Tensor randomInput(const ValueInfo& input, const Shape& shape, std::mt19937& rng, const std::string& modelFile)
{
    if (!input.dtype)
        throw Error(modelFile + ": input '" + input.name + "' is of type " + input.typeName +
                    ", which bench-model cannot fill");
    Tensor values(DType::F32, shape);
    std::normal_distribution<float> normal(0.f, 1.f);
    std::uniform_int_distribution<int> small(0, 9);
    const bool integer = !isFloatingDType(*input.dtype);
    for (float& v : values.mutableValues<float>())
        v = integer ? float(small(rng)) : normal(rng);
    return *input.dtype == DType::F32 ? values : castTensor(values, *input.dtype);
}

int runBenchModel(const Arguments& args)
{
    if (args.positionals().empty())
        throw UsageError("missing MODEL");
    const std::string modelFile = args.positionals()[0];
    const int64_t batch = args.integer("--batch", 1, int64_t(1) << 20).value_or(1);
    const int threads = int(args.integer("--threads", 1, 1024).value_or(2));
    const int runs = int(args.integer("--runs", 1, 100000).value_or(20));
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, size_t(threads));

    Model model = loadModel(modelFile);
    if (model.weightsOnly)
        throw Error(modelFile + ": a weights-only checkpoint (" + model.format + ") has no graph to run");
    std::mt19937 rng(kSeed);
    std::map<std::string, Tensor> inputs;
    for (const ValueInfo& input : model.inputs)
        inputs[input.name] = randomInput(input, inputShape(input, batch, modelFile), rng, modelFile);
    const Interpreter interpreter(std::move(model));

    const bool progress = ::isatty(STDERR_FILENO) == 1;
    auto timed = [&] {
        const auto start = std::chrono::steady_clock::now();
        interpreter.run(inputs);
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    };
    timed(); // warm-up: page faults, caches, TBB's threads
    std::vector<double> ms;
    for (int r = 0; r < runs; ++r) {
        if (progress)
            std::fprintf(stderr, "\rrun %d/%d", r + 1, runs);
        ms.push_back(timed());
    }
    if (progress)
        std::fprintf(stderr, "\r%-30s\r", "");
    double mean = 0;
    for (double v : ms)
        mean += v / double(ms.size());
    std::vector<double> sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    const size_t n = sorted.size();
    const double median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);

    if (args.flag("--json")) {
        const nlohmann::json j{{"model", modelFile}, {"batch", batch},      {"threads", threads},
                               {"runs", runs},       {"median_ms", median}, {"mean_ms", mean}};
        std::printf("%s\n", j.dump(2).c_str());
        return kExitOk;
    }
    std::printf("%s: batch %lld, %d threads, %d runs after a warm-up run\n", modelFile.c_str(),
                static_cast<long long>(batch), threads, runs);
    std::printf("median %.3f ms, mean %.3f ms, min %.3f ms, max %.3f ms\n", median, mean, sorted.front(),
                sorted.back());
    return kExitOk;
}

} // namespace

Command benchModelCommand()
{
    CommandSpec spec;
    spec.name = "bench-model";
    spec.summary = "Measure the interpreter's latency on a model with seeded random inputs";
    spec.synopsis = "bench-model MODEL [--batch B] [--threads T] [--runs N] [--json]";
    spec.positionalName = "MODEL";
    spec.options = {
        {"--batch", "B", "size of the inputs' symbolic dimensions (default 1)", {}, false},
        {"--threads", "T", "worker threads (default 2)", {}, false},
        {"--runs", "N", "timed runs after one warm-up run (default 20)", {}, false},
        {"--json", "", "print JSON instead of text", {}, false},
    };
    spec.notes = "MODEL: a model with a graph (ONNX). Each input gets the model's declared shape: fixed\n"
                 "dimensions as declared, symbolic ones B, unknown ones 1; float inputs are seeded normal\n"
                 "values, integer inputs seeded integers in [0, 10). Latency is wall time of one whole run\n"
                 "(all nodes, inputs in memory), in milliseconds. JSON: {model, batch, threads, runs,\n"
                 "median_ms, mean_ms}. Progress goes to stderr when it is a terminal.";
    return {spec, runBenchModel};
}

} // namespace qs::cli
