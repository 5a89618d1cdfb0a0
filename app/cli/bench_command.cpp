// quantscope-cli bench: throughput of the engine's hot paths against a plain
// copy of the same bytes measured in the same run (docs/benchmarks.md).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>

#include "quantization/tensor_quantization.h"
#include "calib/calibrate.h"
#include "calib/histogram.h"
#include "calib/statistics.h"
#include "cli/commands.h"
#include "quant/kernels.h"

namespace qs::cli {
namespace {

constexpr int64_t kRowLength = 4096; // the data is [N / 4096, 4096], channel axis 0
constexpr int kRepetitions = 5;      // timed rounds after a warm-up round; the best is reported

struct Case {
    std::string name;
    double bytesPerElement; // bytes read plus written, for the GB/s figure
    std::function<void()> run;
    std::function<void()> alternative = {}; // a second way to do the same; the faster counts
};

struct Result {
    std::string name;
    double seconds;
    double gbps;
};

// Deterministic data shaped like weights: normal with a few heavy outliers,
// per-row spreads over two orders of magnitude. Filled in parallel, keyed by row.
Tensor benchData(int64_t elements)
{
    Tensor x(DType::F32, {elements / kRowLength, kRowLength});
    float* data = x.mutableValues<float>().data();
    tbb::parallel_for(int64_t(0), x.dim(0), [&](int64_t row) {
        std::mt19937 rng(uint32_t(row) * 2654435761u + 1u);
        std::normal_distribution<float> normal(0.f, std::exp2(float(row % 7) - 3.f));
        float* r = data + row * kRowLength;
        for (int64_t i = 0; i < kRowLength; ++i)
            r[i] = normal(rng);
        r[rng() % kRowLength] *= 20.f; // an outlier per row
    });
    return x;
}

double secondsOf(const std::function<void()>& run)
{
    const auto start = std::chrono::steady_clock::now();
    run();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

QuantParams paramsFor(const Tensor& x, QType qtype, Granularity granularity, std::optional<double> tileSize)
{
    QuantizationSpec spec;
    spec.qtype = qtype;
    spec.granularity = granularity;
    spec.tileSize = tileSize;
    return computeQuantization(x, spec, "bench").params;
}

int runBench(const Arguments& args)
{
    const int64_t size = args.integer("--size", kRowLength, int64_t(1) << 34).value_or(int64_t(1) << 26);
    if (size % kRowLength != 0)
        throw UsageError("--size must be a multiple of " + std::to_string(kRowLength) + " (rows of the [N/" +
                         std::to_string(kRowLength) + ", " + std::to_string(kRowLength) + "] data)");
    const int threads = int(args.integer("--threads", 1, 1024).value_or(2));
    const bool json = args.flag("--json");
    const bool progress = ::isatty(STDERR_FILENO) == 1;
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, size_t(threads));

    const Tensor x = benchData(size);
    const std::span<const float> values = x.values<float>();
    std::vector<float> out(static_cast<size_t>(size));
    const BlockLayout perChannel = BlockLayout::perChannel(x.shape(), 0);
    const CalibrationMethod absmax = CalibrationMethod::parse("absmax");
    const CalibrationMethod minmax = CalibrationMethod::parse("minmax");

    const QuantParams int8 = paramsFor(x, QType::Int8, Granularity::PerChannel, {});
    const QuantParams int4 = paramsFor(x, QType::Int4, Granularity::PerChannel, 128);
    const QuantParams nf4 = paramsFor(x, QType::Nf4, Granularity::PerChannel, 64);
    const QuantParams fp8 = paramsFor(x, QType::Fp8E4M3, Granularity::PerTensor, {});
    auto fakeQuant = [&](const QuantParams& params) { return [&, p = &params] { fakeQuantizeInto(x, *p, out); }; };
    // The baseline is the faster of one memcpy and a memcpy split over the threads
    // in chunks (which wins depends on the machine and its load), so it is never flattering.
    auto copySingle = [&] { std::memcpy(out.data(), values.data(), size_t(size) * sizeof(float)); };
    auto copyParallel = [&] {
        constexpr int64_t chunk = 1 << 18;
        tbb::parallel_for(int64_t(0), (size + chunk - 1) / chunk, [&](int64_t c) {
            const int64_t begin = c * chunk, n = std::min(chunk, size - begin);
            std::memcpy(out.data() + begin, values.data() + begin, size_t(n) * sizeof(float));
        });
    };
    const std::vector<Case> cases{
        {"copy", 8, copySingle, copyParallel},
        {"absmax_per_channel", 4, [&] { calibrateRanges(values, perChannel, absmax, {}, "bench"); }},
        {"minmax_per_channel", 4, [&] { calibrateRanges(values, perChannel, minmax, {}, "bench"); }},
        {"percentile", 4, [&] { exactPercentile(values, HistogramOf::Values, 99.99); }},
        {"histogram_2048", 4,
         [&] {
             const GroupStatistics s = groupStatistics(values, BlockLayout::perTensor(x.shape()), "bench", false);
             buildHistogram(values, HistogramOf::Values, s.min[0], s.max[0], 2048);
         }},
        {"fake_quant_int8_per_channel", 8, fakeQuant(int8)},
        {"fake_quant_int4_tile128", 8, fakeQuant(int4)},
        {"fake_quant_nf4", 8, fakeQuant(nf4)},
        {"fake_quant_fp8_e4m3", 8, fakeQuant(fp8)},
    };

    // Rounds: every case once per round, best of the rounds after a warm-up
    // round. Interleaving lets the baseline and the kernels see the same
    // background load, so their ratio holds on a busy machine.
    std::vector<double> best(cases.size(), 1e300);
    for (int round = 0; round <= kRepetitions; ++round) {
        for (size_t i = 0; i < cases.size(); ++i) {
            if (progress)
                std::fprintf(stderr, "\rround %d/%d: %-30s", round, kRepetitions, cases[i].name.c_str());
            double s = secondsOf(cases[i].run);
            if (cases[i].alternative)
                s = std::min(s, secondsOf(cases[i].alternative));
            if (round > 0) // round 0 warms up: page faults, caches, TBB's threads
                best[i] = std::min(best[i], s);
        }
    }
    if (progress)
        std::fprintf(stderr, "\r%-50s\r", "");
    std::vector<Result> results;
    for (size_t i = 0; i < cases.size(); ++i)
        results.push_back({cases[i].name, best[i], cases[i].bytesPerElement * double(size) / best[i] / 1e9});

    const double copySeconds = results.front().seconds;
    if (json) {
        nlohmann::json j{{"elements", size}, {"threads", threads}, {"results", nlohmann::json::array()}};
        for (const Result& r : results)
            j["results"].push_back({{"name", r.name},
                                    {"seconds", r.seconds},
                                    {"gbps", r.gbps},
                                    {"ratio_to_copy", copySeconds / r.seconds}});
        std::printf("%s\n", j.dump(2).c_str());
        return kExitOk;
    }
    std::printf("%lld float32 elements ([%lld, %lld]), %d threads, best of %d rounds after a warm-up\n\n",
                static_cast<long long>(size), static_cast<long long>(size / kRowLength),
                static_cast<long long>(kRowLength), threads, kRepetitions);
    std::printf("%-28s %12s %10s %14s\n", "name", "seconds", "GB/s", "ratio_to_copy");
    for (const Result& r : results)
        std::printf("%-28s %12.6f %10.2f %14.3f\n", r.name.c_str(), r.seconds, r.gbps, copySeconds / r.seconds);
    return kExitOk;
}

} // namespace

Command benchCommand()
{
    CommandSpec spec;
    spec.name = "bench";
    spec.summary = "Measure the engine's kernels against a plain copy of the same bytes";
    spec.synopsis = "bench [--size N] [--threads T] [--json]";
    spec.options = {
        {"--size", "N", "float32 elements, a multiple of 4096 (default 67108864)", {}, false},
        {"--threads", "T", "worker threads (default 2)", {}, false},
        {"--json", "", "print JSON instead of a table", {}, false},
    };
    spec.notes = "The data is N seeded random floats shaped [N/4096, 4096] (channel axis 0). The cases run in\n"
                 "rounds, each case once per round: a warm-up round, then 5 timed rounds; the best time counts.\n"
                 "gbps counts bytes read plus written: copy 8 per element, reductions 4, fake quant 8.\n"
                 "ratio_to_copy = copy seconds / case seconds.\n"
                 "Cases: copy (the baseline: the faster of one memcpy and a memcpy split over the threads),\n"
                 "absmax_per_channel, minmax_per_channel (calibrateRanges), percentile (exact 99.99th percentile\n"
                 "of x), histogram_2048 (min/max pass, then 2048 bins), fake_quant_int8_per_channel (absmax),\n"
                 "fake_quant_int4_tile128, fake_quant_nf4 (tiles of 64), fake_quant_fp8_e4m3 (per tensor);\n"
                 "fake-quant cases time the kernel only, the scales are computed before.\n"
                 "Progress goes to stderr when it is a terminal.";
    return {spec, runBench};
}

} // namespace qs::cli
