#include "quant/palettization.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include <tbb/parallel_for.h>

#include "core/error.h"
#include "numerics/qtype.h"
#include "quant/layout_walk.h"

namespace qs {
namespace {

// The flat indices of every group, grouped: members[offsets[g] .. offsets[g + 1]).
struct GroupMembers {
    std::vector<int64_t> offsets;
    std::vector<int64_t> members;
};

GroupMembers groupMembers(const BlockLayout& layout, int64_t numel)
{
    const int64_t groups = layout.groupCount();
    const LayoutWalk walk(layout);
    GroupMembers m;
    m.offsets.assign(size_t(groups) + 1, 0);
    walk.forEachRun(0, numel, [&](int64_t, int64_t n, int64_t group) {
        if (walk.perElementGroups())
            for (int64_t j = 0; j < n; ++j)
                ++m.offsets[size_t(group + j) + 1];
        else
            m.offsets[size_t(group) + 1] += n;
    });
    for (size_t g = 0; g < size_t(groups); ++g)
        m.offsets[g + 1] += m.offsets[g];
    std::vector<int64_t> next(m.offsets.begin(), m.offsets.end() - 1);
    m.members.resize(size_t(numel));
    walk.forEachRun(0, numel, [&](int64_t start, int64_t n, int64_t group) {
        for (int64_t j = 0; j < n; ++j)
            m.members[size_t(next[size_t(walk.perElementGroups() ? group + j : group)]++)] = start + j;
    });
    return m;
}

std::string tensorLabel(std::string_view name)
{
    return "tensor '" + std::string(name) + "'";
}

void checkIsLut(QType t, std::string_view tensorName)
{
    if (!isLut(t))
        throw Error(tensorLabel(tensorName) + ": " + std::string(qtypeName(t)) + " is not a lut type");
}

} // namespace

int nearestLutEntry(std::span<const float> table, float x)
{
    // Midpoints in double are exact (a sum of two floats, halved), so "x above
    // the midpoint" is "x strictly nearer the upper entry".
    int lo = 0, hi = int(table.size()) - 1; // the answer is in [lo, hi]
    while (lo < hi) {
        const int mid = (lo + hi) / 2;
        const double between = (double(table[size_t(mid)]) + double(table[size_t(mid) + 1])) * 0.5;
        if (double(x) > between)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

std::vector<float> kmeansLut(std::span<const float> values, int bits, int* iterations)
{
    const size_t k = size_t(1) << bits;
    if (iterations)
        *iterations = 0;
    std::vector<float> sorted(values.begin(), values.end());
    std::sort(sorted.begin(), sorted.end());
    std::vector<float> distinct(sorted);
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    if (distinct.empty())
        return std::vector<float>(k, 0.0f);
    if (distinct.size() <= k) {
        std::vector<float> table(distinct);
        table.resize(k, distinct.back());
        return table;
    }
    // Evenly spaced over [min, max]; quantiles of the distinct values when float32
    // cannot hold K increasing entries in so narrow a range.
    std::vector<float> table(k);
    const double lo = distinct.front(), hi = distinct.back();
    for (size_t j = 0; j < k; ++j)
        table[j] = float(lo + (hi - lo) * double(j) / double(k - 1));
    if (std::adjacent_find(table.begin(), table.end(), std::greater_equal<float>()) != table.end()) {
        const size_t d = distinct.size();
        for (size_t j = 0; j < k; ++j)
            table[j] = distinct[size_t(std::floor((double(j) + 0.5) * double(d) / double(k)))];
    }

    // Clusters are runs of the sorted values: cluster j is [ends[j - 1], ends[j]).
    auto assign = [&](std::vector<size_t>& ends) {
        for (size_t j = 0; j + 1 < k; ++j) {
            const double between = (double(table[j]) + double(table[j + 1])) * 0.5;
            ends[j] = size_t(std::upper_bound(sorted.begin(), sorted.end(), between,
                                              [](double b, float v) { return b < double(v); }) -
                             sorted.begin());
        }
        ends[k - 1] = sorted.size();
    };
    std::vector<size_t> ends(k), next(k);
    assign(ends);
    for (int it = 0; it < kLutMaxIterations; ++it) {
        size_t begin = 0;
        for (size_t j = 0; j < k; ++j) {
            if (ends[j] > begin) {
                double sum = 0;
                for (size_t i = begin; i < ends[j]; ++i)
                    sum += double(sorted[i]);
                table[j] = float(sum / double(ends[j] - begin));
            }
            begin = ends[j];
        }
        if (iterations)
            *iterations = it + 1;
        assign(next);
        if (next == ends)
            break;
        std::swap(ends, next);
    }
    return table;
}

QuantParams lutParams(const Tensor& input, QType t, const BlockLayout& layout, std::string_view tensorName,
                      const CancellationToken& cancel)
{
    checkIsLut(t, tensorName);
    if (layout.shape != input.shape())
        throw Error(tensorLabel(tensorName) + " has shape " + shapeToString(input.shape()) + " but its layout is for " +
                    shapeToString(layout.shape));
    const Tensor x = input.toFloat32();
    const auto v = x.values<float>();
    for (size_t i = 0; i < v.size(); ++i)
        if (!std::isfinite(v[i]))
            throw Error(tensorLabel(tensorName) + " holds a NaN or infinite value (first at flat index " +
                        std::to_string(i) + ")");
    const GroupMembers groups = groupMembers(layout, x.numel());
    const size_t groupCount = groups.offsets.size() - 1;
    const int bits = qtypeInfo(t).bits;
    const size_t k = size_t(1) << bits;
    QuantParams p;
    p.qtype = t;
    p.layout = layout;
    p.symmetric = true;
    p.lut.resize(groupCount * k);
    p.scales.resize(groupCount);
    tbb::parallel_for(size_t(0), groupCount, [&](size_t g) {
        if (cancel.isCancelled())
            return;
        std::vector<float> values;
        values.reserve(size_t(groups.offsets[g + 1] - groups.offsets[g]));
        for (int64_t i = groups.offsets[g]; i < groups.offsets[g + 1]; ++i)
            values.push_back(v[size_t(groups.members[size_t(i)])]);
        const std::vector<float> table = kmeansLut(values, bits);
        std::copy(table.begin(), table.end(), p.lut.begin() + std::ptrdiff_t(g * k));
        const float largest = std::max(std::fabs(table.front()), std::fabs(table.back()));
        p.scales[g] = largest > 0 ? largest : 1.0f;
    });
    cancel.check();
    return p;
}

void checkLutParams(const QuantParams& params, const Shape& shape, std::string_view tensorName)
{
    checkIsLut(params.qtype, tensorName);
    const std::string name = tensorLabel(tensorName);
    if (params.layout.shape != shape || params.layout.block.size() != shape.size())
        throw Error(name + " has shape " + shapeToString(shape) + " but its quantization parameters are for " +
                    shapeToString(params.layout.shape));
    const size_t k = size_t(1) << qtypeInfo(params.qtype).bits;
    const size_t groups = size_t(params.layout.groupCount());
    if (params.lut.size() != groups * k)
        throw Error(name + ": " + std::to_string(params.lut.size()) + " table entries for " + std::to_string(groups) +
                    " groups of " + std::to_string(k) + " (" + params.layout.describe() + ")");
    for (size_t g = 0; g < groups; ++g)
        for (size_t j = 0; j < k; ++j) {
            const float e = params.lut[g * k + j];
            if (!std::isfinite(e) || (j > 0 && e < params.lut[g * k + j - 1]))
                throw Error(name + ", group " + std::to_string(g) + ": table entry " + std::to_string(j) + " (" +
                            std::to_string(e) + ") is not finite or not ascending");
        }
}

void lutFakeQuantizeInto(const Tensor& input, const QuantParams& params, std::span<float> out,
                         std::string_view tensorName)
{
    checkLutParams(params, input.shape(), tensorName);
    if (int64_t(out.size()) != input.numel())
        throw Error(tensorLabel(tensorName) + ": output buffer holds " + std::to_string(out.size()) + " floats for " +
                    std::to_string(input.numel()) + " elements");
    const Tensor x = input.toFloat32();
    const auto v = x.values<float>();
    const size_t k = size_t(1) << qtypeInfo(params.qtype).bits;
    const LayoutWalk walk(params.layout);
    bool bad = false;
    walk.forEachRun(0, x.numel(), [&](int64_t start, int64_t n, int64_t group) {
        for (int64_t j = 0; j < n; ++j) {
            const float value = v[size_t(start + j)];
            bad = bad || !std::isfinite(value);
            const std::span<const float> table(
                params.lut.data() + size_t(walk.perElementGroups() ? group + j : group) * k, k);
            out[size_t(start + j)] = table[size_t(nearestLutEntry(table, value))];
        }
    });
    if (bad)
        for (size_t i = 0; i < v.size(); ++i)
            if (!std::isfinite(v[i]))
                throw Error(tensorLabel(tensorName) + " holds a NaN or infinite value (first at flat index " +
                            std::to_string(i) + ")");
}

Tensor lutQuantize(const Tensor& input, const QuantParams& params, std::string_view tensorName)
{
    checkLutParams(params, input.shape(), tensorName);
    const Tensor x = input.toFloat32();
    const auto v = x.values<float>();
    Tensor codes(DType::U8, input.shape());
    auto c = codes.mutableValues<uint8_t>();
    const size_t k = size_t(1) << qtypeInfo(params.qtype).bits;
    const LayoutWalk walk(params.layout);
    walk.forEachRun(0, x.numel(), [&](int64_t start, int64_t n, int64_t group) {
        for (int64_t j = 0; j < n; ++j) {
            const float value = v[size_t(start + j)];
            if (!std::isfinite(value))
                throw Error(tensorLabel(tensorName) + " holds a NaN or infinite value (at flat index " +
                            std::to_string(start + j) + ")");
            const std::span<const float> table(
                params.lut.data() + size_t(walk.perElementGroups() ? group + j : group) * k, k);
            c[size_t(start + j)] = uint8_t(nearestLutEntry(table, value));
        }
    });
    return codes;
}

Tensor lutDequantize(const Tensor& codes, const QuantParams& params)
{
    checkLutParams(params, codes.shape(), "codes");
    if (codes.dtype() != DType::U8)
        throw Error("lut codes must be uint8, got " + std::string(dtypeName(codes.dtype())));
    const size_t k = size_t(1) << qtypeInfo(params.qtype).bits;
    const auto c = codes.values<uint8_t>();
    Tensor out(DType::F32, codes.shape());
    auto o = out.mutableValues<float>();
    const LayoutWalk walk(params.layout);
    walk.forEachRun(0, codes.numel(), [&](int64_t start, int64_t n, int64_t group) {
        for (int64_t j = 0; j < n; ++j) {
            const size_t code = c[size_t(start + j)];
            if (code >= k)
                throw Error("lut code " + std::to_string(code) + " at flat index " + std::to_string(start + j) +
                            " is beyond the table of " + std::to_string(k) + " entries");
            o[size_t(start + j)] = params.lut[size_t(walk.perElementGroups() ? group + j : group) * k + code];
        }
    });
    return out;
}

} // namespace qs
