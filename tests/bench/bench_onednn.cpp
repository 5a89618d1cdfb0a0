// Our Conv, Gemm and MatMul kernels against oneDNN's, op by op, on the shapes
// a model's run gives them: every such node of each model (with the residual
// Add and activation the interpreter folds into a Conv), identical ones timed
// once and counted. Per case, round by round interleaved, fastest of N:
//   ours      the one-node model through our Interpreter (what a model run
//             pays for that node, packed weights kept across runs)
//   plain     oneDNN on our NCHW / row-major tensors as they are
//   blk+ro    oneDNN in its preferred layouts, weights reordered once,
//             activations reordered in and the output out on every call
//   blk       the same without the activations' reorders (an integration
//             keeping activations in oneDNN's layouts between ops)
// Ratios are ours / oneDNN (above 1: oneDNN is faster); err is oneDNN's
// largest difference from our output over our output's largest magnitude.
//
//     OMP_NUM_THREADS=2 bench_onednn [--batch B] [--runs N] [--threads T] [--side S] [--pause-ms P]
//                                    MODEL.onnx...
//
// Defaults: batch 1, 30 rounds, 2 threads on each side, both sides, a 10 ms
// pause whenever the rounds switch between ours and oneDNN (--pause-ms 0:
// the two runtimes' idle threads compete, as they would in one model run).//
// --side ours or onednn times one side alone (ours: no OpenMP thread ever
// wakes; onednn: ours is timed after oneDNN's rounds, not among them), to see
// what the other library's idle threads cost it.
//
// A benchmark, not a test: CTest does not run it (docs/benchmarks.md).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <sys/resource.h>
#include <thread>
#include <vector>

#include <dnnl.hpp>
#include <omp.h>
#include <tbb/global_control.h>

#include "onednn_op.h"
#include "runtime/interpreter.h"
#include "zoo_op_cases.h"

