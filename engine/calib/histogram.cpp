#include "calib/histogram.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <limits>
#include <optional>

#include <nlohmann/json.hpp>
#include <tbb/blocked_range.h>
#include <tbb/combinable.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_reduce.h>
#include <tbb/task_arena.h>

#include "core/error.h"
#include "core/vector_clones.h"

namespace qs {

namespace {

constexpr int64_t kChunk = int64_t(1) << 16;

// Calls f(begin, end) over [begin, end) read as four interleaved streams
// (quarters, a block of each in turn): more loads in flight than one stream keeps.
template <class F> void interleaved(int64_t begin, int64_t end, F&& f)
{
    constexpr int64_t block = 256;
    const int64_t quarter = (end - begin) / 4 / block * block;
    for (int64_t j = 0; j < quarter; j += block)
        for (int64_t q = 0; q < 4; ++q)
            f(begin + q * quarter + j, begin + q * quarter + j + block);
    f(begin + 4 * quarter, end);
}

// Runs body(begin, end, counters) over chunks of [0, n) in parallel, each thread
// counting into its own `bins` counters of type T, and returns their sums.
template <class T, class Body> std::vector<int64_t> countInParallel(int64_t n, size_t bins, Body&& body)
{
    if (n <= kChunk) { // one chunk: no per-thread counters to allocate and fold
        std::vector<T> c(bins, 0);
        interleaved(0, n, [&](int64_t b, int64_t e) { body(b, e, c.data()); });
        return std::vector<int64_t>(c.begin(), c.end());
    }
    tbb::combinable<std::vector<T>> local([bins] { return std::vector<T>(bins, 0); });
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, kChunk), [&](const tbb::blocked_range<int64_t>& r) {
        T* c = local.local().data();
        interleaved(r.begin(), r.end(), [&](int64_t b, int64_t e) { body(b, e, c); });
    });
    std::vector<int64_t> total(bins, 0);
    local.combine_each([&](const std::vector<T>& c) {
        for (size_t i = 0; i < bins; ++i)
            total[i] += int64_t(c[i]);
    });
    return total;
}

// 32-bit counters while no counter can overflow, 64-bit beyond.
template <class Body> std::vector<int64_t> count(int64_t n, size_t bins, Body&& body)
{
    if (n < (int64_t(1) << 32))
        return countInParallel<uint32_t>(n, bins, body);
    return countInParallel<int64_t>(n, bins, body);
}

// Adds `copies` interleaved sub-histograms of `bins` counters each into one.
std::vector<int64_t> foldCopies(const std::vector<int64_t>& c, size_t bins, size_t copies)
{
    std::vector<int64_t> out(bins, 0);
    for (size_t k = 0; k < copies; ++k)
        for (size_t b = 0; b < bins; ++b)
            out[b] += c[k * bins + b];
    return out;
}

