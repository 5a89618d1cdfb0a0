#pragma once
// Histograms of fp32 data and exact percentiles.
//
// Fixed-range histograms (buildHistogram): `bins` equal bins over [lo, hi];
// the bin of v is binOf(v) below, in float arithmetic exactly as written, so a
// plain loop reproduces it bit for bit.
//
// Growing histograms (GrowingHistogram, for streaming observers): bins of width
// w = 2^e on both sides of zero, 2·B bins covering [−B·w, B·w). A value v goes
// to bin B + floor(v / w) when v >= 0 and B − 1 − floor(−v / w) when v < 0
// (computed in double, where dividing by 2^e is exact). When a batch holds a
// magnitude >= B·w, e grows to the smallest e' with B·2^e' above it and every
// old bin j on each side merges into bin j >> (e' − e): since w' = 2^(e'−e)·w,
// floor(v / w') = floor(floor(v / w) / 2^(e'−e)), so the old counts land exactly
// where a from-scratch histogram at the new width would put their values.
// At least half of each side's bins are in use after a batch.

#include <cstdint>
#include <span>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace qs {

// What a histogram counts: x itself (two-sided) or |x| (symmetric methods).
enum class HistogramOf : uint8_t { Values, Magnitudes };

struct Histogram {
    double lo = 0;               // lower edge of bin 0
    double hi = 0;               // upper edge of the last bin
    std::vector<int64_t> counts; // one per bin

    size_t bins() const { return counts.size(); }
    double edge(size_t i) const { return lo + (hi - lo) * double(i) / double(counts.size()); }
    double center(size_t i) const { return lo + (hi - lo) * (double(i) + 0.5) / double(counts.size()); }
    int64_t total() const;
};

// The bin rule of buildHistogram, all in float: scale = float(bins) / (hi − lo) (0 when
// hi <= lo), t = (v − lo)·scale clamped to [0, bins − 1], bin = int32(t) (truncation).
struct HistogramBinning {
    float lo;
    float scale;
    int32_t last;
    HistogramBinning(float lo, float hi, size_t bins);
    int32_t operator()(float v) const
    {
        float t = (v - lo) * scale;
        t = t > 0 ? t : 0;
        t = t < float(last) ? t : float(last);
        return int32_t(t);
    }
};

// Histogram of x (or |x|) with `bins` bins over [lo, hi], in parallel.
Histogram buildHistogram(std::span<const float> x, HistogramOf what, float lo, float hi, size_t bins = 2048);

// np.percentile(v, p) with its default linear interpolation, where v is x or |x|:
// with r = (p/100)·(n−1), k = floor(r), t = r − k, a and b the k-th and (k+1)-th
// smallest values (b = a at the end), d = float(b − a):
// a + d·t when t < 0.5, b − d·(1 − t) otherwise, in double (what NumPy computes for
// float32 input). Exact, no sort: small inputs are selected in a copy; large ones
// by a sample bracket (one pass gathers the few elements that can hold ranks k and
// k + 1, Floyd–Rivest style) or, when the bracket misses, a radix select on the
// float bit patterns (two passes). x must be finite and non-empty; p in [0, 100].
double exactPercentile(std::span<const float> x, HistogramOf what, double p);

// The percentile p of the values a histogram counts, np.percentile-style (linear
// interpolation at rank (p/100)·(n−1)), where the c elements of a bin are taken to
// sit at its lo + (j + 0.5)·width/c, j = 0..c−1: exact only up to the bin width.
double histogramPercentile(const Histogram& h, double p);

class GrowingHistogram {
public:
    explicit GrowingHistogram(int binsPerSide = 2048);

    // Adds a batch of finite values, growing the range first when needed.
    // Throws Error for a NaN or an Inf.
    void add(std::span<const float> x);
    // The same for a caller that has already checked the batch: every value is
    // finite and |x| <= absMax (groupStatistics gives both). Saves a pass.
    void add(std::span<const float> x, float absMax);

    int binsPerSide() const { return binsPerSide_; }
    bool empty() const { return total_ == 0; }
    int64_t total() const { return total_; }
    int exponent() const { return exponent_; } // the bin width is 2^exponent
    double binWidth() const;
    double range() const { return binWidth() * binsPerSide_; }     // the histogram covers [−range, range)
    const std::vector<int64_t>& counts() const { return counts_; } // 2·binsPerSide, from −range up

    // The counts as a Histogram over [−range, range).
    Histogram values() const;
    // |x| folded onto [0, range): bin j = counts[B + j] + counts[B − 1 − j].
    Histogram magnitudes() const;

    nlohmann::json toJson() const;
    static GrowingHistogram fromJson(const nlohmann::json& j);

    // The bin of v at exponent e (the rule in the header comment).
    static int64_t binOf(float v, int exponent, int binsPerSide);
    // The smallest exponent e with binsPerSide·2^e > magnitude.
    static int exponentFor(double magnitude, int binsPerSide);

private:
    void growTo(int exponent);

    int binsPerSide_;
    int exponent_ = 0;
    int64_t total_ = 0;
    std::vector<int64_t> counts_;
};

} // namespace qs
