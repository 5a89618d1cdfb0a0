// Calibration: method strings, statistics over block layouts, histograms, exact
// percentiles, every method against a brute-force reference, growing histograms
// and streaming observers.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>

#include <nlohmann/json.hpp>

#include "calib/calibrate.h"
#include "calib/clipping.h"
#include "calib/histogram.h"
#include "calib/method.h"
#include "calib/observer.h"
#include "calib/statistics.h"
#include "core/error.h"
#include "quant/kernels.h"
#include "quant/reference.h"

using namespace qs;

namespace {

std::vector<float> gaussian(size_t n, uint32_t seed, float sigma = 1.0f)
{
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, sigma);
    std::vector<float> v(n);
    for (float& x : v)
        x = d(rng);
    return v;
}

// Heavy-tailed data with a few large outliers, ties and exact zeros: what
// activations look like and what breaks naive bucketing.
std::vector<float> adversarial(size_t n, uint32_t seed)
{
    std::vector<float> v = gaussian(n, seed);
    std::mt19937 rng(seed + 1);
    for (size_t i = 0; i < n; i += 97)
        v[i] = 0.0f;
    for (size_t i = 5; i < n; i += 1013)
        v[i] = 250.0f * (rng() % 2 ? 1.0f : -1.0f);
    for (size_t i = 11; i < n; i += 31)
        v[i] = float(int(v[i] * 4)) / 4; // many ties
    if (n > 3)
        v[3] = -3e4f;
    return v;
}

// Each group's values in flat order, found with the reference BlockLayout::groupOf.
std::vector<std::vector<float>> groupsOf(const std::vector<float>& x, const BlockLayout& layout)
{
    std::vector<std::vector<float>> g(size_t(layout.groupCount()));
    for (size_t i = 0; i < x.size(); ++i)
        g[size_t(layout.groupOf(int64_t(i)))].push_back(x[i]);
    return g;
}

std::vector<BlockLayout> layoutsFor(const Shape& s)
{
    std::vector<BlockLayout> l{BlockLayout::perTensor(s)};
    for (int a = 0; a < int(s.size()); ++a)
        l.push_back(BlockLayout::perChannel(s, a));
    if (s.size() >= 2) {
        l.push_back(BlockLayout::tiled(s, 0, int(s.size()) - 1, 8));  // ragged last tile when shape % 8 != 0
        l.push_back(BlockLayout::tiled(s, -1, int(s.size()) - 1, 5)); // tiles without a channel axis
        BlockLayout boxes{s, s};                                      // ragged boxes on every axis
        for (size_t i = 0; i < s.size(); ++i)
            boxes.block[i] = std::max<int64_t>(1, s[i] / 2 - 1);
        l.push_back(boxes);
    }
    return l;
}

// np.percentile(v, p), from a full sort.
double sortedPercentile(std::vector<float> v, double p)
{
    std::sort(v.begin(), v.end());
    const double r = p / 100.0 * double(v.size() - 1);
    const size_t k = size_t(std::floor(r));
    const double a = v[k], b = v[std::min(k + 1, v.size() - 1)], t = r - double(k);
    const double d = double(float(b - a));
    return t < 0.5 ? a + d * t : b - d * (1 - t);
}

std::vector<int64_t> naiveHistogram(const std::vector<float>& x, bool magnitudes, float lo, float hi, int bins)
{
    std::vector<int64_t> c(size_t(bins), 0);
    const float scale = hi > lo ? float(bins) / (hi - lo) : 0.0f;
    for (float v : x) {
        const float t = ((magnitudes ? std::abs(v) : v) - lo) * scale;
        const int b = t <= 0 ? 0 : (t >= float(bins - 1) ? bins - 1 : int(t));
        ++c[size_t(b)];
    }
    return c;
}

double fakeQuantError(const std::vector<float>& v, Range r, QType t, bool symmetric)
{
    const Range one[1] = {r};
    const GroupQuant gq =
        groupQuant(quantParamsFromRanges(t, BlockLayout::perTensor({1}), one, symmetric, {}, "ref"), 0);
    double e = 0;
    for (float x : v) {
        const double d = double(x) - double(referenceFakeQuantizeValue(gq, x));
        e += d * d;
    }
    return e;
}

// The MSE search written out: every candidate, first smallest error.
Range bruteForceMse(const std::vector<float>& values, const std::vector<float>& weightsValues,
                    const std::vector<int64_t>& weights, float min, float max, QType t, bool symmetric)
{
    Range best{};
    double bestError = INFINITY;
    for (int i = 1; i <= kMseCandidates; ++i) {
        const double alpha = double(i) / kMseCandidates;
        const float a = float(alpha * std::max(-double(min), double(max)));
        const Range r = symmetric ? Range{-a, a} : Range{float(alpha * min), float(alpha * max)};
        double e = 0;
        if (weights.empty()) {
            e = fakeQuantError(values, r, t, symmetric);
        } else {
            const Range one[1] = {r};
            const GroupQuant gq =
                groupQuant(quantParamsFromRanges(t, BlockLayout::perTensor({1}), one, symmetric, {}, "ref"), 0);
            for (size_t b = 0; b < weights.size(); ++b) {
                if (weights[b] == 0)
                    continue;
                const double d = double(weightsValues[b]) - double(referenceFakeQuantizeValue(gq, weightsValues[b]));
                e += double(weights[b]) * d * d;
            }
        }
        if (e < bestError) {
            bestError = e;
            best = r;
        }
    }
    return best;
}

