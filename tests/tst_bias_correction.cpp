// Empirical bias correction (quantization/bias_correction.h) checked against the
// layer's outputs themselves: NumPy (tests/bias_correction/output_mean_shift.py)
// computes E[W·x] − E[Ŵ·x] per output channel from the float and the quantized
// layer's outputs (Gemm over the input rows; Conv over every image and output
// position, zero padding included), and the correction the engine computes from
// the calibration means equals it; added to the bias, it removes the output mean
// shift of a layer whose inputs do not have zero mean.

#include <QtTest>

#include <Eigen/Dense>

#include <cmath>
#include <random>

#include "io/npy.h"
#include "layer_support.h"
#include "quant/kernels.h"
#include "quantization/bias_correction.h"
#include "quantization/input_hessian.h"
#include "quantization/tensor_quantization.h"
#include "test_support.h"

using namespace qs;
using namespace qs::test;

namespace {

const QString kReference = QStringLiteral(QUANTSCOPE_TEST_DATA "/../bias_correction/output_mean_shift.py");

Tensor randomTensor(const Shape& shape, std::mt19937_64& rng, float stddev, float mean = 0)
{
    std::normal_distribution<float> normal(mean, stddev);
    Tensor t(DType::F32, shape);
    for (float& v : t.mutableValues<float>())
        v = normal(rng);
    return t;
}

// int4 with one scale for the whole tensor: a coarse grid whose errors do not average out per channel.
Tensor roundedInt4PerTensor(const Tensor& w)
{
    QuantizationSpec spec;
    spec.qtype = QType::Int4;
    spec.method = CalibrationMethod::parse("absmax");
    spec.granularity = Granularity::PerTensor;
    return fakeQuantize(w, computeQuantization(w, spec, "w").params, Rounding::Nearest, 0, "w");
}

double maxAbs(const Eigen::VectorXd& v)
{
    return v.cwiseAbs().maxCoeff();
}

} // namespace

class TestBiasCorrection : public QObject {
    Q_OBJECT

private slots:
    void removesTheOutputMeanShiftOfAGemm()
    {
        std::mt19937_64 rng(21);
        const int64_t out = 24, in = 64, n = 3000;
        const Tensor w = randomTensor({out, in}, rng, 0.1f);
        // Inputs with a non-zero mean per feature (as after a ReLU), so the weight error shifts the output mean.
        Tensor x(DType::F32, {n, in});
        {
            std::vector<float> means(static_cast<size_t>(in));
            std::uniform_real_distribution<float> u(0.2f, 1.5f);
            for (float& m : means)
                m = u(rng);
            std::normal_distribution<float> normal;
            auto xv = x.mutableValues<float>();
            for (int64_t i = 0; i < n; ++i)
                for (int64_t c = 0; c < in; ++c)
                    xv[size_t(i * in + c)] = means[size_t(c)] + 0.5f * normal(rng);
        }
        const Tensor wq = roundedInt4PerTensor(w);
        InputHessian stats(in);
        {
            const auto xv = x.values<float>();
            const std::vector<double> rows(xv.begin(), xv.end());
            stats.addRows(rows.data(), n);
        }
        const Eigen::VectorXd delta = biasCorrection(w, wq, 0, stats.mean(), "fc.weight");

        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const std::filesystem::path folder = dir.path().toStdString();
        writeNpy(folder / "W.npy", w);
        writeNpy(folder / "Wq.npy", wq);
        writeNpy(folder / "X.npy", x);
        QVERIFY(runPython(kReference, {dir.path(), "gemm"}));
        const Tensor refShift = readNpy(folder / "ref_shift.npy");
        const auto ref = refShift.values<double>();
        const Eigen::VectorXd shift = Eigen::Map<const Eigen::VectorXd>(ref.data(), Eigen::Index(ref.size()));
        QCOMPARE(delta.size(), shift.size());
        const double error = maxAbs(delta - shift);
        // After the correction, the quantized layer's mean output minus the float one's: shift − delta.
        qInfo("Gemm 24x64, int4 per tensor: output mean shift up to %.4g before, %.3g after the correction",
              maxAbs(shift), error);
        QVERIFY(maxAbs(shift) > 0.05); // the shift is real
        QVERIFY(error <= 1e-9 * maxAbs(shift));

        // As the bias: b + delta, in float32; no bias is a zero one.
        const Tensor b = randomTensor({out}, rng, 1.0f);
        const Tensor corrected = correctedBias(&b, delta, "fc.weight");
        for (int64_t i = 0; i < out; ++i)
            QCOMPARE(corrected.values<float>()[size_t(i)], float(double(b.values<float>()[size_t(i)]) + delta(i)));
        QCOMPARE(correctedBias(nullptr, delta, "fc.weight").values<float>()[3], float(delta(3)));
        QVERIFY(errorOf([&] {
                    correctedBias(&b, delta.head(5), "fc.weight");
                }).startsWith("tensor 'fc.weight': bias_correction: the layer's bias has 24 elements"));
    }