// Float bit patterns mapped to unsigned keys that sort like the values (of |x|
// for magnitudes). −0 sorts just below +0, which does not change any value.
uint32_t keyOf(float v, HistogramOf what)
{
    const uint32_t bits = std::bit_cast<uint32_t>(v);
    if (what == HistogramOf::Magnitudes)
        return bits & 0x7fffffffu;
    return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

float valueOfKey(uint32_t key, HistogramOf what)
{
    if (what == HistogramOf::Magnitudes)
        return std::bit_cast<float>(key);
    return std::bit_cast<float>((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
}

// The bucket holding the element of rank `rank` in counts, and how many elements lie below it.
std::pair<size_t, int64_t> bucketOfRank(const std::vector<int64_t>& counts, int64_t rank)
{
    int64_t below = 0;
    for (size_t b = 0; b < counts.size(); ++b) {
        if (rank < below + counts[b])
            return {b, below};
        below += counts[b];
    }
    throw Error("percentile: rank " + std::to_string(rank) + " beyond the data");
}

// The order statistics k and k1 (k1 = k or k + 1) of x (or |x|), found as
// Floyd and Rivest do: a deterministic sample of evenly spaced runs brackets
// them with a margin of a few standard deviations of the sample rank; one pass
// counts the elements below the bracket and gathers those inside it, and an
// exact selection among the gathered few finishes. Empty when the bracket
// missed or holds too many elements (then the caller falls back).
std::optional<std::pair<float, float>> selectBySample(std::span<const float> x, HistogramOf what, int64_t k, int64_t k1)
{
    const int64_t n = int64_t(x.size());
    const bool magnitudes = what == HistogramOf::Magnitudes;
    const auto value = [magnitudes](float v) { return magnitudes ? std::abs(v) : v; };
    // The sample is taken as runs of 256 consecutive elements spread evenly over
    // the data: whole cache lines, so that sampling costs little next to the pass.
    constexpr int64_t run = 256;
    const int64_t runs = std::min<int64_t>(n / (16 * run), 1024);
    const int64_t s = runs * run;
    std::vector<float> sample(static_cast<size_t>(s));
    for (int64_t j = 0; j < runs; ++j) {
        const int64_t start = j * (n / runs) + (j * (n % runs)) / runs;
        for (int64_t e = 0; e < run; ++e)
            sample[size_t(j * run + e)] = value(x[size_t(start + e)]);
    }
    const double margin = 4.0 * std::sqrt(double(s)) + 16.0;
    const int64_t loRank = int64_t(std::floor(double(k) * double(s) / double(n) - margin));
    const int64_t hiRank = int64_t(std::ceil(double(k1 + 1) * double(s) / double(n) + margin));
    float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
    auto from = sample.begin();
    if (loRank >= 0) {
        std::nth_element(sample.begin(), sample.begin() + loRank, sample.end());
        lo = sample[size_t(loRank)];
        from = sample.begin() + loRank; // the hi rank lies in the upper part
    }
    if (hiRank < s) {
        std::nth_element(from, sample.begin() + hiRank, sample.end());
        hi = sample[size_t(hiRank)];
    }
    const int64_t budget = std::max<int64_t>(int64_t(1) << 20, n / 16);

    struct Part {
        int64_t below = 0;
        std::vector<float> inside;
    };
    tbb::combinable<Part> parts;
    std::atomic<bool> overflow = false;
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, kChunk), [&](const tbb::blocked_range<int64_t>& r) {
        Part& part = parts.local();
        interleaved(r.begin(), r.end(), [&](int64_t begin, int64_t end) {
            constexpr int64_t block = 32;
            for (int64_t i = begin; i < end; i += block) {
                const int64_t m = std::min(block, end - i);
                const float* p = x.data() + i;
                int64_t below = 0;
                uint32_t any = 0;
                for (int64_t j = 0; j < m; ++j) {
                    const float v = value(p[j]);
                    below += v < lo;
                    any |= uint32_t(v >= lo) & uint32_t(v <= hi);
                }
                part.below += below;
                if (!any)
                    continue;
                for (int64_t j = 0; j < m; ++j) {
                    const float v = value(p[j]);
                    if (v >= lo && v <= hi)
                        part.inside.push_back(v);
                }
                if (int64_t(part.inside.size()) > budget) {
                    overflow = true;
                    return;
                }
            }
        });
    });
    if (overflow)
        return std::nullopt;
    int64_t below = 0;
    std::vector<float> inside;
    parts.combine_each([&](const Part& part) {
        below += part.below;
        inside.insert(inside.end(), part.inside.begin(), part.inside.end());
    });
    if (below > k || below + int64_t(inside.size()) <= k1)
        return std::nullopt;
    const auto at = inside.begin() + (k - below);
    std::nth_element(inside.begin(), at, inside.end());
    const float a = *at;
    const float b = k1 > k ? *std::min_element(at + 1, inside.end()) : a;
    return std::pair{a, b};
}

double interpolate(double a, double b, double t)
{
    // NumPy's _lerp for float32 data: the difference is a float32, the rest double.
    const double d = double(float(b - a));
    return t < 0.5 ? a + d * t : b - d * (1 - t);
}

} // namespace