// TensorRT's KL search written out plainly (symmetric: window from bin 0).
struct WindowKl {
    size_t first, kept;
    double kl;
};
std::vector<WindowKl> bruteForceEntropy(const std::vector<int64_t>& h, size_t levels, double zeroBin, bool symmetric)
{
    const size_t B = h.size();
    std::vector<WindowKl> all;
    for (size_t i = levels; i <= B; ++i) {
        const size_t a = symmetric ? 0 : size_t(std::llround(zeroBin * double(B - i) / double(B)));
        std::vector<double> p(i), q(i, 0.0);
        for (size_t j = 0; j < i; ++j)
            p[j] = double(h[a + j]);
        int64_t below = 0, above = 0;
        for (size_t j = 0; j < a; ++j)
            below += h[j];
        for (size_t j = a + i; j < B; ++j)
            above += h[j];
        p[0] += double(below);
        p[i - 1] += double(above);
        const size_t m = i / levels;
        for (size_t k = 0; k < levels; ++k) {
            const size_t lo = k * m, hi = k + 1 == levels ? i : lo + m;
            double sum = 0;
            size_t nz = 0;
            for (size_t j = lo; j < hi; ++j) {
                sum += double(h[a + j]);
                nz += p[j] != 0;
            }
            for (size_t j = lo; j < hi && nz > 0; ++j)
                q[j] = p[j] != 0 ? sum / double(nz) : 0.0;
        }
        double sp = 0, sq = 0;
        for (size_t j = 0; j < i; ++j) {
            sp += p[j];
            sq += q[j];
        }
        double kl = 0;
        for (size_t j = 0; j < i && kl < INFINITY; ++j) {
            if (p[j] == 0)
                continue;
            kl = q[j] == 0 ? INFINITY : kl + (p[j] / sp) * std::log((p[j] / sp) / (q[j] / sq));
        }
        if (sq == 0)
            kl = INFINITY;
        all.push_back({a, i, kl});
    }
    return all;
}

// A classifier-like weight [rows, cols]: Gaussian and Laplacian rows (σ about 0.02)
// with three outliers of 4–8 times their size per row.
std::vector<float> outlierWeight(int64_t rows, int64_t cols, uint32_t seed)
{
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    std::exponential_distribution<float> exponential(1.0f / 0.02f);
    std::uniform_int_distribution<int64_t> column(0, cols - 1);
    std::uniform_real_distribution<float> gain(4.0f, 8.0f);
    std::vector<float> w(size_t(rows * cols));
    for (int64_t r = 0; r < rows; ++r) {
        float* row = w.data() + r * cols;
        for (int64_t c = 0; c < cols; ++c)
            row[c] =
                r % 2 ? exponential(rng) - exponential(rng) : normal(rng); // Laplacian: a difference of exponentials
        for (int k = 0; k < 3; ++k)
            row[column(rng)] *= gain(rng);
    }
    return w;
}

// 10·log10(Σx² / Σ(x − fq(x))²) of x fake-quantized as calibration method m gives.
double weightSqnr(const std::vector<float>& x, const BlockLayout& layout, QType t, const char* method,
                  CalibrationReport* report = nullptr)
{
    CalibrationTarget target;
    target.qtype = t;
    const CalibrationMethod m = CalibrationMethod::parse(method);
    const auto ranges = calibrateRanges(x, layout, m, target, "w", report);
    const QuantParams p = quantParamsFromRanges(t, layout, ranges, true, {}, "w");
    std::vector<float> fq(x.size());
    fakeQuantizeInto(Tensor::borrow(DType::F32, layout.shape, x.data(), nullptr), p, fq, Rounding::Nearest, 0, "w");
    double signal = 0, noise = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        signal += double(x[i]) * double(x[i]);
        noise += (double(x[i]) - double(fq[i])) * (double(x[i]) - double(fq[i]));
    }
    return 10 * std::log10(signal / noise);
}

// An entropy search written here in NumPy from the description in calib/clipping.h
// (TensorRT's KL search on a histogram of |x| with L·m bins, m = min(2048 // L,
// n // (16·L)), L = 2^(bits−1)), independent of the C++ code. Reads float32 groups
// of `n` values from argv[1]; prints, per group, the KL divergence of every kept
// width i = L..B, as "g i kl" lines, and "bins g B".
const char* kNumpyEntropy = R"(
import sys, numpy as np
x = np.fromfile(sys.argv[1], dtype=np.float32).reshape(-1, int(sys.argv[2]))
L = 2 ** (int(sys.argv[3]) - 1)
for g, v in enumerate(x):
    m = min(2048 // L, v.size // (16 * L))
    B = L * m
    print('bins', g, B)
    a = np.abs(v)
    scale = np.float32(B) / np.float32(a.max())
    t = np.clip(a * scale, np.float32(0), np.float32(B - 1))
    h = np.bincount(t.astype(np.int32), minlength=B).astype(np.float64)
    for i in range(L, B + 1):
        p = h[:i].copy()
        p[i - 1] += h[i:].sum()
        q = np.zeros(i)
        w = i // L
        for k in range(L):
            lo, hi = k * w, (i if k == L - 1 else (k + 1) * w)
            nz = p[lo:hi] > 0
            if nz.any():
                q[lo:hi][nz] = h[lo:hi].sum() / nz.sum()
        P, Q = p / p.sum(), q / q.sum()
        s = P > 0
        kl = np.inf if (Q[s] == 0).any() else float((P[s] * np.log(P[s] / Q[s])).sum())
        print(g, i, repr(kl))
)";

// QCOMPARE on floating point is fuzzy; calibration results must be equal bit for bit.
#define QCOMPARE_EXACT(actual, expected)                                                                               \
    QVERIFY2((actual) == (expected),                                                                                   \
             qPrintable(QString("%1 != %2").arg(double(actual), 0, 'g', 17).arg(double(expected), 0, 'g', 17)))

#define QVERIFY_THROWS_WITH(expr, ...)                                                                                 \
    do {                                                                                                               \
        bool thrown = false;                                                                                           \
        try {                                                                                                          \
            expr;                                                                                                      \
        } catch (const qs::Error& e) {                                                                                 \
            thrown = true;                                                                                             \
            const std::string msg = e.what();                                                                          \
            for (const char* needle : {__VA_ARGS__})                                                                   \
                QVERIFY2(msg.find(needle) != std::string::npos, (msg + "  (missing: " + needle + ")").c_str());        \
        }                                                                                                              \
        QVERIFY2(thrown, #expr " did not throw qs::Error");                                                            \
    } while (0)

} // namespace

