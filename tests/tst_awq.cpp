// AWQ (quantization/awq.h) checked against things other than itself:
// - an independent NumPy AWQ written from the paper (tests/awq/awq_reference.py)
//   chooses the same exponent and, bit for bit, the same float32 scales and the
//   same simulated weight on fixed layers (per channel and group-wise,
//   symmetric and asymmetric), and with the clipping search the same ratio
//   for every group and the same clipped weight;
// - on a layer whose inputs have outlier channels, its output error on the
//   calibration inputs is below round-to-nearest's, and never above it (α = 0 is
//   round-to-nearest);
// - the weight of a MatMul x·W ([in, out]) gets the same scales as its transpose;
// - on grouped and depthwise Convs (s one per input channel of the layer, each
//   output channel scaled by its own group's, the loss and the clipping scored on
//   each group's inputs) the reference, given the im2col rows written out here,
//   agrees bit for bit too.
// The inputs are multiples of 1/64, so that every sum of them and of their
// products is exact in double: both sides then hold the same statistics, bit for
// bit, whatever order they add in.

#include <QtTest>

#include <Eigen/Dense>

#include <atomic>
#include <cmath>
#include <random>

#include "io/npy.h"
#include "layer_support.h"
#include "quant/kernels.h"
#include "quantization/awq.h"
#include "quantization/input_hessian.h"
#include "quantization/tensor_quantization.h"
#include "test_support.h"

using namespace qs;
using namespace qs::test;

namespace {

const QString kReference = QStringLiteral(QUANTSCOPE_TEST_DATA "/../awq/awq_reference.py");

struct Layer {
    Eigen::MatrixXf w; // [out, in]
    Eigen::MatrixXf x; // [n, in]
};

// Inputs of unequal magnitude with a few outlier channels, as a transformer's
// activations have; every input a multiple of 1/64.
Layer outlierLayer(int64_t rows, int64_t cols, int64_t n, uint64_t seed)
{
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal;
    Layer l{Eigen::MatrixXf(rows, cols), Eigen::MatrixXf(n, cols)};
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
            l.w(r, c) = normal(rng) * 0.05f;
    std::vector<float> magnitude(static_cast<size_t>(cols));
    for (int64_t c = 0; c < cols; ++c)
        magnitude[size_t(c)] = std::exp(normal(rng) * 0.5f) * (c % 13 == 3 ? 12.f : 1.f);
    for (int64_t i = 0; i < n; ++i)
        for (int64_t c = 0; c < cols; ++c)
            l.x(i, c) = std::nearbyint(normal(rng) * magnitude[size_t(c)] * 64.f) / 64.f;
    return l;
}

InputHessian statisticsOf(const Eigen::MatrixXf& x)
{
    InputHessian h(x.cols());
    const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> rows = x.cast<double>();
    h.addRows(rows.data(), rows.rows());
    return h;
}

QuantizationSpec intSpec(int bits, int tile, bool symmetric, int axis)
{
    QuantizationSpec spec;
    spec.qtype = bits == 4 ? QType::Int4 : QType::Int3;
    spec.method = CalibrationMethod::parse(symmetric ? "absmax" : "minmax");
    spec.granularity = Granularity::PerChannel;
    spec.axis = axis;
    if (tile)
        spec.tileSize = double(tile);
    return spec;
}

// The rule's round-to-nearest, as the weight quantizer hands it to AWQ.
GridRounding rtnOf(const QuantizationSpec& spec)
{
    return [spec](const Tensor& w) {
        TensorQuantization q = computeQuantization(w, spec, "w");
        Tensor fake = fakeQuantize(w, q.params, Rounding::Nearest, 0, "w");
        return std::pair(std::move(q), std::move(fake));
    };
}

double outputError(const Layer& l, const Tensor& rounded)
{
    const auto v = rounded.values<float>();
    Eigen::MatrixXd r(l.w.rows(), l.w.cols());
    for (int64_t i = 0; i < r.rows(); ++i)
        for (int64_t j = 0; j < r.cols(); ++j)
            r(i, j) = double(v[size_t(i * r.cols() + j)]);
    return ((l.w.cast<double>() - r) * l.x.cast<double>().transpose()).squaredNorm();
}

} // namespace