int64_t Histogram::total() const
{
    int64_t n = 0;
    for (int64_t c : counts)
        n += c;
    return n;
}

HistogramBinning::HistogramBinning(float lo_, float hi_, size_t bins)
    : lo(lo_), scale(hi_ > lo_ ? float(bins) / (hi_ - lo_) : 0.0f), last(int32_t(bins) - 1)
{
}

Histogram buildHistogram(std::span<const float> x, HistogramOf what, float lo, float hi, size_t bins)
{
    if (bins < 1 || bins > (size_t(1) << 24))
        throw Error("histogram: " + std::to_string(bins) + " bins; expected 1 to 16777216");
    const HistogramBinning bin(lo, hi, bins);
    const bool magnitudes = what == HistogramOf::Magnitudes;
    Histogram h;
    h.lo = lo;
    h.hi = hi;
    // Bin indices are computed a block at a time (this vectorises), then counted
    // into eight interleaved copies so that equal neighbours do not wait on each
    // other's increments.
    constexpr size_t copies = 8;
    const auto body = [&](int64_t begin, int64_t end, auto* c) {
        constexpr int64_t block = 256;
        int32_t idx[block];
        for (int64_t i = begin; i < end; i += block) {
            const int64_t m = std::min(block, end - i);
            const float* p = x.data() + i;
            if (magnitudes)
                for (int64_t k = 0; k < m; ++k)
                    idx[k] = bin(std::abs(p[k]));
            else
                for (int64_t k = 0; k < m; ++k)
                    idx[k] = bin(p[k]);
            int64_t k = 0;
            for (; k + int64_t(copies) <= m; k += int64_t(copies))
                for (size_t j = 0; j < copies; ++j)
                    ++c[j * bins + size_t(idx[k + int64_t(j)])];
            for (; k < m; ++k)
                ++c[size_t(idx[k])];
        }
    };
    h.counts = foldCopies(count(int64_t(x.size()), copies * bins, body), bins, copies);
    return h;
}