class TestCalib : public QObject {
    Q_OBJECT
private slots:
    void parsesEveryMethodAndRoundTrips()
    {
        const struct {
            const char* text;
            CalibrationKind kind;
            const char* canonical;
        } cases[] = {
            {"absmax", CalibrationKind::AbsMax, "absmax"},
            {"absmax,1", CalibrationKind::AbsMax, "absmax"},
            {" absmax , 0.9 ", CalibrationKind::AbsMax, "absmax,0.9"},
            {"minmax,1.5", CalibrationKind::MinMax, "minmax,1.5"},
            {"rms,3", CalibrationKind::Rms, "rms,3"},
            {"fixed, -1 ,2.5", CalibrationKind::Fixed, "fixed,-1,2.5"},
            {"fixed,0,0", CalibrationKind::Fixed, "fixed,0,0"},
            {"percentile,99.99", CalibrationKind::Percentile, "percentile,99.99"},
            {"percentile,100", CalibrationKind::Percentile, "percentile,100"},
            {"mse", CalibrationKind::Mse, "mse"},
            {"entropy", CalibrationKind::Entropy, "entropy"},
            {"rms,0.1", CalibrationKind::Rms, "rms,0.1"},
        };
        for (const auto& c : cases) {
            const CalibrationMethod m = CalibrationMethod::parse(c.text);
            QCOMPARE(m.kind, c.kind);
            QCOMPARE(m.toString(), std::string(c.canonical));
            QCOMPARE(CalibrationMethod::parse(m.toString()), m);
        }
        QCOMPARE_EXACT(CalibrationMethod::parse("fixed,-1,2.5").fixedMin, -1.0);
        QCOMPARE_EXACT(CalibrationMethod::parse("rms,3").factor, 3.0);
        // Every kind in the table parses by its own name or syntax example.
        QCOMPARE(allCalibrationKinds().size(), size_t(7));
    }

    void parseErrorsQuoteTheStringAndSayWhatIsExpected()
    {
        QVERIFY_THROWS_WITH(CalibrationMethod::parse("foo,1"), "'foo,1'", "unknown method 'foo'", "absmax[,s]",
                            "entropy");
        QVERIFY_THROWS_WITH(CalibrationMethod::parse(""), "unknown method ''");
        QVERIFY_THROWS_WITH(CalibrationMethod::parse("rms"), "'rms'", "takes 1 argument", "rms,s");
        QVERIFY_THROWS_WITH(CalibrationMethod::parse("absmax,1,2"), "'absmax,1,2'", "takes 0 or 1", "absmax[,s]");
        QVERIFY_THROWS_WITH(CalibrationMethod::parse("fixed,1"), "'fixed,1'", "takes 2", "fixed,min,max");
        QVERIFY_THROWS_WITH(CalibrationMethod::parse("mse,3"), "'mse,3'", "takes 0");
        QVERIFY_THROWS_WITH(CalibrationMethod::parse("percentile"), "'percentile'", "percentile,p");
        QVERIFY_THROWS_WITH(CalibrationMethod::parse("absmax,abc"), "'absmax,abc'", "'abc' is not a number");
        QVERIFY_THROWS_WITH(CalibrationMethod::parse("absmax,1.5x"), "'1.5x' is not a number");
        QVERIFY_THROWS_WITH(CalibrationMethod::parse("absmax,"), "'' is not a number");
        QVERIFY_THROWS_WITH(CalibrationMethod::parse("minmax,inf"), "'minmax,inf'", "finite");
        QVERIFY_THROWS_WITH(CalibrationMethod::parse("fixed,nan,1"), "finite");
        QVERIFY_THROWS_WITH(CalibrationMethod::parse("absmax,0"), "'absmax,0'", "greater than 0");
        QVERIFY_THROWS_WITH(CalibrationMethod::parse("rms,-2"), "greater than 0");
        QVERIFY_THROWS_WITH(CalibrationMethod::parse("percentile,0"), "'percentile,0'", "(0, 100]");
        QVERIFY_THROWS_WITH(CalibrationMethod::parse("percentile,100.5"), "(0, 100]");
        QVERIFY_THROWS_WITH(CalibrationMethod::parse("fixed,2,1"), "'fixed,2,1'", "min 2 is greater than max 1");
    }

    void methodDecidesSymmetry()
    {
        const auto sym = [](const char* m, std::optional<bool> r) {
            return CalibrationMethod::parse(m).resolveSymmetric(r);
        };
        QVERIFY(sym("absmax", {}));
        QVERIFY(!sym("minmax", {}));
        QVERIFY(sym("rms,2", true));
        QVERIFY(sym("fixed,-3,3", {}));
        QVERIFY(!sym("fixed,-1,3", {}));
        QVERIFY(!sym("percentile,99", false));
        QVERIFY(sym("mse", {}));
        QVERIFY(!sym("entropy", false));
        QVERIFY_THROWS_WITH(sym("absmax", false), "'absmax'", "cannot be made asymmetric");
        QVERIFY_THROWS_WITH(sym("minmax", true), "cannot be made symmetric");
        QVERIFY_THROWS_WITH(sym("fixed,-1,3", true), "cannot be made symmetric");
        QVERIFY(CalibrationMethod::parse("entropy").needsHistogram());
        QVERIFY(!CalibrationMethod::parse("rms,1").needsHistogram());
    }

    void statisticsMatchBruteForceOnEveryLayout()
    {
        for (const Shape& shape : {Shape{5, 7, 33}, Shape{6, 50}, Shape{3, 4, 5, 6}, Shape{1000}, Shape{2, 1, 17}}) {
            const std::vector<float> x = adversarial(size_t(shapeElementCount(shape)), 7);
            for (const BlockLayout& layout : layoutsFor(shape)) {
                const GroupStatistics st = groupStatistics(x, layout, "x", true);
                const auto groups = groupsOf(x, layout);
                QCOMPARE(st.min.size(), groups.size());
                for (size_t g = 0; g < groups.size(); ++g) {
                    const auto [lo, hi] = std::minmax_element(groups[g].begin(), groups[g].end());
                    double ss = 0;
                    for (float v : groups[g])
                        ss += double(v) * v;
                    QCOMPARE(st.count[g], int64_t(groups[g].size()));
                    QCOMPARE_EXACT(st.min[g], *lo);
                    QCOMPARE_EXACT(st.max[g], *hi);
                    QCOMPARE_EXACT(st.absMax(g), std::max(-*lo, *hi));
                    QVERIFY(std::abs(st.sumSquares[g] - ss) <= 1e-12 * ss);
                }
            }
        }
    }

    void statisticsOfLargeGroupsAreDeterministic()
    {
        // Big enough for the parallel pieces of one group and the interleaved row blocks.
        const Shape shape{8, 131072};
        const std::vector<float> x = gaussian(size_t(shapeElementCount(shape)), 3);
        for (const BlockLayout& layout : {BlockLayout::perTensor(shape), BlockLayout::perChannel(shape, 1)}) {
            const GroupStatistics a = groupStatistics(x, layout, "x", true);
            const GroupStatistics b = groupStatistics(x, layout, "x", true);
            QCOMPARE(a.sumSquares, b.sumSquares);
            const auto groups = groupsOf(x, layout);
            for (size_t g = 0; g < groups.size(); g += 997) {
                double ss = 0;
                for (float v : groups[g])
                    ss += double(v) * v;
                QVERIFY(std::abs(a.sumSquares[g] - ss) <= 1e-12 * ss);
                QCOMPARE_EXACT(a.max[g], *std::max_element(groups[g].begin(), groups[g].end()));
            }
        }
    }

