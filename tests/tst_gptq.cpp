// GPTQ (quantization/gptq.h) checked against things other than itself:
// - on random layers whose inputs are correlated, the layer's output error on
//   the calibration inputs, ||W·X − Ŵ·X||², is clearly below round-to-nearest's;
// - an independent NumPy GPTQ written from the paper (tests/gptq/gptq_reference.py)
//   chooses the same integer codes and scales on fixed layers, per channel and
//   group-wise, symmetric and asymmetric, with and without act-order;
// - the Hessian accumulated from a Conv's inputs is the one of its im2col rows;
// - above one tile of features, the tiled parallel accumulation is the plain sum, whatever the threads;
// - a grouped or depthwise Conv's statistics are one Hessian per group, each its own im2col columns', and
//   GPTQ on such a Conv, group by group, chooses the reference's codes (given each group's rows and inputs).

#include <QtTest>

#include <Eigen/Dense>

#include <cmath>
#include <random>

#include <tbb/global_control.h>

#include "io/npy.h"
#include "layer_support.h"
#include "quant/kernels.h"
#include "quantization/gptq.h"
#include "quantization/input_hessian.h"
#include "quantization/tensor_quantization.h"
#include "test_support.h"

using namespace qs;
using namespace qs::test;

namespace {

const QString kReference = QStringLiteral(QUANTSCOPE_TEST_DATA "/../gptq/gptq_reference.py");

// A layer W [rows, cols] and inputs X [n, cols] whose features are correlated
// (a few latent factors mixed into every feature) and of unequal magnitude, as a
// network's activations are; `deadFeature` >= 0 is always 0.
struct Layer {
    Eigen::MatrixXf w;
    Eigen::MatrixXf x;
};

Layer randomLayer(int64_t rows, int64_t cols, int64_t n, uint64_t seed, int64_t deadFeature = -1)
{
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal;
    Layer l{Eigen::MatrixXf(rows, cols), Eigen::MatrixXf(n, cols)};
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
            l.w(r, c) = normal(rng) * 0.05f;
    const int64_t factors = 8;
    Eigen::MatrixXf mix(factors, cols), z(n, factors);
    for (int64_t f = 0; f < factors; ++f)
        for (int64_t c = 0; c < cols; ++c)
            mix(f, c) = normal(rng);
    for (int64_t i = 0; i < n; ++i)
        for (int64_t f = 0; f < factors; ++f)
            z(i, f) = normal(rng);
    l.x = z * mix;
    for (int64_t c = 0; c < cols; ++c) {
        const float magnitude = std::exp(normal(rng) * 0.7f);
        for (int64_t i = 0; i < n; ++i)
            l.x(i, c) = (l.x(i, c) + 0.3f * normal(rng)) * magnitude;
    }
    if (deadFeature >= 0)
        l.x.col(deadFeature).setZero();
    return l;
}

Eigen::MatrixXd hessianOf(const Eigen::MatrixXf& x)
{
    InputHessian h(x.cols());
    const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> rows = x.cast<double>();
    h.addRows(rows.data(), rows.rows());
    return h.hessian();
}

QuantizationSpec int4Spec(std::optional<double> tile, bool symmetric, int bits = 4)
{
    QuantizationSpec spec;
    spec.qtype = bits == 4 ? QType::Int4 : QType::Int3;
    spec.method = CalibrationMethod::parse(symmetric ? "absmax" : "minmax");
    spec.granularity = Granularity::PerChannel;
    spec.axis = 0;
    spec.tileSize = tile;
    return spec;
}

double outputError(const Layer& l, const Eigen::MatrixXf& rounded)
{
    return double(((l.w - rounded) * l.x.transpose()).squaredNorm());
}

double weightSqnrDb(const Eigen::MatrixXf& w, const Eigen::MatrixXf& rounded)
{
    return 10 * std::log10(double(w.squaredNorm()) / double((w - rounded).squaredNorm()));
}

} // namespace

