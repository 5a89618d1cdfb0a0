#include "calib/statistics.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "core/group_runs.h"
#include "core/error.h"
#include "core/vector_clones.h"

namespace qs {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int64_t kSerialElements = int64_t(1) << 14;

struct Summary {
    float min = kInf;
    float max = -kInf;
    double sumSquares = 0;
    float probe = 0; // sum of v·0: NaN as soon as a NaN or an Inf was seen

    void merge(const Summary& o)
    {
        min = std::min(min, o.min);
        max = std::max(max, o.max);
        sumSquares += o.sumSquares;
        probe += o.probe;
    }
};

// Squares are summed in float per lane for kSquaresPerFlush vectors (64
// squares a lane in a long run, 16 in a short one) and then added to the
// lane's double: converting every square to double took more than half the
// time of the whole summary. The sum of squares keeps a relative error below
// about 64 float roundings (4e-6), typically 1e-7; it only feeds `rms`
// ranges. A sum of squares that is not finite is the run's probe for NaN and
// Inf (a square past float's range, |v| > 1.8e19, is summed again in double).
constexpr int64_t kSquaresPerFlush = 16;

// The finishing touches of a run's summary with sums of squares: a lane's float
// sum that overflowed makes the run sum again in double; the probe is the sum's.
void finishSquares(Summary& s, const float* p, int64_t n)
{
    if (!std::isfinite(s.sumSquares)) {
        double exact = 0;
        for (int64_t i = 0; i < n; ++i)
            exact += double(p[i]) * double(p[i]);
        s.sumSquares = exact;
    }
    s.probe += float(s.sumSquares * 0.0);
}

// A short run: 16 independent lanes, nothing reassociated, so the result does
// not depend on the machine (its AVX2 clone gives the same bits). v·0 is NaN
// exactly for NaN and Inf.
template <bool SumSquares> QS_VECTOR_CLONES Summary summarizeLanes(const float* __restrict p, int64_t n)
{
    constexpr int64_t W = 16;
    Summary s;
    int64_t i = 0;
    if (n >= W) {
        float mn[W], mx[W], probe[W], partial[W];
        double ss[W];
        for (int64_t k = 0; k < W; ++k) {
            mn[k] = kInf;
            mx[k] = -kInf;
            probe[k] = partial[k] = 0;
            ss[k] = 0;
        }
        int64_t sinceFlush = 0;
        for (; i + W <= n; i += W) {
            const float* __restrict v = p + i;
#pragma GCC unroll 1 // left to the vectoriser: unrolled first, the lanes stayed scalar
            for (int64_t k = 0; k < W; ++k) {
                mn[k] = v[k] < mn[k] ? v[k] : mn[k];
                mx[k] = v[k] > mx[k] ? v[k] : mx[k];
                if constexpr (SumSquares)
                    partial[k] += v[k] * v[k];
                else
                    probe[k] += v[k] * 0.0f;
            }
            if (SumSquares && ++sinceFlush == kSquaresPerFlush) {
                for (int64_t k = 0; k < W; ++k) {
                    ss[k] += double(partial[k]);
                    partial[k] = 0;
                }
                sinceFlush = 0;
            }
        }
        for (int64_t k = 0; k < W; ++k) {
            s.min = std::min(s.min, mn[k]);
            s.max = std::max(s.max, mx[k]);
            s.probe += probe[k];
            s.sumSquares += ss[k] + double(partial[k]);
        }
    }
    for (; i < n; ++i) {
        const float v = p[i];
        s.min = v < s.min ? v : s.min;
        s.max = v > s.max ? v : s.max;
        if constexpr (SumSquares)
            s.sumSquares += double(v) * double(v);
        else
            s.probe += v * 0.0f;
    }
    if constexpr (SumSquares)
        finishSquares(s, p, n);
    return s;
}

// One contiguous run. A long run is read as four quarters at once — four
// independent memory streams keep more loads in flight than one — folded
// element-wise over W lanes, then into per-lane accumulators; every loop is
// element-wise, so it vectorises without reassociating anything (and its AVX2
// clone gives the same bits). Squares as in summarizeLanes.
template <bool SumSquares> QS_VECTOR_CLONES Summary summarize(const float* __restrict p, int64_t n)
{
    constexpr int64_t W = 64;
    if (n < 64 * W)
        return summarizeLanes<SumSquares>(p, n);
    const int64_t quarter = n / 4 / W * W;
    float mn[W], mx[W], probe[W], partial[W];
    double ss[W];
    for (int64_t k = 0; k < W; ++k) {
        mn[k] = kInf;
        mx[k] = -kInf;
        probe[k] = 0;
        partial[k] = 0;
        ss[k] = 0;
    }
    int64_t sinceFlush = 0;
    for (int64_t i = 0; i < quarter; i += W) {
        const float* __restrict a = p + i;
        const float* __restrict b = a + quarter;
        const float* __restrict c = b + quarter;
        const float* __restrict d = c + quarter;
        for (int64_t k = 0; k < W; ++k) {
            const float lo = std::min(std::min(a[k], b[k]), std::min(c[k], d[k]));
            const float hi = std::max(std::max(a[k], b[k]), std::max(c[k], d[k]));
            mn[k] = lo < mn[k] ? lo : mn[k];
            mx[k] = hi > mx[k] ? hi : mx[k];
            if constexpr (!SumSquares)
                probe[k] += (a[k] * 0.0f + b[k] * 0.0f) + (c[k] * 0.0f + d[k] * 0.0f);
        }
        if constexpr (SumSquares) {
            for (int64_t k = 0; k < W; ++k)
                partial[k] += (a[k] * a[k] + b[k] * b[k]) + (c[k] * c[k] + d[k] * d[k]);
            if (++sinceFlush == kSquaresPerFlush) {
                for (int64_t k = 0; k < W; ++k) {
                    ss[k] += double(partial[k]);
                    partial[k] = 0;
                }
                sinceFlush = 0;
            }
        }
    }
    for (int64_t k = 0; k < W; ++k)
        ss[k] += double(partial[k]);
    Summary s = summarizeLanes<SumSquares>(p + 4 * quarter, n - 4 * quarter);
    for (int64_t k = 0; k < W; ++k) {
        s.min = std::min(s.min, mn[k]);
        s.max = std::max(s.max, mx[k]);
        s.probe += probe[k];
        s.sumSquares += ss[k];
    }
    if constexpr (SumSquares)
        finishSquares(s, p, n);
    return s;
}

Summary summarize(const float* p, int64_t n, bool sumSquares)
{
    return sumSquares ? summarize<true>(p, n) : summarize<false>(p, n);
}

// A group that is one long span: fixed pieces summarised in parallel and merged
// in order, so the sum of squares does not depend on the thread count. A piece
// is 64 KiB of float32, a few microseconds of reading: an activation of a small
// model at batch 1 (tens to hundreds of thousands of values) is split too,
// where it used to keep every other thread waiting.
Summary summarizeSpan(const float* p, int64_t n, bool sumSquares)
{
    constexpr int64_t piece = int64_t(1) << 14;
    if (n <= 2 * piece)
        return summarize(p, n, sumSquares);
    const int64_t pieces = (n + piece - 1) / piece;
    std::vector<Summary> parts(static_cast<size_t>(pieces));
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, pieces), [&](const tbb::blocked_range<int64_t>& r) {
        for (int64_t k = r.begin(); k != r.end(); ++k)
            parts[size_t(k)] = summarize(p + k * piece, std::min(piece, n - k * piece), sumSquares);
    });
    Summary s;
    for (const Summary& part : parts)
        s.merge(part);
    return s;
}