    void nonFiniteDataNamesTheTensorAndIndex()
    {
        for (float bad : {NAN, INFINITY, -INFINITY}) {
            std::vector<float> x = gaussian(600, 1);
            x[437] = bad;
            x[500] = NAN;
            const Shape shape{20, 30};
            QVERIFY_THROWS_WITH(groupStatistics(x, BlockLayout::perChannel(shape, 1), "layer1.weight", false),
                                "'layer1.weight'", "flat index 437", "[14, 17]");
            QVERIFY_THROWS_WITH(calibrateRanges(x, BlockLayout::perTensor(shape), CalibrationMethod::parse("mse"),
                                                CalibrationTarget{}, "conv.w"),
                                "'conv.w'", "437");
        }
    }

    void histogramsEqualANaiveLoop()
    {
        std::vector<float> x = adversarial(300001, 5);
        x.push_back(-3e4f); // the minimum again, and values exactly at the edges
        x.push_back(250.0f);
        for (bool magnitudes : {false, true})
            for (int bins : {2048, 7, 1}) {
                const float lo = magnitudes ? 0.0f : -3e4f, hi = magnitudes ? 3e4f : 250.0f;
                const Histogram h =
                    buildHistogram(x, magnitudes ? HistogramOf::Magnitudes : HistogramOf::Values, lo, hi, size_t(bins));
                QCOMPARE(h.counts, naiveHistogram(x, magnitudes, lo, hi, bins));
                QCOMPARE(h.total(), int64_t(x.size()));
            }
        // A constant tensor: zero width puts everything in bin 0.
        const std::vector<float> c(1000, 2.5f);
        QCOMPARE(buildHistogram(c, HistogramOf::Values, 2.5f, 2.5f, 16).counts[0], int64_t(1000));
    }

    void percentileIsExactlyNumpys()
    {
        std::vector<std::vector<float>> data{gaussian(1001, 1), adversarial(100003, 2), gaussian(70000, 3, 1e-30f),
                                             std::vector<float>(50000, -1.25f)};
        std::vector<float> ints(40000);
        for (size_t i = 0; i < ints.size(); ++i)
            ints[i] = float(int(i % 13) - 6); // heavy ties, negatives and both zeros
        ints[7] = -0.0f;
        data.push_back(ints);
        data.push_back({3.5f});
        for (const auto& x : data)
            for (double p : {0.0, 0.5, 1.0, 25.0, 50.0, 90.0, 99.0, 99.9, 99.99, 100.0, 37.123}) {
                std::vector<float> mags(x.size());
                std::transform(x.begin(), x.end(), mags.begin(), [](float v) { return std::abs(v); });
                QCOMPARE_EXACT(exactPercentile(x, HistogramOf::Values, p), sortedPercentile(x, p));
                QCOMPARE_EXACT(exactPercentile(x, HistogramOf::Magnitudes, p), sortedPercentile(mags, p));
            }
    }

    void percentileIsExactWhereTheSampleCannotBracket()
    {
        // The sample is 512 runs of 256 elements at a spacing of 4096: zeros there
        // and nowhere else make the bracket miss, and the radix select has to answer.
        std::vector<float> periodic = gaussian(size_t(1) << 21, 4);
        for (size_t i = 0; i < periodic.size(); ++i)
            if (i % 4096 < 256)
                periodic[i] = 0.0f;
        // Two and a half million ties: the bracket holds too many elements.
        std::vector<float> ties(2500000, 1.0f);
        for (size_t i = 0; i < ties.size(); i += 1001)
            ties[i] = -float(i);
        for (const auto* x : {&periodic, &ties})
            for (double p : {0.1, 50.0, 99.99}) {
                std::vector<float> mags(x->size());
                std::transform(x->begin(), x->end(), mags.begin(), [](float v) { return std::abs(v); });
                QCOMPARE_EXACT(exactPercentile(*x, HistogramOf::Values, p), sortedPercentile(*x, p));
                QCOMPARE_EXACT(exactPercentile(*x, HistogramOf::Magnitudes, p), sortedPercentile(mags, p));
            }
    }

    void everySimpleMethodMatchesBruteForce()
    {
        const Shape shape{6, 9, 21};
        const std::vector<float> x = adversarial(size_t(shapeElementCount(shape)), 11);
        for (const BlockLayout& layout : layoutsFor(shape)) {
            const auto groups = groupsOf(x, layout);
            const auto run = [&](const char* method, std::optional<bool> symmetric = {}) {
                CalibrationTarget t;
                t.symmetric = symmetric;
                return calibrateRanges(x, layout, CalibrationMethod::parse(method), t, "x");
            };
            const auto absmax = run("absmax,0.5"), minmax = run("minmax,2"), rms = run("rms,3"),
                       fixed = run("fixed,-1,4"), pctSym = run("percentile,99"), pctTwo = run("percentile,99", false);
            for (size_t g = 0; g < groups.size(); ++g) {
                const auto& v = groups[g];
                const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
                const float a = std::max(-*lo, *hi);
                QCOMPARE_EXACT(absmax[g].max, float(0.5 * a));
                QCOMPARE_EXACT(absmax[g].min, -float(0.5 * a));
                QCOMPARE_EXACT(minmax[g].min, float(2.0 * *lo));
                QCOMPARE_EXACT(minmax[g].max, float(2.0 * *hi));
                double ss = 0;
                for (float e : v)
                    ss += double(e) * e;
                QVERIFY(std::abs(rms[g].max - float(3 * std::sqrt(ss / double(v.size())))) <= 1e-6f * rms[g].max);
                QCOMPARE_EXACT(fixed[g].min, -1.0f);
                QCOMPARE_EXACT(fixed[g].max, 4.0f);
                std::vector<float> mags(v.size());
                std::transform(v.begin(), v.end(), mags.begin(), [](float e) { return std::abs(e); });
                QCOMPARE_EXACT(pctSym[g].max, float(sortedPercentile(mags, 99)));
                QCOMPARE_EXACT(pctTwo[g].min, float(sortedPercentile(v, 1)));
                QCOMPARE_EXACT(pctTwo[g].max, float(sortedPercentile(v, 99)));
            }
        }
    }