class TestGptq : public QObject {
    Q_OBJECT

private slots:
    void lowersTheOutputErrorOnTheCalibrationInputs_data()
    {
        QTest::addColumn<int>("bits");
        QTest::addColumn<double>("tile");
        QTest::addColumn<bool>("symmetric");
        QTest::addColumn<QString>("algorithm");
        QTest::newRow("int4 per channel") << 4 << 0.0 << true << "gptq";
        QTest::newRow("int4 per channel, no act-order") << 4 << 0.0 << true << "gptq,0.01,0";
        QTest::newRow("int4 tiles of 32") << 4 << 32.0 << true << "gptq";
        QTest::newRow("int4 asymmetric tiles of 64") << 4 << 64.0 << false << "gptq";
        QTest::newRow("int3 per channel") << 3 << 0.0 << true << "gptq";
    }

    void lowersTheOutputErrorOnTheCalibrationInputs()
    {
        QFETCH(int, bits);
        QFETCH(double, tile);
        QFETCH(bool, symmetric);
        QFETCH(QString, algorithm);
        const Layer l = randomLayer(64, 256, 2048, 7);
        const Tensor w = tensorOf(l.w);
        const QuantizationSpec spec = int4Spec(tile > 0 ? std::optional(tile) : std::nullopt, symmetric, bits);
        const Eigen::MatrixXf rtn =
            matrixOf(fakeQuantize(w, computeQuantization(w, spec, "w").params, Rounding::Nearest, 0, "w"));
        const GptqResult g =
            gptqQuantize(w, spec, WeightAlgorithm::parse(algorithm.toStdString()), hessianOf(l.x), "w");
        const Eigen::MatrixXf gptq = matrixOf(g.rounded);
        const double rtnError = outputError(l, rtn), gptqError = outputError(l, gptq);
        qInfo("%s: ||WX - W^X||^2 RTN %.4g, GPTQ %.4g (%.1f%% of RTN); weight SQNR RTN %.2f dB, GPTQ %.2f dB",
              QTest::currentDataTag(), rtnError, gptqError, 100 * gptqError / rtnError, weightSqnrDb(l.w, rtn),
              weightSqnrDb(l.w, gptq));
        QVERIFY2(gptqError < 0.2 * rtnError, "GPTQ should remove at least 80% of RTN's output error");
        // Every value is a point of the grid the parameters define: quantizing it again changes nothing.
        const Tensor again = fakeQuantize(g.rounded, g.quantization.params, Rounding::Nearest, 0, "w");
        QCOMPARE(bytesOf(again), bytesOf(g.rounded));
    }

    void matchesTheNumpyReferenceCodeForCode_data()
    {
        QTest::addColumn<int>("tile");
        QTest::addColumn<bool>("symmetric");
        QTest::addColumn<double>("damp");
        QTest::addColumn<bool>("actOrder");
        QTest::addColumn<int>("deadFeature");
        QTest::newRow("per channel, act-order") << 0 << true << 0.01 << true << -1;
        QTest::newRow("per channel, own order, dead input") << 0 << true << 0.01 << false << 17;
        QTest::newRow("asymmetric per channel, damp 0.1") << 0 << false << 0.1 << true << -1;
        QTest::newRow("tiles of 32, own order") << 32 << true << 0.01 << false << -1;
        QTest::newRow("tiles of 32, act-order") << 32 << true << 0.01 << true << 5;
        QTest::newRow("asymmetric tiles of 64, act-order") << 64 << false << 0.01 << true << -1;
    }

