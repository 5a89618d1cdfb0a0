// quantscope-cli bench-model: the interpreter's latency on one model, on seeded
// random inputs of the model's input shapes (what tests/ort compares with ONNX
// Runtime on the same model and thread count). How it measures lives in
// cli/model_latency.h, shared with tests/bench/bench_zoo.
#include <cstdio>

#include <nlohmann/json.hpp>
#include <tbb/global_control.h>

#include "cli/commands.h"
#include "cli/input_shapes.h"
#include "cli/model_latency.h"
#include "cli/quantization_options.h"
#include "cli/text_table.h"
#include "core/error.h"
#include "io/model_loader.h"
#include "rules/ruleset.h"
#include "runtime/interpreter.h"

namespace qs::cli {
namespace {

int runBenchModel(const Arguments& args)
{
    if (args.positionals().empty())
        throw UsageError("missing MODEL");
    const std::string modelFile = args.positionals()[0];
    if (args.value("--batch") && args.value("--batch-size"))
        throw UsageError("--batch is the older name of --batch-size: give one of them");
    const std::optional<int64_t> requested =
        args.value("--batch") ? args.integer("--batch", 1, int64_t(1) << 20) : batchSizeArgument(args);
    const int threads = int(args.integer("--threads", 1, 1024).value_or(2));
    const int runs = int(args.integer("--runs", 1, 100000).value_or(20));
    if (args.value("--top") && !args.flag("--profile"))
        throw UsageError("--top lists the slowest nodes of --profile: give --profile too");
    const size_t top = size_t(args.integer("--top", 0, 100000).value_or(15));
    const std::optional<std::string> rulesFile = args.value("--rules");
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, size_t(threads));

    const RuleSet rules =
        rulesFile ? RuleSet::load(*rulesFile) : RuleSet::fromJson(kDefaultFakeQuantRules, "<default rules>");
    Model model = loadModel(modelFile);
    if (model.weightsOnly)
        throw Error(modelFile + ": a weights-only checkpoint (" + model.format + ") has no graph to run");
    const int64_t batch = cliBatchSizing(model, requested, 1).batchSize;
    const std::map<std::string, Shape> shapes = shapeOptions(args, model, modelFile);
    const std::map<std::string, Tensor> inputs = namingFile(modelFile, [&] {
        return syntheticInputs(model, batch, shapes, modelFile,
                               [&](const ValueInfo& input) { return shapeRemedy(input, batch); });
    });
    if (const std::optional<std::string> dir = args.value("--save-inputs"))
        writeInputsForOnnxRuntime(*dir, inputs);
    const Interpreter interpreter(std::move(model));
    QuantizedRunVariants variants(interpreter, rules, inputs);
    const std::vector<Latency> measured = measureInterleaved(
        runs, {wallClock([&] { variants.runFloat(); }), wallClock([&] { variants.runObserved(); }),
               wallClock([&] { variants.runObservedEveryHistogram(); }), wallClock([&] { variants.runFakeQuant(); })});
    const Latency& fp32 = measured[0];
    const Latency& observed = measured[1];
    const Latency& observedAll = measured[2];
    const Latency& fakeQuant = measured[3];
    const double overhead = observed.median / fp32.median - 1.0;
    const double overheadAll = observedAll.median / fp32.median - 1.0;

    const bool profiled = args.flag("--profile");
    std::vector<NodeTimer::OpTime> profile;
    std::vector<NodeTimer::NodeTime> slowest;
    double profiledMs = 0; // kernel time per run, all nodes
    if (profiled) {
        NodeTimer timer;
        RunOptions timed;
        timed.observer = &timer;
        for (int r = 0; r < runs; ++r)
            interpreter.run(inputs, timed);
        profile = timer.byType();
        slowest = timer.slowestNodes(top);
        for (NodeTimer::OpTime& t : profile)
            profiledMs += t.ms /= runs;
        for (NodeTimer::NodeTime& n : slowest)
            n.ms /= runs;
    }
    const auto share = [&](double ms) { return profiledMs > 0 ? ms / profiledMs : 0.0; };