double exactPercentile(std::span<const float> x, HistogramOf what, double p)
{
    const int64_t n = int64_t(x.size());
    if (n == 0)
        throw Error("percentile of an empty tensor");
    if (!(p >= 0 && p <= 100))
        throw Error("percentile " + std::to_string(p) + " is outside [0, 100]");
    const double rank = (p / 100.0) * double(n - 1);
    const int64_t k = std::min<int64_t>(int64_t(std::floor(rank)), n - 1);
    const int64_t k1 = std::min(k + 1, n - 1);
    const double t = rank - double(k);

    if (n <= (int64_t(1) << 15)) {
        std::vector<float> v(x.begin(), x.end());
        if (what == HistogramOf::Magnitudes)
            for (float& e : v)
                e = std::abs(e);
        std::nth_element(v.begin(), v.begin() + k, v.end());
        const float a = v[size_t(k)];
        const float b = k1 > k ? *std::min_element(v.begin() + k1, v.end()) : a;
        return interpolate(a, b, t);
    }

    if (const auto ab = selectBySample(x, what, k, k1))
        return interpolate(ab->first, ab->second, t);

    // The sample missed (ties, adversarial order): a radix select on the keys.
    // Pass 1: the top 16 bits of the keys; pass 2: the low 16 bits of the keys
    // in the (at most two) buckets that hold ranks k and k + 1.
    const std::vector<int64_t> top = foldCopies(count(n, 2 * 65536,
                                                      [&](int64_t begin, int64_t end, auto* c) {
                                                          constexpr int64_t block = 256;
                                                          uint32_t idx[block];
                                                          for (int64_t i = begin; i < end; i += block) {
                                                              const int64_t m = std::min(block, end - i);
                                                              for (int64_t k = 0; k < m; ++k)
                                                                  idx[k] = keyOf(x[size_t(i + k)], what) >> 16;
                                                              int64_t k = 0;
                                                              for (; k + 2 <= m; k += 2) {
                                                                  ++c[idx[k]];
                                                                  ++c[65536 + idx[k + 1]];
                                                              }
                                                              for (; k < m; ++k)
                                                                  ++c[idx[k]];
                                                          }
                                                      }),
                                                65536, 2);
    const auto [bucketA, belowA] = bucketOfRank(top, k);
    const auto [bucketB, belowB] = bucketOfRank(top, k1);
    const std::vector<int64_t> low =
        count(n, 2 * 65536,
              [&, bucketA = uint32_t(bucketA), bucketB = uint32_t(bucketB)](int64_t begin, int64_t end, auto* c) {
                  // Few elements fall in the two buckets: test a block at a time
                  // (vectorised) and only walk the blocks that hold one.
                  constexpr int64_t block = 256;
                  uint32_t keys[block];
                  for (int64_t i = begin; i < end; i += block) {
                      const int64_t m = std::min(block, end - i);
                      uint32_t hit = 0;
                      for (int64_t k = 0; k < m; ++k) {
                          keys[k] = keyOf(x[size_t(i + k)], what);
                          hit |= uint32_t((keys[k] >> 16) == bucketA) | uint32_t((keys[k] >> 16) == bucketB);
                      }
                      if (!hit)
                          continue;
                      for (int64_t k = 0; k < m; ++k) {
                          if ((keys[k] >> 16) == bucketA)
                              ++c[keys[k] & 0xffffu];
                          else if ((keys[k] >> 16) == bucketB)
                              ++c[65536 + (keys[k] & 0xffffu)];
                      }
                  }
              });
    const std::vector<int64_t> lowA(low.begin(), low.begin() + 65536);
    const std::vector<int64_t> lowB(low.begin() + 65536, low.end());
    const uint32_t keyA = uint32_t(bucketA << 16) | uint32_t(bucketOfRank(lowA, k - belowA).first);
    const uint32_t keyB = bucketB == bucketA
                              ? uint32_t(bucketB << 16) | uint32_t(bucketOfRank(lowA, k1 - belowA).first)
                              : uint32_t(bucketB << 16) | uint32_t(bucketOfRank(lowB, k1 - belowB).first);
    return interpolate(valueOfKey(keyA, what), valueOfKey(keyB, what), t);
}

double histogramPercentile(const Histogram& h, double p)
{
    const int64_t n = h.total();
    if (n == 0)
        throw Error("percentile of an empty histogram");
    const double rank = (std::clamp(p, 0.0, 100.0) / 100.0) * double(n - 1);
    const int64_t k = std::min<int64_t>(int64_t(std::floor(rank)), n - 1);
    const double width = (h.hi - h.lo) / double(h.bins());
    const auto valueOfRank = [&](int64_t r) {
        const auto [bin, below] = bucketOfRank(h.counts, r);
        return h.lo + width * (double(bin) + (double(r - below) + 0.5) / double(h.counts[bin]));
    };
    return interpolate(valueOfRank(k), valueOfRank(std::min(k + 1, n - 1)), rank - double(k));
}

namespace {

constexpr int64_t kBinBlock = 256;
constexpr int kSpareZeroCounters = 8;
constexpr int64_t kMinPiece = int64_t(1) << 14;

// The bins of n ≤ kBinBlock values, with the power-of-two 1/width `inverseWidth`:
// B + ⌊v/width⌋ for v > 0, B − 1 − ⌊−v/width⌋ for v < 0. Zeros (half of a ReLU's
// outputs) get 2·B + k mod 8: spare counters taken in turn and added to bin B
// afterwards, because increments of one counter wait on each other. A loop
// without branches, vectorised: binning used to cost more than the model's
// convolutions on small activations.
QS_VECTOR_CLONES void binBlock(const float* __restrict x, int64_t n, float inverseWidth, int32_t B,
                               uint32_t* __restrict idx)
{
    for (int64_t k = 0; k < n; ++k) {
        const float v = x[k];
        const int32_t t = int32_t(std::fabs(v) * inverseWidth);
        idx[k] = uint32_t(v > 0 ? B + t : (v < 0 ? B - 1 - t : 2 * B + int32_t(k & (kSpareZeroCounters - 1))));
    }
}

} // namespace