    void mseOnValuesPicksTheBruteForceCandidate()
    {
        const Shape shape{4, 300};
        const std::vector<float> x = adversarial(1200, 21);
        for (QType q : {QType::Int8, QType::Int4, QType::Fp8E4M3, QType::Nf4})
            for (bool symmetric : {true, false}) {
                if (!symmetric && !isIntegerLike(q))
                    continue; // asymmetric float formats are an error in quant
                for (const BlockLayout& layout :
                     {BlockLayout::perChannel(shape, 0), BlockLayout::tiled(shape, 0, 1, 64)}) {
                    CalibrationTarget t;
                    t.qtype = q;
                    t.symmetric = symmetric;
                    const auto r = calibrateRanges(x, layout, CalibrationMethod::parse("mse"), t, "x");
                    const auto groups = groupsOf(x, layout);
                    for (size_t g = 0; g < groups.size(); ++g) {
                        const auto [lo, hi] = std::minmax_element(groups[g].begin(), groups[g].end());
                        const Range ref = bruteForceMse(groups[g], {}, {}, *lo, *hi, q, symmetric);
                        QCOMPARE_EXACT(r[g].min, ref.min);
                        QCOMPARE_EXACT(r[g].max, ref.max);
                    }
                }
            }
        // Clipping must actually happen on outlier-heavy int4 data (the search is not a no-op).
        CalibrationTarget t;
        t.qtype = QType::Int4;
        const auto r = calibrateRanges(x, BlockLayout::perTensor(shape), CalibrationMethod::parse("mse"), t, "x");
        QVERIFY(r[0].max < 3e4f);
    }

    void mseOnLargeGroupsMatchesAtHistogramResolution()
    {
        const Shape shape{2, 20000}; // groups above kMseExactLimit
        const std::vector<float> x = adversarial(40000, 31);
        for (bool symmetric : {true, false}) {
            CalibrationTarget t;
            t.symmetric = symmetric;
            t.histogramBins = 512;
            const BlockLayout layout = BlockLayout::perChannel(shape, 0);
            const auto r = calibrateRanges(x, layout, CalibrationMethod::parse("mse"), t, "x");
            const auto groups = groupsOf(x, layout);
            for (size_t g = 0; g < groups.size(); ++g) {
                const auto [lo, hi] = std::minmax_element(groups[g].begin(), groups[g].end());
                const float a = std::max(-*lo, *hi);
                const float hlo = symmetric ? -a : *lo, hhi = symmetric ? a : *hi;
                const auto counts = naiveHistogram(groups[g], false, hlo, hhi, 512);
                std::vector<float> centres(512);
                for (size_t b = 0; b < 512; ++b)
                    centres[b] = float(hlo + (double(hhi) - double(hlo)) * (double(b) + 0.5) / 512.0);
                const Range ref = bruteForceMse({}, centres, counts, *lo, *hi, QType::Int8, symmetric);
                QCOMPARE_EXACT(r[g].min, ref.min);
                QCOMPARE_EXACT(r[g].max, ref.max);
            }
        }
    }

    void unsignedTypesRefuseSymmetricMethodsOnNegativeData()
    {
        // uint4 under absmax quantizes [0, absmax]: a weight's negative half would
        // become 0 (issue 17: output SQNR −409 dB). Refused, naming the tensor, the
        // qtype, the method and what to set; non-negative data (ReLU outputs) and
        // asymmetric methods are fine.
        const std::vector<float> w = gaussian(64, 5);
        const BlockLayout layout = BlockLayout::perChannel({4, 16}, 0);
        CalibrationTarget u4;
        u4.qtype = QType::UInt4;
        for (const char* m : {"absmax", "rms,3", "mse", "entropy", "percentile,99"})
            QVERIFY_THROWS_WITH(calibrateRanges(w, layout, CalibrationMethod::parse(m), u4, "fc.weight"), "'fc.weight'",
                                "uint4", m, "minmax", "symmetric: false", "int4");
        const auto two = calibrateRanges(w, layout, CalibrationMethod::parse("minmax"), u4, "fc.weight");
        QVERIFY(two[0].min < 0);
        CalibrationTarget asymmetricEntropy = u4;
        asymmetricEntropy.symmetric = false;
        QCOMPARE(calibrateRanges(w, layout, CalibrationMethod::parse("entropy"), asymmetricEntropy, "w").size(), 4u);
        std::vector<float> relu = w;
        for (float& v : relu)
            v = std::max(v, 0.0f);
        QCOMPARE(calibrateRanges(relu, layout, CalibrationMethod::parse("absmax"), u4, "w").size(), 4u);

        // Activations: the observer's ranges say the same, naming the activation.
        Observer o("conv1_out", ObserverConfig{{0}, -1, 2048});
        o.observe(w, {4, 16});
        CalibrationTarget u8;
        u8.qtype = QType::UInt8;
        QVERIFY_THROWS_WITH(o.ranges(CalibrationMethod::parse("absmax"), u8), "activation 'conv1_out'", "uint8",
                            "int8");
        Observer r("relu_out", ObserverConfig{{0}, -1, 2048});
        r.observe(relu, {4, 16});
        QCOMPARE(r.ranges(CalibrationMethod::parse("absmax"), u8).size(), 1u);
    }

