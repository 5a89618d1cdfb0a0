// quantscope-cli bench-model: the interpreter's latency on one model, on seeded
// random inputs of the model's input shapes (what tests/ort compares with ONNX
// Runtime on the same model and thread count).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <random>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <tbb/global_control.h>

#include "cli/commands.h"
#include "cli/input_shapes.h"
#include "cli/quantization_options.h"
#include "cli/text_table.h"
#include "core/error.h"
#include "io/model_loader.h"
#include "io/synthetic_data.h"
#include "rules/ruleset.h"
#include "runtime/activation_calibration.h"
#include "runtime/interpreter.h"
#include "runtime/quantization_hook.h"
#include "quantization/quantization_plan.h"
#include "quantization/weight_quantizer.h"

namespace qs::cli {
namespace {

// The default fake-quant rule set: int8 per-channel weights and int8 dynamic
// (per-batch absmax) input activations on every layer.
constexpr const char* kDefaultRules = R"({"version": 1, "rules": [{"weight_qtype": "int8", "act_qtype": "int8"}]})";

struct Latency {
    double median = 0, mean = 0, min = 0, max = 0;
};

Latency summarize(std::vector<double> ms)
{
    Latency l;
    for (double v : ms)
        l.mean += v / double(ms.size());
    std::sort(ms.begin(), ms.end());
    const size_t n = ms.size();
    l.median = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
    l.min = ms.front();
    l.max = ms.back();
    return l;
}

// One warm-up call of each variant, then `runs` rounds that time each variant
// once, interleaved, so that a machine's drift (turbo, other load) reaches all
// of them alike.
std::vector<Latency> measure(int runs, const std::vector<std::function<void()>>& variants)
{
    const bool progress = ::isatty(STDERR_FILENO) == 1;
    for (const auto& run : variants)
        run(); // warm-up: page faults, caches, TBB's threads
    std::vector<std::vector<double>> ms(variants.size());
    for (int r = 0; r < runs; ++r) {
        if (progress)
            std::fprintf(stderr, "\rround %d/%d", r + 1, runs);
        for (size_t v = 0; v < variants.size(); ++v) {
            const auto start = std::chrono::steady_clock::now();
            variants[v]();
            ms[v].push_back(
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
        }
    }
    if (progress)
        std::fprintf(stderr, "\r%-40s\r", "");
    std::vector<Latency> latencies;
    for (auto& m : ms)
        latencies.push_back(summarize(std::move(m)));
    return latencies;
}

// Wall time per op type over float runs, from an observer around every node
// (what --profile prints): where a model's latency goes.
class NodeTimer : public NodeObserver {
public:
    struct OpTime {
        std::string opType;
        size_t nodes = 0; // nodes of this type in the model
        double ms = 0;    // summed over the runs
    };

    // Times the run as plain inference runs it: with activations folded into Conv.
    bool needsEveryNode() const override { return false; }
    void beforeNode(NodeEvent&) override { start_ = std::chrono::steady_clock::now(); }
    void afterNode(NodeEvent& event) override
    {
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
        auto [it, inserted] = index_.try_emplace(event.node->opType, byType_.size());
        if (inserted)
            byType_.push_back({event.node->opType, 0, 0});
        OpTime& t = byType_[it->second];
        t.ms += ms;
        if (event.nodeIndex >= seen_.size())
            seen_.resize(event.nodeIndex + 1, false);
        if (!seen_[event.nodeIndex]) {
            seen_[event.nodeIndex] = true;
            ++t.nodes;
        }
    }

    // Op types, slowest first.
    std::vector<OpTime> byType() const
    {
        std::vector<OpTime> sorted = byType_;
        std::sort(sorted.begin(), sorted.end(), [](const OpTime& a, const OpTime& b) { return a.ms > b.ms; });
        return sorted;
    }

private:
    std::chrono::steady_clock::time_point start_;
    std::map<std::string, size_t> index_;
    std::vector<OpTime> byType_;
    std::vector<bool> seen_;
};

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
    const std::optional<std::string> rulesFile = args.value("--rules");
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, size_t(threads));

