// AdaRound (quantization/adaround.h) checked against things other than itself:
// - an independent NumPy AdaRound written from the paper
//   (tests/adaround/adaround_reference.py), which evaluates the objective on the
//   inputs X themselves rather than on their Hessian, chooses the same integer
//   codes on fixed layers — a Gemm (symmetric and asymmetric grids) and Convs,
//   plain, depthwise and grouped (their im2col patches written out here by hand;
//   a grouped Conv's rows against their own group's inputs) — and reaches the
//   same objective;
// - the layer's output error on the calibration inputs, ||W·X − Ŵ·X||², is
//   never above round-to-nearest's, computed here from X (per channel and in
//   asymmetric tiles);
// - the result is the same for one thread and for many; a cancel stops it;
// - bad Hessians and grids are errors naming the tensor.

#include <QtTest>

#include <tbb/global_control.h>

#include <Eigen/Dense>

#include <cmath>
#include <random>
#include <thread>

#include "io/npy.h"
#include "layer_support.h"
#include "quant/kernels.h"
#include "quantization/adaround.h"
#include "quantization/input_hessian.h"
#include "quantization/tensor_quantization.h"
#include "test_support.h"

using namespace qs;
using namespace qs::test;

namespace {

const QString kReference = QStringLiteral(QUANTSCOPE_TEST_DATA "/../adaround/adaround_reference.py");

// A weight [rows, cols] and inputs [n, cols] with correlated features of unequal magnitude.
struct Layer {
    Eigen::MatrixXf w;
    Eigen::MatrixXf x;
};

Layer randomLayer(int64_t rows, int64_t cols, int64_t n, uint64_t seed)
{
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal;
    Layer l{Eigen::MatrixXf(rows, cols), Eigen::MatrixXf(n, cols)};
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
            l.w(r, c) = normal(rng) * 0.05f;
    const int64_t factors = 6;
    Eigen::MatrixXf mix(factors, cols), z(n, factors);
    for (float& v : mix.reshaped())
        v = normal(rng);
    for (float& v : z.reshaped())
        v = normal(rng);
    l.x = z * mix;
    for (int64_t c = 0; c < cols; ++c) {
        const float magnitude = std::exp(normal(rng) * 0.7f);
        for (int64_t i = 0; i < n; ++i)
            l.x(i, c) = (l.x(i, c) + 0.3f * normal(rng)) * magnitude;
    }
    return l;
}

Eigen::MatrixXd hessianOf(const Eigen::MatrixXf& x)
{
    InputHessian h(x.cols());
    const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> rows = x.cast<double>();
    h.addRows(rows.data(), rows.rows());
    return h.hessian();
}

QuantizationSpec intSpec(int bits, bool symmetric)
{
    QuantizationSpec spec;
    spec.qtype = bits == 4 ? QType::Int4 : bits == 3 ? QType::Int3 : QType::Int8;
    spec.method = CalibrationMethod::parse(symmetric ? "absmax" : "minmax");
    spec.granularity = Granularity::PerChannel;
    spec.axis = 0;
    return spec;
}

// ||W·Xᵀ − Ŵ·Xᵀ||² / n, from the inputs.
double outputError(const Eigen::MatrixXf& w, const Eigen::MatrixXf& rounded, const Eigen::MatrixXf& x)
{
    return ((w - rounded).cast<double>() * x.cast<double>().transpose()).squaredNorm() / double(x.rows());
}

} // namespace

class TestAdaround : public QObject {
    Q_OBJECT

private slots:
    void matchesTheNumpyReferenceCodeForCode_data()
    {
        QTest::addColumn<QString>("layer");
        QTest::addColumn<int>("bits");
        QTest::addColumn<bool>("symmetric");
        QTest::addColumn<QString>("algorithm");
        QTest::newRow("Gemm int4 per channel") << "gemm" << 4 << true << "adaround";
        QTest::newRow("Gemm int4 asymmetric") << "gemm" << 4 << false << "adaround";
        QTest::newRow("Gemm int3, 400 steps, lambda 0.1") << "gemm" << 3 << true << "adaround,400,0.1";
        QTest::newRow("Conv int4 per channel") << "conv" << 4 << true << "adaround";
        QTest::newRow("Conv int4 asymmetric") << "conv" << 4 << false << "adaround";
        QTest::newRow("depthwise Conv int4 per channel") << "depthwise" << 4 << true << "adaround";
        QTest::newRow("grouped Conv (2 groups) int4 asymmetric") << "grouped" << 4 << false << "adaround";
    }

