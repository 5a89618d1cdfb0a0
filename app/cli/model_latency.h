#pragma once
// How a model's latency is measured, one definition for `quantscope-cli
// bench-model` and tests/bench/bench_zoo: seeded synthetic inputs; variants of
// a run on those inputs timed round by round, interleaved; the float,
// calibration-observed and fake-quantized runs of one model; a timer around
// every node (bench-model --profile). Header-only, so that the benchmark
// executable needs the engine's libraries and nothing of the CLI's.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cli/input_shapes.h" // kSyntheticSeed (declarations only: nothing to link)
#include "core/error.h"
#include "io/npy.h"
#include "io/synthetic_data.h"
#include "quantization/quantization_plan.h"
#include "quantization/weight_quantizer.h"
#include "rules/ruleset.h"
#include "runtime/activation_calibration.h"
#include "runtime/interpreter.h"
#include "runtime/quantization_hook.h"

namespace qs::cli {

// The default fake-quant rule set: int8 per-channel weights and int8 dynamic
// (per-batch absmax) input activations on every layer.
inline constexpr const char* kDefaultFakeQuantRules =
    R"({"version": 1, "rules": [{"weight_qtype": "int8", "act_qtype": "int8"}]})";

struct Latency {
    double median = 0, mean = 0, min = 0, max = 0; // milliseconds
};

inline Latency summarize(std::vector<double> ms)
{
    Latency l;
    if (ms.empty())
        return l;
    for (double v : ms)
        l.mean += v / double(ms.size());
    std::sort(ms.begin(), ms.end());
    const size_t n = ms.size();
    l.median = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
    l.min = ms.front();
    l.max = ms.back();
    return l;
}

// One call of a variant, returning its milliseconds: wall time around our own
// work (wallClock), or what another process measured of its own.
using TimedCall = std::function<double()>;

inline TimedCall wallClock(std::function<void()> run)
{
    return [run = std::move(run)] {
        const auto start = std::chrono::steady_clock::now();
        run();
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    };
}

// One warm-up call of each variant, then `runs` rounds that call each variant
// once, interleaved, so that a machine's drift (turbo, other load) reaches all
// of them alike. Progress goes to stderr when it is a terminal.
inline std::vector<Latency> measureInterleaved(int runs, const std::vector<TimedCall>& variants)
{
    const bool progress = ::isatty(STDERR_FILENO) == 1;
    for (const TimedCall& call : variants)
        call(); // warm-up: page faults, caches, thread pools
    std::vector<std::vector<double>> ms(variants.size());
    for (int r = 0; r < runs; ++r) {
        if (progress)
            std::fprintf(stderr, "\rround %d/%d", r + 1, runs);
        for (size_t v = 0; v < variants.size(); ++v)
            ms[v].push_back(variants[v]());
    }
    if (progress)
        std::fprintf(stderr, "\r%-40s\r", "");
    std::vector<Latency> latencies;
    for (auto& m : ms)
        latencies.push_back(summarize(std::move(m)));
    return latencies;
}

// Seeded values for every input of `model` (io/synthetic_data.h): `shapes`
// gives whole shapes, a dynamic axis 0 takes `batch`; `remedy` says what a
// user gives for an input with other dynamic dimensions (in the Error).
inline std::map<std::string, Tensor> syntheticInputs(const Model& model, int64_t batch,
                                                     const std::map<std::string, Shape>& shapes,
                                                     const std::string& modelFile,
                                                     const std::function<std::string(const ValueInfo&)>& remedy)
{
    std::mt19937_64 random(kSyntheticSeed);
    std::map<std::string, Tensor> inputs;
    for (const ValueInfo& input : model.inputs) {
        const auto given = shapes.find(input.name);
        const Shape shape =
            syntheticShape(input, given == shapes.end() ? std::nullopt : std::optional<Shape>(given->second), batch,
                           modelFile, remedy(input));
        inputs[input.name] = syntheticTensor(input, shape, syntheticIdBound(model, input.name), random);
    }
    return inputs;
}

// Writes each input as DIR/input_<i>.npy and DIR/inputs.json mapping input
// names to those files: what tests/ort/run_model.js, profile_model.js and
// bench_server.js read. Returns the path of inputs.json.
inline std::filesystem::path writeInputsForOnnxRuntime(const std::filesystem::path& dir,
                                                       const std::map<std::string, Tensor>& inputs)
{
    std::filesystem::create_directories(dir);
    nlohmann::json manifest = nlohmann::json::object();
    size_t index = 0;
    for (const auto& [name, tensor] : inputs) {
        const std::filesystem::path file = dir / ("input_" + std::to_string(index++) + ".npy");
        writeNpy(file, tensor);
        manifest[name] = std::filesystem::absolute(file).string();
    }
    const std::filesystem::path manifestFile = dir / "inputs.json";
    std::FILE* out = std::fopen(manifestFile.c_str(), "w");
    if (!out)
        throw Error("cannot write " + manifestFile.string());
    const std::string text = manifest.dump(1) + "\n";
    const bool written = std::fwrite(text.data(), 1, text.size(), out) == text.size();
    if (std::fclose(out) != 0 || !written)
        throw Error("cannot write " + manifestFile.string());
    return manifestFile;
}

// The four runs bench-model times on one model and one set of inputs: float;
// float with calibration observers on every activation the rules quantize,
// keeping histograms where the rules' methods need them (as quantize --calib
// calibrates); the same keeping every histogram (as the app does);
// fake-quantized with the rules. Weights are quantized once, here; static
// activations are calibrated on `inputs`. `interpreter`, `inputs` and the
// rules' model must outlive this.
class QuantizedRunVariants {
public:
    QuantizedRunVariants(const Interpreter& interpreter, const RuleSet& rules,
                         const std::map<std::string, Tensor>& inputs)
        : interpreter_(interpreter), inputs_(inputs), plan_(QuantizationPlan::build(interpreter.model(), rules)),
          weights_(quantizedWeights(interpreter.model(), plan_)),
          statics_(calibratedStatics(interpreter, plan_, inputs)),
          hook_(interpreter.model(), plan_, weights_, statics_),
          calibrator_(interpreter, plan_, 2048, KeptHistograms::AsPlanNeeds),
          everyHistogram_(interpreter, plan_, 2048, KeptHistograms::All)
    {
        hooked_.observer = &hook_;
    }
    QuantizedRunVariants(const QuantizedRunVariants&) = delete;
    QuantizedRunVariants& operator=(const QuantizedRunVariants&) = delete;

