// The computations the charts plot (engine: analysis/distribution,
// analysis/scale_ranges, analysis/method_comparison, session/layer_errors),
// tested without Qt Widgets; tst_charts tests the views that draw them.
#include <QtTest>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <future>
#include <random>
#include <thread>

#include "chart_test_inputs.h"

#include "analysis/distribution.h"
#include "analysis/method_comparison.h"
#include "quant/metrics.h"
#include "analysis/scale_ranges.h"
#include "quantization/tensor_quantization.h"
#include "graph/model.h"
#include "io/model_loader.h"
#include "quant/kernels.h"
#include "runtime/activation_calibration.h"
#include "session/evaluation.h"
#include "session/layer_errors.h"

using namespace qs;
using namespace qs::chart_test;

namespace {

int64_t sum(const std::vector<int64_t>& v)
{
    int64_t s = 0;
    for (const int64_t c : v)
        s += c;
    return s;
}

} // namespace

class TestChartData : public QObject {
    Q_OBJECT
private slots:
    void distributionCountsAddUpAndClippedMassIsAnalysis()
    {
        for (const char* method : {"absmax", "percentile,99", "minmax", "mse"})
            for (const Granularity g : {Granularity::PerTensor, Granularity::PerChannel}) {
                const Tensor x = noisyTensor({12, 5, 31}, 7);
                const QuantizationSpec spec = specOf(method, g);
                const TensorQuantization q = computeQuantization(x, spec, "w");
                const Tensor fq = fakeQuantize(x, q.params);
                const DistributionData d = weightDistribution(x, fq, q, 0, std::nullopt, "w", 200);
                QCOMPARE(d.elements, x.numel());
                QCOMPARE(d.values.total(), x.numel());
                QCOMPARE(d.fakeQuant.total(), x.numel());
                QCOMPARE(d.roundingCount + d.clippingCount, x.numel());
                QCOMPARE(d.roundingError.total(), d.roundingCount);
                QCOMPARE(d.clippingError.total(), d.clippingCount);
                QCOMPARE(d.clipped, d.clippingCount);
                QCOMPARE(d.clippedFraction, fractionClipped(x.values<float>(), q.params.layout, q.ranges));
                QCOMPARE(sum(d.strip), x.numel());
                QCOMPARE(d.channels, int64_t(12));
                // Scalar reference: the clipped count and the outliers by a plain loop.
                int64_t clipped = 0, outliers = 0;
                const auto xs = x.values<float>();
                for (int64_t i = 0; i < x.numel(); ++i) {
                    const Range& r = q.ranges[size_t(q.params.layout.groupOf(i))];
                    clipped += xs[size_t(i)] < r.min || xs[size_t(i)] > r.max;
                    outliers += std::abs(xs[size_t(i)] - d.mean) > kOutlierSigmas * d.stddev;
                }
                QCOMPARE(d.clipped, clipped);
                QCOMPARE(d.outliers, outliers);
                if (QString(method).startsWith("percentile"))
                    QVERIFY(d.clipped > 0);
                if (QString(method) == "absmax")
                    QCOMPARE(d.clipped, int64_t(0));
                // Rounding error stays within half a step of the widest group's scale.
                const float widest = *std::max_element(q.params.scales.begin(), q.params.scales.end());
                QVERIFY(d.roundingError.lo >= -0.5 * widest * 1.0001 && d.roundingError.hi <= 0.5 * widest * 1.0001);
            }
    }

    // The weight quantizer holds no ranges for a GGUF block type (a group per 32
    // weights); the distribution then takes each block's data range with 0, and
    // must equal the one drawn from the full quantization.
    void distributionOfAGgufBlockWeightWithoutRanges()
    {
        const Tensor x = noisyTensor({12, 64}, 5);
        QuantizationSpec spec = specOf("absmax");
        spec.qtype = QType::Q4_0;
        const TensorQuantization full = computeQuantization(x, spec, "w");
        QCOMPARE(full.ranges.size(), size_t(24));
        TensorQuantization held = full;
        held.ranges = {};
        held.saturation = {};
        const Tensor fq = fakeQuantize(x, full.params);
        for (const std::optional<int64_t> channel : {std::optional<int64_t>{}, std::optional<int64_t>{3}}) {
            const DistributionData a = weightDistribution(x, fq, full, 0, channel, "w", 64);
            const DistributionData b = weightDistribution(x, fq, held, 0, channel, "w", 64);
            QCOMPARE(b.clipped, a.clipped);
            QCOMPARE(b.clippedFraction, a.clippedFraction);
            QCOMPARE(b.range.min, a.range.min);
            QCOMPARE(b.range.max, a.range.max);
            QCOMPARE(b.roundingCount, a.roundingCount);
            QCOMPARE(b.channelRanges.size(), a.channelRanges.size());
            for (size_t c = 0; c < a.channelRanges.size(); ++c) {
                QCOMPARE(b.channelRanges[c].min, a.channelRanges[c].min);
                QCOMPARE(b.channelRanges[c].max, a.channelRanges[c].max);
            }
        }
    }

