#include "quantization/method_comparison.h"

#include <algorithm>

#include "calib/calibrate.h"
#include "calib/compatibility.h"
#include "numerics/qtype.h"
#include "quant/kernels.h"

namespace qs {
namespace {

MethodResult measure(const Tensor& x, const QuantizationSpec& spec, std::string method, std::string_view tensorName)
{
    const TensorQuantization q = computeQuantization(x, spec, tensorName);
    MethodResult r;
    r.method = std::move(method);
    r.symmetric = q.params.symmetric;
    r.scales = q.params.scales;
    r.zeroPoints = q.params.zeroPoints;
    const Tensor xf = x.toFloat32();
    std::vector<float> fake(size_t(xf.numel()));
    fakeQuantizeInto(xf, q.params, fake, Rounding::Nearest, 0, tensorName);
    r.metrics = errorMetrics(xf.values<float>(), fake);
    r.metrics.fractionClipped = fractionClipped(xf.values<float>(), q.params.layout, q.saturation);
    r.ranges = q.ranges;
    r.note = q.note;
    return r;
}

} // namespace

std::vector<std::string> comparedMethods()
{
    return {"absmax", "minmax", "rms,3", "percentile,99.9", "percentile,99.99", "mse", "entropy"};
}

std::vector<MethodResult> compareMethods(const Tensor& x, const QuantizationSpec& spec, std::string_view tensorName,
                                         const CancellationToken& cancel)
{
    cancel.check();
    const QuantTypeInfo& info = qtypeInfo(spec.qtype);
    if (info.kind == QKind::Microscaling) {
        QuantizationSpec mx = spec;
        mx.method = CalibrationMethod::parse("absmax");
        return {measure(x, mx, std::string(info.name) + " block scales", tensorName)};
    }
    // An unsigned type under a symmetric method would zero the negative values
    // (calibrateRanges refuses it): those methods are skipped, not the comparison.
    bool negative = false;
    if (info.kind == QKind::Integer && !info.isSigned) {
        const Tensor xf = x.toFloat32();
        for (float v : xf.values<float>())
            negative |= v < 0;
    }
    std::vector<MethodResult> results, skipped;
    for (const std::string& text : comparedMethods()) {
        cancel.check();
        QuantizationSpec s = spec;
        s.method = CalibrationMethod::parse(text);
        s.symmetric.reset(); // each method's own symmetry
        const MethodCompatibility c = methodCompatibility(s.qtype, s.method, {});
        const bool symmetric = c.symmetric;
        if (!c) {
            MethodResult r;
            r.method = s.method.toString();
            r.symmetric = symmetric;
            r.skipped = c.reason;
            skipped.push_back(std::move(r));
            continue;
        }
        if (symmetric && negative) {
            MethodResult r;
            r.method = s.method.toString();
            r.skipped = "symmetric: " + std::string(info.name) + " would turn the negative values into 0";
            skipped.push_back(std::move(r));
            continue;
        }
        results.push_back(measure(x, s, s.method.toString(), tensorName));
    }
    std::stable_sort(results.begin(), results.end(),
                     [](const MethodResult& a, const MethodResult& b) { return a.metrics.mse < b.metrics.mse; });
    results.insert(results.end(), skipped.begin(), skipped.end());
    return results;
}

} // namespace qs