    void matchesTheNumpyReferenceCodeForCode()
    {
        QFETCH(QString, layer);
        QFETCH(int, bits);
        QFETCH(bool, symmetric);
        QFETCH(QString, algorithm);
        const WeightAlgorithm a = WeightAlgorithm::parse(algorithm.toStdString());
        const QuantizationSpec spec = intSpec(bits, symmetric);
        Tensor w;                              // the weight as the engine sees it
        Eigen::MatrixXf wm, x;                 // [O, F] and [n, F] for the reference
        std::vector<Eigen::MatrixXd> hessians; // the engine's own, one per group
        int64_t groups = 1;
        if (layer == "gemm") {
            const Layer l = randomLayer(40, 96, 600, 5); // 40 rows: two full blocks of 16 and a short one
            w = tensorOf(l.w);
            wm = l.w;
            x = l.x;
            hessians = {hessianOf(l.x)};
        } else {
            // Conv, stride 2, pads 1 on [6, C, 11, 9] inputs (6·6·5 patches): [O=12, C=4, 3, 3] (36 features);
            // depthwise [24, 1, 3, 3] (24 groups of 9 features: one output channel each); grouped
            // [36, 4, 3, 3] in 2 groups (C = 8; 18 rows per group: a full block of 16 and a short one).
            const Shape shape = layer == "conv"        ? Shape{12, 4, 3, 3}
                                : layer == "depthwise" ? Shape{24, 1, 3, 3}
                                                       : Shape{36, 4, 3, 3};
            groups = layer == "conv" ? 1 : layer == "depthwise" ? 24 : 2;
            const int64_t channels = shape[1] * groups, features = shape[1] * 9;
            const auto [conv, node] = stride2Pad1Conv(shape, groups);
            std::mt19937 rng(9);
            std::normal_distribution<float> normal;
            w = Tensor(DType::F32, shape);
            for (float& v : w.mutableValues<float>())
                v = normal(rng) * 0.2f;
            Tensor input(DType::F32, {6, channels, 11, 9});
            for (float& v : input.mutableValues<float>())
                v = std::max(0.f, normal(rng) + 0.3f); // post-ReLU
            InputHessian h(calibrationFeatures(conv), true, groups);
            accumulateLayerInput(conv, node, input, h);
            hessians = h.hessians();
            x = stride2Pad1Patches(input); // every group's features, group after group
            wm = Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
                w.values<float>().data(), shape[0], features);
        }
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const std::filesystem::path folder = dir.path().toStdString();
        writeNpy(folder / "W.npy", tensorOf(wm));
        writeNpy(folder / "X.npy", tensorOf(x));
        QVERIFY(runPython(kReference, {dir.path(), QString::number(bits), symmetric ? "sym" : "asym",
                                       QString::number(a.adaroundIterations),
                                       QString::number(a.adaroundLambda, 'g', 17), QString::number(groups)}));