class TestAwq : public QObject {
    Q_OBJECT

private slots:
    void matchesTheNumpyReferenceBitForBit_data()
    {
        QTest::addColumn<int>("bits");
        QTest::addColumn<int>("tile");
        QTest::addColumn<bool>("symmetric");
        QTest::addColumn<int>("grid");
        QTest::addColumn<bool>("clip");
        QTest::newRow("int4 per channel") << 4 << 0 << true << 20 << false;
        QTest::newRow("int3 asymmetric per channel") << 3 << 0 << false << 20 << false;
        QTest::newRow("int4 tiles of 32") << 4 << 32 << true << 20 << false;
        QTest::newRow("int4 asymmetric tiles of 16, grid 7") << 4 << 16 << false << 7 << false;
        QTest::newRow("clip: int4 per channel") << 4 << 0 << true << 20 << true;
        QTest::newRow("clip: int3 asymmetric per channel") << 3 << 0 << false << 20 << true;
        QTest::newRow("clip: int4 tiles of 32") << 4 << 32 << true << 20 << true;
        QTest::newRow("clip: int4 asymmetric tiles of 16, grid 7") << 4 << 16 << false << 7 << true;
    }

    void matchesTheNumpyReferenceBitForBit()
    {
        QFETCH(int, bits);
        QFETCH(int, tile);
        QFETCH(bool, symmetric);
        QFETCH(int, grid);
        QFETCH(bool, clip);
        const Layer l = outlierLayer(40, 96, 512, 5);
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const std::filesystem::path folder = dir.path().toStdString();
        writeNpy(folder / "W.npy", tensorOf(l.w));
        writeNpy(folder / "X.npy", tensorOf(l.x));
        QVERIFY(runPython(kReference, {dir.path(), QString::number(bits), QString::number(tile),
                                       symmetric ? "sym" : "asym", QString::number(grid), clip ? "1" : "0"}));

        WeightAlgorithm algorithm = WeightAlgorithm::parse("awq");
        algorithm.awqGrid = grid;
        algorithm.awqClip = clip;
        const InputHessian stats = statisticsOf(l.x);
        const QuantizationSpec spec = intSpec(bits, tile, symmetric, 0);
        const AwqClipGroups groups = awqClipGroups({40, 96}, {}, spec, "w");
        const AwqResult a = awqQuantize(tensorOf(l.w), 0, 1, algorithm, stats.hessian(), stats.meanAbs(), rtnOf(spec),
                                        "w", {}, &groups);

        const Tensor refIndexTensor = readNpy(folder / "ref_alpha_index.npy");
        const int64_t refIndex = refIndexTensor.values<int64_t>()[0];
        const Tensor refS = readNpy(folder / "ref_s.npy");
        const Tensor refRounded = readNpy(folder / "ref_rounded.npy");
        const Tensor refLossTensor = readNpy(folder / "ref_losses.npy");
        const auto refLosses = refLossTensor.values<double>();
        qInfo("%s: alpha %.2f (reference %.2f); loss %.6g at alpha 0 (round to nearest), %.6g chosen",
              QTest::currentDataTag(), a.alpha, double(refIndex) / grid, a.losses.front(),
              a.losses[size_t(a.alphaIndex)]);
        QCOMPARE(int64_t(a.alphaIndex), refIndex);
        QVERIFY2(a.alphaIndex > 0, "on inputs with outlier channels the search should leave alpha 0");
        QCOMPARE(a.inputScale.shape(), (Shape{1, 96}));
        QCOMPARE(bytesOf(a.inputScale.reshaped({96})), bytesOf(refS));
        QCOMPARE(a.losses.size(), refLosses.size());
        for (size_t i = 0; i < refLosses.size(); ++i)
            QVERIFY(std::abs(a.losses[i] - refLosses[i]) <= 1e-9 * refLosses[i]);
        // The weight to 1e-6 (relative to the layer's largest weight), and in practice bit for bit.
        const auto got = a.rounded.values<float>(), want = refRounded.values<float>();
        QCOMPARE(got.size(), want.size());
        const float largest = l.w.cwiseAbs().maxCoeff();
        size_t differing = 0;
        for (size_t k = 0; k < got.size(); ++k) {
            QVERIFY2(std::abs(got[k] - want[k]) <= 1e-6f * largest, qPrintable(QString("weight %1").arg(k)));
            differing += got[k] != want[k];
        }
        QCOMPARE(differing, size_t(0));
        if (clip) {
            const Tensor refClip = readNpy(folder / "ref_clip_index.npy");
            const auto ref = refClip.values<int64_t>();
            QCOMPARE(a.clipIndex.size(), ref.size());
            std::vector<int> histogram(kAwqClipRatios, 0);
            for (size_t g = 0; g < ref.size(); ++g) {
                QVERIFY2(a.clipIndex[g] == ref[g],
                         qPrintable(
                             QString("group %1: ratio index %2, reference %3").arg(g).arg(a.clipIndex[g]).arg(ref[g])));
                ++histogram[size_t(a.clipIndex[g])];
            }
            QString text;
            for (int i = 0; i < kAwqClipRatios; ++i)
                if (histogram[size_t(i)])
                    text += QString(" r=%1: %2").arg(awqClipRatio(i)).arg(histogram[size_t(i)]);
            qInfo("%s: clipping ratios of the %zu groups:%s", QTest::currentDataTag(), ref.size(), qPrintable(text));
            QVERIFY2(histogram[0] < int(ref.size()), "the search should clip some group of these layers");
        } else {
            QVERIFY(a.clipIndex.empty());
            QCOMPARE(bytesOf(a.clipped), bytesOf(a.scaled));
        }
        // The grid values are the clipped scaled weight's round-to-nearest, and the weight is them over s.
        const Tensor again = fakeQuantize(a.clipped, a.quantization.params, Rounding::Nearest, 0, "w");
        QCOMPARE(bytesOf(again), bytesOf(a.grid));
    }