    void entropyIsNeverFarWorseThanAbsmaxBelow8Bits()
    {
        // Issue 17: int4 entropy per channel on a classifier weight gave 7.7 dB against
        // absmax's 23.5 (a 512-value row in 2048 bins is mostly empty bins). On the
        // target grid's bins, entropy must stay within 1 dB of absmax at 2–7 bits, per
        // channel and with tiles of 32; tiles of 32 are too small for a histogram and
        // keep their whole range, which the report says.
        const int64_t rows = 64, cols = 512;
        const std::vector<float> w = outlierWeight(rows, cols, 17);
        const BlockLayout perChannel = BlockLayout::perChannel({rows, cols}, 0);
        const BlockLayout tiles = BlockLayout::tiled({rows, cols}, 0, 1, 32);
        for (QType t : {QType::Int2, QType::Int3, QType::Int4, QType::Int6, QType::Int7}) {
            for (const BlockLayout* layout : {&perChannel, &tiles}) {
                CalibrationReport report;
                const double absmax = weightSqnr(w, *layout, t, "absmax");
                const double entropy = weightSqnr(w, *layout, t, "entropy", &report);
                const QString what = QString("%1 %2: entropy %3 dB, absmax %4 dB")
                                         .arg(QString::fromUtf8(qtypeName(t).data(), int(qtypeName(t).size())))
                                         .arg(layout == &tiles ? "tiles of 32" : "per channel")
                                         .arg(entropy)
                                         .arg(absmax);
                qInfo("%s", qPrintable(what));
                QVERIFY2(entropy >= absmax - 1.0, qPrintable(what));
                QCOMPARE(report.groups, layout->groupCount());
                if (layout == &tiles) {
                    QCOMPARE(report.entropyWholeRange, report.groups);
                    QVERIFY2(report.note.find("whole range") != std::string::npos &&
                                 report.note.find("the smallest group holds 32") != std::string::npos,
                             report.note.c_str());
                } else {
                    // 512 values give L·m bins with m = 512 / (16·L): int2–int4 search (m = 16, 8, 4),
                    // int6 and int7 (m = 1, 0) have too few values and keep their range.
                    const bool search = 512 / (16 * (int64_t(1) << (qtypeInfo(t).bits - 1))) >= 2;
                    QCOMPARE(report.entropyWholeRange, search ? 0 : report.groups);
                    QCOMPARE(report.note.empty(), search);
                }
            }
        }
    }

    void entropyMatchesAnIndependentNumpySearch()
    {
        QProcess probe;
        probe.start(QStringLiteral("/usr/bin/python3"), {QStringLiteral("-c"), QStringLiteral("import numpy")});
        if (!probe.waitForFinished(60000) || probe.exitStatus() != QProcess::NormalExit || probe.exitCode() != 0)
            QSKIP("/usr/bin/python3 with numpy is needed for the reference search");
        const int64_t rows = 6, cols = 4096;
        const std::vector<float> w = outlierWeight(rows, cols, 23);
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const QString data = dir.filePath("w.f32");
        {
            QFile f(data);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write(reinterpret_cast<const char*>(w.data()), qint64(w.size() * sizeof(float)));
        }
        const BlockLayout layout = BlockLayout::perChannel({rows, cols}, 0);
        for (QType t : {QType::Int2, QType::Int4, QType::Int7}) {
            const int bits = qtypeInfo(t).bits;
            QProcess py;
            py.start(QStringLiteral("/usr/bin/python3"), {QStringLiteral("-c"), QString::fromUtf8(kNumpyEntropy), data,
                                                          QString::number(cols), QString::number(bits)});
            QVERIFY(py.waitForFinished(120000));
            QVERIFY2(py.exitCode() == 0, py.readAllStandardError().constData());
            // kl[g][i], the reference's divergence of kept width i in group g, and its bins.
            std::vector<std::map<int64_t, double>> kl{size_t(rows)};
            std::vector<int64_t> bins(size_t(rows), 0);
            for (const QByteArray& line : py.readAllStandardOutput().split('\n')) {
                const QList<QByteArray> f = line.split(' ');
                if (f.size() == 3 && f[0] == "bins")
                    bins[size_t(f[1].toLongLong())] = f[2].toLongLong();
                else if (f.size() == 3)
                    kl[size_t(f[0].toLongLong())][f[1].toLongLong()] = f[2] == "inf" ? INFINITY : f[2].toDouble();
            }
            CalibrationTarget target;
            target.qtype = t;
            const auto ranges = calibrateRanges(w, layout, CalibrationMethod::parse("entropy"), target, "w");
            const auto groups = groupsOf(w, layout);
            for (size_t g = 0; g < groups.size(); ++g) {
                const int levels = 1 << (bits - 1);
                QCOMPARE(int64_t(entropyBins(cols, entropyLevels(t, true, false), 2048)), bins[g]);
                QVERIFY(bins[g] > levels);
                float a = 0;
                for (float v : groups[g])
                    a = std::max(a, std::abs(v));
                // The kept width our search picked, from its range's upper edge.
                int64_t picked = -1;
                for (const auto& [i, d] : kl[g])
                    if (ranges[g].max == float(double(a) * double(i) / double(bins[g])))
                        picked = i;
                QVERIFY2(picked >= 0, qPrintable(QString("group %1: %2 is no bin edge").arg(g).arg(ranges[g].max)));
                double best = INFINITY;
                for (const auto& [i, d] : kl[g])
                    best = std::min(best, d);
                const QString what = QString("int%1 group %2: picked width %3 of %4, KL %5, reference best %6")
                                         .arg(bits)
                                         .arg(g)
                                         .arg(picked)
                                         .arg(bins[g])
                                         .arg(kl[g][picked], 0, 'g', 10)
                                         .arg(best, 0, 'g', 10);
                QVERIFY2(kl[g][picked] <= best + 1e-9 * std::abs(best) + 1e-12, qPrintable(what));
            }
        }
    }