    void distributionOfOneChannel()
    {
        const Tensor x = noisyTensor({6, 40}, 3);
        const TensorQuantization q = computeQuantization(x, specOf("percentile,95"), "w");
        const Tensor fq = fakeQuantize(x, q.params);
        const DistributionData d = weightDistribution(x, fq, q, 0, int64_t(4), "w", 64);
        QCOMPARE(d.elements, int64_t(40));
        QCOMPARE(d.values.total(), int64_t(40));
        QVERIFY(d.strip.empty());
        QVERIFY(d.grid.has_value());
        QCOMPARE(d.grid->scale, q.params.scales[4]);
        QCOMPARE(d.range.min, q.ranges[4].min);
        QCOMPARE(d.range.max, q.ranges[4].max);
        int64_t clipped = 0;
        for (int64_t i = 160; i < 200; ++i)
            clipped += std::abs(x.values<float>()[size_t(i)]) > q.ranges[4].max;
        QCOMPARE(d.clipped, clipped);
        QVERIFY_THROWS_EXCEPTION(Error, weightDistribution(x, fq, q, 0, int64_t(6), "w", 64));
    }

    void gridValuesAreTheTypesValuesTimesScale()
    {
        GroupQuant g{QType::Int8, integerGrid(QType::Int8, false), 0.25f, 0};
        const auto values = gridValuesIn(g, -1.0, 1.0, 100);
        QCOMPARE(values.size(), size_t(9));
        QCOMPARE(values.front(), -1.0f);
        QCOMPARE(values.back(), 1.0f);
        QVERIFY(gridValuesIn(g, -100, 100, 100).empty()); // too dense to draw
        GroupQuant fp4{QType::Fp4E2M1, {0, 0}, 2.0f, 0};
        const auto fp4Values = gridValuesIn(fp4, -100, 100, 100);
        QCOMPARE(fp4Values.size(), size_t(15)); // ±{0.5,1,1.5,2,3,4,6}·2 and 0 (signed zeros merged)
        QCOMPARE(fp4Values.back(), 12.0f);
        GroupQuant asym{QType::UInt8, integerGrid(QType::UInt8, false), 0.5f, 10};
        const auto a = gridValuesIn(asym, -5.0, 0.0, 100);
        QCOMPARE(a.front(), -5.0f); // code 0 is (0 − 10)·0.5
        QCOMPARE(a.size(), size_t(11));
    }

    void activationDistributionFromObserver()
    {
        Observer obs("act", ObserverConfig{{0}, -1, 512});
        const Tensor batch = noisyTensor({8, 300}, 11);
        obs.observe(batch);
        CalibrationTarget target;
        const CalibrationMethod m = CalibrationMethod::parse("percentile,99");
        const auto ranges = obs.ranges(m, target);
        const QuantParams params =
            quantParamsFromRanges(QType::Int8, BlockLayout::perTensor({1}), ranges, true, {}, "act");
        const DistributionData d = activationDistribution(obs, params, ranges[0], 128);
        QVERIFY(d.estimated);
        QCOMPARE(d.elements, batch.numel());
        QCOMPARE(d.values.total(), batch.numel());
        QCOMPARE(d.roundingCount + d.clippingCount, batch.numel());
        QVERIFY(d.clipped > 0);
        QVERIFY(d.clippedFraction < 0.05);
    }

    void scaleRangesEqualComputeQuantization()
    {
        const Tensor w = demoWeight(demo().conv1);
        const TensorQuantization q = computeQuantization(w, specOf("absmax"), "conv1");
        const ScaleRangeData d = scaleRanges(w, q, 0, "conv1");
        QCOMPARE(d.channels, w.dim(0));
        QCOMPARE(d.tilesPerChannel, int64_t(1));
        const TensorQuantization minmax = computeQuantization(w, specOf("minmax"), "conv1");
        for (int64_t c = 0; c < d.channels; ++c) {
            QCOMPARE(d.calibrated[size_t(c)].min, q.ranges[size_t(c)].min);
            QCOMPARE(d.calibrated[size_t(c)].max, q.ranges[size_t(c)].max);
            QCOMPARE(d.scales[size_t(c)], q.params.scales[size_t(c)]);
            QCOMPARE(float(d.channelAbsMax(c)), q.ranges[size_t(c)].max); // absmax ranges are ±absmax
            QCOMPARE(d.channelMin[size_t(c)], minmax.ranges[size_t(c)].min);
            QCOMPARE(d.channelMax[size_t(c)], minmax.ranges[size_t(c)].max);
        }
        const auto order = d.sortedByAbsMax();
        for (size_t i = 1; i < order.size(); ++i)
            QVERIFY(d.channelAbsMax(order[i - 1]) >= d.channelAbsMax(order[i]));
        const auto [mn, mx] = std::minmax_element(w.values<float>().begin(), w.values<float>().end());
        QCOMPARE(d.tensorMin, *mn);
        QCOMPARE(d.tensorMax, *mx);
        QCOMPARE(d.spread(), double(*std::max_element(q.params.scales.begin(), q.params.scales.end())) /
                                 double(*std::min_element(q.params.scales.begin(), q.params.scales.end())));
    }

