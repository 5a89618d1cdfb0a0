#include "analysis/method_comparison.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "calib/calibrate.h"
#include "calib/compatibility.h"
#include "core/error.h"
#include "numerics/qtype.h"
#include "quant/kernels.h"
#include "quant/reference.h"

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

// Why `m` cannot calibrate `qtype` (its own symmetry, whatever the spec says), or empty.
std::string asymmetricSkip(const CalibrationMethod& m, QType qtype)
{
    const MethodCompatibility c = methodCompatibility(qtype, m, {});
    return c.problem == MethodCompatibility::Problem::NoZeroPoint ? c.reason : std::string();
}

// Applicable results by MSE (ties keep their order), then the skipped ones in order.
void sortByMse(std::vector<MethodResult>& results)
{
    const auto skipped =
        std::stable_partition(results.begin(), results.end(), [](const MethodResult& r) { return r.skipped.empty(); });
    std::stable_sort(results.begin(), skipped,
                     [](const MethodResult& a, const MethodResult& b) { return a.metrics.mse < b.metrics.mse; });
}

// A histogram of x over the data and every method's range.
Histogram spanningHistogram(std::span<const float> x, const std::vector<MethodResult>& results, size_t bins)
{
    const auto [mn, mx] = std::minmax_element(x.begin(), x.end());
    float lo = *mn, hi = *mx;
    for (const MethodResult& r : results)
        for (const Range& g : r.ranges) {
            lo = std::min(lo, g.min);
            hi = std::max(hi, g.max);
        }
    return buildHistogram(x, HistogramOf::Values, lo, hi > lo ? hi : lo + 1.0f, bins);
}

} // namespace

std::vector<std::string> comparedMethods(const std::vector<double>& percentiles, double rmsFactor)
{
    std::vector<CalibrationMethod> methods(2);
    methods[1].kind = CalibrationKind::MinMax;
    CalibrationMethod& rms = methods.emplace_back();
    rms.kind = CalibrationKind::Rms;
    rms.factor = rmsFactor;
    for (const double p : percentiles) {
        CalibrationMethod& m = methods.emplace_back();
        m.kind = CalibrationKind::Percentile;
        m.percentile = p;
    }
    methods.emplace_back().kind = CalibrationKind::Mse;
    methods.emplace_back().kind = CalibrationKind::Entropy;
    std::vector<std::string> out;
    for (const CalibrationMethod& m : methods)
        out.push_back(m.toString());
    return out;
}

std::vector<MethodResult> compareMethods(const Tensor& x, const QuantizationSpec& spec, std::string_view tensorName,
                                         const CancellationToken& cancel, const std::vector<std::string>& methods)
{
    cancel.check();
    const QuantTypeInfo& info = qtypeInfo(spec.qtype);
    if (hasOwnBlockScales(spec.qtype)) {
        QuantizationSpec mx = spec;
        mx.method = CalibrationMethod::parse("absmax");
        return {measure(x, mx, std::string(info.name) + " block scales", tensorName)};
    }
    if (isLut(spec.qtype)) {
        QuantizationSpec lut = spec;
        lut.method = CalibrationMethod::parse("absmax");
        return {measure(x, lut, std::string(info.name) + " k-means table", tensorName)};
    }
    // An unsigned type under a symmetric method would zero the negative values
    // (calibrateRanges refuses it): those methods are skipped, not the comparison.
    bool negative = false;
    if (info.kind == QKind::Integer && !info.isSigned) {
        const Tensor xf = x.toFloat32();
        for (float v : xf.values<float>())
            negative |= v < 0;
    }
    std::vector<MethodResult> results;
    for (const std::string& text : methods) {
        cancel.check();
        QuantizationSpec s = spec;
        s.method = CalibrationMethod::parse(text);
        s.symmetric.reset(); // each method's own symmetry
        const bool symmetric = calibrationSymmetric(s.method, CalibrationTarget{s.qtype, s.options, {}});
        MethodResult skipped;
        skipped.method = s.method.toString();
        skipped.symmetric = symmetric;
        skipped.skipped = asymmetricSkip(s.method, s.qtype);
        if (skipped.skipped.empty() && symmetric && negative)
            skipped.skipped = "symmetric: " + std::string(info.name) + " would turn the negative values into 0";
        results.push_back(skipped.skipped.empty() ? measure(x, s, s.method.toString(), tensorName) : skipped);
    }
    sortByMse(results);
    return results;
}

const MethodResult* MethodComparisonData::best() const
{
    return !results.empty() && results.front().skipped.empty() ? &results.front() : nullptr;
}