    void entropyMatchesTheTensorRtSearch()
    {
        // Gaussian channels with rare outliers at ±20. (KL needs many samples per
        // bin and a histogram that resolves the bulk, or it keeps the whole range.)
        const size_t n = 1000000;
        const Shape shape{3, int64_t(n)};
        std::vector<float> x = gaussian(3 * n, 41);
        for (size_t i = 0; i < 2 * n; i += 10000)
            x[i] = i % 20000 ? 20.0f : -20.0f;
        for (size_t i = 2 * n; i < 3 * n; ++i)
            x[i] = std::abs(x[i]) * 0.5f + 0.1f; // a one-sided (ReLU-like) channel
        for (bool symmetric : {true, false}) {
            CalibrationTarget t;
            t.symmetric = symmetric;
            const BlockLayout layout = BlockLayout::perChannel(shape, 0);
            const auto r = calibrateRanges(x, layout, CalibrationMethod::parse("entropy"), t, "x");
            const auto groups = groupsOf(x, layout);
            for (size_t g = 0; g < groups.size(); ++g) {
                const auto [lo, hi] = std::minmax_element(groups[g].begin(), groups[g].end());
                const float a = std::max(-*lo, *hi);
                const float hlo = symmetric ? 0.0f : std::min(*lo, 0.0f), hhi = symmetric ? a : std::max(*hi, 0.0f);
                const auto counts = naiveHistogram(groups[g], symmetric, hlo, hhi, 2048);
                const double zero = -double(hlo) / (double(hhi) - double(hlo)) * 2048;
                // The implementation sums the divergence in another order (prefix sums):
                // its pick must be a minimiser up to rounding, and the brute force's
                // first minimiser whenever that one wins by more than rounding.
                const auto all = bruteForceEntropy(counts, symmetric ? 128 : 256, zero, symmetric);
                const auto edge = [&](size_t i) { return float(hlo + (double(hhi) - double(hlo)) * double(i) / 2048); };
                const auto best = std::min_element(all.begin(), all.end(),
                                                   [](const WindowKl& a, const WindowKl& b) { return a.kl < b.kl; });
                const auto picked = std::find_if(all.begin(), all.end(), [&](const WindowKl& w) {
                    return r[g].max == edge(w.first + w.kept) &&
                           r[g].min == (symmetric ? -edge(w.kept) : edge(w.first));
                });
                QVERIFY(picked != all.end());
                QVERIFY(picked->kl <= best->kl + 1e-9 * std::abs(best->kl) + 1e-15);
                bool clearWinner = true;
                for (const WindowKl& w : all)
                    clearWinner &= &w == &*best || w.kl > best->kl + 1e-9 * std::abs(best->kl) + 1e-15;
                if (clearWinner)
                    QCOMPARE(picked->kept, best->kept);
                // The bulk is kept; on the gaussian channels the symmetric (TensorRT)
                // search also clips the outliers away.
                if (g < 2)
                    QVERIFY2(r[g].max > 2.0f && (symmetric ? r[g].max < 15.0f : r[g].min < -2.0f),
                             qPrintable(QString("[%1, %2] group %3 symmetric %4")
                                            .arg(r[g].min)
                                            .arg(r[g].max)
                                            .arg(g)
                                            .arg(symmetric)));
            }
        }
        QCOMPARE(entropyLevels(QType::Int8, true, false), 128);
        QCOMPARE(entropyLevels(QType::Int8, false, false), 256);
        QCOMPARE(entropyLevels(QType::Fp8E4M3, true, false), 126);
        QCOMPARE(entropyLevels(QType::Fp4E2M1, true, false), 7);
    }

    void microscalingTypesRefuseCalibration()
    {
        const std::vector<float> x = gaussian(64, 1);
        CalibrationTarget t;
        t.qtype = QType::MxFp4;
        QVERIFY_THROWS_WITH(
            calibrateRanges(x, BlockLayout::perTensor({64}), CalibrationMethod::parse("absmax"), t, "blk.w"), "'blk.w'",
            "mxfp4", "own block scales");
    }

    void growingHistogramKeepsCountsAndMatchesFromScratch()
    {
        GrowingHistogram h(256);
        std::vector<float> all;
        // Batches of one piece (straight into the totals) and of several
        // (counted in parallel). The first is so small that its bin width is
        // below 2^-126 (binned in double, not float); one is half zeros (a
        // ReLU's output: zeros go to spare counters); one holds subnormals.
        const float sigmas[] = {1e-37f, 0.01f, 0.5f, 0.2f, 40.0f, 3.0f, 1.0f, 2.0f};
        const size_t sizes[] = {20000, 20000, 100000, 3, 70000, 20000, 50001, 40000};
        uint32_t seed = 1;
        for (size_t b = 0; b < std::size(sigmas); ++b) {
            std::vector<float> batch = gaussian(sizes[b], seed++, sigmas[b]);
            if (b == 6)
                for (float& v : batch)
                    v = std::max(v, 0.0f);
            if (b == 7)
                for (size_t i = 0; i < batch.size(); i += 3)
                    batch[i] = std::ldexp(batch[i], -140);
            batch[0] = 0.0f;
            batch[1] = -0.0f;
            h.add(batch);
            all.insert(all.end(), batch.begin(), batch.end());
            QCOMPARE(h.total(), int64_t(all.size()));
            float absMax = 0;
            for (float v : all)
                absMax = std::max(absMax, std::abs(v));
            QVERIFY(absMax < h.range());
            QVERIFY(absMax >= h.range() / 2); // at least half of the bins in use
            std::vector<int64_t> scratch(512, 0);
            for (float v : all)
                ++scratch[size_t(GrowingHistogram::binOf(v, h.exponent(), 256))];
            QCOMPARE(h.counts(), scratch);
        }
        const std::vector<float> withNan{1.0f, NAN, 2.0f};
        QVERIFY_THROWS_WITH(h.add(withNan), "NaN");
        QCOMPARE(h.total(), int64_t(all.size()));
        const GrowingHistogram back = GrowingHistogram::fromJson(h.toJson());
        QCOMPARE(back.counts(), h.counts());
        QCOMPARE(back.exponent(), h.exponent());
        // Folding onto |x| adds the two sides.
        const Histogram mags = h.magnitudes();
        QCOMPARE(mags.total(), h.total());
        QCOMPARE(mags.counts[0], h.counts()[256] + h.counts()[255]);
    }