    void tiledScalesLandInTheirCell()
    {
        const Tensor w = noisyTensor({5, 64}, 5);
        const TensorQuantization q = computeQuantization(w, tiledSpec(16), "w");
        const ScaleRangeData d = scaleRanges(w, q, 0, "w");
        QCOMPARE(d.tilesPerChannel, int64_t(4));
        for (int64_t c = 0; c < 5; ++c)
            for (int64_t t = 0; t < 4; ++t) {
                float absmax = 0;
                for (int64_t k = 0; k < 16; ++k)
                    absmax = std::max(absmax, std::abs(w.values<float>()[size_t(c * 64 + t * 16 + k)]));
                QCOMPARE(d.scales[size_t(c * 4 + t)], absmax / 127.5f);
            }
    }

    void comparisonIsSortedByMseWithTheUsersPAndS()
    {
        const Tensor w = noisyTensor({8, 128}, 21);
        const MethodComparisonData d = compareWeightMethods(w, specOf("absmax"), 99.5, 2.5, "w");
        QCOMPARE(d.values.total(), w.numel());
        QStringList methods;
        for (const MethodResult& r : d.results)
            methods << QString::fromStdString(r.method);
        QVERIFY2(methods.contains("percentile,99.5") && methods.contains("rms,2.5") && methods.contains("mse"),
                 qPrintable(methods.join(' ')));
        QVERIFY(!methods.contains("percentile,99.9"));
        for (size_t i = 1; i < d.results.size(); ++i)
            if (d.results[i].skipped.empty())
                QVERIFY(d.results[i - 1].metrics.mse <= d.results[i].metrics.mse);
        const MethodResult* best = d.best();
        QVERIFY(best);
        for (const MethodResult& r : d.results)
            QVERIFY(best->metrics.mse <= r.metrics.mse);
        // The rows compareMethods also measures carry its numbers.
        for (const MethodResult& r : compareMethods(w, specOf("absmax"), "w"))
            for (const MethodResult& mine : d.results)
                if (mine.method == r.method)
                    QCOMPARE(mine.metrics.mse, r.metrics.mse);
    }

    void comparisonCountsWhatSaturatesUnderTheScaleUsed()
    {
        // pow2 rounds each scale to a power of two, often down: values near absmax then saturate. The chart
        // must count them as compare-methods and the layer table do (saturationRanges), not report 0% for
        // values inside the calibrated range that the grid cannot reach.
        const Tensor w = noisyTensor({8, 128}, 23);
        QuantizationSpec spec = specOf("absmax");
        spec.options.restriction = ScaleRestriction::Pow2;
        const MethodComparisonData d = compareWeightMethods(w, spec, 99.9, 3, "w");
        const auto absmax = std::find_if(d.results.begin(), d.results.end(),
                                         [](const MethodResult& r) { return r.method == "absmax"; });
        QVERIFY(absmax != d.results.end());
        const TensorQuantization q = computeQuantization(w, spec, "w");
        QCOMPARE(absmax->metrics.fractionClipped, fractionClipped(w.values<float>(), q.params.layout, q.saturation));
        QVERIFY(absmax->metrics.fractionClipped > 0);
        // The calibrated range itself clips nothing under absmax: the old count.
        QCOMPARE(fractionClipped(w.values<float>(), q.params.layout, q.ranges), 0.0);
    }

    void floatTypesSkipAsymmetricMethods()
    {
        const Tensor w = noisyTensor({4, 64}, 2);
        const MethodComparisonData d =
            compareWeightMethods(w, specOf("absmax", Granularity::PerChannel, QType::Fp8E4M3), 99.9, 3, "w");
        QCOMPARE(d.results.back().method, std::string("minmax"));
        QVERIFY(!d.results.back().skipped.empty());
        QVERIFY(d.best() && d.best()->skipped.empty());
    }