// Per-group accumulators of one block of rows.
struct Partial {
    std::vector<float> min, max;
    std::vector<double> sumSquares;
    float probe = 0;

    explicit Partial(int64_t groups, bool withSumSquares)
        : min(size_t(groups), kInf), max(size_t(groups), -kInf), sumSquares(withSumSquares ? size_t(groups) : 0, 0.0)
    {
    }
};

// Rows [r0, r1) of a layout where every element of a row is its own group
// (per-channel on the last axis, ...). Columns are taken a slice at a time so
// that the slice's accumulators stay in L1, and up to four rows that share
// their groups are folded before touching the accumulators. The loops are
// element-wise and vectorise; v·0 is NaN exactly for NaN and Inf.
void accumulateColumns(const float* x, const GroupRuns& runs, int64_t r0, int64_t r1, Partial& out, bool withSumSquares)
{
    constexpr int64_t slice = 1024;
    std::vector<int64_t> bases(size_t(r1 - r0));
    for (int64_t r = r0; r < r1; ++r)
        bases[size_t(r - r0)] = runs.rowGroup(r);
    float probe[slice] = {};
    for (int64_t c0 = 0; c0 < runs.rowLength; c0 += slice) {
        const int64_t w = std::min(slice, runs.rowLength - c0);
        for (int64_t r = r0; r < r1;) {
            const int64_t base = bases[size_t(r - r0)];
            float* __restrict mn = out.min.data() + base + c0;
            float* __restrict mx = out.max.data() + base + c0;
            double* __restrict ss = withSumSquares ? out.sumSquares.data() + base + c0 : nullptr;
            const float* __restrict a = x + r * runs.rowLength + c0;
            if (r + 4 <= r1 && bases[size_t(r + 3 - r0)] == base && bases[size_t(r + 1 - r0)] == base &&
                bases[size_t(r + 2 - r0)] == base) {
                const float* __restrict b = a + runs.rowLength;
                const float* __restrict c = b + runs.rowLength;
                const float* __restrict d = c + runs.rowLength;
                for (int64_t k = 0; k < w; ++k) {
                    const float lo = std::min(std::min(a[k], b[k]), std::min(c[k], d[k]));
                    const float hi = std::max(std::max(a[k], b[k]), std::max(c[k], d[k]));
                    mn[k] = lo < mn[k] ? lo : mn[k];
                    mx[k] = hi > mx[k] ? hi : mx[k];
                    probe[k] += (a[k] * 0.0f + b[k] * 0.0f) + (c[k] * 0.0f + d[k] * 0.0f);
                }
                if (ss)
                    for (int64_t k = 0; k < w; ++k)
                        ss[k] += (double(a[k]) * double(a[k]) + double(b[k]) * double(b[k])) +
                                 (double(c[k]) * double(c[k]) + double(d[k]) * double(d[k]));
                r += 4;
                continue;
            }
            for (int64_t k = 0; k < w; ++k) {
                mn[k] = a[k] < mn[k] ? a[k] : mn[k];
                mx[k] = a[k] > mx[k] ? a[k] : mx[k];
                probe[k] += a[k] * 0.0f;
            }
            if (ss)
                for (int64_t k = 0; k < w; ++k)
                    ss[k] += double(a[k]) * double(a[k]);
            ++r;
        }
    }
    for (float p : probe)
        out.probe += p;
}

