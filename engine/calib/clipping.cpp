#include "calib/clipping.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include <tbb/parallel_for.h>

#include "core/error.h"
#include "numerics/grid.h"
#include "quant/kernels.h"

namespace qs {

namespace {

// The candidate range i of the MSE search.
Range mseCandidate(int i, float min, float max, bool symmetric)
{
    const double alpha = double(i) / kMseCandidates;
    if (symmetric) {
        const float a = float(alpha * std::max(-double(min), double(max)));
        return {-a, a};
    }
    return {float(alpha * double(min)), float(alpha * double(max))};
}

// log(n) for the small integers that counts and bin numbers mostly are.
double logOf(int64_t n)
{
    static const std::vector<double> table = [] {
        std::vector<double> t(size_t(1) << 16);
        for (size_t k = 1; k < t.size(); ++k)
            t[k] = std::log(double(k));
        return t;
    }();
    return n < int64_t(table.size()) ? table[size_t(n)] : std::log(double(n));
}

double xLogX(int64_t n)
{
    return n == 0 ? 0.0 : double(n) * logOf(n);
}

// The KL divergences of windows of one histogram, each in O(levels) from prefix sums:
// with P and Q unnormalised (ΣP = total, ΣQ = SQ),
//   KL = (Σ P·log P − Σ_levels (Σ_level P)·log(sum/nonZero)) / total − log total + log SQ.
class WindowDivergence {
public:
    WindowDivergence(const std::vector<int64_t>& h, size_t levels) : h_(h), levels_(levels)
    {
        const size_t B = h.size();
        count_.assign(B + 1, 0);
        nonZero_.assign(B + 1, 0);
        xLogX_.assign(B + 1, 0.0);
        for (size_t j = 0; j < B; ++j) {
            count_[j + 1] = count_[j] + h[j];
            nonZero_[j + 1] = nonZero_[j] + (h[j] != 0);
            xLogX_[j + 1] = xLogX_[j] + xLogX(h[j]);
        }
    }