        const AdaroundResult r = adaroundQuantize(w, spec, a, hessians, "w");
        const QuantParams& p = r.quantization.params;
        const auto ours = r.rounded.values<float>();
        const Tensor refCodes = readNpy(folder / "ref_codes.npy").toFloat32();
        const Tensor refRtn = readNpy(folder / "ref_rtn_codes.npy").toFloat32();
        const auto rc = refCodes.values<float>(), rr = refRtn.values<float>();
        const int64_t rows = wm.rows(), cols = wm.cols();
        int64_t agree = 0, flippedByReference = 0;
        Eigen::MatrixXf rounded(rows, cols);
        for (int64_t row = 0; row < rows; ++row)
            for (int64_t c = 0; c < cols; ++c) {
                const size_t k = size_t(row * cols + c);
                const float z = p.zeroPoints.empty() ? 0.f : float(p.zeroPoints[size_t(row)]);
                const float code = std::nearbyint(ours[k] / p.scales[size_t(row)] + z);
                agree += code == rc[k];
                flippedByReference += rc[k] != rr[k];
                rounded(row, c) = ours[k];
            }
        const Tensor refLosses = readNpy(folder / "ref_losses.npy");
        const auto rl = refLosses.values<double>();
        const Eigen::MatrixXf rtn = matrixOf(
            fakeQuantize(tensorOf(wm), computeQuantization(tensorOf(wm), spec, "w").params, Rounding::Nearest, 0, "w"));
        // A grouped Conv's output error: each group's rows on its own inputs, summed.
        const auto groupedError = [&](const Eigen::MatrixXf& result) {
            const int64_t groupRows = rows / groups;
            double sum = 0;
            for (int64_t g = 0; g < groups; ++g)
                sum += outputError(wm.middleRows(g * groupRows, groupRows), result.middleRows(g * groupRows, groupRows),
                                   x.middleCols(g * cols, cols));
            return sum;
        };
        const double rtnError = groupedError(rtn), ourError = groupedError(rounded);
        const double agreement = 100.0 * double(agree) / double(rows * cols);
        qInfo("%s: %.2f%% of %lld codes equal to the NumPy reference's (which rounds %lld weights away from nearest); "
              "output error RTN %.5g, AdaRound %.5g (%.1f%% of RTN), reference %.5g; engine's own figures %.5g / %.5g",
              QTest::currentDataTag(), agreement, (long long)(rows * cols), (long long)flippedByReference, rtnError,
              ourError, 100 * ourError / rtnError, rl[1], r.rtnLoss, r.loss);
        QVERIFY2(flippedByReference > 0, "the case should not be plain rounding to nearest");
        QVERIFY2(agreement >= 99.5, "AdaRound's codes differ from the reference's");
        QVERIFY(std::abs(ourError - rl[1]) <= 1e-4 * rl[1]);
        QVERIFY(std::abs(rtnError - rl[0]) <= 1e-6 * rl[0]);
        // The engine's figures from the Hessian are the ones from the inputs.
        QVERIFY(std::abs(r.loss - ourError) <= 1e-6 * ourError);
        QVERIFY(std::abs(r.rtnLoss - rtnError) <= 1e-6 * rtnError);
        QVERIFY2(ourError < rtnError, "AdaRound should lower round-to-nearest's output error");
        // Every value is a point of the grid: quantizing it again changes nothing.
        const Tensor again = fakeQuantize(r.rounded, p, Rounding::Nearest, 0, "w");
        QCOMPARE(bytesOf(again), bytesOf(r.rounded));
    }

    void neverWorseThanRoundToNearest_data()
    {
        QTest::addColumn<int>("bits");
        QTest::addColumn<bool>("symmetric");
        QTest::addColumn<int>("seed");
        QTest::addColumn<int>("tile");
        for (int seed = 1; seed <= 3; ++seed) {
            QTest::addRow("int4 seed %d", seed) << 4 << true << seed << 0;
            QTest::addRow("int4 asymmetric seed %d", seed) << 4 << false << seed << 0;
            QTest::addRow("int8 seed %d", seed) << 8 << true << seed << 0;
            QTest::addRow("int4 asymmetric tiles of 16, seed %d", seed) << 4 << false << seed << 16;
        }
    }

    void neverWorseThanRoundToNearest()
    {
        QFETCH(int, bits);
        QFETCH(bool, symmetric);
        QFETCH(int, seed);
        QFETCH(int, tile);
        const Layer l = randomLayer(24, 80, 400, uint64_t(seed) + 100);
        const Tensor w = tensorOf(l.w);
        QuantizationSpec spec = intSpec(bits, symmetric);
        if (tile)
            spec.tileSize = double(tile);
        const AdaroundResult r = adaroundQuantize(w, spec, WeightAlgorithm::parse("adaround,300"), hessianOf(l.x), "w");
        const Eigen::MatrixXf rtn =
            matrixOf(fakeQuantize(w, computeQuantization(w, spec, "w").params, Rounding::Nearest, 0, "w"));
        const double rtnError = outputError(l.w, rtn, l.x), error = outputError(l.w, matrixOf(r.rounded), l.x);
        qInfo("%s: output error RTN %.4g, AdaRound %.4g (%.1f%%), %lld weights flipped", QTest::currentDataTag(),
              rtnError, error, 100 * error / rtnError, (long long)r.flipped);
        QVERIFY(error <= rtnError);
    }

    void sameResultOnOneThreadAndOnMany()
    {
        const Layer l = randomLayer(70, 64, 300, 4);
        const Tensor w = tensorOf(l.w);
        const Eigen::MatrixXd h = hessianOf(l.x);
        const WeightAlgorithm a = WeightAlgorithm::parse("adaround,200");
        const AdaroundResult many = adaroundQuantize(w, intSpec(4, true), a, h, "w");
        AdaroundResult one;
        {
            tbb::global_control single(tbb::global_control::max_allowed_parallelism, 1);
            one = adaroundQuantize(w, intSpec(4, true), a, h, "w");
        }
        QCOMPARE(bytesOf(one.rounded), bytesOf(many.rounded));
        QVERIFY(one.flipped > 0);
    }

    void stopsWhenCancelledWhileItRuns()
    {
        // 100 000 steps on a 64×256 layer would take minutes; a cancel 100 ms in stops it within the next 32 steps.
        const Layer l = randomLayer(64, 256, 300, 6);
        const Tensor w = tensorOf(l.w);
        const Eigen::MatrixXd h = hessianOf(l.x);
        CancellationToken cancel;
        std::thread canceller([cancel]() mutable {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            cancel.cancel();
        });
        QElapsedTimer timer;
        timer.start();
        bool cancelled = false;
        try {
            adaroundQuantize(w, intSpec(4, true), WeightAlgorithm::parse("adaround,100000"), h, "w", cancel);
        } catch (const Cancelled&) {
            cancelled = true;
        }
        canceller.join();
        qInfo("cancelled after %lld ms", (long long)timer.elapsed());
        QVERIFY(cancelled);
        QVERIFY(timer.elapsed() < 10000);
    }

    void channelAxisOtherThanTheFirst()
    {
        // A Gemm weight [K, N] without transB: channels on axis 1. The result is the transposed
        // weight's, transposed.
        const Layer l = randomLayer(20, 48, 200, 8);
        const Tensor w = tensorOf(l.w);
        const Tensor wt = tensorOf(l.w.transpose());
        QuantizationSpec spec = intSpec(4, true), specT = spec;
        specT.axis = 1;
        const WeightAlgorithm a = WeightAlgorithm::parse("adaround,150");
        const Eigen::MatrixXd h = hessianOf(l.x);
        const AdaroundResult r = adaroundQuantize(w, spec, a, h, "w");
        const AdaroundResult rt = adaroundQuantize(wt, specT, a, h, "w");
        QCOMPARE(bytesOf(tensorOf(matrixOf(rt.rounded).transpose())), bytesOf(r.rounded));
    }

    void badInputsAreErrorsNamingTheTensor()
    {
        const Layer l = randomLayer(4, 8, 16, 1);
        const Tensor w = tensorOf(l.w);
        const WeightAlgorithm a = WeightAlgorithm::parse("adaround,10");
        QVERIFY(errorOf([&] {
                    adaroundQuantize(w, intSpec(4, true), a, Eigen::MatrixXd::Identity(7, 7), "fc.weight");
                }).startsWith("tensor 'fc.weight': adaround: the Hessian is 7x7, the weight has 8 input features"));
        Eigen::MatrixXd nan = Eigen::MatrixXd::Identity(8, 8);
        nan(2, 3) = std::nan("");
        QVERIFY(errorOf([&] { adaroundQuantize(w, intSpec(4, true), a, nan, "fc.weight"); }).contains("NaN or Inf"));
        QuantizationSpec fp8 = intSpec(4, true);
        fp8.qtype = QType::Fp8E4M3;
        fp8.method = CalibrationMethod::parse("absmax");
        QVERIFY(errorOf([&] {
                    adaroundQuantize(w, fp8, a, Eigen::MatrixXd::Identity(8, 8), "fc.weight");
                }).startsWith("tensor 'fc.weight': adaround: rounds onto integer grids only"));
        // No calibration input at all (H = 0): nothing to reconstruct, the regulariser alone rounds to nearest,
        // ties (a fractional part of exactly 0.5, as a negative absmax weight has) up where RTN rounds to even.
        const AdaroundResult zero = adaroundQuantize(w, intSpec(4, true), WeightAlgorithm::parse("adaround,200"),
                                                     Eigen::MatrixXd::Zero(8, 8), "fc.weight");
        const QuantParams& p = zero.quantization.params;
        int64_t ties = 0, evenTies = 0;
        for (int64_t r = 0; r < 4; ++r)
            for (int64_t c = 0; c < 8; ++c) {
                const float v = l.w(r, c) / p.scales[size_t(r)];
                if (v - std::floor(v) == 0.5f) {
                    ++ties;
                    evenTies += int64_t(std::floor(v)) % 2 == 0;
                }
            }
        QCOMPARE(zero.flipped, evenTies);
        QVERIFY(ties > 0);
    }

    void parsesAndWritesItsOptions()
    {
        const WeightAlgorithm d = WeightAlgorithm::parse("adaround");
        QCOMPARE(d.kind, WeightAlgorithmKind::Adaround);
        QCOMPARE(d.adaroundIterations, 1000);
        QCOMPARE(d.adaroundLambda, 0.01);
        QVERIFY(d.needsCalibration());
        QCOMPARE(d.toString(), std::string("adaround"));
        QCOMPARE(std::string(d.name()), std::string("adaround"));
        QCOMPARE(WeightAlgorithm::parse("adaround,250").toString(), std::string("adaround,250"));
        QCOMPARE(WeightAlgorithm::parse("adaround,250,0.5").toString(), std::string("adaround,250,0.5"));
        QCOMPARE(WeightAlgorithm::parse("adaround,1000,0.01").toString(), std::string("adaround"));
        QCOMPARE(WeightAlgorithm::parse("adaround,1000,0").toString(), std::string("adaround,1000,0"));
        QVERIFY(errorOf([] { WeightAlgorithm::parse("adaround,2.5"); }).contains("iters is the number of Adam steps"));
    }
};

QTEST_APPLESS_MAIN(TestAdaround)
#include "tst_adaround.moc"