namespace {

using qs::Tensor;
using qs::bench::OnednnLayout;
using qs::bench::OnednnOp;
using qs::bench::OpCase;
using Clock = std::chrono::steady_clock;

constexpr int kVariants = 4; // ours, plain, blk+ro, blk

struct Options {
    int64_t batch = 1;
    int runs = 30;
    int threads = 2;
    // "both" (interleaved), or one side alone: "ours" (no OpenMP thread ever
    // wakes) or "onednn" (no TBB worker), to see what the other costs it.
    std::string side = "both";
    // Sleep before a variant whose library is not the one that ran last, so
    // that the other's threads have gone idle (libgomp's spin for about 6 ms
    // after a parallel region by default); 0 measures the two side by side.
    int pauseMs = 10;
    std::vector<std::string> models;
};

double cpuSeconds()
{
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
           1e-6 * double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

// One timed variant of a case.
struct Variant {
    std::function<void()> call;
    bool onednn = false; // whose threads it wakes: OpenMP's (oneDNN) or TBB's (ours)
    double fastestUs = INFINITY;
    double wallSeconds = 0, cpuSeconds = 0; // over the timed calls: how many threads were busy
};

// Each round calls every variant once untimed (its threads awake) and once
// timed; the fastest timed call counts. Before a variant of the other library
// than the last one, `pauseMs` lets that library's threads go idle.
void measure(std::vector<Variant*>& variants, int runs, int pauseMs)
{
    const Variant* last = nullptr;
    for (int r = 0; r < runs; ++r)
        for (Variant* v : variants) {
            if (last && last->onednn != v->onednn)
                std::this_thread::sleep_for(std::chrono::milliseconds(pauseMs));
            last = v;
            v->call();
            const double cpu0 = cpuSeconds();
            const auto start = Clock::now();
            v->call();
            const double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
            v->cpuSeconds += cpuSeconds() - cpu0;
            v->wallSeconds += us * 1e-6;
            v->fastestUs = std::min(v->fastestUs, us);
        }
}

// Largest |a - b| over the largest |a|.
double relativeError(const Tensor& ours, const Tensor& theirs)
{
    if (ours.shape() != theirs.shape())
        return INFINITY;
    const auto a = ours.values<float>(), b = theirs.values<float>();
    double diff = 0, scale = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        diff = std::max(diff, double(std::fabs(a[i] - b[i])));
        scale = std::max(scale, double(std::fabs(a[i])));
    }
    return scale > 0 ? diff / scale : diff;
}

std::string firstLine(const char* file, const char* key)
{
    std::ifstream in(file);
    for (std::string line; std::getline(in, line);)
        if (line.rfind(key, 0) == 0)
            return line.substr(line.find(':') == std::string::npos ? 0 : line.find(':') + 2);
    return "?";
}

std::string loadAverage()
{
    std::ifstream in("/proc/loadavg");
    std::string one, five;
    in >> one >> five;
    return one + " " + five;
}

const char* isaName(dnnl::cpu_isa isa)
{
    switch (isa) {
    case dnnl::cpu_isa::avx512_core_amx:
        return "avx512_core_amx";
    case dnnl::cpu_isa::avx512_core_bf16:
        return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_vnni:
        return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core:
        return "avx512_core";
    case dnnl::cpu_isa::avx2_vnni:
        return "avx2_vnni";
    case dnnl::cpu_isa::avx2:
        return "avx2";
    default:
        return "other";
    }
}

std::string ratio(double ours, double theirs)
{
    if (!std::isfinite(theirs))
        return "-";
    char s[16];
    std::snprintf(s, sizeof s, "%.2f", ours / theirs);
    return s;
}

std::string micros(double us)
{
    if (!std::isfinite(us))
        return "-";
    char s[16];
    std::snprintf(s, sizeof s, "%.1f", us);
    return s;
}

// The op class a case counts under in the totals: what a routing decision
// would be made on.
std::string opClass(const OpCase& c)
{
    const qs::Node& op = c.model.nodes.front();
    if (op.opType == "Conv") {
        const Tensor* w = c.model.initializer(op.inputs.at(1));
        const int64_t group = op.intAttribute("group", 1);
        if (w && group > 1 && w->dim(1) == 1 && w->dim(0) == group)
            return "Conv depthwise";
        if (group > 1)
            return "Conv grouped";
        if (w && w->rank() == 4 && w->dim(2) == 1 && w->dim(3) == 1)
            return "Conv 1x1";
        return "Conv kxk";
    }
    if (op.opType == "MatMul")
        return c.model.initializer(op.inputs.at(1)) ? "MatMul (B constant)" : "MatMul (B computed)";
    return op.opType;
}

// Times of the four variants (and the faster of plain and blk+ro), weighted by count.
struct ClassSums {
    double us[kVariants] = {0, 0, 0, 0};
    double bestNchw = 0;
    int nodes = 0;
};

// Sums over one model's cases, each weighted by its count.
struct ModelSums {
    double us[kVariants] = {0, 0, 0, 0};
    double bestNchw = 0;        // per case, the faster of plain and blk+ro
    double routed = 0;          // per case, the faster of ours and bestNchw
    double unmappedUs = 0;      // ours on cases oneDNN does not run (also in every column above)
    double setupMs[2] = {0, 0}; // oneDNN's primitives made and weights reordered, plain and blocked, distinct cases
};

ModelSums benchModel(const std::string& path, const Options& options, const dnnl::engine& engine,
                     std::map<std::string, ClassSums>& classes)
{
    std::vector<OpCase> cases = qs::bench::zooOpCases(path, options.batch);
    int nodes = 0;
    for (const OpCase& c : cases)
        nodes += c.count;
    std::printf("\n== %s, batch %lld: %d Conv/Gemm/MatMul nodes, %zu distinct\n", path.c_str(),
                static_cast<long long>(options.batch), nodes, cases.size());
    std::printf("%-64s %3s %9s %9s %9s %9s %6s %6s %6s %8s  %s\n", "op", "n", "ours us", "plain us", "blk+ro us",
                "blk us", "/plain", "/blk+ro", "/blk", "err", "oneDNN implementation (plain | blocked)");
    ModelSums sums;
    double busy[kVariants][2] = {};
    for (OpCase& c : cases) {
        const qs::Interpreter interpreter(c.model);
        std::map<std::string, Tensor> inputs;
        for (size_t i = 0; i < c.model.inputs.size(); ++i)
            inputs[c.model.inputs[i].name] = c.activations[i];
        const std::string outputName = c.model.outputs.front().name;
        Variant ours{[&] { interpreter.run(inputs); }};
        std::optional<OnednnOp> plain, blocked;
        std::string unmapped;
        if (options.side == "ours") {
            unmapped = "--side ours";
        } else {
            try {
                plain.emplace(c, engine, OnednnLayout::Plain);
                blocked.emplace(c, engine, OnednnLayout::Blocked);
                sums.setupMs[0] += plain->setupMs();
                sums.setupMs[1] += blocked->setupMs();
            } catch (const std::exception& e) {
                unmapped = e.what();
                plain.reset();
                blocked.reset();
            }
        }
        Variant dnnlPlain{{}, true}, dnnlBlocked{{}, true}, dnnlKept{{}, true};
        std::vector<Variant*> variants;
        if (options.side != "onednn")
            variants.push_back(&ours);
        if (plain) {
            dnnlPlain.call = [&] { plain->run(); };
            dnnlBlocked.call = [&] { blocked->run(); };
            dnnlKept.call = [&] { blocked->runKept(); };
            variants.push_back(&dnnlPlain);
            variants.push_back(&dnnlBlocked);
            if (blocked->hasKeptRun())
                variants.push_back(&dnnlKept);
        }
        measure(variants, options.runs, options.pauseMs);
        if (options.side == "onednn") { // ours after oneDNN's rounds, not among them
            std::vector<Variant*> alone{&ours};
            measure(alone, options.runs, options.pauseMs);
        }
        if (plain && !blocked->hasKeptRun())
            dnnlKept.fastestUs = dnnlBlocked.fastestUs; // no activation reorders to leave out

        double error = 0;
        std::string implementations = unmapped.empty() ? "" : "not run: " + unmapped;
        if (plain) {
            const Tensor reference = interpreter.run(inputs).at(outputName);
            error = std::max({relativeError(reference, plain->run()), relativeError(reference, blocked->run()),
                              (blocked->runKept(), relativeError(reference, blocked->keptOutput()))});
            implementations = plain->implementation() + " | " + blocked->implementation();
        }
        const Variant* all[kVariants] = {&ours, &dnnlPlain, &dnnlBlocked, &dnnlKept};
        for (int v = 0; v < kVariants; ++v) {
            const double us = std::isfinite(all[v]->fastestUs) ? all[v]->fastestUs : ours.fastestUs;
            sums.us[v] += c.count * us;
            busy[v][0] += all[v]->cpuSeconds;
            busy[v][1] += all[v]->wallSeconds;
        }
        const double bestNchw = std::min(dnnlPlain.fastestUs, dnnlBlocked.fastestUs);
        sums.bestNchw += c.count * (std::isfinite(bestNchw) ? bestNchw : ours.fastestUs);
        sums.routed += c.count * std::min(ours.fastestUs, bestNchw);
        ClassSums& cls = classes[opClass(c)];
        cls.nodes += c.count;
        for (int v = 0; v < kVariants; ++v)
            cls.us[v] += c.count * (std::isfinite(all[v]->fastestUs) ? all[v]->fastestUs : ours.fastestUs);
        cls.bestNchw += c.count * (std::isfinite(bestNchw) ? bestNchw : ours.fastestUs);
        if (!plain)
            sums.unmappedUs += c.count * ours.fastestUs;
        char err[16];
        std::snprintf(err, sizeof err, "%.1e", error);
        std::printf("%-64s %3d %9s %9s %9s %9s %6s %6s %6s %8s  %s\n", c.summary.c_str(), c.count,
                    micros(ours.fastestUs).c_str(), micros(dnnlPlain.fastestUs).c_str(),
                    micros(dnnlBlocked.fastestUs).c_str(), micros(dnnlKept.fastestUs).c_str(),
                    ratio(ours.fastestUs, dnnlPlain.fastestUs).c_str(),
                    ratio(ours.fastestUs, dnnlBlocked.fastestUs).c_str(),
                    ratio(ours.fastestUs, dnnlKept.fastestUs).c_str(), plain ? err : "-", implementations.c_str());
        std::fflush(stdout);
    }
    std::printf("sum (x count) %50s %9s %9s %9s %9s %6s %6s %6s\n", "", micros(sums.us[0]).c_str(),
                micros(sums.us[1]).c_str(), micros(sums.us[2]).c_str(), micros(sums.us[3]).c_str(),
                ratio(sums.us[0], sums.us[1]).c_str(), ratio(sums.us[0], sums.us[2]).c_str(),
                ratio(sums.us[0], sums.us[3]).c_str());
    std::printf("oneDNN per op, faster of plain and blk+ro (NCHW kept): %.1f us (ours / that %.2f); ours where "
                "faster, else that: %.1f us (%.2f)\n",
                sums.bestNchw, sums.us[0] / sums.bestNchw, sums.routed, sums.us[0] / sums.routed);
    if (sums.unmappedUs > 0)
        std::printf("cases oneDNN does not run count with our time in every column: %.1f us\n", sums.unmappedUs);
    std::printf("oneDNN setup (primitives and their JIT code, weight reorders; once per distinct case): plain %.1f "
                "ms, blocked %.1f ms\n",
                sums.setupMs[0], sums.setupMs[1]);
    std::printf("busy threads (cpu / wall over the timed calls):");
    const char* names[kVariants] = {"ours", "plain", "blk+ro", "blk"};
    for (int v = 0; v < kVariants; ++v)
        if (busy[v][1] > 0)
            std::printf(" %s %.2f", names[v], busy[v][0] / busy[v][1]);
    std::printf("\n");
    return sums;
}

// The one-node route's own cost: run() of a model whose only node is a Relu of one value.
double interpreterOverheadUs(int runs)
{
    qs::Model m;
    m.format = "onnx";
    m.opsetImports[""] = 13;
    m.nodes.push_back(qs::Node{"relu", "Relu", "", {"x"}, {"y"}, {}});
    m.inputs.push_back(qs::ValueInfo{"x", qs::DType::F32, "float32", std::vector<qs::Dim>{qs::Dim::fixed(1)}});
    m.outputs.push_back(qs::ValueInfo{"y", qs::DType::F32, "float32", std::nullopt});
    const qs::Interpreter interpreter(std::move(m));
    const std::map<std::string, Tensor> inputs{{"x", Tensor(qs::DType::F32, {1})}};
    Variant v{[&] { interpreter.run(inputs); }};
    std::vector<Variant*> one{&v};
    measure(one, runs * 10, 0);
    return v.fastestUs;
}

} // namespace