    void matchesTheNumpyReferenceCodeForCode()
    {
        QFETCH(int, tile);
        QFETCH(bool, symmetric);
        QFETCH(double, damp);
        QFETCH(bool, actOrder);
        QFETCH(int, deadFeature);
        const Layer l = randomLayer(48, 320, 1024, 11, deadFeature); // 320 columns: three blocks of 128, the last short
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const std::filesystem::path folder = dir.path().toStdString();
        writeNpy(folder / "W.npy", tensorOf(l.w));
        writeNpy(folder / "X.npy", tensorOf(l.x));
        QVERIFY(runPython(kReference, {dir.path(), "4", QString::number(tile), symmetric ? "sym" : "asym",
                                       QString::number(damp, 'g', 17), actOrder ? "1" : "0"}));

        WeightAlgorithm algorithm;
        algorithm.kind = WeightAlgorithmKind::Gptq;
        algorithm.dampening = damp;
        algorithm.actOrder = actOrder;
        const Tensor w = tensorOf(l.w);
        const QuantizationSpec spec = int4Spec(tile ? std::optional(double(tile)) : std::nullopt, symmetric);
        const GptqResult g = gptqQuantize(w, spec, algorithm, hessianOf(l.x), "w");
        const QuantParams& p = g.quantization.params;

        const Tensor refCodes = readNpy(folder / "ref_codes.npy").toFloat32();
        const Tensor refScales = readNpy(folder / "ref_scales.npy");
        const auto rc = refCodes.values<float>();
        const auto rs = refScales.values<float>();
        const int64_t groupsPerRow = refScales.shape()[1];
        QCOMPARE(int64_t(p.scales.size()), l.w.rows() * groupsPerRow);
        // Our codes: the grid values the fake-quantized weight holds, (v / s) + z exactly.
        const auto ours = g.rounded.values<float>();
        int64_t agree = 0, scalesEqual = 0;
        for (int64_t r = 0; r < l.w.rows(); ++r)
            for (int64_t c = 0; c < l.w.cols(); ++c) {
                const size_t group = size_t(r * groupsPerRow + (tile ? c / tile : 0));
                const float z = p.zeroPoints.empty() ? 0.f : float(p.zeroPoints[group]);
                const float code = std::nearbyint(ours[size_t(r * l.w.cols() + c)] / p.scales[group] + z);
                agree += code == rc[size_t(r * l.w.cols() + c)];
            }
        for (size_t g2 = 0; g2 < p.scales.size(); ++g2)
            scalesEqual += std::abs(p.scales[g2] - rs[g2]) <= 1e-6f * rs[g2];
        const double agreement = 100.0 * double(agree) / double(l.w.size());
        qInfo("%s: %.3f%% of %lld codes and %lld of %zu scales equal to the NumPy reference", QTest::currentDataTag(),
              agreement, (long long)l.w.size(), (long long)scalesEqual, p.scales.size());
        QVERIFY2(agreement >= 99.9, "GPTQ codes differ from the reference beyond rounding ties");
        QVERIFY(double(scalesEqual) >= 0.99 * double(p.scales.size()));
        if (deadFeature >= 0) // a dead input's weights are 0, as the reference's
            for (int64_t r = 0; r < l.w.rows(); ++r)
                QCOMPARE(ours[size_t(r * l.w.cols() + deadFeature)], 0.f);
    }

    void convHessianIsTheOneOfItsIm2colRows()
    {
        // Conv [O=3, C=2, 3, 3], stride 2, pads 1, dilation 1 on a [2, 2, 5, 6] input.
        const auto [layer, node] = stride2Pad1Conv({3, 2, 3, 3});
        std::mt19937 rng(3);
        std::normal_distribution<float> normal;
        Tensor x(DType::F32, {2, 2, 5, 6});
        for (float& v : x.mutableValues<float>())
            v = normal(rng);
        InputHessian h(contractionFeatures(layer));
        QCOMPARE(h.features(), int64_t(18));
        accumulateLayerInput(layer, node, x, h);
        // The patches written out by hand: output 3x3 per image.
        const auto v = x.values<float>();
        Eigen::MatrixXd rows(2 * 3 * 3, 18);
        int64_t row = 0;
        for (int64_t b = 0; b < 2; ++b)
            for (int64_t oy = 0; oy < 3; ++oy)
                for (int64_t ox = 0; ox < 3; ++ox, ++row)
                    for (int64_t c = 0; c < 2; ++c)
                        for (int64_t i = 0; i < 3; ++i)
                            for (int64_t j = 0; j < 3; ++j) {
                                const int64_t y = oy * 2 - 1 + i, xx = ox * 2 - 1 + j;
                                const bool in = y >= 0 && y < 5 && xx >= 0 && xx < 6;
                                rows(row, c * 9 + i * 3 + j) = in ? v[size_t(((b * 2 + c) * 5 + y) * 6 + xx)] : 0.0;
                            }
        QCOMPARE(h.rows(), int64_t(18));
        const Eigen::MatrixXd expected = 2.0 * rows.transpose() * rows / 18.0;
        QVERIFY((h.hessian() - expected).cwiseAbs().maxCoeff() <= 1e-12 * expected.cwiseAbs().maxCoeff());
    }

