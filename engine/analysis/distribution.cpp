#include "analysis/distribution.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/block_layout.h"
#include "core/error.h"
#include "numerics/grid.h"
#include "numerics/qtype.h"

namespace qs {
namespace {

// Where each element of a tensor belongs: its channel and its scale group.
class ElementGroups {
public:
    ElementGroups(const BlockLayout& layout, int channelAxis) : layout_(layout)
    {
        const Shape& shape = layout.shape;
        if (channelAxis >= 0 && !shape.empty()) {
            axis_ = normalizeAxis(channelAxis, int(shape.size()), "channel axis");
            channels_ = shape[size_t(axis_)];
            for (size_t d = size_t(axis_) + 1; d < shape.size(); ++d)
                inner_ *= shape[d];
        }
        perTensor_ = layout.isPerTensor();
        perChannel_ = axis_ >= 0 && layout.groupCount() == channels_ && layout.block[size_t(axis_)] == 1;
    }
    int64_t channels() const { return channels_; }
    int64_t channelOf(int64_t flat) const { return axis_ < 0 ? 0 : (flat / inner_) % channels_; }
    int64_t groupOf(int64_t flat) const
    {
        if (perTensor_)
            return 0;
        if (perChannel_)
            return channelOf(flat);
        return layout_.groupOf(flat);
    }

private:
    const BlockLayout& layout_;
    int axis_ = -1;
    int64_t channels_ = 1;
    int64_t inner_ = 1;
    bool perTensor_ = true;
    bool perChannel_ = false;
};

Histogram emptyHistogram(double lo, double hi, size_t bins)
{
    Histogram h;
    h.lo = lo;
    h.hi = hi > lo ? hi : lo + 1.0;
    h.counts.assign(bins, 0);
    return h;
}

void addTo(Histogram& h, const HistogramBinning& binOf, float v, int64_t count = 1)
{
    h.counts[size_t(binOf(v))] += count;
}

// The symmetric span of the rounding-error histogram: the largest error seen,
// or the grid step when every error was zero.
double roundingSpan(double maxAbs, const std::optional<GroupQuant>& grid)
{
    if (maxAbs > 0)
        return maxAbs;
    return grid ? 0.5 * double(grid->scale) : 1.0;
}

} // namespace

DistributionData weightDistribution(const Tensor& x, const Tensor& fakeQuant, const TensorQuantization& q,
                                    int channelAxis, std::optional<int64_t> channel, std::string tensorName,
                                    size_t bins, const CancellationToken& cancel)
{
    if (x.dtype() != DType::F32 || fakeQuant.dtype() != DType::F32 || x.shape() != fakeQuant.shape() ||
        x.shape() != q.params.layout.shape)
        throw Error("distribution of '" + tensorName + "': the weight " + shapeToString(x.shape()) +
                    ", its fake-quant " + shapeToString(fakeQuant.shape()) + " and its layout " +
                    shapeToString(q.params.layout.shape) + " must be float32 of one shape");
    DistributionData d;
    d.tensor = std::move(tensorName);
    const ElementGroups groups(q.params.layout, channelAxis);
    d.channels = groups.channels();
    if (channel && (*channel < 0 || *channel >= d.channels))
        throw Error("distribution of '" + d.tensor + "': channel " + std::to_string(*channel) + " is not in [0, " +
                    std::to_string(d.channels) + ")");
    d.channel = channel;
    const std::span<const float> xs = x.values<float>();
    const std::span<const float> fq = fakeQuant.values<float>();
    const int64_t n = int64_t(xs.size());
    const auto selected = [&](int64_t i) { return !channel || groups.channelOf(i) == *channel; };
    // A quantization that holds no ranges (a GGUF block type's, as the weight
    // quantizer keeps it): each group's data range widened to include 0, which
    // is what its ranges are.
    std::vector<Range> dataRanges;
    if (q.ranges.empty()) {
        dataRanges.assign(size_t(q.params.layout.groupCount()), Range{0.0f, 0.0f});
        for (int64_t i = 0; i < n; ++i) {
            Range& r = dataRanges[size_t(groups.groupOf(i))];
            r.min = std::min(r.min, xs[size_t(i)]);
            r.max = std::max(r.max, xs[size_t(i)]);
        }
    }
    const std::vector<Range>& ranges = q.ranges.empty() ? dataRanges : q.ranges;

    // Pass 1: extents, moments, ranges of the groups seen, clipping.
    double sum = 0, sumSq = 0;
    float dataMin = std::numeric_limits<float>::max(), dataMax = std::numeric_limits<float>::lowest();
    Range envelope{std::numeric_limits<float>::max(), std::numeric_limits<float>::lowest()};
    std::optional<int64_t> onlyGroup;
    bool oneGroup = true;
    double maxRoundingError = 0;
    double minClipError = 0, maxClipError = 0;
    if (d.channels > 1 && !channel)
        d.channelRanges.assign(size_t(d.channels), envelope);
    for (int64_t i = 0; i < n; ++i) {
        if ((i & 0xfffff) == 0)
            cancel.check();
        const int64_t g = groups.groupOf(i);
        const Range& r = ranges[size_t(g)];
        if (!d.channelRanges.empty()) {
            Range& cr = d.channelRanges[size_t(groups.channelOf(i))];
            cr.min = std::min(cr.min, r.min);
            cr.max = std::max(cr.max, r.max);
        }
        if (!selected(i))
            continue;
        const float v = xs[size_t(i)];
        ++d.elements;
        sum += v;
        sumSq += double(v) * v;
        dataMin = std::min(dataMin, v);
        dataMax = std::max(dataMax, v);
        envelope.min = std::min(envelope.min, r.min);
        envelope.max = std::max(envelope.max, r.max);
        if (!onlyGroup)
            onlyGroup = g;
        else if (*onlyGroup != g)
            oneGroup = false;
        const double e = double(v) - double(fq[size_t(i)]);
        if (v < r.min || v > r.max) {
            if (d.clipped == 0)
                minClipError = maxClipError = e;
            ++d.clipped;
            minClipError = std::min(minClipError, e);
            maxClipError = std::max(maxClipError, e);
        } else {
            maxRoundingError = std::max(maxRoundingError, std::abs(e));
        }
    }
    if (d.elements == 0)
        throw Error("distribution of '" + d.tensor + "': no elements");
    d.range = envelope;
    if (oneGroup && !hasOwnBlockScales(q.params.qtype) && !isLut(q.params.qtype))
        d.grid = groupQuant(q.params, *onlyGroup);
    d.clippedFraction = double(d.clipped) / double(d.elements);
    d.mean = sum / double(d.elements);
    d.stddev = std::sqrt(std::max(0.0, sumSq / double(d.elements) - d.mean * d.mean));

    // Pass 2: the histograms.
    const double lo = std::min(double(dataMin), double(envelope.min));
    const double hi = std::max(double(dataMax), double(envelope.max));
    d.values = emptyHistogram(lo, hi, bins);
    d.fakeQuant = emptyHistogram(lo, hi, bins);
    const HistogramBinning valueBin(float(d.values.lo), float(d.values.hi), bins);
    const double span = roundingSpan(maxRoundingError, d.grid);
    d.roundingError = emptyHistogram(-span, span, bins / 2);
    const HistogramBinning roundingBin(float(-span), float(span), bins / 2);
    d.clippingError = emptyHistogram(minClipError, maxClipError, bins / 2);
    const HistogramBinning clippingBin(float(d.clippingError.lo), float(d.clippingError.hi), bins / 2);
    const bool strip = !d.channelRanges.empty();
    if (strip) {
        d.stripBins = int64_t(std::max<size_t>(bins / 2, 1));
        d.strip.assign(size_t(d.channels * d.stripBins), 0);
    }
    const HistogramBinning stripBin(float(d.values.lo), float(d.values.hi), size_t(std::max<int64_t>(d.stripBins, 1)));
    const double outlierDistance = kOutlierSigmas * d.stddev;
    for (int64_t i = 0; i < n; ++i) {
        if ((i & 0xfffff) == 0)
            cancel.check();
        const float v = xs[size_t(i)];
        if (strip)
            ++d.strip[size_t(groups.channelOf(i) * d.stripBins + stripBin(v))];
        if (!selected(i))
            continue;
        addTo(d.values, valueBin, v);
        addTo(d.fakeQuant, valueBin, fq[size_t(i)]);
        if (d.stddev > 0 && std::abs(double(v) - d.mean) > outlierDistance)
            ++d.outliers;
        const Range& r = ranges[size_t(groups.groupOf(i))];
        const float e = float(double(v) - double(fq[size_t(i)]));
        if (v < r.min || v > r.max) {
            addTo(d.clippingError, clippingBin, e);
            ++d.clippingCount;
        } else {
            addTo(d.roundingError, roundingBin, e);
            ++d.roundingCount;
        }
    }
    return d;
}

DistributionData activationDistribution(const Observer& observer, const QuantParams& params, Range range, size_t bins)
{
    if (observer.groupCount() < 1 || observer.config().histogramBinsPerSide <= 0 || observer.histogram(0).empty())
        throw Error("distribution of activation '" + observer.name() + "': the observer kept no histogram");
    DistributionData d;
    d.tensor = observer.name();
    d.activation = true;
    d.estimated = true;
    d.range = range;
    const Histogram source = observer.histogram(0).values();
    size_t first = 0, last = source.bins();
    while (first < last && source.counts[first] == 0)
        ++first;
    while (last > first && source.counts[last - 1] == 0)
        --last;
    const double lo = std::min(source.edge(first), double(range.min));
    const double hi = std::max(source.edge(last), double(range.max));
    d.values = emptyHistogram(lo, hi, bins);
    d.fakeQuant = emptyHistogram(lo, hi, bins);
    const HistogramBinning valueBin(float(d.values.lo), float(d.values.hi), bins);
    if (!hasOwnBlockScales(params.qtype) && !isLut(params.qtype) && params.layout.groupCount() == 1)
        d.grid = groupQuant(params, 0);

    // One pass for the moments and error extents, one to bin.
    struct BinPoint {
        float centre, fake;
        int64_t count;
        bool inside;
    };
    std::vector<BinPoint> points;
    double sum = 0, sumSq = 0, maxRounding = 0, minClip = 0, maxClip = 0;
    for (size_t j = first; j < last; ++j) {
        const int64_t c = source.counts[j];
        if (c == 0)
            continue;
        const float centre = float(source.center(j));
        const float fake = d.grid ? referenceFakeQuantizeValue(*d.grid, centre) : centre;
        const bool inside = centre >= range.min && centre <= range.max;
        const double e = double(centre) - double(fake);
        if (inside) {
            maxRounding = std::max(maxRounding, std::abs(e));
        } else {
            if (d.clipped == 0)
                minClip = maxClip = e;
            minClip = std::min(minClip, e);
            maxClip = std::max(maxClip, e);
            d.clipped += c;
        }
        points.push_back({centre, fake, c, inside});
        d.elements += c;
        sum += double(c) * centre;
        sumSq += double(c) * double(centre) * centre;
    }
    d.clippedFraction = double(d.clipped) / double(d.elements);
    d.mean = sum / double(d.elements);
    d.stddev = std::sqrt(std::max(0.0, sumSq / double(d.elements) - d.mean * d.mean));
    const double span = roundingSpan(maxRounding, d.grid);
    d.roundingError = emptyHistogram(-span, span, bins / 2);
    d.clippingError = emptyHistogram(minClip, maxClip, bins / 2);
    const HistogramBinning roundingBin(float(-span), float(span), bins / 2);
    const HistogramBinning clippingBin(float(d.clippingError.lo), float(d.clippingError.hi), bins / 2);
    for (const BinPoint& p : points) {
        addTo(d.values, valueBin, p.centre, p.count);
        addTo(d.fakeQuant, valueBin, p.fake, p.count);
        if (d.stddev > 0 && std::abs(double(p.centre) - d.mean) > kOutlierSigmas * d.stddev)
            d.outliers += p.count;
        const float e = float(double(p.centre) - double(p.fake));
        if (p.inside) {
            addTo(d.roundingError, roundingBin, e, p.count);
            d.roundingCount += p.count;
        } else {
            addTo(d.clippingError, clippingBin, e, p.count);
            d.clippingCount += p.count;
        }
    }
    return d;
}

std::vector<float> gridValuesIn(const GroupQuant& g, double lo, double hi, size_t maxCount)
{
    std::vector<float> out;
    const QuantTypeInfo& info = qtypeInfo(g.qtype);
    const auto keep = [&](float v) {
        if (std::isfinite(v) && v >= lo && v <= hi)
            out.push_back(v);
    };
    if (isIntegerLike(g.qtype)) {
        // (q − z)·s for q in the grid; only the codes that can land inside [lo, hi].
        const double s = g.scale;
        const double qLo = std::max(double(g.grid.qmin), std::ceil(lo / s + g.zeroPoint));
        const double qHi = std::min(double(g.grid.qmax), std::floor(hi / s + g.zeroPoint));
        if (qHi - qLo + 1 > double(maxCount))
            return {};
        for (double qv = qLo; qv <= qHi; ++qv) {
            const float unit = g.qtype == QType::Binary && qv == 0 ? std::nanf("") : float(qv - g.zeroPoint);
            keep(unit * g.scale);
        }
    } else {
        const uint32_t codes = 1u << info.bits;
        for (uint32_t c = 0; c < codes; ++c)
            keep(gridValueOfCode(g.qtype, c) * g.scale);
        std::sort(out.begin(), out.end());
        out.erase(std::unique(out.begin(), out.end()), out.end());
        if (out.size() > maxCount)
            return {};
    }
    return out;
}

} // namespace qs
