#include "calib/clipping.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "numerics/grid.h"
#include "quant/reference.h"

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

GroupQuant quantOf(Range r, const ClippingTarget& target, std::string_view tensorName)
{
    const Range one[1] = {r};
    const QuantParams params = quantParamsFromRanges(target.qtype, BlockLayout::perTensor({1}), one, target.symmetric,
                                                     target.options, tensorName);
    return groupQuant(params, 0);
}

// Runs the candidate search with error(gq) for each candidate's quantizer.
template <class Error>
Range searchMse(float min, float max, const ClippingTarget& target, std::string_view tensorName, Error&& error)
{
    if (min == 0 && max == 0)
        return {0, 0};
    Range best{};
    double bestError = std::numeric_limits<double>::infinity();
    for (int i = 1; i <= kMseCandidates; ++i) {
        const Range r = mseCandidate(i, min, max, target.symmetric);
        const double e = error(quantOf(r, target, tensorName));
        if (e < bestError) {
            bestError = e;
            best = r;
        }
    }
    return best;
}

// KL divergence of the window [a, a + i) of h merged into `levels` levels;
// prefix[j] is the count of bins below j.
double windowDivergence(const std::vector<int64_t>& h, const std::vector<int64_t>& prefix, size_t a, size_t i,
                        size_t levels, std::vector<double>& p, std::vector<double>& q)
{
    p.assign(i, 0.0);
    q.assign(i, 0.0);
    const int64_t below = prefix[a], above = prefix.back() - prefix[a + i];
    for (size_t j = 0; j < i; ++j)
        p[j] = double(h[a + j]);
    p[0] += double(below);
    p[i - 1] += double(above);

    const size_t merged = i / levels;
    for (size_t k = 0; k < levels; ++k) {
        const size_t start = k * merged, stop = k + 1 == levels ? i : start + merged;
        double sum = 0;
        size_t nonZero = 0;
        for (size_t j = start; j < stop; ++j) {
            sum += double(h[a + j]);
            nonZero += p[j] != 0;
        }
        if (nonZero == 0)
            continue;
        for (size_t j = start; j < stop; ++j)
            q[j] = p[j] != 0 ? sum / double(nonZero) : 0.0;
    }
    double sumP = 0, sumQ = 0;
    for (size_t j = 0; j < i; ++j) {
        sumP += p[j];
        sumQ += q[j];
    }
    if (sumP == 0 || sumQ == 0)
        return std::numeric_limits<double>::infinity();
    double kl = 0;
    for (size_t j = 0; j < i; ++j) {
        if (p[j] == 0)
            continue;
        if (q[j] == 0)
            return std::numeric_limits<double>::infinity();
        const double pj = p[j] / sumP, qj = q[j] / sumQ;
        kl += pj * std::log(pj / qj);
    }
    return kl;
}

} // namespace

Range mseRangeOfValues(std::span<const float> x, float min, float max, const ClippingTarget& target,
                       std::string_view tensorName)
{
    return searchMse(min, max, target, tensorName, [&](const GroupQuant& gq) {
        double sum = 0;
        for (float v : x) {
            const double d = double(v) - double(referenceFakeQuantizeValue(gq, v));
            sum += d * d;
        }
        return sum;
    });
}

Range mseRangeOfHistogram(const Histogram& h, float min, float max, const ClippingTarget& target,
                          std::string_view tensorName)
{
    return searchMse(min, max, target, tensorName, [&](const GroupQuant& gq) {
        double sum = 0;
        for (size_t b = 0; b < h.bins(); ++b) {
            if (h.counts[b] == 0)
                continue;
            const float c = float(h.center(b));
            const double d = double(c) - double(referenceFakeQuantizeValue(gq, c));
            sum += double(h.counts[b]) * d * d;
        }
        return sum;
    });
}

int entropyLevels(QType t, bool symmetric, bool narrowRange)
{
    const QTypeInfo& info = qtypeInfo(t);
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
    }
    return 1;
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
    std::vector<int64_t> prefix(B + 1, 0);
    for (size_t j = 0; j < B; ++j)
        prefix[j + 1] = prefix[j] + h.counts[j];
    std::vector<double> p, q;
    double best = std::numeric_limits<double>::infinity();
    size_t bestA = 0, bestI = B;
    for (size_t i = L; i <= B; ++i) {
        const size_t a = symmetric ? 0 : size_t(std::llround(zero * double(B - i) / double(B)));
        const double d = windowDivergence(h.counts, prefix, a, i, L, p, q);
        if (d < best) {
            best = d;
            bestA = a;
            bestI = i;
        }
    }
    return rangeOf(bestA, bestI);
}

} // namespace qs