    // Above 256 features XᵀX is accumulated in tiles, in parallel (InputHessian::addRows): it is
    // the Hessian of a plain sum over the rows, in long double, and the same bit for bit whether
    // one thread or several add the tiles. 600 features: 3 × 3 tiles, the last ones partial.
    void tiledParallelHessianIsTheSumOverTheRows()
    {
        const int64_t features = 600, n = 2500; // three chunks of rows, the last partial
        std::mt19937 rng(11);
        std::normal_distribution<float> normal;
        Tensor x(DType::F32, {n, features});
        auto v = x.mutableValues<float>();
        for (int64_t r = 0; r < n; ++r)
            for (int64_t f = 0; f < features; ++f)
                v[size_t(r * features + f)] = normal(rng) * float(1 + f % 7); // unequal spreads
        QuantizableLayer layer;
        layer.modulePath = "wide";
        layer.opType = "MatMul";
        layer.weightShape = {features, 8};
        layer.channelAxis = 1;
        Node node;
        node.opType = "MatMul";
        auto accumulate = [&](int threads) {
            tbb::global_control limit(tbb::global_control::max_allowed_parallelism, size_t(threads));
            InputHessian h(features);
            accumulateLayerInput(layer, node, x, h);
            return h.hessian();
        };
        const Eigen::MatrixXd one = accumulate(1), several = accumulate(4);
        QVERIFY(one == several);
        // Spot checks against long-double sums (every 7th row and column: 86 × 86 entries).
        double worst = 0;
        for (int64_t a = 0; a < features; a += 7)
            for (int64_t b = 0; b < features; b += 7) {
                long double sum = 0, scale = 0;
                for (int64_t r = 0; r < n; ++r) {
                    const long double p = (long double)v[size_t(r * features + a)] * v[size_t(r * features + b)];
                    sum += p;
                    scale += std::abs(p);
                }
                const double expected = double(2 * sum / n);
                worst = std::max(worst, std::abs(one(a, b) - expected) / double(2 * scale / n));
            }
        qInfo("largest difference against the long-double sums: %.2e of the sum of |products|", worst);
        QVERIFY(worst < 1e-12);
    }