GrowingHistogram::GrowingHistogram(int binsPerSide) : binsPerSide_(binsPerSide)
{
    if (binsPerSide < 1 || binsPerSide > (1 << 22))
        throw Error("growing histogram: " + std::to_string(binsPerSide) + " bins per side; expected 1 to 4194304");
    counts_.reserve(2 * size_t(binsPerSide) + kSpareZeroCounters);
    counts_.assign(2 * size_t(binsPerSide), 0);
}

double GrowingHistogram::binWidth() const
{
    return std::ldexp(1.0, exponent_);
}

int64_t GrowingHistogram::binOf(float v, int exponent, int binsPerSide)
{
    const double u = double(v) * std::ldexp(1.0, -exponent);
    return v >= 0 ? binsPerSide + int64_t(u) : binsPerSide - 1 - int64_t(-u);
}

int GrowingHistogram::exponentFor(double magnitude, int binsPerSide)
{
    if (!(magnitude > 0))
        return -160; // any width holds zeros; start below every float so the first real data sets it
    int e = std::ilogb(magnitude) - std::ilogb(double(binsPerSide));
    while (std::ldexp(double(binsPerSide), e) <= magnitude)
        ++e;
    while (std::ldexp(double(binsPerSide), e - 1) > magnitude)
        --e;
    return e;
}

void GrowingHistogram::growTo(int exponent)
{
    const int shift = exponent - exponent_;
    std::vector<int64_t> merged(counts_.size(), 0);
    const int64_t B = binsPerSide_;
    for (int64_t j = 0; j < B; ++j) {
        const int64_t to = shift >= 62 ? 0 : (j >> shift);
        merged[size_t(B + to)] += counts_[size_t(B + j)];
        merged[size_t(B - 1 - to)] += counts_[size_t(B - 1 - j)];
    }
    counts_ = std::move(merged);
    exponent_ = exponent;
}

void GrowingHistogram::add(std::span<const float> x)
{
    if (x.empty())
        return;
    // The largest magnitude, and whether every value is finite, over chunks in parallel.
    struct Scan {
        float absMax = 0;
        bool finite = true;
    };
    constexpr int64_t kScanChunk = 1 << 16;
    const auto scan = tbb::parallel_reduce(
        tbb::blocked_range<size_t>(0, x.size(), kScanChunk), Scan{},
        [&](const tbb::blocked_range<size_t>& r, Scan acc) {
            for (size_t i = r.begin(); i < r.end(); ++i) {
                const float a = std::abs(x[i]);
                acc.absMax = a > acc.absMax ? a : acc.absMax;
                acc.finite &= a <= std::numeric_limits<float>::max(); // false for NaN too
            }
            return acc;
        },
        [](Scan a, const Scan& b) {
            return Scan{std::max(a.absMax, b.absMax), a.finite && b.finite};
        });
    if (!scan.finite)
        throw Error("growing histogram: the batch holds NaN or Inf");
    add(x, scan.absMax);
}