    const RuleSet rules = rulesFile ? RuleSet::load(*rulesFile) : RuleSet::fromJson(kDefaultRules, "<default rules>");
    Model model = loadModel(modelFile);
    if (model.weightsOnly)
        throw Error(modelFile + ": a weights-only checkpoint (" + model.format + ") has no graph to run");
    const int64_t batch = cliBatchSizing(model, requested, 1).batchSize;
    const std::map<std::string, Shape> shapes = shapeOptions(args, model, modelFile);
    std::mt19937_64 random(kSyntheticSeed);
    std::map<std::string, Tensor> inputs;
    for (const ValueInfo& input : model.inputs) {
        const auto given = shapes.find(input.name);
        const Shape shape =
            syntheticShape(input, given == shapes.end() ? std::nullopt : std::optional<Shape>(given->second), batch,
                           modelFile, shapeRemedy(input, batch));
        inputs[input.name] = namingFile(
            modelFile, [&] { return syntheticTensor(input, shape, syntheticIdBound(model, input.name), random); });
    }
    const Interpreter interpreter(std::move(model));
    const QuantizationPlan plan = QuantizationPlan::build(interpreter.model(), rules);

    // Weights are quantized once, beforehand (not timed); static activations
    // are calibrated on the benchmark's own inputs.
    WeightQuantizer weights;
    weights.update(interpreter.model(), plan);
    std::map<size_t, StaticActivation> statics;
    {
        ActivationCalibrator once(interpreter, plan, 2048, KeptHistograms::AsPlanNeeds);
        once.observe(inputs);
        const ActivationStatistics statistics = once.finish();
        for (const LayerQuantization& l : plan.layers())
            if (l.activation && l.activation->staticScale) {
                statics = staticActivations(plan, statistics);
                break;
            }
    }
    QuantizationHook hook(interpreter.model(), plan, weights, statics);
    RunOptions hooked;
    hooked.observer = &hook;
    // Float inference; the same with calibration observers on every activation
    // the rules quantize, keeping histograms where the rules' methods need them
    // (as `quantize --calib` calibrates) and everywhere (as the app does);
    // fake-quantized inference.
    ActivationCalibrator calibrator(interpreter, plan, 2048, KeptHistograms::AsPlanNeeds);
    ActivationCalibrator everyHistogram(interpreter, plan, 2048, KeptHistograms::All);
    const std::vector<Latency> measured =
        measure(runs, {[&] { interpreter.run(inputs); }, [&] { calibrator.observe(inputs); },
                       [&] { everyHistogram.observe(inputs); }, [&] { interpreter.run(inputs, hooked); }});
    const Latency& fp32 = measured[0];
    const Latency& observed = measured[1];
    const Latency& observedAll = measured[2];
    const Latency& fakeQuant = measured[3];
    const double overhead = observed.median / fp32.median - 1.0;
    const double overheadAll = observedAll.median / fp32.median - 1.0;

    std::vector<NodeTimer::OpTime> profile;
    if (args.flag("--profile")) {
        NodeTimer timer;
        RunOptions timed;
        timed.observer = &timer;
        for (int r = 0; r < runs; ++r)
            interpreter.run(inputs, timed);
        profile = timer.byType();
        for (NodeTimer::OpTime& t : profile)
            t.ms /= runs;
    }

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
        if (!profile.empty()) {
            nlohmann::json& p = j["profile"] = nlohmann::json::array();
            for (const NodeTimer::OpTime& t : profile)
                p.push_back({{"op_type", t.opType}, {"nodes", t.nodes}, {"ms_mean", t.ms}});
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
    if (!profile.empty()) {
        double total = 0;
        for (const NodeTimer::OpTime& t : profile)
            total += t.ms;
        std::vector<std::vector<std::string>> rows{{"op type", "nodes", "ms per run", "share"}};
        for (const NodeTimer::OpTime& t : profile)
            rows.push_back({t.opType, std::to_string(t.nodes), formatNumber(t.ms, "%.3f"),
                            formatNumber(100.0 * t.ms / total, "%.1f%%")});
        std::printf("\nfloat time per op type (mean of %d runs, kernels only):\n%s", runs,
                    alignedTable(rows, {false, true, true, true}).c_str());
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
                    "                      [--rules R.json] [--profile] [--json]";
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
        {"--profile", "", "also time each op type over N more float runs", {}, false},
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
                 "fake_quant_latency_ms_median, fake_quant_latency_ms_min} and, with --profile, profile:\n"
                 "[{op_type, nodes, ms_mean}], slowest first: each op type's kernel time per float run, from\n"
                 "a timer around every node. Progress goes to stderr when it is a terminal.";
    return {spec, runBenchModel};
}

} // namespace qs::cli
