// Calibration: method strings, statistics over block layouts, histograms, exact
// percentiles, growing histograms and streaming observers. (The clipping
// searches against brute force: tst_calib_search.)
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
                    // Squares are summed in float lanes, up to 64 to a lane, before double.
                    QVERIFY(std::abs(st.sumSquares[g] - ss) <= 4e-6 * ss);
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
                QVERIFY2(std::abs(a.sumSquares[g] - ss) <= 4e-6 * ss,
                         qPrintable(QString::number(std::abs(a.sumSquares[g] - ss) / ss)));
                QCOMPARE_EXACT(a.max[g], *std::max_element(groups[g].begin(), groups[g].end()));
            }
        }
    }

    void longRunsSumSquaresPastFloatRange()
    {
        // Squares of 1e20 overflow float: short and long runs sum them again in double.
        for (const int64_t n : {int64_t(3000), int64_t(5000), int64_t(70001)}) {
            std::vector<float> x = gaussian(size_t(n), 4);
            x[size_t(n / 3)] = 1e20f;
            x[size_t(n / 2)] = -3e25f;
            const GroupStatistics st = groupStatistics(x, BlockLayout::perTensor(Shape{n}), "x", true);
            double ss = 0;
            for (float v : x)
                ss += double(v) * v;
            QVERIFY(std::isfinite(st.sumSquares[0]));
            QVERIFY(std::abs(st.sumSquares[0] - ss) <= 1e-12 * ss);
            QCOMPARE_EXACT(st.max[0], 1e20f);
        }
    }

    void nonFiniteDataInLongRunsNamesTheIndex()
    {
        // Short runs and runs long enough for the four-stream summary, with and
        // without sums of squares.
        for (float bad : {NAN, INFINITY, -INFINITY})
            for (bool squares : {false, true})
                for (const int64_t n : {int64_t(2000), int64_t(100000)}) {
                    std::vector<float> x = gaussian(size_t(n), 1);
                    const std::string at = "flat index " + std::to_string(n * 7 / 9);
                    x[size_t(n * 7 / 9)] = bad;
                    QVERIFY_THROWS_WITH(groupStatistics(x, BlockLayout::perTensor(Shape{n}), "act", squares), "'act'",
                                        at.c_str());
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
