#pragma once
// Searches for a clipping range: the MSE search and TensorRT's entropy (KL
// divergence) calibration. Both return the chosen range of one group.
//
// MSE: candidates are kMseCandidates ranges, i = 1..kMseCandidates, α = i / kMseCandidates:
//   symmetric  ±α·absmax;   two-sided  [α·min, α·max] (min and max scaled jointly).
// Each candidate's scale and zero point come from quantParamsFromRanges (the
// real scale rule, with the target's options) and its error is
//   Σ w·(x − fq(x))·(x − fq(x))   in double, in order over the group's points,
// where fq is quant's fake-quantization (equal to referenceFakeQuantizeValue bit
// for bit) and the points are the group's values (w = 1) or a histogram's bin
// centres weighted by their counts. The first candidate with the smallest error
// wins (ties go to the narrower range). All groups are searched together, one
// fast fake-quant pass per candidate.
// Entropy (TensorRT): a histogram H of |x| over [0, absmax] (symmetric) or of x
// over [min(min, 0), max(max, 0)] (two-sided), B bins, L levels (entropyLevels).
// For each kept width i = L..B bins (symmetric: bins [0, i); two-sided: the
// window [a, a + i) with a = round(z·(B − i)/B), z the fractional bin of zero,
// so the window shrinks towards zero proportionally on both sides):
//   P = H on the window, the mass outside folded into the window's end bin(s);
//   Q = H on the window merged into L levels (i / L bins each, the last level
//       takes the remainder), each level's count spread evenly over the bins of
//       that level where P is non-zero (zero bins of P stay zero in Q);
//   KL(P/ΣP ‖ Q/ΣQ) = Σ p·ln(p/q) over p > 0, +∞ if some p > 0 has q = 0.
// The smallest divergence wins (ties: the narrowest window); the range is the
// window's edges. When L >= B the whole histogram range is returned.
// The histogram is cut on the target's own grid (entropyBins): B = L·m bins, m bins
// per level of the type, m at most maxBins / L and small enough that a bin holds
// kEntropyValuesPerBin values on average. TensorRT's 2048 bins are meant for int8
// activations with millions of values; a 512-value weight row in 2048 bins is mostly
// empty bins, and on such a histogram the narrowest windows tie at a divergence of
// 0 (Q equals P wherever every non-empty bin holds one value), which clipped int4
// weights to a fraction of their range. A group with fewer than
// 2·L·kEntropyValuesPerBin values (m < 2) has too few values for any histogram the
// search can use: it keeps its whole range (what absmax, or minmax when two-sided,
// gives), and the callers report how many groups did.

#include <cstdint>
#include <span>
#include <string_view>

#include "calib/histogram.h"
#include "quant/scale.h"

namespace qs {

inline constexpr int kMseCandidates = 200;

struct ClippingTarget {
    QType qtype = QType::Int8;
    ScaleOptions options;
    bool symmetric = true;
};

// Points of the MSE search: row g of a [groups, width] matrix holds group g's
// points and their weights (0 pads a short row).
struct MsePoints {
    int64_t groups = 0;
    int64_t width = 0;
    std::vector<float> points;   // groups × width
    std::vector<double> weights; // groups × width
    std::vector<float> min;      // per group: the data's min and max
    std::vector<float> max;

    MsePoints(int64_t groups, int64_t width);
    // Fills row g with values (weight 1) or with a histogram's centres and counts.
    void setValues(int64_t g, std::span<const float> values, float min, float max);
    void setHistogram(int64_t g, const Histogram& h, float min, float max);
};

// The MSE-minimising candidate range of every group.
std::vector<Range> mseRanges(const MsePoints& points, const ClippingTarget& target, std::string_view tensorName);

// Quantization levels the entropy search merges into: symmetric — positive levels
// (signed integers −qmin of the grid: 128 for int8, 127 with narrow range; unsigned qmax + 1; binary and ternary 1;
// float formats and nf4 the count of their positive finite values: e4m3fn 126,
// e5m2 123, e2m1 7, nf4 8); two-sided — all levels (integers qmax − qmin + 1:
// 256 for int8; binary 2, ternary 3; float formats and nf4 their finite values).
int entropyLevels(QType t, bool symmetric, bool narrowRange);

// Values per histogram bin, on average over a group's whole range, that the entropy
// search asks for.
inline constexpr int64_t kEntropyValuesPerBin = 16;

// Bins of the entropy histogram of a group of `values` values: L·m with
// m = min(maxBins / L, values / (L·kEntropyValuesPerBin)); 0 when m < 2 (too few
// values: the group keeps its whole range).
size_t entropyBins(int64_t values, int levels, size_t maxBins);

// The histogram with every `factor` consecutive bins merged into one; the last
// bin is padded with empty bins (its upper edge moves out accordingly).
Histogram mergedBins(const Histogram& h, size_t factor);

// Entropy search on a histogram of |x| (symmetric: h.lo must be 0) or of x (two-sided).
Range entropyRange(const Histogram& h, bool symmetric, int levels);

} // namespace qs