    void runFloat() const { interpreter_.run(inputs_); }
    void runObserved() { calibrator_.observe(inputs_); }
    void runObservedEveryHistogram() { everyHistogram_.observe(inputs_); }
    void runFakeQuant() const { interpreter_.run(inputs_, hooked_); }

private:
    static WeightQuantizer quantizedWeights(const Model& model, const QuantizationPlan& plan)
    {
        WeightQuantizer weights;
        weights.update(model, plan);
        return weights;
    }
    static std::map<size_t, StaticActivation> calibratedStatics(const Interpreter& interpreter,
                                                                const QuantizationPlan& plan,
                                                                const std::map<std::string, Tensor>& inputs)
    {
        for (const LayerQuantization& l : plan.layers())
            if (l.activation && l.activation->staticScale) {
                ActivationCalibrator once(interpreter, plan, 2048, KeptHistograms::AsPlanNeeds);
                once.observe(inputs);
                return staticActivations(plan, once.finish());
            }
        return {};
    }

    const Interpreter& interpreter_;
    const std::map<std::string, Tensor>& inputs_;
    const QuantizationPlan plan_;
    const WeightQuantizer weights_;
    const std::map<size_t, StaticActivation> statics_;
    QuantizationHook hook_;
    RunOptions hooked_;
    ActivationCalibrator calibrator_;
    ActivationCalibrator everyHistogram_;
};

// Wall time of every node over float runs, from an observer around each one
// (bench-model --profile): where a model's latency goes, by op type and by
// node. The run is timed as plain inference runs it: an activation or residual
// Add folded into a Conv counts as that Conv's time, and the folded nodes get
// none. Main-graph nodes only (an If, Loop or Scan counts as one node).
class NodeTimer : public NodeObserver {
public:
    struct OpTime {
        std::string opType;
        size_t nodes = 0; // nodes of this type that ran
        double ms = 0;    // summed over the runs
    };
    struct NodeTime {
        size_t index = 0; // in the main graph
        std::string name; // the node's name, else "<first output> (unnamed)"
        std::string opType;
        double ms = 0; // summed over the runs
    };

    bool needsEveryNode() const override { return false; }
    // Times nodes, reads no tensors: the run goes as without it (Convs write into Concats).
    bool readsInputs() const override { return false; }
    bool readsOutputs() const override { return false; }
    void beforeNode(NodeEvent&) override { start_ = std::chrono::steady_clock::now(); }
    void afterNode(NodeEvent& event) override
    {
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
        if (event.nodeIndex >= nodes_.size())
            nodes_.resize(event.nodeIndex + 1);
        NodeTime& n = nodes_[event.nodeIndex];
        if (n.opType.empty()) {
            n.index = event.nodeIndex;
            n.opType = event.node->opType;
            n.name = !event.node->name.empty()      ? event.node->name
                     : !event.node->outputs.empty() ? event.node->outputs.front() + " (unnamed)"
                                                    : "#" + std::to_string(event.nodeIndex) + " (unnamed)";
        }
        n.ms += ms;
    }

    // Op types, slowest first.
    std::vector<OpTime> byType() const
    {
        std::map<std::string, OpTime> types;
        for (const NodeTime& n : nodes_)
            if (!n.opType.empty()) {
                OpTime& t = types[n.opType];
                t.opType = n.opType;
                ++t.nodes;
                t.ms += n.ms;
            }
        std::vector<OpTime> sorted;
        for (auto& [type, t] : types)
            sorted.push_back(t);
        std::stable_sort(sorted.begin(), sorted.end(), [](const OpTime& a, const OpTime& b) { return a.ms > b.ms; });
        return sorted;
    }

    // The `count` slowest nodes, slowest first.
    std::vector<NodeTime> slowestNodes(size_t count) const
    {
        std::vector<NodeTime> ran;
        for (const NodeTime& n : nodes_)
            if (!n.opType.empty())
                ran.push_back(n);
        std::stable_sort(ran.begin(), ran.end(), [](const NodeTime& a, const NodeTime& b) { return a.ms > b.ms; });
        ran.resize(std::min(ran.size(), count));
        return ran;
    }

private:
    std::chrono::steady_clock::time_point start_;
    std::vector<NodeTime> nodes_; // by node index; empty opType: never ran
};

} // namespace qs::cli