MethodComparisonData compareWeightMethods(const Tensor& x, const QuantizationSpec& spec, double percentile,
                                          double rmsFactor, std::string tensorName, size_t bins,
                                          const CancellationToken& cancel)
{
    MethodComparisonData d;
    d.tensor = std::move(tensorName);
    const Tensor xf = x.toFloat32();
    d.results = compareMethods(xf, spec, d.tensor, cancel, comparedMethods({percentile}, rmsFactor));
    d.values = spanningHistogram(xf.values<float>(), d.results, bins);
    return d;
}

MethodComparisonData compareActivationMethods(const Observer& observer, const CalibrationTarget& target,
                                              double percentile, double rmsFactor, size_t bins,
                                              const CancellationToken& cancel)
{
    if (observer.groupCount() < 1 || observer.config().histogramBinsPerSide <= 0 || observer.histogram(0).empty())
        throw Error("method comparison of activation '" + observer.name() + "': the observer kept no histogram");
    if (hasOwnBlockScales(target.qtype))
        throw Error("method comparison of activation '" + observer.name() +
                    "': " + std::string(qtypeName(target.qtype)) + " computes its own block scales");
    MethodComparisonData d;
    d.tensor = observer.name();
    d.activation = true;
    d.estimated = true;
    const Histogram source = observer.histogram(0).values();
    const BlockLayout layout = BlockLayout::perTensor({1});
    for (const std::string& text : comparedMethods({percentile}, rmsFactor)) {
        cancel.check();
        MethodResult r;
        r.method = text;
        const CalibrationMethod m = CalibrationMethod::parse(text);
        CalibrationTarget t = target;
        t.symmetric.reset();
        r.skipped = asymmetricSkip(m, t.qtype);
        if (!r.skipped.empty()) {
            d.results.push_back(std::move(r));
            continue;
        }
        r.symmetric = calibrationSymmetric(m, t);
        r.ranges = observer.ranges(m, t);
        const QuantParams params =
            quantParamsFromRanges(t.qtype, layout, std::span(r.ranges).first(1), r.symmetric, t.options, d.tensor);
        r.scales = params.scales;
        r.zeroPoints = params.zeroPoints;
        const GroupQuant g = groupQuant(params, 0);
        const Range saturates = saturationRanges(params).front(); // what clips under the scale used
        double signal = 0, noise = 0, maxAbs = 0, cross = 0, fakeSq = 0;
        int64_t n = 0, clipped = 0;
        for (size_t j = 0; j < source.bins(); ++j) {
            const int64_t c = source.counts[j];
            if (c == 0)
                continue;
            const float centre = float(source.center(j));
            const float fake = referenceFakeQuantizeValue(g, centre);
            const double e = double(centre) - fake;
            signal += double(c) * centre * centre;
            noise += double(c) * e * e;
            cross += double(c) * centre * fake;
            fakeSq += double(c) * double(fake) * fake;
            maxAbs = std::max(maxAbs, std::abs(e));
            n += c;
            if (centre < saturates.min || centre > saturates.max)
                clipped += c;
        }
        r.metrics.mse = noise / double(n);
        r.metrics.sqnrDb = noise == 0 ? std::numeric_limits<double>::infinity() : 10.0 * std::log10(signal / noise);
        r.metrics.maxAbsError = maxAbs;
        r.metrics.cosine = signal > 0 && fakeSq > 0 ? cross / std::sqrt(signal * fakeSq) : (signal == fakeSq ? 1 : 0);
        r.metrics.fractionClipped = double(clipped) / double(n);
        d.results.push_back(std::move(r));
    }
    sortByMse(d.results);
    // The histogram: the populated bins and every range.
    size_t first = 0, last = source.bins();
    while (first < last && source.counts[first] == 0)
        ++first;
    while (last > first && source.counts[last - 1] == 0)
        --last;
    double lo = source.edge(first), hi = source.edge(last);
    for (const MethodResult& r : d.results)
        for (const Range& g : r.ranges) {
            lo = std::min(lo, double(g.min));
            hi = std::max(hi, double(g.max));
        }
    d.values.lo = lo;
    d.values.hi = hi > lo ? hi : lo + 1.0;
    d.values.counts.assign(bins, 0);
    const HistogramBinning binOf(float(d.values.lo), float(d.values.hi), bins);
    for (size_t j = first; j < last; ++j)
        d.values.counts[size_t(binOf(float(source.center(j))))] += source.counts[j];
    return d;
}

} // namespace qs