// Rows [r0, r1) of a layout whose groups are interleaved in memory.
void accumulateRows(const float* x, const GroupRuns& runs, int64_t r0, int64_t r1, Partial& out, bool withSumSquares)
{
    if (runs.runLength == 1) {
        accumulateColumns(x, runs, r0, r1, out, withSumSquares);
        return;
    }
    for (int64_t r = r0; r < r1; ++r) {
        const float* __restrict row = x + r * runs.rowLength;
        const int64_t base = runs.rowGroup(r);
        for (int64_t k = 0; k < runs.runsPerRow; ++k) {
            const int64_t begin = k * runs.runLength;
            const Summary s = summarize(row + begin, std::min(runs.runLength, runs.rowLength - begin), withSumSquares);
            const size_t g = size_t(base + k);
            out.min[g] = std::min(out.min[g], s.min);
            out.max[g] = std::max(out.max[g], s.max);
            if (withSumSquares)
                out.sumSquares[g] += s.sumSquares;
            out.probe += s.probe;
        }
    }
}

} // namespace

// Lanes kept across the rows (a kernel's piece of output is often many short
// rows: 9 positions of each of hundreds of channels): 64 of them while a row
// has 64 elements left (four vectors, so that no lane waits on the last
// comparison of its own), then 16, then one at a time; rows that follow each
// other in memory are one run.
QS_VECTOR_CLONES Extremes extremesOf(const float* p, int64_t rows, int64_t n, int64_t ld)
{
    if (ld == n) {
        n *= rows;
        rows = 1;
    }
    constexpr int64_t W = 64, w = 16;
    float mn[W], mx[W], probe[W], mn16[w], mx16[w], probe16[w];
    for (int64_t k = 0; k < W; ++k) {
        mn[k] = kInf;
        mx[k] = -kInf;
        probe[k] = 0;
    }
    for (int64_t k = 0; k < w; ++k) {
        mn16[k] = kInf;
        mx16[k] = -kInf;
        probe16[k] = 0;
    }
    float lo = kInf, hi = -kInf, rest = 0;
    for (int64_t r = 0; r < rows; ++r) {
        const float* __restrict row = p + r * ld;
        int64_t i = 0;
        for (; i + W <= n; i += W) {
            const float* __restrict v = row + i;
            for (int64_t k = 0; k < W; ++k) {
                mn[k] = v[k] < mn[k] ? v[k] : mn[k];
                mx[k] = v[k] > mx[k] ? v[k] : mx[k];
                probe[k] += v[k] * 0.0f;
            }
        }
        for (; i + w <= n; i += w) {
            const float* __restrict v = row + i;
#pragma GCC unroll 1 // left to the vectoriser, as in summarizeLanes
            for (int64_t k = 0; k < w; ++k) {
                mn16[k] = v[k] < mn16[k] ? v[k] : mn16[k];
                mx16[k] = v[k] > mx16[k] ? v[k] : mx16[k];
                probe16[k] += v[k] * 0.0f;
            }
        }
        for (; i < n; ++i) {
            const float v = row[i];
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
            rest += v * 0.0f;
        }
    }
    // Folded vector-wise into the 16 lanes first: called a few hundred times a
    // run on pieces of a few hundred values, the fold is not negligible.
    for (int64_t k = 0; k < w; ++k) {
        mn16[k] = std::min(std::min(mn16[k], mn[k]), std::min(std::min(mn[k + w], mn[k + 2 * w]), mn[k + 3 * w]));
        mx16[k] = std::max(std::max(mx16[k], mx[k]), std::max(std::max(mx[k + w], mx[k + 2 * w]), mx[k + 3 * w]));
        probe16[k] += (probe[k] + probe[k + w]) + (probe[k + 2 * w] + probe[k + 3 * w]);
    }
    for (int64_t k = 0; k < w; ++k) {
        lo = std::min(lo, mn16[k]);
        hi = std::max(hi, mx16[k]);
        rest += probe16[k];
    }
    return {lo, hi, !std::isnan(rest)};
}