    void cancelledComparisonStopsBetweenMethods()
    {
        // A token cancelled before the call: compareMethods measures no method.
        const Tensor w = noisyTensor({4, 64}, 3);
        CancellationToken cancelled;
        cancelled.cancel();
        QVERIFY_THROWS_EXCEPTION(Cancelled, compareMethods(w, specOf("absmax"), "w", cancelled));
        QVERIFY_THROWS_EXCEPTION(Cancelled, compareWeightMethods(w, specOf("absmax"), 99.9, 3, "w", 64, cancelled));

        // The job token of a superseded comparison, cancelled while it runs: the comparison stops at the next
        // method instead of measuring all of them (mse and entropy are the slow ones) before it notices.
        const Tensor big = noisyTensor({64, 65536}, 4);
        QElapsedTimer timer;
        timer.start();
        compareMethods(big, specOf("absmax"), "big");
        const qint64 fullMs = timer.elapsed();
        CancellationToken token;
        timer.restart();
        auto running = std::async(
            std::launch::async, [&] { return compareWeightMethods(big, specOf("absmax"), 99.9, 3, "big", 64, token); });
        std::this_thread::sleep_for(std::chrono::milliseconds(fullMs / 20));
        token.cancel();
        QVERIFY_THROWS_EXCEPTION(Cancelled, running.get());
        const qint64 cancelledMs = timer.elapsed();
        qInfo("full comparison %lld ms, cancelled after %lld ms: stopped at %lld ms", fullMs, fullMs / 20, cancelledMs);
        QVERIFY2(cancelledMs < fullMs / 2,
                 qPrintable(QString("stopped after %1 ms of %2").arg(cancelledMs).arg(fullMs)));
    }

    void layerErrorsJoinEvaluationWeightsAndSensitivity()
    {
        const Model& model = demo().model;
        const LayerErrorInputs in = layerErrorInputs();
        const LayerErrorData d = layerErrors(model, &in.eval, in.weights, &in.sens);
        QCOMPARE(d.rows.size(), in.eval.layers.size());
        QCOMPARE(*d.rows[0].weightSqnr, 30.0); // the evaluation's own weight metric wins
        QCOMPARE(d.sensitivity.front().modulePath, model.layers[3].modulePath);
    }

    void comparedMethodsAreOneList()
    {
        // compare-methods' list and the charts' (with the user's p and s) are the same list.
        const std::vector<std::string> cli{"absmax",           "minmax", "rms,3",  "percentile,99.9",
                                           "percentile,99.99", "mse",    "entropy"};
        QCOMPARE(comparedMethods(), cli);
        const std::vector<std::string> charts{"absmax", "minmax", "rms,2.5", "percentile,99.5", "mse", "entropy"};
        QCOMPARE(comparedMethods({99.5}, 2.5), charts);
        std::vector<std::string> compared;
        for (const MethodResult& r :
             compareWeightMethods(noisyTensor({4, 64}, 9), specOf("absmax"), 99.5, 2.5, "w").results)
            compared.push_back(r.method);
        std::sort(compared.begin(), compared.end());
        std::vector<std::string> expected = charts;
        std::sort(expected.begin(), expected.end());
        QCOMPARE(compared, expected);
    }

    void unsignedWeightSkipsSymmetricMethodsWhateverPAndS()
    {
        // A p the CLI does not try is skipped like the others (it used to reach computeQuantization and fail).
        const Tensor w = noisyTensor({4, 64}, 8);
        const MethodComparisonData d =
            compareWeightMethods(w, specOf("minmax", Granularity::PerChannel, QType::UInt8), 99.5, 2.5, "w");
        for (const MethodResult& r : d.results) {
            if (r.method == "minmax")
                QVERIFY(r.skipped.empty());
            else if (r.method != "mse" && r.method != "entropy")
                QVERIFY2(r.skipped.starts_with("symmetric"), r.method.c_str());
        }
        QCOMPARE(d.best()->method, std::string("minmax"));
    }

    void staticActivationIsWhatTheChartAndTheHookUse()
    {
        Observer obs("act", ObserverConfig{{0}, -1, 512});
        obs.observe(noisyTensor({8, 300}, 12));
        ActivationQuantization a;
        a.value = "act";
        a.method = CalibrationMethod::parse("percentile,99");
        a.target.qtype = QType::Int8;
        const StaticActivation s = staticActivationFrom(obs, a);
        const auto ranges = obs.ranges(a.method, a.target);
        QCOMPARE(s.range.min, ranges[0].min);
        QCOMPARE(s.range.max, ranges[0].max);
        const QuantParams expected =
            quantParamsFromRanges(QType::Int8, BlockLayout::perTensor({1}), ranges, true, {}, "act");
        QCOMPARE(s.params.scales, expected.scales);
        QCOMPARE(s.params.layout.groupCount(), int64_t(1));
        // An asymmetric method gets its zero point.
        a.method = CalibrationMethod::parse("minmax");
        QVERIFY(!staticActivationFrom(obs, a).params.symmetric);
    }
};

QTEST_MAIN(TestChartData)
#include "tst_chart_data.moc"
