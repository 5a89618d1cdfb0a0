// quantscope-cli fake-quant: quantize and dequantize an .npy array, write the result.
#include <cstdio>

#include "quant/metrics.h"
#include "quantization/tensor_quantization.h"
#include "cli/commands.h"
#include "cli/quantization_options.h"
#include "core/error.h"
#include "io/npy.h"
#include "quant/kernels.h"

namespace qs::cli {
namespace {

int runFakeQuant(const Arguments& args)
{
    QuantizationSpec spec = quantizationSpecFrom(args);
    spec.method = parseMethodArgument(args);
    spec.options.narrowRange = args.flag("--narrow-range");
    if (const auto s = args.value("--symmetric"))
        spec.symmetric = *s == "true";
    if (const auto r = args.value("--scale-restriction"))
        spec.options.restriction = *parseScaleRestriction(*r);
    const Rounding rounding = parseRounding(args.valueOr("--rounding", "nearest")).value();
    const uint64_t seed = args.unsignedInteger("--seed").value_or(0);
    if (args.value("--seed") && rounding != Rounding::Stochastic)
        throw UsageError("--seed applies to --rounding stochastic only");
    const std::string in = *args.value("--npy");
    const std::string out = *args.value("--out");

    const Tensor x = loadNpyArgument(args);
    const auto [q, fake] = namingFile(in, [&] {
        TensorQuantization tq = computeQuantization(x, spec, in);
        Tensor f = fakeQuantize(x, tq.params, rounding, seed, in);
        return std::pair(std::move(tq), std::move(f));
    });
    writeNpy(out, fake);

    const ErrorMetrics m = errorMetrics(x.values<float>(), fake.values<float>());
    const double clipped = fractionClipped(x.values<float>(), q.params.layout, q.saturation);
    std::printf("%s -> %s: %s, %s, %s, %lld groups: mse %.6g, sqnr %.2f dB, %.4f%% clipped\n", in.c_str(), out.c_str(),
                std::string(qtypeName(spec.qtype)).c_str(),
                hasOwnBlockScales(spec.qtype) ? "own block scales" : spec.method.toString().c_str(),
                layoutText(spec, x.shape()).c_str(), static_cast<long long>(q.params.scales.size()), m.mse, m.sqnrDb,
                100.0 * clipped);
    if (!q.note.empty())
        std::printf("%s: %s\n", in.c_str(), q.note.c_str());
    return kExitOk;
}

} // namespace

Command fakeQuantCommand()
{
    CommandSpec spec;
    spec.name = "fake-quant";
    spec.summary = "Quantize and dequantize an .npy array (float32 out), as a rule would";
    spec.synopsis = "fake-quant --npy IN --qtype Q --method M [--granularity G] [--axis A] [--tile T]\n"
                    "                      [--narrow-range] [--symmetric true|false] [--scale-restriction R]\n"
                    "                      [--rounding nearest|stochastic] [--seed N] --out OUT.npy";
    spec.options = {{"--npy", "IN", "input .npy array (any numeric dtype; read as float32)", {}, true}};
    for (OptionSpec& o : layoutOptions())
        spec.options.push_back(std::move(o));
    const std::vector<OptionSpec> more{
        {"--method",
         "M",
         "calibration method string: absmax[,s], minmax[,s], rms,s, fixed,min,max, percentile,p, mse, entropy",
         {},
         true},
        {"--narrow-range", "", "integer grid without its most negative code (int8: [-127, 127])", {}, false},
        {"--symmetric",
         "B",
         "symmetric (true) or two-sided (false) percentile, mse and entropy:",
         {"true", "false"},
         false},
        {"--scale-restriction", "R", "how scales are represented, default float:", {"float", "pow2", "fp16"}, false},
        {"--rounding",
         "MODE",
         "rounding to the grid, default nearest (half to even):",
         {"nearest", "stochastic"},
         false},
        {"--seed", "N", "seed of stochastic rounding (default 0)", {}, false},
        {"--out", "OUT.npy", "output .npy (float32, same shape), written atomically", {}, true},
    };
    spec.options.insert(spec.options.end(), more.begin(), more.end());
    spec.notes =
        layoutNotes() +
        "\nThe scale is max|range| / bound for symmetric methods (bound: qmax + 0.5 for integers, qmax with\n"
        "--narrow-range, the largest finite value for float types, 1 for nf4) and (max - min) / (qmax - qmin)\n"
        "with a zero point for asymmetric ones. Prints one line: groups, MSE, SQNR and % clipped.";
    return {spec, runFakeQuant};
}

} // namespace qs::cli