    // A grouped Conv's statistics: one Hessian per group, each 2·X_gᵀX_g/n of its own im2col columns
    // (written out here), the same bits on one thread and on several; the means of every feature.
    // Depthwise [8, 1, 3, 3], 2 groups of [6, 2, 3, 3], and 2 groups of 288 features ([4, 32, 3, 3]:
    // each group's Hessian in 2 × 2 tiles).
    void groupedConvHessiansAreEachGroupsOwn()
    {
        struct Case {
            Shape weight;
            int64_t groups;
        };
        for (const Case& k : {Case{{8, 1, 3, 3}, 8}, Case{{6, 2, 3, 3}, 2}, Case{{4, 32, 3, 3}, 2}}) {
            const int64_t channels = k.weight[1] * k.groups, features = k.weight[1] * 9;
            const auto [layer, node] = stride2Pad1Conv(k.weight, k.groups);
            std::mt19937 rng(5);
            std::normal_distribution<float> normal;
            Tensor x(DType::F32, {3, channels, 9, 10});
            for (float& v : x.mutableValues<float>())
                v = normal(rng) + 0.5f;
            auto accumulate = [&](int threads) {
                tbb::global_control limit(tbb::global_control::max_allowed_parallelism, size_t(threads));
                InputHessian h(calibrationFeatures(layer), true, calibrationGroups(layer));
                accumulateLayerInput(layer, node, x, h);
                return h;
            };
            const InputHessian one = accumulate(1), several = accumulate(4);
            QCOMPARE(one.groups(), k.groups);
            QCOMPARE(one.groupFeatures(), features);
            const Eigen::MatrixXd patches = stride2Pad1Patches(x).cast<double>();
            const double n = double(patches.rows());
            QCOMPARE(one.rows(), patches.rows());
            double worst = 0;
            for (int64_t g = 0; g < k.groups; ++g) {
                QVERIFY(one.hessian(g) == several.hessian(g));
                const Eigen::MatrixXd xg = patches.middleCols(g * features, features);
                const Eigen::MatrixXd expected = 2.0 * xg.transpose() * xg / n;
                worst =
                    std::max(worst, (one.hessian(g) - expected).cwiseAbs().maxCoeff() / expected.cwiseAbs().maxCoeff());
            }
            const Eigen::VectorXd means = patches.colwise().sum().transpose() / n;
            const double meanError = (one.mean() - means).cwiseAbs().maxCoeff();
            qInfo("Conv %s, %lld groups: %lld Hessians of %lld features, largest difference from the im2col "
                  "rows' %.2e (relative), means %.2e",
                  shapeToString(k.weight).c_str(), (long long)k.groups, (long long)k.groups, (long long)features, worst,
                  meanError);
            QVERIFY(worst <= 1e-12);
            QVERIFY(meanError <= 1e-12);
            QVERIFY(errorOf([&] { one.hessian(k.groups); }).contains("not a group"));
        }
        QVERIFY(errorOf([] { InputHessian(10, true, 3); }).contains("10 features cannot form 3 groups"));
    }

    void groupedConvMatchesTheNumpyReferenceGroupByGroup_data()
    {
        QTest::addColumn<QString>("shape");
        QTest::addColumn<bool>("symmetric");
        QTest::addColumn<bool>("actOrder");
        QTest::newRow("depthwise [32, 1, 3, 3], act-order") << "depthwise" << true << true;
        QTest::newRow("depthwise [32, 1, 3, 3], asymmetric, own order") << "depthwise" << false << false;
        QTest::newRow("2 groups [16, 24, 3, 3], act-order") << "grouped" << true << true;
        QTest::newRow("2 groups [16, 24, 3, 3], asymmetric, own order") << "grouped" << false << false;
    }

    // Each group's rows against its own Hessian, as the reference runs them: its im2col columns
    // built here, independently of the engine's accumulation.
    void groupedConvMatchesTheNumpyReferenceGroupByGroup()
    {
        QFETCH(QString, shape);
        QFETCH(bool, symmetric);
        QFETCH(bool, actOrder);
        const bool depthwise = shape == "depthwise";
        const Shape weightShape = depthwise ? Shape{32, 1, 3, 3} : Shape{16, 24, 3, 3};
        const int64_t groups = depthwise ? 32 : 2, channels = weightShape[1] * groups;
        const int64_t rows = weightShape[0], features = weightShape[1] * 9;
        const auto [layer, node] = stride2Pad1Conv(weightShape, groups);
        std::mt19937 rng(17);
        std::normal_distribution<float> normal;
        Tensor w(DType::F32, weightShape);
        for (float& v : w.mutableValues<float>())
            v = normal(rng) * 0.1f;
        // Inputs: a few latent factors shared by the channels, unequal magnitudes, post-ReLU.
        Tensor x(DType::F32, {8, channels, 16, 16});
        {
            auto xv = x.mutableValues<float>();
            std::vector<float> magnitude(static_cast<size_t>(channels));
            for (float& m : magnitude)
                m = std::exp(normal(rng) * 0.7f);
            for (int64_t b = 0; b < 8; ++b)
                for (int64_t p = 0; p < 256; ++p) {
                    const float f1 = normal(rng), f2 = normal(rng);
                    for (int64_t c = 0; c < channels; ++c)
                        xv[size_t((b * channels + c) * 256 + p)] =
                            std::max(0.f, (f1 * float(c % 3) + f2 + 0.5f * normal(rng)) * magnitude[size_t(c)]);
                }
        }
        InputHessian h(calibrationFeatures(layer), true, groups);
        accumulateLayerInput(layer, node, x, h);
        const Eigen::MatrixXf patches = stride2Pad1Patches(x);
        const Eigen::MatrixXf wm =
            Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
                w.values<float>().data(), rows, features);

        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const std::filesystem::path folder = dir.path().toStdString();
        writeNpy(folder / "W.npy", tensorOf(wm));
        writeNpy(folder / "X.npy", tensorOf(patches));
        QVERIFY(runPython(kReference, {dir.path(), "4", "0", symmetric ? "sym" : "asym", "0.01", actOrder ? "1" : "0",
                                       QString::number(groups)}));