float GroupStatistics::rms(size_t g) const
{
    return count[g] == 0 ? 0.0f : float(std::sqrt(sumSquares[g] / double(count[g])));
}

GroupStatistics groupStatistics(std::span<const float> x, const BlockLayout& layout, std::string_view tensorName,
                                bool withSumSquares)
{
    const GroupRuns runs(layout);
    if (int64_t(x.size()) != runs.elements)
        throw Error("tensor '" + std::string(tensorName) + "': " + std::to_string(x.size()) +
                    " values do not fill the shape " + shapeToString(layout.shape));
    GroupStatistics st;
    st.count = runs.groupSizes();
    const size_t groups = size_t(runs.groups);
    st.min.assign(groups, kInf);
    st.max.assign(groups, -kInf);
    st.sumSquares.assign(withSumSquares ? groups : 0, 0.0);
    float probe = 0;

    if (runs.elements == 0) {
    } else if (runs.groupMajor()) {
        std::vector<int64_t> offsets(groups + 1, 0);
        for (size_t g = 0; g < groups; ++g)
            offsets[g + 1] = offsets[g] + st.count[g];
        std::vector<float> probes(groups, 0.0f);
        const auto summarizeGroups = [&](const tbb::blocked_range<size_t>& r) {
            for (size_t g = r.begin(); g != r.end(); ++g) {
                const Summary s = summarizeSpan(x.data() + offsets[g], st.count[g], withSumSquares);
                st.min[g] = s.min;
                st.max[g] = s.max;
                if (withSumSquares)
                    st.sumSquares[g] = s.sumSquares;
                probes[g] = s.probe;
            }
        };
        // A small tensor (an activation of a small model, every batch) takes
        // less time to summarise than handing half of it to another thread.
        if (runs.elements < kSerialElements)
            summarizeGroups(tbb::blocked_range<size_t>(0, groups));
        else
            tbb::parallel_for(tbb::blocked_range<size_t>(0, groups), summarizeGroups);
        for (float p : probes)
            probe += p;
    } else {
        // Interleaved groups: a fixed number of row blocks (it depends on the
        // shape, never on the thread count) each fill their own accumulators,
        // merged in order afterwards.
        const int64_t budget = std::max<int64_t>(1, (int64_t(1) << 24) / std::max<int64_t>(runs.groups, 1));
        const int64_t blocks = std::clamp<int64_t>(std::min<int64_t>(runs.rows, 64), 1, budget);
        std::vector<Partial> partials;
        partials.reserve(size_t(blocks));
        for (int64_t b = 0; b < blocks; ++b)
            partials.emplace_back(runs.groups, withSumSquares);
        tbb::parallel_for(int64_t(0), blocks, [&](int64_t b) {
            accumulateRows(x.data(), runs, runs.rows * b / blocks, runs.rows * (b + 1) / blocks, partials[size_t(b)],
                           withSumSquares);
        });
        tbb::parallel_for(tbb::blocked_range<size_t>(0, groups), [&](const tbb::blocked_range<size_t>& r) {
            for (const Partial& p : partials)
                for (size_t g = r.begin(); g != r.end(); ++g) {
                    st.min[g] = std::min(st.min[g], p.min[g]);
                    st.max[g] = std::max(st.max[g], p.max[g]);
                    if (withSumSquares)
                        st.sumSquares[g] += p.sumSquares[g];
                }
        });
        for (const Partial& p : partials)
            probe += p.probe;
    }
    if (std::isnan(probe))
        checkFinite(x, layout.shape, tensorName);
    for (size_t g = 0; g < groups; ++g)
        if (st.count[g] == 0)
            st.min[g] = st.max[g] = 0;
    return st;
}

void checkFinite(std::span<const float> x, const Shape& shape, std::string_view tensorName)
{
    const auto bad = std::find_if(x.begin(), x.end(), [](float v) { return !std::isfinite(v); });
    if (bad == x.end())
        return;
    int64_t flat = bad - x.begin();
    const int64_t index = flat;
    std::string position;
    for (size_t i = shape.size(); i-- > 0;) {
        const int64_t d = std::max<int64_t>(shape[i], 1);
        position = std::to_string(flat % d) + (position.empty() ? "" : ", ") + position;
        flat /= d;
    }
    throw Error("tensor '" + std::string(tensorName) + "' contains " + (std::isnan(*bad) ? "NaN" : "Inf") +
                " at flat index " + std::to_string(index) + " (element [" + position + "])");
}

} // namespace qs
