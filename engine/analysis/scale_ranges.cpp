#include "analysis/scale_ranges.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/block_layout.h"
#include "core/error.h"

namespace qs {

double ScaleRangeData::channelAbsMax(int64_t c) const
{
    return std::max(std::abs(double(channelMin[size_t(c)])), std::abs(double(channelMax[size_t(c)])));
}

std::vector<int64_t> ScaleRangeData::sortedByAbsMax() const
{
    std::vector<int64_t> order(static_cast<size_t>(channels));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return channelAbsMax(a) > channelAbsMax(b); });
    return order;
}

ScaleRangeData scaleRanges(const Tensor& w, const TensorQuantization& q, int channelAxis, std::string tensorName)
{
    const BlockLayout& layout = q.params.layout;
    if (w.dtype() != DType::F32 || w.shape() != layout.shape || w.rank() == 0)
        throw Error("scale ranges of '" + tensorName + "': the weight " + shapeToString(w.shape()) +
                    " must be float32 of its layout's shape " + shapeToString(layout.shape));
    ScaleRangeData d;
    d.tensor = std::move(tensorName);
    d.channelAxis = normalizeAxis(channelAxis, w.rank(), "channel axis");
    const size_t axis = size_t(d.channelAxis);
    d.channels = w.dim(d.channelAxis);
    const Shape grid = layout.gridShape();
    d.perTensor = layout.isPerTensor();
    // Groups must not straddle channels: one channel per group index along the axis.
    if (!d.perTensor && layout.block[axis] != 1)
        throw Error("scale ranges of '" + d.tensor + "': its groups (" + layout.describe() +
                    ") do not follow the channel axis " + std::to_string(d.channelAxis));
    d.tilesPerChannel = d.perTensor ? 1 : layout.groupCount() / d.channels;

    const float big = std::numeric_limits<float>::max();
    d.channelMin.assign(size_t(d.channels), big);
    d.channelMax.assign(size_t(d.channels), -big);
    d.calibrated.assign(size_t(d.channels), Range{big, -big});
    d.scales.assign(size_t(d.channels * d.tilesPerChannel), 0.0f);
    int64_t inner = 1;
    for (size_t k = axis + 1; k < w.shape().size(); ++k)
        inner *= w.shape()[k];
    // Group index → (channel, tile): groups are row-major over the grid shape,
    // so a group's channel is its grid coordinate along the axis.
    int64_t gridInner = 1;
    for (size_t k = axis + 1; k < grid.size(); ++k)
        gridInner *= grid[k];
    const auto channelOfGroup = [&](int64_t g) { return d.perTensor ? 0 : (g / gridInner) % d.channels; };
    const auto tileOfGroup = [&](int64_t g) {
        if (d.perTensor)
            return int64_t(0);
        const int64_t outer = g / (gridInner * d.channels);
        return outer * gridInner + g % gridInner;
    };

    const std::span<const float> x = w.values<float>();
    d.tensorMin = big;
    d.tensorMax = -big;
    for (size_t i = 0; i < x.size(); ++i) {
        const int64_t c = (int64_t(i) / inner) % d.channels;
        d.channelMin[size_t(c)] = std::min(d.channelMin[size_t(c)], x[i]);
        d.channelMax[size_t(c)] = std::max(d.channelMax[size_t(c)], x[i]);
        d.tensorMin = std::min(d.tensorMin, x[i]);
        d.tensorMax = std::max(d.tensorMax, x[i]);
    }
    d.tensorCalibrated = Range{big, -big};
    for (int64_t g = 0; g < layout.groupCount(); ++g) {
        const Range& r = q.ranges[size_t(g)];
        d.tensorCalibrated.min = std::min(d.tensorCalibrated.min, r.min);
        d.tensorCalibrated.max = std::max(d.tensorCalibrated.max, r.max);
        if (d.perTensor)
            continue;
        const int64_t c = channelOfGroup(g);
        Range& cr = d.calibrated[size_t(c)];
        cr.min = std::min(cr.min, r.min);
        cr.max = std::max(cr.max, r.max);
        d.scales[size_t(c * d.tilesPerChannel + tileOfGroup(g))] = q.params.scales[size_t(g)];
    }
    if (d.perTensor) {
        std::fill(d.calibrated.begin(), d.calibrated.end(), d.tensorCalibrated);
        std::fill(d.scales.begin(), d.scales.end(), q.params.scales.at(0));
    }
    const auto [mn, mx] = std::minmax_element(d.scales.begin(), d.scales.end());
    d.scaleMin = *mn;
    d.scaleMax = *mx;
    double sum = 0, sumSq = 0;
    for (const float s : d.scales) {
        sum += s;
        sumSq += double(s) * s;
    }
    d.scaleMean = sum / double(d.scales.size());
    d.scaleStd = std::sqrt(std::max(0.0, sumSq / double(d.scales.size()) - d.scaleMean * d.scaleMean));
    return d;
}

} // namespace qs