    void groupedConvMatchesTheNumpyReferenceBitForBit_data()
    {
        QTest::addColumn<QString>("shape");
        QTest::addColumn<int>("bits");
        QTest::addColumn<int>("tile"); // 0 per channel, -1 per tensor
        QTest::addColumn<bool>("symmetric");
        QTest::addColumn<bool>("clip");
        QTest::newRow("depthwise [16, 1, 3, 3], int4 per tensor") << "depthwise" << 4 << -1 << true << false;
        QTest::newRow("depthwise [16, 1, 3, 3], int3 asymmetric per tensor")
            << "depthwise" << 3 << -1 << false << false;
        QTest::newRow("2 groups [12, 4, 3, 3], int4 per channel") << "grouped" << 4 << 0 << true << false;
        QTest::newRow("2 groups [12, 4, 3, 3], int4 per tensor") << "grouped" << 4 << -1 << true << false;
        QTest::newRow("clip: depthwise [16, 1, 3, 3], int4 per channel") << "depthwise" << 4 << 0 << true << true;
        QTest::newRow("clip: 2 groups [12, 4, 3, 3], int3 asymmetric per channel")
            << "grouped" << 3 << 0 << false << true;
        // Per tensor, the whole weight is one clipping group, its loss summed over every row and group.
        QTest::newRow("clip: 2 groups [12, 4, 3, 3], int4 per tensor") << "grouped" << 4 << -1 << true << true;
        QTest::newRow("clip: depthwise [16, 1, 3, 3], int3 asymmetric per tensor")
            << "depthwise" << 3 << -1 << false << true;
    }

