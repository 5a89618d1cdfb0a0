// Calibration's clipping searches: every method against a brute-force
// reference, MSE and entropy (KL) searches, and the entropy search against
// independent NumPy and TensorRT formulations.
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
#include "calib_support.h"
#include "core/error.h"
#include "quant/kernels.h"
#include "quant/reference.h"

using namespace qs;
using namespace qs::test;

namespace {

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

} // namespace

class TestCalibSearch : public QObject {
    Q_OBJECT
private slots:
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
};

QTEST_APPLESS_MAIN(TestCalibSearch)
#include "tst_calib_search.moc"