    // The window [a, a + i), outliers folded into its end bins.
    double operator()(size_t a, size_t i) const
    {
        const int64_t total = count_.back();
        const int64_t below = count_[a], above = total - count_[a + i];
        const size_t last = a + i - 1;
        if (i == 1)
            return h_[a] > 0 ? 0.0 : std::numeric_limits<double>::infinity();
        const int64_t first = h_[a] + below, end = h_[last] + above; // P at the window's ends
        double pLogP = xLogX_[last] - xLogX_[a + 1] + xLogX(first) + xLogX(end);
        double pLogQ = 0;
        int64_t sumQ = 0;
        const size_t merged = i / levels_;
        for (size_t k = 0; k < levels_; ++k) {
            const size_t start = a + k * merged, stop = k + 1 == levels_ ? a + i : start + merged;
            const int64_t sum = count_[stop] - count_[start];
            int64_t nz = nonZero_[stop] - nonZero_[start];
            int64_t mass = sum; // Σ P over the level
            if (start == a) {
                nz += (first != 0) - (h_[a] != 0);
                mass += below;
            }
            if (stop == a + i) {
                nz += (end != 0) - (h_[last] != 0);
                mass += above;
            }
            if (nz == 0)
                continue;
            if (sum == 0)
                return std::numeric_limits<double>::infinity(); // P > 0 where Q = 0
            pLogQ += double(mass) * (logOf(sum) - logOf(nz));
            sumQ += sum;
        }
        return (pLogP - pLogQ) / double(total) - logOf(total) + logOf(sumQ);
    }

private:
    const std::vector<int64_t>& h_;
    size_t levels_;
    std::vector<int64_t> count_, nonZero_;
    std::vector<double> xLogX_;
};

} // namespace

MsePoints::MsePoints(int64_t groups_, int64_t width_)
    : groups(groups_), width(width_), points(size_t(groups_ * width_), 0.0f), weights(size_t(groups_ * width_), 0.0),
      min(size_t(groups_), 0.0f), max(size_t(groups_), 0.0f)
{
}

void MsePoints::setValues(int64_t g, std::span<const float> values, float lo, float hi)
{
    if (int64_t(values.size()) > width)
        throw Error("MsePoints: " + std::to_string(values.size()) + " values in a row of " + std::to_string(width));
    std::copy(values.begin(), values.end(), points.begin() + g * width);
    std::fill_n(weights.begin() + g * width, values.size(), 1.0);
    min[size_t(g)] = lo;
    max[size_t(g)] = hi;
}

void MsePoints::setHistogram(int64_t g, const Histogram& h, float lo, float hi)
{
    if (int64_t(h.bins()) > width)
        throw Error("MsePoints: " + std::to_string(h.bins()) + " bins in a row of " + std::to_string(width));
    for (size_t b = 0; b < h.bins(); ++b) {
        points[size_t(g * width) + b] = float(h.center(b));
        weights[size_t(g * width) + b] = double(h.counts[b]);
    }
    min[size_t(g)] = lo;
    max[size_t(g)] = hi;
}

std::vector<Range> mseRanges(const MsePoints& p, const ClippingTarget& target, std::string_view tensorName)
{
    const size_t groups = size_t(p.groups);
    std::vector<Range> best(groups, Range{0, 0});
    std::vector<double> bestError(groups, std::numeric_limits<double>::infinity());
    if (groups == 0 || p.width == 0)
        return best;
    const BlockLayout rows = BlockLayout::perChannel({p.groups, p.width}, 0);
    const Tensor points = Tensor::borrow(DType::F32, {p.groups, p.width}, p.points.data(), nullptr);
    std::vector<float> fq(p.points.size());
    std::vector<Range> candidate(groups);
    for (int i = 1; i <= kMseCandidates; ++i) {
        for (size_t g = 0; g < groups; ++g)
            candidate[g] = mseCandidate(i, p.min[g], p.max[g], target.symmetric);
        const QuantParams params =
            quantParamsFromRanges(target.qtype, rows, candidate, target.symmetric, target.options, tensorName);
        fakeQuantizeInto(points, params, fq, Rounding::Nearest, 0, tensorName);
        tbb::parallel_for(size_t(0), groups, [&](size_t g) {
            if (p.min[g] == 0 && p.max[g] == 0)
                return; // all zeros: [0, 0] is exact
            const float* x = p.points.data() + g * size_t(p.width);
            const double* w = p.weights.data() + g * size_t(p.width);
            const float* q = fq.data() + g * size_t(p.width);
            double e = 0;
            for (int64_t j = 0; j < p.width; ++j) {
                const double d = double(x[j]) - double(q[j]);
                e += w[j] * d * d;
            }
            if (e < bestError[g]) {
                bestError[g] = e;
                best[g] = candidate[g];
            }
        });
    }
    return best;
}

int entropyLevels(QType t, bool symmetric, bool narrowRange)
{
    const QuantTypeInfo& info = qtypeInfo(t);
    switch (info.kind) {
    case QKind::Integer: {
        const IntegerGrid g = integerGrid(t, narrowRange);
        if (!symmetric)
            return g.qmax - g.qmin + 1;
        return info.isSigned ? std::max(-g.qmin, 1) : g.qmax + 1;
    }
    case QKind::Binary:
        return symmetric ? 1 : 2;
    case QKind::Ternary:
        return symmetric ? 1 : 3;
    case QKind::Float:
    case QKind::Codebook:
    case QKind::Microscaling: {
        const QType element = info.kind == QKind::Microscaling ? info.element : t;
        std::set<float> values;
        for (uint32_t code = 0; code < (1u << qtypeInfo(element).bits); ++code) {
            const float v = gridValueOfCode(element, code);
            if (std::isfinite(v) && (symmetric ? v > 0 : true))
                values.insert(v == 0 ? 0.0f : v);
        }
        return int(values.size());
    }
    case QKind::GgufBlock:
    case QKind::Lut:
        break; // its own block scales: never calibrated (calib/compatibility.h)
    }
    return 1;
}

size_t entropyBins(int64_t values, int levels, size_t maxBins)
{
    const int64_t L = std::max(levels, 1);
    const int64_t m = std::min(int64_t(maxBins) / L, std::max<int64_t>(values, 0) / (L * kEntropyValuesPerBin));
    return m < 2 ? 0 : size_t(L * m);
}

Histogram mergedBins(const Histogram& h, size_t factor)
{
    if (factor <= 1 || h.bins() == 0)
        return h;
    const size_t bins = (h.bins() + factor - 1) / factor;
    Histogram m{h.lo, h.lo + (h.hi - h.lo) * double(bins * factor) / double(h.bins()), {}};
    m.counts.assign(bins, 0);
    for (size_t b = 0; b < h.bins(); ++b)
        m.counts[b / factor] += h.counts[b];
    return m;
}

Range entropyRange(const Histogram& h, bool symmetric, int levels)
{
    const size_t B = h.bins();
    const size_t L = size_t(std::max(levels, 1));
    const auto rangeOf = [&](size_t a, size_t i) {
        return symmetric ? Range{-float(h.edge(i)), float(h.edge(i))} : Range{float(h.edge(a)), float(h.edge(a + i))};
    };
    if (h.total() == 0 || h.hi <= h.lo)
        return symmetric ? Range{-float(h.hi), float(h.hi)} : Range{float(h.lo), float(h.hi)};
    if (L >= B)
        return rangeOf(0, B);
    const double zero = std::clamp(-h.lo / (h.hi - h.lo), 0.0, 1.0) * double(B);
    const WindowDivergence divergence(h.counts, L);
    double best = std::numeric_limits<double>::infinity();
    size_t bestA = 0, bestI = B;
    for (size_t i = L; i <= B; ++i) {
        const size_t a = symmetric ? 0 : size_t(std::llround(zero * double(B - i) / double(B)));
        const double d = divergence(a, i);
        if (d < best) {
            best = d;
            bestA = a;
            bestI = i;
        }
    }
    return rangeOf(bestA, bestI);
}

} // namespace qs