    void convMeansAreOverEveryOutputPosition()
    {
        // Conv [O=6, C=3, 3, 3], stride 2, pads 1, on [4, 3, 9, 10] inputs with a non-zero mean.
        std::mt19937_64 rng(4);
        const Tensor w = randomTensor({6, 3, 3, 3}, rng, 0.2f);
        const Tensor x = randomTensor({4, 3, 9, 10}, rng, 0.7f, 0.8f);
        const Tensor wq = roundedInt4PerTensor(w);
        const auto [layer, node] = stride2Pad1Conv({6, 3, 3, 3});
        InputHessian stats(contractionFeatures(layer));
        accumulateLayerInput(layer, node, x, stats);
        const Eigen::VectorXd delta = biasCorrection(w, wq, 0, stats.mean(), "conv.weight");

        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const std::filesystem::path folder = dir.path().toStdString();
        writeNpy(folder / "W.npy", w);
        writeNpy(folder / "Wq.npy", wq);
        writeNpy(folder / "X.npy", x);
        QVERIFY(runPython(kReference, {dir.path(), "conv", "2", "1"}));
        const Tensor refShift = readNpy(folder / "ref_shift.npy");
        const auto ref = refShift.values<double>();
        const Eigen::VectorXd shift = Eigen::Map<const Eigen::VectorXd>(ref.data(), Eigen::Index(ref.size()));
        qInfo("Conv 6x3x3x3, stride 2, pads 1: output mean shift up to %.4g, engine minus NumPy %.3g", maxAbs(shift),
              maxAbs(delta - shift));
        QVERIFY(maxAbs(shift) > 0.01);
        QVERIFY(maxAbs(delta - shift) <= 1e-9 * maxAbs(shift));
    }

