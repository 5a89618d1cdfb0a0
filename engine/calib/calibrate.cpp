#include "calib/calibrate.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include <tbb/parallel_for.h>

#include "calib/clipping.h"
#include "core/group_runs.h"
#include "calib/histogram.h"
#include "calib/statistics.h"
#include "core/error.h"

namespace qs {

namespace {

Range symmetricRange(double magnitude)
{
    const float a = float(magnitude);
    return {-a, a};
}

// The methods that look at every value of a group, one group at a time.
// `wholeRange` counts the entropy groups too small for a histogram.
Range rangeOfGroup(std::span<const float> v, float min, float max, const CalibrationMethod& m,
                   const CalibrationTarget& target, bool symmetric, std::atomic<int64_t>& wholeRange)
{
    if (v.empty())
        return {0, 0};
    const float absMax = std::max(-min, max);
    switch (m.kind) {
    case CalibrationKind::Percentile:
        if (symmetric)
            return symmetricRange(exactPercentile(v, HistogramOf::Magnitudes, m.percentile));
        return {float(exactPercentile(v, HistogramOf::Values, 100.0 - m.percentile)),
                float(exactPercentile(v, HistogramOf::Values, m.percentile))};
    case CalibrationKind::Entropy: {
        const int levels = entropyLevels(target.qtype, symmetric, target.options.narrowRange);
        const size_t bins = entropyBins(int64_t(v.size()), levels, size_t(target.histogramBins));
        if (bins == 0) {
            ++wholeRange;
            return symmetric ? symmetricRange(absMax) : Range{min, max};
        }
        if (symmetric)
            return entropyRange(buildHistogram(v, HistogramOf::Magnitudes, 0, absMax, bins), true, levels);
        return entropyRange(buildHistogram(v, HistogramOf::Values, std::min(min, 0.0f), std::max(max, 0.0f), bins),
                            false, levels);
    }
    default:
        break;
    }
    throw Error("calibration method '" + m.toString() + "' does not look at the values one group at a time");
}

} // namespace

void checkUnsignedSymmetric(QType t, bool symmetric, const CalibrationMethod& m, float min, std::string_view tensorName)
{
    const QuantTypeInfo& info = qtypeInfo(t);
    if (!symmetric || info.kind != QKind::Integer || info.isSigned || !(min < 0))
        return;
    const std::string name(info.name);
    const std::string signedName = name.rfind("uint", 0) == 0 ? name.substr(1) : "a signed type";
    throw Error("tensor '" + std::string(tensorName) + "': " + name + " with the symmetric calibration method '" +
                m.toString() + "' quantizes [0, absmax], so every negative value (down to " + std::to_string(min) +
                ") would become 0; use an asymmetric method (minmax, or percentile, mse or entropy with "
                "symmetric: false) or the signed type " +
                signedName);
}

bool calibrationSymmetric(const CalibrationMethod& m, const CalibrationTarget& target)
{
    return m.resolveSymmetric(target.symmetric);
}

namespace {

void checkCalibratable(const CalibrationMethod& m, const CalibrationTarget& target, std::string_view tensorName)
{
    if (hasOwnBlockScales(target.qtype))
        throw Error("tensor '" + std::string(tensorName) + "': " + std::string(qtypeName(target.qtype)) +
                    " computes its own block scales from the data; calibration method '" + m.toString() +
                    "' does not apply to it");
    if (target.histogramBins < 1)
        throw Error("tensor '" + std::string(tensorName) + "': histogram bins must be at least 1, got " +
                    std::to_string(target.histogramBins));
}

// absmax and minmax: the range of a group from its extremes.
Range rangeOfExtremes(const CalibrationMethod& m, float min, float max)
{
    const double s = m.factor;
    if (m.kind == CalibrationKind::AbsMax)
        return symmetricRange(s * double(std::max(-min, max)));
    return {float(s * double(min)), float(s * double(max))};
}

} // namespace

bool calibratesFromExtremes(const CalibrationMethod& m)
{
    return m.kind == CalibrationKind::AbsMax || m.kind == CalibrationKind::MinMax;
}

Range calibrateRangeOfExtremes(float min, float max, const CalibrationMethod& m, const CalibrationTarget& target,
                               std::string_view tensorName)
{
    if (!calibratesFromExtremes(m))
        throw Error("tensor '" + std::string(tensorName) + "': calibration method '" + m.toString() +
                    "' needs the data, not only its extremes");
    checkCalibratable(m, target, tensorName);
    checkUnsignedSymmetric(target.qtype, calibrationSymmetric(m, target), m, min, tensorName);
    return rangeOfExtremes(m, min, max);
}

std::vector<Range> calibrateRanges(std::span<const float> x, const BlockLayout& layout, const CalibrationMethod& m,
                                   const CalibrationTarget& target, std::string_view tensorName,
                                   CalibrationReport* report)
{
    checkCalibratable(m, target, tensorName);
    const bool symmetric = calibrationSymmetric(m, target);
    const GroupStatistics st = groupStatistics(x, layout, tensorName, m.kind == CalibrationKind::Rms);
    const size_t groups = st.count.size();
    if (groups > 0)
        checkUnsignedSymmetric(target.qtype, symmetric, m, *std::min_element(st.min.begin(), st.min.end()), tensorName);
    if (report) {
        *report = {};
        report->groups = int64_t(groups);
    }
    std::vector<Range> ranges(groups);
    const double s = m.factor;
    switch (m.kind) {
    case CalibrationKind::AbsMax:
    case CalibrationKind::MinMax:
        for (size_t g = 0; g < groups; ++g)
            ranges[g] = rangeOfExtremes(m, st.min[g], st.max[g]);
        return ranges;
    case CalibrationKind::Rms:
        for (size_t g = 0; g < groups; ++g)
            ranges[g] = symmetricRange(st.count[g] == 0 ? 0.0 : s * std::sqrt(st.sumSquares[g] / double(st.count[g])));
        return ranges;
    case CalibrationKind::Fixed:
        std::fill(ranges.begin(), ranges.end(), Range{float(m.fixedMin), float(m.fixedMax)});
        return ranges;
    case CalibrationKind::Percentile:
    case CalibrationKind::Mse:
    case CalibrationKind::Entropy:
        break;
    }
    const GroupMajorValues values(x, layout);
    if (m.kind == CalibrationKind::Mse) {
        // All groups are searched together on [groups, width] points: their values
        // when every group is small, else each group's histogram of x.
        const int64_t largest = groups == 0 ? 0 : *std::max_element(st.count.begin(), st.count.end());
        const bool exact = largest <= kMseExactLimit;
        MsePoints points(int64_t(groups), exact ? largest : target.histogramBins);
        tbb::parallel_for(size_t(0), groups, [&](size_t g) {
            const std::span<const float> v = values.group(int64_t(g));
            if (v.empty())
                return;
            const float lo = st.min[g], hi = st.max[g], a = std::max(-lo, hi);
            if (exact)
                points.setValues(int64_t(g), v, lo, hi);
            else
                points.setHistogram(int64_t(g),
                                    buildHistogram(v, HistogramOf::Values, symmetric ? -a : lo, symmetric ? a : hi,
                                                   size_t(target.histogramBins)),
                                    lo, hi);
        });
        return mseRanges(points, ClippingTarget{target.qtype, target.options, symmetric}, tensorName);
    }
    std::atomic<int64_t> wholeRange{0};
    tbb::parallel_for(size_t(0), groups, [&](size_t g) {
        ranges[g] = rangeOfGroup(values.group(int64_t(g)), st.min[g], st.max[g], m, target, symmetric, wholeRange);
    });
    if (report && wholeRange > 0) {
        const int64_t levels = std::max(entropyLevels(target.qtype, symmetric, target.options.narrowRange), 1);
        const int64_t smallest = *std::min_element(st.count.begin(), st.count.end());
        const std::string whole = symmetric ? "±absmax" : "[min, max]";
        report->entropyWholeRange = wholeRange;
        report->note = "entropy: " + std::to_string(int64_t(wholeRange)) + " of " + std::to_string(groups) +
                       " groups kept their whole range " + whole + ": ";
        if (target.histogramBins / levels < 2)
            report->note += std::string(qtypeName(target.qtype)) + " has " + std::to_string(levels) +
                            " levels, more than half of the " + std::to_string(target.histogramBins) +
                            " histogram bins";
        else
            report->note += "the search needs " + std::to_string(2 * levels * kEntropyValuesPerBin) +
                            " values per group (" + std::to_string(kEntropyValuesPerBin) +
                            " per bin, 2 bins per level of " + std::string(qtypeName(target.qtype)) +
                            "), the smallest group holds " + std::to_string(smallest);
    }
    return ranges;
}

} // namespace qs