    void observerAveragesPerSampleStatisticsOverBatches()
    {
        // Three batches of shape [2, 3]: batch axis 0, statistics per sample then averaged.
        const std::vector<std::vector<float>> batches{
            {1, -2, 3, 0.5f, 0.5f, -0.5f}, {4, 4, 4, -1, -1, -1}, {0, 0, 0, 9, -9, 1}};
        Observer o("act", ObserverConfig{{0}, -1, 64});
        double sumAbs = 0, sumMin = 0, sumMax = 0, sumRms = 0;
        for (const auto& b : batches) {
            o.observe(b, {2, 3});
            double a = 0, mn = 0, mx = 0, rms = 0;
            for (int s = 0; s < 2; ++s) {
                const float* v = b.data() + 3 * s;
                const float lo = std::min({v[0], v[1], v[2]}), hi = std::max({v[0], v[1], v[2]});
                a += std::max(-lo, hi) / 2.0;
                mn += lo / 2.0;
                mx += hi / 2.0;
                rms += std::sqrt((v[0] * v[0] + v[1] * v[1] + v[2] * v[2]) / 3.0) / 2.0;
            }
            sumAbs += a;
            sumMin += mn;
            sumMax += mx;
            sumRms += rms;
        }
        QCOMPARE(o.batches(), int64_t(3));
        QVERIFY(std::abs(o.averageAbsMax(0) - sumAbs / 3) < 1e-12);
        QVERIFY(std::abs(o.averageMin(0) - sumMin / 3) < 1e-12);
        QVERIFY(std::abs(o.averageMax(0) - sumMax / 3) < 1e-12);
        QVERIFY(std::abs(o.averageRms(0) - sumRms / 3) < 1e-6);
        QCOMPARE_EXACT(o.runningMin(0), -9.0f);
        QCOMPARE_EXACT(o.runningMax(0), 9.0f);
        const auto r = o.ranges(CalibrationMethod::parse("absmax,2"), {});
        QCOMPARE_EXACT(r[0].max, float(2 * (sumAbs / 3)));
        const auto mm = o.ranges(CalibrationMethod::parse("minmax"), {});
        QCOMPARE_EXACT(mm[0].min, float(sumMin / 3));

        // Without batch axes the whole batch is one sample: the per-batch absmax is the batch's.
        Observer whole("act", ObserverConfig{{}, -1, 0});
        for (const auto& b : batches)
            whole.observe(b, {2, 3});
        QVERIFY(std::abs(whole.averageAbsMax(0) - (3.0 + 4.0 + 9.0) / 3) < 1e-12);
        QVERIFY_THROWS_WITH(whole.ranges(CalibrationMethod::parse("entropy"), {}), "'act'", "no histogram");
    }

    void observerPerChannelAndErrors()
    {
        // [N, C, L] with channels on axis 1; batch axes {0}.
        const std::vector<float> x = gaussian(4 * 3 * 50, 9);
        Observer o("conv1/out", ObserverConfig{{0}, 1, 128});
        o.observe(x, {4, 3, 50});
        QCOMPARE(o.groupCount(), int64_t(3));
        for (size_t c = 0; c < 3; ++c) {
            double mean = 0;
            float lo = INFINITY;
            for (int n = 0; n < 4; ++n) {
                float a = 0;
                for (int l = 0; l < 50; ++l) {
                    a = std::max(a, std::abs(x[size_t(n * 150 + int(c) * 50 + l)]));
                    lo = std::min(lo, x[size_t(n * 150 + int(c) * 50 + l)]);
                }
                mean += a / 4.0;
            }
            QVERIFY(std::abs(o.averageAbsMax(c) - mean) < 1e-12);
            QCOMPARE_EXACT(o.runningMin(c), lo);
            QCOMPARE(o.histogram(c).total(), int64_t(200));
        }
        QVERIFY_THROWS_WITH(o.observe(gaussian(4 * 5 * 50, 1), {4, 5, 50}), "'conv1/out'", "5 channels");
        Observer bad("a", ObserverConfig{{1}, 1, 0});
        QVERIFY_THROWS_WITH(bad.observe(x, {4, 3, 50}), "'a'", "also a batch axis");
        Observer none("b");
        QVERIFY_THROWS_WITH(none.ranges(CalibrationMethod::parse("absmax"), {}), "'b'", "no batch");
        std::vector<float> withNan = x;
        withNan[17] = NAN;
        QVERIFY_THROWS_WITH(none.observe(withNan, {4, 3, 50}), "'b'", "NaN", "17");
    }

    void observerHistogramMethodsAndJsonRoundTrip()
    {
        Observer o("act");
        std::vector<float> all;
        for (uint32_t b = 0; b < 4; ++b) {
            const std::vector<float> batch = adversarial(8 * 1000, 50 + b);
            o.observe(batch, {8, 1000});
            all.insert(all.end(), batch.begin(), batch.end());
        }
        // Histogram percentile: within one bin of the exact percentile.
        const auto p = o.ranges(CalibrationMethod::parse("percentile,99.9"), {});
        const double exact = exactPercentile(all, HistogramOf::Magnitudes, 99.9);
        QVERIFY2(std::abs(p[0].max - exact) <= o.histogram(0).binWidth(),
                 qPrintable(QString("%1 vs %2").arg(p[0].max).arg(exact)));
        CalibrationTarget two;
        two.symmetric = false;
        const auto p2 = o.ranges(CalibrationMethod::parse("percentile,99"), two);
        QVERIFY(std::abs(p2[0].min - exactPercentile(all, HistogramOf::Values, 1)) <= o.histogram(0).binWidth());

        const Observer back = Observer::fromJson(nlohmann::json::parse(o.toJson().dump()));
        for (const char* m : {"absmax", "minmax,0.9", "rms,4", "fixed,-2,3", "percentile,99.99", "mse", "entropy"}) {
            const CalibrationMethod method = CalibrationMethod::parse(m);
            CalibrationTarget t;
            t.symmetric = method.acceptsSymmetricOverride() ? std::optional<bool>(false) : std::nullopt;
            for (const CalibrationTarget& target : {CalibrationTarget{}, t}) {
                if (!method.acceptsSymmetricOverride() && target.symmetric)
                    continue;
                const auto a = o.ranges(method, target), b = back.ranges(method, target);
                QCOMPARE_EXACT(a[0].min, b[0].min);
                QCOMPARE_EXACT(a[0].max, b[0].max);
                QVERIFY(a[0].min <= a[0].max);
            }
        }
        // mse and entropy from the histograms clip rare outliers at ±20 of gaussian batches.
        Observer g("act");
        for (uint32_t b = 0; b < 4; ++b) {
            std::vector<float> batch = gaussian(250000, 70 + b);
            for (size_t i = 0; i < batch.size(); i += 10000)
                batch[i] = i % 20000 ? 20.0f : -20.0f;
            g.observe(batch, {250, 1000});
        }
        CalibrationTarget int4; // int8's rounding noise is below the cost of clipping these outliers
        int4.qtype = QType::Int4;
        const float mse = g.ranges(CalibrationMethod::parse("mse"), int4)[0].max;
        const float entropy = g.ranges(CalibrationMethod::parse("entropy"), {})[0].max;
        QVERIFY2(mse > 2.0f && mse < 15.0f, qPrintable(QString::number(mse)));
        QVERIFY2(entropy > 2.0f && entropy < 15.0f, qPrintable(QString::number(entropy)));
        QVERIFY_THROWS_WITH(Observer::fromJson(nlohmann::json{{"name", "x"}, {"version", 2}}), "'x'", "version");
    }
};

QTEST_APPLESS_MAIN(TestCalib)
#include "tst_calib.moc"