    void groupedConvsCorrectEachChannelOverItsOwnGroup()
    {
        // Depthwise [8, 1, 3, 3] (8 groups) and grouped [6, 2, 3, 3] (2 groups of 2 input channels),
        // stride 2, pads 1, on inputs whose channels have very different means (as after a ReLU), so a
        // correction taken over another group's means would be wrong.
        struct Case {
            Shape weight;
            int64_t channels, groups;
        };
        for (const Case& k : {Case{{8, 1, 3, 3}, 8, 8}, Case{{6, 2, 3, 3}, 4, 2}}) {
            std::mt19937_64 rng(uint64_t(k.groups));
            const Tensor w = randomTensor(k.weight, rng, 0.3f);
            Tensor x = randomTensor({5, k.channels, 9, 10}, rng, 0.4f);
            {
                auto xv = x.mutableValues<float>();
                const size_t plane = 9 * 10;
                for (size_t i = 0; i < xv.size(); ++i)
                    xv[i] += 0.3f + 0.7f * float((i / plane) % size_t(k.channels)); // channel c: mean 0.3 + 0.7·c
            }
            const Tensor wq = roundedInt4PerTensor(w);
            auto [layer, node] = stride2Pad1Conv(k.weight);
            layer.groups = k.groups;
            QCOMPARE(calibrationFeatures(layer), k.channels * 9);
            InputHessian stats(calibrationFeatures(layer), false);
            accumulateLayerInput(layer, node, x, stats);
            QVERIFY(!stats.hasHessian());
            QVERIFY(errorOf([&] { stats.hessian(); }).contains("hold the input means only, not a Hessian"));
            const Eigen::VectorXd delta = biasCorrection(w, wq, 0, stats.mean(), "dw.weight", k.groups);

            QTemporaryDir dir;
            QVERIFY(dir.isValid());
            const std::filesystem::path folder = dir.path().toStdString();
            writeNpy(folder / "W.npy", w);
            writeNpy(folder / "Wq.npy", wq);
            writeNpy(folder / "X.npy", x);
            QVERIFY(runPython(kReference, {dir.path(), "conv", "2", "1", QString::number(k.groups)}));
            const Tensor refShift = readNpy(folder / "ref_shift.npy");
            const auto ref = refShift.values<double>();
            const Eigen::VectorXd shift = Eigen::Map<const Eigen::VectorXd>(ref.data(), Eigen::Index(ref.size()));
            QCOMPARE(delta.size(), shift.size());
            // The first group's means for every channel (what ignoring the groups would read) miss the shift.
            const int64_t perGroup = stats.features() / k.groups;
            Eigen::VectorXd firstGroup(stats.features());
            for (int64_t g = 0; g < k.groups; ++g)
                firstGroup.segment(g * perGroup, perGroup) = stats.mean().head(perGroup);
            const double wrong = maxAbs(biasCorrection(w, wq, 0, firstGroup, "dw.weight", k.groups) - shift);
            qInfo("Conv %s, %lld groups: output mean shift up to %.4g, engine minus NumPy %.3g "
                  "(the first group's means for every channel: %.3g)",
                  shapeToString(k.weight).c_str(), static_cast<long long>(k.groups), maxAbs(shift),
                  maxAbs(delta - shift), wrong);
            QVERIFY(maxAbs(shift) > 0.01);
            QVERIFY(maxAbs(delta - shift) <= 1e-9 * maxAbs(shift));
            QVERIFY(wrong > 0.1 * maxAbs(shift));
        }
        // Output channels that do not split into the groups, and means of the wrong length.
        std::mt19937_64 rng(3);
        const Tensor w = randomTensor({6, 1, 3, 3}, rng, 0.3f);
        QVERIFY(errorOf([&] {
                    biasCorrection(w, w, 0, Eigen::VectorXd::Zero(36), "dw.weight", 4);
                }).startsWith("tensor 'dw.weight': bias_correction: 6 output channels cannot form 4 groups"));
        QVERIFY(errorOf([&] {
                    biasCorrection(w, w, 0, Eigen::VectorXd::Zero(9), "dw.weight", 6);
                }).contains("cover 9 input features, the weight has 9 in each of 6 groups"));
        // An input whose channels are not the groups' is an error naming the layer.
        auto [layer, node] = stride2Pad1Conv({6, 1, 3, 3});
        layer.groups = 6;
        InputHessian stats(calibrationFeatures(layer), false);
        QVERIFY(errorOf([&] {
                    accumulateLayerInput(layer, node, randomTensor({1, 5, 9, 10}, rng, 1.0f), stats);
                }).startsWith("layer 'conv': input [1, 5, 9, 10] does not match the Conv weight"));
    }

    void badStatisticsAreErrorsNamingTheTensor()
    {
        std::mt19937_64 rng(1);
        const Tensor w = randomTensor({4, 8}, rng, 1.0f);
        QVERIFY(errorOf([&] {
                    biasCorrection(w, w, 0, Eigen::VectorXd::Zero(7), "fc.weight");
                }).startsWith("tensor 'fc.weight': bias_correction: the calibration means cover 7 input features"));
        Eigen::VectorXd nan = Eigen::VectorXd::Zero(8);
        nan(1) = std::nan("");
        QVERIFY(errorOf([&] { biasCorrection(w, w, 0, nan, "fc.weight"); }).contains("NaN or Inf"));
    }
};

QTEST_APPLESS_MAIN(TestBiasCorrection)
#include "tst_bias_correction.moc"