    // A grouped Conv: s one per input channel of the layer (C), m_j over channel j's own im2col
    // entries, each output channel scaled by its group's s, the loss summed over the groups. The
    // reference gets the im2col rows built here (every group's, group after group). The inputs are
    // multiples of 1/64 and there are 512 rows, so both sides hold the same statistics exactly.
    void groupedConvMatchesTheNumpyReferenceBitForBit()
    {
        QFETCH(QString, shape);
        QFETCH(int, bits);
        QFETCH(int, tile);
        QFETCH(bool, symmetric);
        QFETCH(bool, clip);
        const bool depthwise = shape == "depthwise";
        const Shape weightShape = depthwise ? Shape{16, 1, 3, 3} : Shape{12, 4, 3, 3};
        const int64_t groups = depthwise ? 16 : 2, perGroup = weightShape[1], channels = perGroup * groups;
        const int64_t rows = weightShape[0], features = perGroup * 9;
        const auto [layer, node] = stride2Pad1Conv(weightShape, groups);
        std::mt19937_64 rng(31);
        std::normal_distribution<float> normal;
        Tensor w(DType::F32, weightShape);
        for (float& v : w.mutableValues<float>())
            v = normal(rng) * 0.05f;
        Tensor x(DType::F32, {8, channels, 16, 16}); // 8 · 8 · 8 = 512 patches
        {
            auto xv = x.mutableValues<float>();
            for (int64_t c = 0; c < channels; ++c) {
                const float magnitude = std::exp(normal(rng) * 0.5f) * (c % 5 == 2 ? 12.f : 1.f);
                for (int64_t b = 0; b < 8; ++b)
                    for (int64_t p = 0; p < 256; ++p)
                        xv[size_t((b * channels + c) * 256 + p)] =
                            std::nearbyint(normal(rng) * magnitude * 64.f) / 64.f;
            }
        }
        InputHessian stats(calibrationFeatures(layer), true, groups);
        accumulateLayerInput(layer, node, x, stats);
        QCOMPARE(stats.rows(), int64_t(512));
        const Eigen::MatrixXf wm =
            Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
                w.values<float>().data(), rows, features);

        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const std::filesystem::path folder = dir.path().toStdString();
        writeNpy(folder / "W.npy", tensorOf(wm));
        writeNpy(folder / "X.npy", tensorOf(stride2Pad1Patches(x)));
        QVERIFY(
            runPython(kReference, {dir.path(), QString::number(bits), QString::number(tile), symmetric ? "sym" : "asym",
                                   "20", clip ? "1" : "0", QString::number(groups), "9"}));