void GrowingHistogram::add(std::span<const float> x, float absMax)
{
    if (x.empty())
        return;
    const int needed = exponentFor(absMax, binsPerSide_);
    if (total_ == 0)
        exponent_ = needed;
    else if (needed > exponent_)
        growTo(needed);
    const int64_t B = binsPerSide_;
    // With 2^−e a normal float, float products are exact (or below 1, when
    // subnormal), so binBlock gives binOf's bins; otherwise (widths beyond
    // 2^±126) binOf's products in double, value by value.
    const bool floatBins = exponent_ >= -126 && exponent_ <= 126;
    const float inverseWidth = floatBins ? std::ldexp(1.0f, -exponent_) : 0.0f;
    const double inverseWidthWide = std::ldexp(1.0, -exponent_);
    // Counters come 2·B + kSpareZeroCounters at a time: the bins, then the
    // spare counters of binBlock's zeros.
    const size_t bins = 2 * size_t(B);
    auto countInto = [&](int64_t begin, int64_t end, auto* c) {
        if (!floatBins) {
            for (int64_t i = begin; i < end; ++i) {
                const float v = x[size_t(i)];
                const double u = double(v) * inverseWidthWide;
                ++c[size_t(v >= 0 ? B + int64_t(u) : B - 1 - int64_t(-u))];
            }
            return;
        }
        uint32_t idx[kBinBlock];
        for (int64_t i = begin; i < end; i += kBinBlock) {
            const int64_t m = std::min(kBinBlock, end - i);
            binBlock(x.data() + i, m, inverseWidth, int32_t(B), idx);
            for (int64_t k = 0; k < m; ++k)
                ++c[idx[k]];
        }
    };
    // Pieces of at least kMinPiece values, one per thread: the first counts
    // straight into the totals (with room for the spare counters), the others
    // into copies added afterwards. Clearing and adding a copy cost about what
    // counting a few thousand values does, so small activations take one piece.
    const int64_t n = int64_t(x.size());
    // (And pieces of fewer than 2^31 values, which 32-bit copies count.)
    const int64_t pieces = std::max(
        std::clamp<int64_t>(n / kMinPiece, 1, std::max(1, tbb::this_task_arena::max_concurrency())), (n >> 31) + 1);
    counts_.resize(bins + kSpareZeroCounters, 0);
    if (pieces == 1) {
        countInto(0, n, counts_.data());
    } else {
        std::vector<std::vector<uint32_t>> copies(size_t(pieces - 1));
        tbb::parallel_for(
            tbb::blocked_range<int64_t>(0, pieces, 1),
            [&](const tbb::blocked_range<int64_t>& r) {
                for (int64_t p = r.begin(); p < r.end(); ++p) {
                    const int64_t begin = n * p / pieces, end = n * (p + 1) / pieces;
                    if (p == 0) {
                        countInto(begin, end, counts_.data());
                    } else {
                        std::vector<uint32_t>& c = copies[size_t(p - 1)];
                        c.assign(counts_.size(), 0);
                        countInto(begin, end, c.data());
                    }
                }
            },
            tbb::simple_partitioner());
        for (const std::vector<uint32_t>& c : copies)
            for (size_t i = 0; i < c.size(); ++i)
                counts_[i] += c[i];
    }
    for (size_t k = bins; k < counts_.size(); ++k)
        counts_[size_t(B)] += counts_[k];
    counts_.resize(bins);
    total_ += int64_t(x.size());
}

Histogram GrowingHistogram::values() const
{
    return Histogram{-range(), range(), counts_};
}

Histogram GrowingHistogram::magnitudes() const
{
    const size_t B = size_t(binsPerSide_);
    Histogram h{0, range(), std::vector<int64_t>(B, 0)};
    for (size_t j = 0; j < B; ++j)
        h.counts[j] = counts_[B + j] + counts_[B - 1 - j];
    return h;
}

nlohmann::json GrowingHistogram::toJson() const
{
    return {{"bins_per_side", binsPerSide_}, {"exponent", exponent_}, {"total", total_}, {"counts", counts_}};
}

GrowingHistogram GrowingHistogram::fromJson(const nlohmann::json& j)
{
    try {
        GrowingHistogram h(j.at("bins_per_side").get<int>());
        h.exponent_ = j.at("exponent").get<int>();
        h.total_ = j.at("total").get<int64_t>();
        h.counts_ = j.at("counts").get<std::vector<int64_t>>();
        int64_t sum = 0;
        for (int64_t c : h.counts_) {
            if (c < 0)
                throw Error("a negative count");
            sum += c;
        }
        if (h.counts_.size() != 2 * size_t(h.binsPerSide_) || sum != h.total_)
            throw Error("counts do not match bins_per_side and total");
        return h;
    } catch (const nlohmann::json::exception& e) {
        throw Error(std::string("growing histogram JSON: ") + e.what());
    } catch (const Error& e) {
        throw Error(std::string("growing histogram JSON: ") + e.what());
    }
}

} // namespace qs
