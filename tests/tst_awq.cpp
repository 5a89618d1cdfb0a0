// AWQ (quantization/awq.h) checked against things other than itself:
// - an independent NumPy AWQ written from the paper (tests/awq/awq_reference.py)
//   chooses the same exponent and, bit for bit, the same float32 scales and the
//   same simulated weight on fixed layers (per channel and group-wise,
//   symmetric and asymmetric);
// - on a layer whose inputs have outlier channels, its output error on the
//   calibration inputs is below round-to-nearest's, and never above it (α = 0 is
//   round-to-nearest);
// - the weight of a MatMul x·W ([in, out]) gets the same scales as its transpose.
// The inputs are multiples of 1/64, so that every sum of them and of their
// products is exact in double: both sides then hold the same statistics, bit for
// bit, whatever order they add in.

#include <QtTest>

#include <Eigen/Dense>

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
        QTest::newRow("int4 per channel") << 4 << 0 << true << 20;
        QTest::newRow("int3 asymmetric per channel") << 3 << 0 << false << 20;
        QTest::newRow("int4 tiles of 32") << 4 << 32 << true << 20;
        QTest::newRow("int4 asymmetric tiles of 16, grid 7") << 4 << 16 << false << 7;
    }

    void matchesTheNumpyReferenceBitForBit()
    {
        QFETCH(int, bits);
        QFETCH(int, tile);
        QFETCH(bool, symmetric);
        QFETCH(int, grid);
        const Layer l = outlierLayer(40, 96, 512, 5);
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const std::filesystem::path folder = dir.path().toStdString();
        writeNpy(folder / "W.npy", tensorOf(l.w));
        writeNpy(folder / "X.npy", tensorOf(l.x));
        QVERIFY(runPython(kReference, {dir.path(), QString::number(bits), QString::number(tile),
                                       symmetric ? "sym" : "asym", QString::number(grid)}));

        WeightAlgorithm algorithm = WeightAlgorithm::parse("awq");
        algorithm.awqGrid = grid;
        const InputHessian stats = statisticsOf(l.x);
        const AwqResult a = awqQuantize(tensorOf(l.w), 0, 1, algorithm, stats.hessian(), stats.meanAbs(),
                                        rtnOf(intSpec(bits, tile, symmetric, 0)), "w");

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
        QCOMPARE(bytesOf(a.rounded), bytesOf(refRounded));
        QCOMPARE(a.losses.size(), refLosses.size());
        for (size_t i = 0; i < refLosses.size(); ++i)
            QVERIFY(std::abs(a.losses[i] - refLosses[i]) <= 1e-9 * refLosses[i]);
        // The grid values are the scaled weight's round-to-nearest, and the weight is them over s.
        const Tensor again = fakeQuantize(a.scaled, a.quantization.params, Rounding::Nearest, 0, "w");
        QCOMPARE(bytesOf(again), bytesOf(a.grid));
    }

    void groupedConvMatchesTheNumpyReferenceBitForBit_data()
    {
        QTest::addColumn<QString>("shape");
        QTest::addColumn<int>("bits");
        QTest::addColumn<int>("tile"); // 0 per channel, -1 per tensor
        QTest::addColumn<bool>("symmetric");
        QTest::newRow("depthwise [16, 1, 3, 3], int4 per tensor") << "depthwise" << 4 << -1 << true;
        QTest::newRow("depthwise [16, 1, 3, 3], int3 asymmetric per tensor") << "depthwise" << 3 << -1 << false;
        QTest::newRow("2 groups [12, 4, 3, 3], int4 per channel") << "grouped" << 4 << 0 << true;
        QTest::newRow("2 groups [12, 4, 3, 3], int4 per tensor") << "grouped" << 4 << -1 << true;
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
        QVERIFY(runPython(kReference, {dir.path(), QString::number(bits), QString::number(tile),
                                       symmetric ? "sym" : "asym", "20", QString::number(groups), "9"}));

        QuantizationSpec spec = intSpec(bits, 0, symmetric, 0);
        if (tile < 0)
            spec.granularity = Granularity::PerTensor;
        const AwqResult a = awqQuantize(w, 0, 1, WeightAlgorithm::parse("awq"), stats.hessians(), stats.meanAbs(),
                                        rtnOf(spec), "dw.weight");
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
        const Tensor again = fakeQuantize(a.scaled, a.quantization.params, Rounding::Nearest, 0, "w");
        QCOMPARE(bytesOf(again), bytesOf(a.grid));
    }

    void lowersTheOutputErrorOfRoundToNearest()
    {
        const Layer l = outlierLayer(64, 256, 1024, 9);
        const QuantizationSpec spec = intSpec(4, 0, true, 0);
        const Tensor w = tensorOf(l.w);
        const auto [rtnQ, rtn] = rtnOf(spec)(w);
        const InputHessian stats = statisticsOf(l.x);
        const AwqResult a =
            awqQuantize(w, 0, 1, WeightAlgorithm::parse("awq"), stats.hessian(), stats.meanAbs(), rtnOf(spec), "w");
        const double rtnError = outputError(l, rtn), awqError = outputError(l, a.rounded);
        qInfo("int4 per channel, 64x256: ||WX - W^X||^2 RTN %.4g, AWQ %.4g (%.1f%% of RTN), alpha %.2f", rtnError,
              awqError, 100 * awqError / rtnError, a.alpha);
        // α = 0 is round-to-nearest itself: the first loss is RTN's, and the chosen one is not above it.
        QVERIFY(std::abs(a.losses.front() * 1024 / 2 - rtnError) <= 1e-6 * rtnError);
        QVERIFY2(awqError < 0.9 * rtnError, "AWQ should remove at least 10% of RTN's output error here");
    }

    void matmulLayoutGetsTheSameScales()
    {
        // x·W with W [in, out]: channel axis 1, input channels on axis 0.
        const Layer l = outlierLayer(24, 64, 256, 3);
        const InputHessian stats = statisticsOf(l.x);
        const WeightAlgorithm algorithm = WeightAlgorithm::parse("awq");
        const AwqResult rows = awqQuantize(tensorOf(l.w), 0, 1, algorithm, stats.hessian(), stats.meanAbs(),
                                           rtnOf(intSpec(4, 0, true, 0)), "w");
        const Eigen::MatrixXf wt = l.w.transpose();
        const AwqResult cols = awqQuantize(tensorOf(wt), 1, 0, algorithm, stats.hessian(), stats.meanAbs(),
                                           rtnOf(intSpec(4, 0, true, 1)), "w");
        QCOMPARE(cols.alphaIndex, rows.alphaIndex);
        QCOMPARE(cols.inputScale.shape(), (Shape{64, 1}));
        QCOMPARE(bytesOf(cols.inputScale.reshaped({64})), bytesOf(rows.inputScale.reshaped({64})));
        QCOMPARE(bytesOf(cols.rounded.permuted({1, 0})), bytesOf(rows.rounded));
    }

    void badStatisticsAreErrorsNamingTheTensor()
    {
        const Layer l = outlierLayer(4, 8, 16, 1);
        const WeightAlgorithm a = WeightAlgorithm::parse("awq");
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
    }
};

QTEST_APPLESS_MAIN(TestAwq)
#include "tst_awq.moc"
