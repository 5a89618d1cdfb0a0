#include "quant/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <tbb/parallel_for.h>

#include "core/group_runs.h"
#include "core/error.h"

namespace qs {
namespace {

// Fixed chunks: the partial sums, and so the rounding of their total, are the
// same for any thread count.
constexpr int64_t kChunk = 1 << 16;

int64_t chunkCount(int64_t n)
{
    return (n + kChunk - 1) / kChunk;
}

} // namespace

void ErrorSums::add(const ErrorSums& other)
{
    count += other.count;
    signal += other.signal;
    noise += other.noise;
    cross += other.cross;
    quantized += other.quantized;
    maxAbs = std::max(maxAbs, other.maxAbs);
}

ErrorMetrics ErrorSums::metrics() const
{
    constexpr double inf = std::numeric_limits<double>::infinity();
    ErrorMetrics m;
    m.mse = count ? noise / double(count) : 0.0;
    m.sqnrDb = noise == 0 ? inf : (signal == 0 ? -inf : 10.0 * std::log10(signal / noise));
    m.maxAbsError = maxAbs;
    if (signal == 0 || quantized == 0)
        m.cosine = (signal == 0 && quantized == 0) ? 1.0 : 0.0;
    else
        m.cosine = cross / std::sqrt(signal * quantized);
    return m;
}

ErrorSums errorSums(std::span<const float> original, std::span<const float> quantized)
{
    if (original.size() != quantized.size())
        throw Error("errorMetrics: " + std::to_string(original.size()) + " original values against " +
                    std::to_string(quantized.size()) + " quantized ones");
    const auto n = int64_t(original.size());
    std::vector<ErrorSums> chunks(size_t(chunkCount(n)));
    tbb::parallel_for(int64_t(0), chunkCount(n), [&](int64_t c) {
        ErrorSums s;
        const int64_t begin = c * kChunk, end = std::min(n, (c + 1) * kChunk);
        for (int64_t i = begin; i < end; ++i) {
            const double x = original[size_t(i)];
            const double q = quantized[size_t(i)];
            const double d = x - q;
            s.signal += x * x;
            s.noise += d * d;
            s.cross += x * q;
            s.quantized += q * q;
            s.maxAbs = std::max(s.maxAbs, std::abs(d));
        }
        s.count = end - begin;
        chunks[size_t(c)] = s;
    });
    ErrorSums total;
    for (const ErrorSums& s : chunks)
        total.add(s);
    return total;
}

ErrorMetrics errorMetrics(std::span<const float> original, std::span<const float> quantized)
{
    return errorSums(original, quantized).metrics();
}

constexpr double kClipSlack = 0x1p-20;

double fractionClipped(std::span<const float> x, const BlockLayout& layout, std::span<const Range> ranges)
{
    const GroupRuns runs(layout);
    if (int64_t(x.size()) != runs.elements || int64_t(ranges.size()) != runs.groups)
        throw Error("fractionClipped: " + std::to_string(x.size()) + " values and " + std::to_string(ranges.size()) +
                    " ranges for layout " + layout.describe() + " of shape " + shapeToString(layout.shape));
    const int64_t n = runs.elements;
    std::vector<int64_t> clipped(size_t(chunkCount(n)));
    tbb::parallel_for(int64_t(0), chunkCount(n), [&](int64_t c) {
        int64_t count = 0;
        runs.forEachPiece(c * kChunk, std::min(n, (c + 1) * kChunk), [&](int64_t g, int64_t begin, int64_t end) {
            // The scale's float rounding may put a range's edge a few ulps inside the
            // value it was computed from (absmax / bound · bound): a relative slack.
            const Range r{float(double(ranges[size_t(g)].min) - kClipSlack * std::abs(double(ranges[size_t(g)].min))),
                          float(double(ranges[size_t(g)].max) + kClipSlack * std::abs(double(ranges[size_t(g)].max)))};
            for (int64_t i = begin; i < end; ++i)
                count += (x[size_t(i)] < r.min) | (x[size_t(i)] > r.max);
        });
        clipped[size_t(c)] = count;
    });
    int64_t total = 0;
    for (int64_t c : clipped)
        total += c;
    return n ? double(total) / double(n) : 0.0;
}

} // namespace qs
