// GPTQ on one large layer against one float pass over the same data (issue 20's
// speed figure): a MatMul x[1, T, C] · W[C, O] built in memory, S sequences of
// T tokens streamed through it twice —
//   1. the float pass: the interpreter runs the model on each sequence;
//   2. the Hessian: each sequence's rows added to the layer's InputHessian as
//      the calibration run adds them (accumulateLayerInput), the data streaming
//      through, H = 2·XᵀX/n never needing X whole;
// then gptqQuantize on H (int4, per channel and in tiles of 128, damp 0.01,
// act-order). Each sequence's inputs are generated (seeded normal values with
// per-feature spreads between 1/8 and 8) outside the timed sections. Prints the
// seconds of each step and their ratios to the float pass.
//
//     bench_gptq [--features C] [--outputs O] [--sequences S] [--tokens T] [--threads N]
//
// Defaults C = O = 4096, S = 128, T = 512, N = 2. A benchmark, not a test: CTest
// does not run it (docs/benchmarks.md).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <tbb/global_control.h>

#include "core/error.h"
#include "core/tensor.h"
#include "graph/model.h"
#include "graph/weight_layout.h"
#include "quantization/gptq.h"
#include "quantization/input_hessian.h"
#include "runtime/interpreter.h"

using namespace qs;

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d)
{
    return std::chrono::duration<double>(d).count();
}

struct Options {
    int64_t features = 4096, outputs = 4096, sequences = 128, tokens = 512;
    int threads = 2;
};

Options parse(int argc, char** argv)
{
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (i + 1 >= argc)
            throw Error(a + ": needs a value");
        const long long v = std::atoll(argv[++i]);
        if (v <= 0)
            throw Error(a + ": expected a positive integer, got '" + argv[i] + "'");
        if (a == "--features")
            o.features = v;
        else if (a == "--outputs")
            o.outputs = v;
        else if (a == "--sequences")
            o.sequences = v;
        else if (a == "--tokens")
            o.tokens = v;
        else if (a == "--threads")
            o.threads = int(v);
        else
            throw Error("unknown option '" + a +
                        "'; usage: bench_gptq [--features C] [--outputs O] [--sequences S] [--tokens T] [--threads N]");
    }
    return o;
}

Model matMulModel(const Options& o)
{
    std::mt19937_64 rng(20);
    std::normal_distribution<float> normal(0.0f, 1.0f / std::sqrt(float(o.features)));
    std::vector<float> w(size_t(o.features * o.outputs));
    for (float& v : w)
        v = normal(rng);
    Model m;
    m.format = "onnx";
    m.irVersion = 8;
    m.opsetImports[""] = 17;
    m.addInitializer("W", Tensor::fromVector(DType::F32, {o.features, o.outputs}, w));
    m.inputs.push_back(ValueInfo{"x", DType::F32, "float32",
                                 std::vector<Dim>{Dim::fixed(1), Dim::fixed(o.tokens), Dim::fixed(o.features)}});
    m.outputs.push_back(ValueInfo{"y", DType::F32, "float32", std::nullopt});
    Node node;
    node.name = "layer/MatMul";
    node.opType = "MatMul";
    node.inputs = {"x", "W"};
    node.outputs = {"y"};
    m.nodes.push_back(node);
    m.layers = findGraphLayers(m);
    if (m.layers.size() != 1)
        throw Error("bench_gptq: expected one quantizable layer");
    return m;
}

// Sequence `s`'s inputs: the same values in both passes.
Tensor sequence(const Options& o, int64_t s, const std::vector<float>& spread)
{
    std::mt19937_64 rng(uint64_t(1000 + s));
    std::normal_distribution<float> normal;
    std::vector<float> x(size_t(o.tokens * o.features));
    for (int64_t t = 0; t < o.tokens; ++t)
        for (int64_t f = 0; f < o.features; ++f)
            x[size_t(t * o.features + f)] = normal(rng) * spread[size_t(f)];
    return Tensor::fromVector(DType::F32, {1, o.tokens, o.features}, x);
}

} // namespace

int main(int argc, char** argv)
{
    try {
        std::setvbuf(stdout, nullptr, _IOLBF, 0); // each figure as it comes, also into a file
        const Options o = parse(argc, argv);
        tbb::global_control threads(tbb::global_control::max_allowed_parallelism, size_t(o.threads));
        std::vector<float> spread(size_t(o.features));
        std::mt19937_64 rng(7);
        std::uniform_real_distribution<float> exponent(-3.0f, 3.0f);
        for (float& v : spread)
            v = std::exp2(exponent(rng));

        const Model model = matMulModel(o);
        const QuantizableLayer layer = model.layers.front();
        const Node node = model.nodes.front();
        const Interpreter interpreter(model);
        std::printf("layer: MatMul [%lld, %lld]; %lld sequences of %lld tokens (%lld rows); %d threads\n",
                    (long long)o.features, (long long)o.outputs, (long long)o.sequences, (long long)o.tokens,
                    (long long)(o.sequences * o.tokens), o.threads);

        Clock::duration floatPass{}, hessianPass{};
        InputHessian hessian(o.features);
        double checksum = 0;
        for (int64_t s = 0; s < o.sequences; ++s) {
            const Tensor x = sequence(o, s, spread);
            auto t0 = Clock::now();
            const auto out = interpreter.run({{"x", x}});
            floatPass += Clock::now() - t0;
            checksum += double(out.at("y").values<float>()[0]);
            t0 = Clock::now();
            accumulateLayerInput(layer, node, x, hessian);
            hessianPass += Clock::now() - t0;
        }
        const double floatSeconds = seconds(floatPass);
        std::printf("float pass (interpreter):       %8.2f s  (checksum %.3g)\n", floatSeconds, checksum);
        std::printf("Hessian accumulation:           %8.2f s  %6.2f x the float pass\n", seconds(hessianPass),
                    seconds(hessianPass) / floatSeconds);

        auto t0 = Clock::now();
        const Eigen::MatrixXd h = hessian.hessian();
        const double hessianOut = seconds(Clock::now() - t0);
        const Tensor weight = model.initializer("W")->permuted({1, 0}); // [O, C]: channel axis first
        WeightAlgorithm gptq;
        gptq.kind = WeightAlgorithmKind::Gptq;
        for (const bool tiles : {false, true}) {
            QuantizationSpec spec;
            spec.qtype = QType::Int4;
            spec.axis = 0;
            if (tiles)
                spec.tileSize = 128;
            t0 = Clock::now();
            const GptqResult r = gptqQuantize(weight, spec, gptq, h, "W");
            const double q = seconds(Clock::now() - t0) + hessianOut;
            std::printf("GPTQ int4 %-12s (from H):   %8.2f s  %6.2f x the float pass; with the Hessian %6.2f x\n",
                        tiles ? "tiles of 128" : "per channel", q, q / floatSeconds,
                        (q + seconds(hessianPass)) / floatSeconds);
            checksum += double(r.rounded.values<float>()[0]);
        }
        std::printf("(checksum %.3g)\n", checksum);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_gptq: %s\n", e.what());
        return 1;
    }
}
