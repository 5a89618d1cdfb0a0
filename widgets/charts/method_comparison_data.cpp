#include "widgets/charts/method_comparison_data.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "calib/calibrate.h"
#include "core/error.h"
#include "numerics/qtype.h"
#include "quant/kernels.h"
#include "quant/reference.h"

namespace qs {
namespace {

void sortByMse(std::vector<MethodResult>& results)
{
    std::stable_partition(results.begin(), results.end(), [](const MethodResult& r) { return r.skipped.empty(); });
    const auto applicable =
        std::find_if(results.begin(), results.end(), [](const MethodResult& r) { return !r.skipped.empty(); });
    std::stable_sort(results.begin(), applicable,
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

std::string skippedReason(const CalibrationMethod& m, const CalibrationTarget& target)
{
    if (!calibrationSymmetric(m, CalibrationTarget{target.qtype, target.options, {}}) &&
        qtypeInfo(target.qtype).kind != QKind::Integer)
        return "asymmetric: " + std::string(qtypeName(target.qtype)) + " has no zero point";
    return {};
}

} // namespace

const MethodResult* MethodComparisonData::best() const
{
    return !results.empty() && results.front().skipped.empty() ? &results.front() : nullptr;
}

std::vector<std::string> comparisonMethods(double percentile, double rmsFactor)
{
    CalibrationMethod p, s;
    p.kind = CalibrationKind::Percentile;
    p.percentile = percentile;
    s.kind = CalibrationKind::Rms;
    s.factor = rmsFactor;
    return {"absmax", "minmax", s.toString(), p.toString(), "mse", "entropy"};
}

MethodComparisonData compareWeightMethods(const Tensor& x, const QuantizationSpec& spec, double percentile,
                                          double rmsFactor, std::string tensorName, size_t bins,
                                          const CancellationToken& cancel)
{
    MethodComparisonData d;
    d.tensor = std::move(tensorName);
    const Tensor xf = x.toFloat32();
    std::vector<MethodResult> tried = compareMethods(xf, spec, d.tensor, cancel);
    if (isMicroscaling(spec.qtype)) {
        d.results = std::move(tried);
    } else {
        for (const std::string& text : comparisonMethods(percentile, rmsFactor)) {
            const auto it =
                std::find_if(tried.begin(), tried.end(), [&](const MethodResult& r) { return r.method == text; });
            if (it != tried.end()) {
                d.results.push_back(*it);
                continue;
            }
            // A p or s compareMethods does not try: measured as it measures.
            QuantizationSpec s = spec;
            s.method = CalibrationMethod::parse(text);
            s.symmetric.reset();
            MethodResult r;
            r.method = text;
            r.skipped = skippedReason(s.method, CalibrationTarget{s.qtype, s.options, {}});
            if (r.skipped.empty()) {
                const TensorQuantization q = computeQuantization(xf, s, d.tensor);
                std::vector<float> fake(size_t(xf.numel()));
                fakeQuantizeInto(xf, q.params, fake, Rounding::Nearest, 0, d.tensor);
                r.symmetric = q.params.symmetric;
                r.scales = q.params.scales;
                r.zeroPoints = q.params.zeroPoints;
                r.ranges = q.ranges;
                r.metrics = errorMetrics(xf.values<float>(), fake);
                r.metrics.fractionClipped = fractionClipped(xf.values<float>(), q.params.layout, q.saturation);
            }
            d.results.push_back(std::move(r));
            cancel.check();
        }
    }
    sortByMse(d.results);
    d.values = spanningHistogram(xf.values<float>(), d.results, bins);
    return d;
}

MethodComparisonData compareActivationMethods(const Observer& observer, const CalibrationTarget& target,
                                              double percentile, double rmsFactor, size_t bins,
                                              const CancellationToken& cancel)
{
    if (observer.groupCount() < 1 || observer.config().histogramBinsPerSide <= 0 || observer.histogram(0).empty())
        throw Error("method comparison of activation '" + observer.name() + "': the observer kept no histogram");
    if (isMicroscaling(target.qtype))
        throw Error("method comparison of activation '" + observer.name() +
                    "': " + std::string(qtypeName(target.qtype)) + " computes its own block scales");
    MethodComparisonData d;
    d.tensor = observer.name();
    d.activation = true;
    d.estimated = true;
    const Histogram source = observer.histogram(0).values();
    const BlockLayout layout = BlockLayout::perTensor({1});
    for (const std::string& text : comparisonMethods(percentile, rmsFactor)) {
        cancel.check();
        MethodResult r;
        r.method = text;
        const CalibrationMethod m = CalibrationMethod::parse(text);
        CalibrationTarget t = target;
        t.symmetric.reset();
        r.skipped = skippedReason(m, t);
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