int main(int argc, char** argv)
{
    Options options;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if ((a == "--batch" || a == "--runs" || a == "--threads" || a == "--pause-ms") && i + 1 < argc) {
            const int value = std::max(a == "--pause-ms" ? 0 : 1, std::atoi(argv[++i]));
            if (a == "--pause-ms")
                options.pauseMs = value;
            else if (a == "--batch")
                options.batch = value;
            else if (a == "--runs")
                options.runs = value;
            else
                options.threads = value;
        } else if (a == "--side" && i + 1 < argc) {
            options.side = argv[++i];
            if (options.side != "both" && options.side != "ours" && options.side != "onednn") {
                std::fprintf(stderr, "--side takes both, ours or onednn\n");
                return 2;
            }
        } else if (a.rfind("--", 0) == 0) {
            std::fprintf(stderr, "unknown option %s\n", a.c_str());
            return 2;
        } else {
            options.models.push_back(a);
        }
    }
    if (options.models.empty()) {
        std::fprintf(stderr, "usage: OMP_NUM_THREADS=2 bench_onednn [--batch B] [--runs N] [--threads T] [--side "
                             "both|ours|onednn] [--pause-ms P] "
                             "MODEL.onnx...\n");
        return 2;
    }
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, size_t(options.threads));
    omp_set_num_threads(options.threads);
    const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    const dnnl_version_t* version = dnnl_version();
    const char* waitPolicy = std::getenv("OMP_WAIT_POLICY");
    std::printf("CPU: %s; load average %s\n", firstLine("/proc/cpuinfo", "model name").c_str(), loadAverage().c_str());
    std::printf("oneDNN %d.%d.%d, ISA %s, OpenMP threads %d (OMP_WAIT_POLICY %s); our TBB threads %d; batch %lld, "
                "fastest of %d rounds, %d ms pause between the libraries\n",
                version->major, version->minor, version->patch, isaName(dnnl::get_effective_cpu_isa()),
                omp_get_max_threads(), waitPolicy ? waitPolicy : "unset", options.threads,
                static_cast<long long>(options.batch), options.runs, options.pauseMs);
    std::printf("ours includes the one-node run's bookkeeping: %.1f us (run() of a one-Relu model)\n",
                interpreterOverheadUs(options.runs));

    std::vector<std::pair<std::string, ModelSums>> all;
    std::map<std::string, ClassSums> classes;
    for (const std::string& model : options.models) {
        try {
            all.emplace_back(model, benchModel(model, options, engine, classes));
        } catch (const std::exception& e) {
            std::fprintf(stderr, "%s: %s\n", model.c_str(), e.what());
        }
    }
    std::printf("\n== per model, batch %lld: Conv/Gemm/MatMul time, us (sum over nodes)\n",
                static_cast<long long>(options.batch));
    std::printf("%-26s %10s %10s %10s %10s %10s %7s %7s %7s %7s\n", "model", "ours", "plain", "blk+ro", "blk",
                "best NCHW", "/plain", "/blk+ro", "/blk", "/best");
    for (const auto& [model, s] : all) {
        const std::string name = model.substr(model.find_last_of('/') + 1);
        std::printf("%-26s %10.1f %10.1f %10.1f %10.1f %10.1f %7.2f %7.2f %7.2f %7.2f\n", name.c_str(), s.us[0],
                    s.us[1], s.us[2], s.us[3], s.bestNchw, s.us[0] / s.us[1], s.us[0] / s.us[2], s.us[0] / s.us[3],
                    s.us[0] / s.bestNchw);
    }
    std::printf("\n== per op class over these models, batch %lld: time, us (sum over nodes)\n",
                static_cast<long long>(options.batch));
    std::printf("%-26s %5s %10s %10s %10s %10s %10s %7s %7s %7s %7s\n", "class", "nodes", "ours", "plain", "blk+ro",
                "blk", "best NCHW", "/plain", "/blk+ro", "/blk", "/best");
    for (const auto& [name, s] : classes)
        std::printf("%-26s %5d %10.1f %10.1f %10.1f %10.1f %10.1f %7.2f %7.2f %7.2f %7.2f\n", name.c_str(), s.nodes,
                    s.us[0], s.us[1], s.us[2], s.us[3], s.bestNchw, s.us[0] / s.us[1], s.us[0] / s.us[2],
                    s.us[0] / s.us[3], s.us[0] / s.bestNchw);
    std::printf("load average at the end %s\n", loadAverage().c_str());
    return 0;
}