    if (args.flag("--json")) {
        nlohmann::json j{
            {"model", modelFile},
            {"batch", batch},
            {"threads", threads},
            {"runs", runs},
            {"rules", rulesFile ? *rulesFile : std::string("<default: int8 weights, int8 dynamic activations>")},
            {"latency_ms_median", fp32.median},
            {"latency_ms_mean", fp32.mean},
            {"latency_ms_min", fp32.min},
            {"observer_latency_ms_median", observed.median},
            {"observer_overhead", overhead},
            {"observer_all_histograms_latency_ms_median", observedAll.median},
            {"observer_overhead_all_histograms", overheadAll},
            {"fake_quant_latency_ms_median", fakeQuant.median},
            {"fake_quant_latency_ms_min", fakeQuant.min}};
        if (profiled) {
            j["profile_ms_total"] = profiledMs;
            nlohmann::json& p = j["profile"] = nlohmann::json::array();
            for (const NodeTimer::OpTime& t : profile)
                p.push_back({{"op_type", t.opType}, {"nodes", t.nodes}, {"ms_mean", t.ms}, {"share", share(t.ms)}});
            nlohmann::json& n = j["nodes"] = nlohmann::json::array();
            for (const NodeTimer::NodeTime& t : slowest)
                n.push_back({{"node", t.name},
                             {"index", t.index},
                             {"op_type", t.opType},
                             {"ms_mean", t.ms},
                             {"share", share(t.ms)}});
        }
        std::printf("%s\n", j.dump(2).c_str());
        return kExitOk;
    }
    std::printf("%s: batch %lld, %d threads, %d runs after a warm-up run; rules %s\n", modelFile.c_str(),
                static_cast<long long>(batch), threads, runs,
                rulesFile ? rulesFile->c_str() : "int8 weights, int8 dynamic activations (default)");
    const auto row = [](const char* what, const Latency& l) {
        std::printf("%-22s median %9.3f ms  mean %9.3f ms  min %9.3f ms  max %9.3f ms\n", what, l.median, l.mean, l.min,
                    l.max);
    };
    row("float", fp32);
    row("float + observers", observed);
    row("  + every histogram", observedAll);
    row("fake-quant", fakeQuant);
    std::printf("observer overhead %.1f%% (%.1f%% with every histogram), fake-quant %.2fx float\n", 100.0 * overhead,
                100.0 * overheadAll, fakeQuant.median / fp32.median);
    if (profiled) {
        std::vector<std::vector<std::string>> rows{{"op type", "nodes", "ms per run", "share"}};
        for (const NodeTimer::OpTime& t : profile)
            rows.push_back({t.opType, std::to_string(t.nodes), formatNumber(t.ms, "%.3f"),
                            formatNumber(100.0 * share(t.ms), "%.1f%%")});
        std::printf("\nfloat time per op type (mean of %d runs, kernels only; %.3f ms in all):\n%s", runs, profiledMs,
                    alignedTable(rows, {false, true, true, true}).c_str());
        if (!slowest.empty()) {
            std::vector<std::vector<std::string>> nodeRows{{"node", "op type", "ms per run", "share"}};
            for (const NodeTimer::NodeTime& n : slowest)
                nodeRows.push_back(
                    {n.name, n.opType, formatNumber(n.ms, "%.3f"), formatNumber(100.0 * share(n.ms), "%.1f%%")});
            std::printf("\nthe %zu slowest nodes (an activation or Add folded into a Conv counts as the Conv):\n%s",
                        slowest.size(), alignedTable(nodeRows, {false, false, true, true}).c_str());
        }
    }
    return kExitOk;
}

} // namespace

Command benchModelCommand()
{
    CommandSpec spec;
    spec.name = "bench-model";
    spec.summary = "Measure the interpreter's latency on a model with seeded random inputs";
    spec.synopsis = "bench-model MODEL [--batch-size B] [--shape NAME=AxBxC ...] [--threads T] [--runs N]\n"
                    "                      [--rules R.json] [--profile [--top N]] [--save-inputs DIR] [--json]";
    spec.positionalName = "MODEL";
    spec.options = {
        {"--batch-size",
         "B",
         "size of the inputs' dynamic axis 0 (default: the model's fixed batch dimension, else 1)",
         {},
         false},
        {"--batch", "B", "the older name of --batch-size", {}, false},
        {"--shape",
         "NAME=AxBxC",
         "the whole shape of input NAME, for dynamic dimensions (e.g. x=1x3x48x320)",
         {},
         false,
         true},
        {"--threads", "T", "worker threads (default 2)", {}, false},
        {"--runs", "N", "timed runs after one warm-up run (default 20)", {}, false},
        {"--rules", "R.json", "the fake-quant rules (default: int8 weights, int8 dynamic activations)", {}, false},
        {"--profile", "", "also time every node over N more float runs: per op type, and the slowest nodes", {}, false},
        {"--top", "N", "with --profile, how many of the slowest nodes to list (default 15)", {}, false},
        {"--save-inputs",
         "DIR",
         "also write the seeded inputs as DIR/input_<i>.npy and DIR/inputs.json (for ONNX Runtime)",
         {},
         false},
        {"--json", "", "print JSON instead of text", {}, false},
    };
    spec.notes = "MODEL: a model with a graph (ONNX). Each input gets its --shape, else the model's declared\n"
                 "shape: fixed dimensions as declared, a dynamic axis 0 B; any other dynamic dimension needs\n"
                 "--shape (else exit 1 naming the input and its dynamic dimensions). A model whose inputs fix\n"
                 "axis 0 takes only that B. Float inputs are seeded normal values; integer inputs seeded ids\n"
                 "below the row count of the embedding table (Gather) they feed, else in [0, 10). Latency is wall time "
                 "of one whole run\n"
                 "(all nodes, inputs in memory), in milliseconds, for four runs of the same inputs: float;\n"
                 "float with calibration observers on every activation the rules quantize, keeping histograms\n"
                 "only where a rule's method needs them (percentile, mse, entropy), as quantize --calib does\n"
                 "(observer_overhead = their median over float's, minus 1); the same keeping every histogram,\n"
                 "as the app's calibration does (observer_overhead_all_histograms); fake-quant with the rules\n"
                 "(weights quantized once beforehand, activations every run; static ones calibrated on the\n"
                 "benchmark's inputs).\n"
                 "JSON: {model, batch, threads, runs, rules, latency_ms_median, latency_ms_mean,\n"
                 "latency_ms_min, observer_latency_ms_median, observer_overhead,\n"
                 "observer_all_histograms_latency_ms_median, observer_overhead_all_histograms,\n"
                 "fake_quant_latency_ms_median, fake_quant_latency_ms_min} and, with --profile,\n"
                 "profile_ms_total (kernel time per float run, all nodes), profile: [{op_type, nodes,\n"
                 "ms_mean, share}] (every op type, slowest first) and nodes: [{node, index, op_type, ms_mean,\n"
                 "share}] (the --top slowest nodes), from a timer around every node of the main graph; an\n"
                 "activation or residual Add the run folds into a Conv counts as that Conv. Node names are\n"
                 "the file's, else the first output's followed by (unnamed). With --save-inputs the inputs\n"
                 "are the files tests/ort/run_model.js and profile_model.js read (inputs.json maps input\n"
                 "names to .npy files). Progress goes to stderr when it is a terminal.";
    return {spec, runBenchModel};
}

} // namespace qs::cli