        QuantizationSpec spec = intSpec(bits, 0, symmetric, 0);
        if (tile < 0)
            spec.granularity = Granularity::PerTensor;
        WeightAlgorithm algorithm = WeightAlgorithm::parse("awq");
        algorithm.awqClip = clip;
        const AwqClipGroups clipGroups = awqClipGroups(w.shape(), {}, spec, "dw.weight");
        const AwqResult a = awqQuantize(w, 0, 1, algorithm, stats.hessians(), stats.meanAbs(), rtnOf(spec), "dw.weight",
                                        {}, clip ? &clipGroups : nullptr);
        const Tensor refIndexTensor = readNpy(folder / "ref_alpha_index.npy");
        const int64_t refIndex = refIndexTensor.values<int64_t>()[0];
        const Tensor refS = readNpy(folder / "ref_s.npy");
        const Tensor refRounded = readNpy(folder / "ref_rounded.npy");
        const Tensor refLossTensor = readNpy(folder / "ref_losses.npy");
        const auto refLosses = refLossTensor.values<double>();
        qInfo("%s: alpha %.2f (reference %.2f); loss %.6g at alpha 0 (round to nearest), %.6g chosen",
              QTest::currentDataTag(), a.alpha, double(refIndex) / 20, a.losses.front(),
              a.losses[size_t(a.alphaIndex)]);
        QCOMPARE(int64_t(a.alphaIndex), refIndex);
        QVERIFY2(a.alphaIndex > 0, "on inputs with outlier channels the search should leave alpha 0");
        // s as [O, I, 1, 1]: output channel o holds its group's I input channels' scales.
        QCOMPARE(int64_t(refS.numel()), channels);
        QCOMPARE(a.inputScale.shape(), (Shape{rows, perGroup, 1, 1}));
        const auto rs = refS.values<float>();
        std::vector<float> expected;
        for (int64_t o = 0; o < rows; ++o)
            for (int64_t i = 0; i < perGroup; ++i)
                expected.push_back(rs[size_t(o / (rows / groups) * perGroup + i)]);
        QCOMPARE(bytesOf(a.inputScale), bytesOf(Tensor::fromVector(DType::F32, a.inputScale.shape(), expected)));
        QCOMPARE(bytesOf(a.rounded), bytesOf(refRounded));
        QCOMPARE(a.losses.size(), refLosses.size());
        for (size_t i = 0; i < refLosses.size(); ++i)
            QVERIFY(std::abs(a.losses[i] - refLosses[i]) <= 1e-9 * refLosses[i]);
        if (clip) {
            // Each output channel's clipping ratio, scored on its own Conv group's inputs.
            const Tensor refClip = readNpy(folder / "ref_clip_index.npy");
            const auto ref = refClip.values<int64_t>();
            QCOMPARE(a.clipIndex.size(), ref.size());
            int64_t clipped = 0;
            for (size_t g = 0; g < ref.size(); ++g) {
                QCOMPARE(int64_t(a.clipIndex[g]), ref[g]);
                clipped += a.clipIndex[g] > 0;
            }
            qInfo("%s: %lld of %zu groups clipped, every ratio the reference's", QTest::currentDataTag(),
                  (long long)clipped, ref.size());
        }
        const Tensor again = fakeQuantize(a.clipped, a.quantization.params, Rounding::Nearest, 0, "w");
        QCOMPARE(bytesOf(again), bytesOf(a.grid));
    }

    void lowersTheOutputErrorOfRoundToNearest()
    {
        const Layer l = outlierLayer(64, 256, 1024, 9);
        const QuantizationSpec spec = intSpec(4, 0, true, 0);
        const Tensor w = tensorOf(l.w);
        const auto [rtnQ, rtn] = rtnOf(spec)(w);
        const InputHessian stats = statisticsOf(l.x);
        const AwqClipGroups groups = awqClipGroups({64, 256}, {}, spec, "w");
        const AwqResult a = awqQuantize(w, 0, 1, WeightAlgorithm::parse("awq,20,0"), stats.hessian(), stats.meanAbs(),
                                        rtnOf(spec), "w");
        const AwqResult c = awqQuantize(w, 0, 1, WeightAlgorithm::parse("awq"), stats.hessian(), stats.meanAbs(),
                                        rtnOf(spec), "w", {}, &groups);
        const double rtnError = outputError(l, rtn), awqError = outputError(l, a.rounded),
                     clipError = outputError(l, c.rounded);
        qInfo("int4 per channel, 64x256: ||WX - W^X||^2 RTN %.4g, AWQ %.4g (%.1f%% of RTN), alpha %.2f; "
              "with clipping %.4g (%.1f%% of RTN)",
              rtnError, awqError, 100 * awqError / rtnError, a.alpha, clipError, 100 * clipError / rtnError);
        // α = 0 is round-to-nearest itself: the first loss is RTN's, and the chosen one is not above it.
        QVERIFY(std::abs(a.losses.front() * 1024 / 2 - rtnError) <= 1e-6 * rtnError);
        QVERIFY2(awqError < 0.9 * rtnError, "AWQ should remove at least 10% of RTN's output error here");
        // The same scales; r = 1 is no clipping, so each group's error (and their sum) is not above AWQ's.
        QCOMPARE(c.alphaIndex, a.alphaIndex);
        QVERIFY(clipError <= awqError * (1 + 1e-12));
    }

    void matmulLayoutGetsTheSameScales()
    {
        // x·W with W [in, out]: channel axis 1, input channels on axis 0.
        const Layer l = outlierLayer(24, 64, 256, 3);
        const InputHessian stats = statisticsOf(l.x);
        const WeightAlgorithm algorithm = WeightAlgorithm::parse("awq");
        const AwqClipGroups rowGroups = awqClipGroups({24, 64}, {}, intSpec(4, 0, true, 0), "w");
        const AwqResult rows = awqQuantize(tensorOf(l.w), 0, 1, algorithm, stats.hessian(), stats.meanAbs(),
                                           rtnOf(intSpec(4, 0, true, 0)), "w", {}, &rowGroups);
        const Eigen::MatrixXf wt = l.w.transpose();
        const AwqClipGroups colGroups = awqClipGroups({64, 24}, {}, intSpec(4, 0, true, 1), "w");
        const AwqResult cols = awqQuantize(tensorOf(wt), 1, 0, algorithm, stats.hessian(), stats.meanAbs(),
                                           rtnOf(intSpec(4, 0, true, 1)), "w", {}, &colGroups);
        QCOMPARE(cols.alphaIndex, rows.alphaIndex);
        QCOMPARE(cols.clipIndex, rows.clipIndex);
        QCOMPARE(cols.inputScale.shape(), (Shape{64, 1}));
        QCOMPARE(bytesOf(cols.inputScale.reshaped({64})), bytesOf(rows.inputScale.reshaped({64})));
        QCOMPARE(bytesOf(cols.rounded.permuted({1, 0})), bytesOf(rows.rounded));
    }

    void badStatisticsAreErrorsNamingTheTensor()
    {
        const Layer l = outlierLayer(4, 8, 16, 1);
        const WeightAlgorithm a = WeightAlgorithm::parse("awq,20,0");
        const InputHessian small = statisticsOf(l.x.leftCols(7));
        QVERIFY(errorOf([&] {
                    awqQuantize(tensorOf(l.w), 0, 1, a, small.hessian(), small.meanAbs(), rtnOf(intSpec(4, 0, true, 0)),
                                "fc.weight");
                }).startsWith("tensor 'fc.weight': awq: the calibration statistics cover 7 input features"));
        const InputHessian stats = statisticsOf(l.x);
        Eigen::VectorXd nan = stats.meanAbs();
        nan(2) = std::nan("");
        QVERIFY(errorOf([&] {
                    awqQuantize(tensorOf(l.w), 0, 1, a, stats.hessian(), nan, rtnOf(intSpec(4, 0, true, 0)),
                                "fc.weight");
                }).contains("NaN or Inf"));
        // Clipping needs the groups, and is defined for absmax and minmax grids only.
        QVERIFY(errorOf([&] {
                    awqQuantize(tensorOf(l.w), 0, 1, WeightAlgorithm::parse("awq"), stats.hessian(), stats.meanAbs(),
                                rtnOf(intSpec(4, 0, true, 0)), "fc.weight");
                }).startsWith("tensor 'fc.weight': awq: the clipping search needs the weight's groups"));
        QuantizationSpec mse = intSpec(4, 0, true, 0);
        mse.method = CalibrationMethod::parse("mse");
        const QString refused = errorOf([&] { awqClipGroups({4, 8}, {}, mse, "fc.weight"); });
        QVERIFY2(refused.startsWith("tensor 'fc.weight': awq: the clipping search shrinks the range absmax and minmax "
                                    "take from the weight, and weight_calibration mse chooses its own range"),
                 qPrintable(refused));
    }

    void theClippingSearchIsCancellable()
    {
        // Cancelled while the clipping search runs (at its first rounding, after the 20 of the α search).
        const Layer l = outlierLayer(16, 32, 64, 2);
        const InputHessian stats = statisticsOf(l.x);
        const QuantizationSpec spec = intSpec(4, 0, true, 0);
        const AwqClipGroups groups = awqClipGroups({16, 32}, {}, spec, "w");
        CancellationToken cancel;
        std::atomic<int> calls{0};
        const GridRounding plain = rtnOf(spec);
        const GridRounding cancelling = [&](const Tensor& w) {
            if (++calls == 21)
                cancel.cancel();
            return plain(w);
        };
        bool cancelled = false;
        try {
            awqQuantize(tensorOf(l.w), 0, 1, WeightAlgorithm::parse("awq"), stats.hessian(), stats.meanAbs(),
                        cancelling, "w", cancel, &groups);
        } catch (const Cancelled&) {
            cancelled = true;
        }
        QVERIFY(cancelled);
        QVERIFY(calls >= 21 && calls < 41);
    }

    void tiledMatmulGroupsFollowTheQuantizedOrder()
    {
        // x·W with W [in, out], tiles of 16 along the input (the weight quantizer's order [out, in]): each
        // group is one output column's run of 16 inputs.
        QuantizationSpec spec = intSpec(4, 16, true, 0);
        const AwqClipGroups g = awqClipGroups({48, 5}, {1, 0}, spec, "w");
        QCOMPARE(g.count, int64_t(15));
        for (int64_t i = 0; i < 48; ++i)
            for (int64_t o = 0; o < 5; ++o)
                QCOMPARE(g.groupOf[size_t(i * 5 + o)], o * 3 + i / 16);
    }
};

QTEST_APPLESS_MAIN(TestAwq)
#include "tst_awq.moc"