        WeightAlgorithm algorithm = WeightAlgorithm::parse("gptq");
        algorithm.actOrder = actOrder;
        const GptqResult g = gptqQuantize(w, int4Spec({}, symmetric), algorithm, h.hessians(), "dw.weight");
        const QuantParams& p = g.quantization.params;
        const Tensor refCodes = readNpy(folder / "ref_codes.npy").toFloat32();
        const Tensor refScales = readNpy(folder / "ref_scales.npy");
        const auto rc = refCodes.values<float>();
        const auto rs = refScales.values<float>();
        const auto ours = g.rounded.values<float>();
        QCOMPARE(int64_t(p.scales.size()), rows);
        int64_t agree = 0;
        double worstScale = 0;
        for (int64_t r = 0; r < rows; ++r) {
            const float z = p.zeroPoints.empty() ? 0.f : float(p.zeroPoints[size_t(r)]);
            for (int64_t c = 0; c < features; ++c)
                agree += std::nearbyint(ours[size_t(r * features + c)] / p.scales[size_t(r)] + z) ==
                         rc[size_t(r * features + c)];
            worstScale = std::max(worstScale, double(std::abs(p.scales[size_t(r)] - rs[size_t(r)]) / rs[size_t(r)]));
        }
        // The output error Σ_g ||(W_g − Ŵ_g)·X_gᵀ||² of ours, of the reference's codes and of RTN.
        const Eigen::MatrixXf rtn =
            matrixOf(fakeQuantize(tensorOf(wm), computeQuantization(tensorOf(wm), int4Spec({}, symmetric), "w").params,
                                  Rounding::Nearest, 0, "w"));
        Eigen::MatrixXf reference(rows, features), mine(rows, features);
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < features; ++c) {
                const float z = p.zeroPoints.empty() ? 0.f : float(p.zeroPoints[size_t(r)]);
                reference(r, c) = (rc[size_t(r * features + c)] - z) * rs[size_t(r)];
                mine(r, c) = ours[size_t(r * features + c)];
            }
        const int64_t groupRows = rows / groups;
        const auto groupedError = [&](const Eigen::MatrixXf& rounded) {
            double sum = 0;
            for (int64_t k = 0; k < groups; ++k)
                sum +=
                    double(((wm.middleRows(k * groupRows, groupRows) - rounded.middleRows(k * groupRows, groupRows)) *
                            patches.middleCols(k * features, features).transpose())
                               .squaredNorm());
            return sum;
        };
        const double ourError = groupedError(mine), refError = groupedError(reference), rtnError = groupedError(rtn);
        const double agreement = 100.0 * double(agree) / double(rows * features);
        qInfo("%s: %.3f%% of %lld codes equal to the NumPy reference's, scales within %.1e; output error RTN %.5g, "
              "GPTQ %.5g (%.1f%% of RTN), reference %.5g (ours/reference - 1 = %.2e)",
              QTest::currentDataTag(), agreement, (long long)(rows * features), worstScale, rtnError, ourError,
              100 * ourError / rtnError, refError, ourError / refError - 1);
        QVERIFY2(agreement >= 99.9, "GPTQ codes differ from the reference beyond rounding ties");
        QVERIFY(worstScale <= 1e-6);
        QVERIFY(std::abs(ourError / refError - 1) <= 1e-5);
        QVERIFY(ourError < rtnError);
    }

    // Per-tensor scales couple the groups: one scale, from the whole weight, as round-to-nearest's;
    // each group's rows are then rounded against their own Hessian.
    void groupedConvPerTensorScaleIsTheWholeWeights()
    {
        const auto [layer, node] = stride2Pad1Conv({16, 1, 3, 3}, 16);
        std::mt19937 rng(23);
        std::normal_distribution<float> normal;
        Tensor w(DType::F32, {16, 1, 3, 3});
        for (float& v : w.mutableValues<float>())
            v = normal(rng) * 0.1f;
        Tensor x(DType::F32, {4, 16, 12, 12});
        for (float& v : x.mutableValues<float>())
            v = std::max(0.f, normal(rng) + 0.2f);
        InputHessian h(calibrationFeatures(layer), true, 16);
        accumulateLayerInput(layer, node, x, h);
        QuantizationSpec spec = int4Spec({}, true);
        spec.granularity = Granularity::PerTensor;
        const GptqResult g = gptqQuantize(w, spec, WeightAlgorithm::parse("gptq"), h.hessians(), "dw.weight");
        const TensorQuantization rtn = computeQuantization(w, spec, "dw.weight");
        QCOMPARE(g.quantization.params.scales.size(), size_t(1));
        QCOMPARE(g.quantization.params.scales, rtn.params.scales);
        const Tensor again = fakeQuantize(g.rounded, g.quantization.params, Rounding::Nearest, 0, "w");
        QCOMPARE(bytesOf(again), bytesOf(g.rounded));
        // Σ_g e_g·H_g·e_gᵀ: below round-to-nearest's.
        const Tensor nearest = fakeQuantize(w, rtn.params, Rounding::Nearest, 0, "w");
        const auto groupedError = [&](const Tensor& rounded) {
            const Eigen::MatrixXd e = channelRows(w, 0) - channelRows(rounded, 0);
            double sum = 0;
            for (int64_t k = 0; k < 16; ++k)
                sum += (e.row(k) * h.hessian(k)).dot(e.row(k));
            return sum;
        };
        qInfo("depthwise [16, 1, 3, 3], int4 per tensor: output error RTN %.5g, GPTQ %.5g", groupedError(nearest),
              groupedError(g.rounded));
        QVERIFY(groupedError(g.rounded) < groupedError(nearest));
        // Hessians that do not split the rows are an error naming the tensor.
        QVERIFY(errorOf([&] {
                    gptqQuantize(w, spec, WeightAlgorithm::parse("gptq"),
                                 std::vector<Eigen::MatrixXd>(3, Eigen::MatrixXd::Identity(9, 9)), "dw.weight");
                }).startsWith("tensor 'dw.weight': gptq: 16 output channels cannot form 3 groups"));
    }

    void badHessiansAreErrorsNamingTheTensor()
    {
        const Layer l = randomLayer(4, 8, 16, 1);
        const Tensor w = tensorOf(l.w);
        WeightAlgorithm a = WeightAlgorithm::parse("gptq");
        QVERIFY(errorOf([&] {
                    gptqQuantize(w, int4Spec({}, true), a, Eigen::MatrixXd::Identity(7, 7), "fc.weight");
                }).startsWith("tensor 'fc.weight': gptq: the Hessian is 7x7, the weight has 8 input features"));
        Eigen::MatrixXd nan = Eigen::MatrixXd::Identity(8, 8);
        nan(2, 3) = std::nan("");
        QVERIFY(errorOf([&] { gptqQuantize(w, int4Spec({}, true), a, nan, "fc.weight"); }).contains("NaN or Inf"));
        // No calibration input at all: every input is dead, the weights are zero, nothing breaks.
        const GptqResult zero = gptqQuantize(w, int4Spec({}, true), a, Eigen::MatrixXd::Zero(8, 8), "fc.weight");
        for (float v : zero.rounded.values<float>())
            QCOMPARE(v, 0.f);
    }
};

QTEST_APPLESS_MAIN(TestGptq)
#include "tst_gptq.moc"
