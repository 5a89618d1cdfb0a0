// The integer simulation of a LiteRT model (export/tflite_integer.h): the
// fixed-point primitives and every operator on one-operator models written
// field by field (tests/tflite_support.h), against results computed by hand
// from LiteRT's reference-kernel arithmetic (the expected codes below are
// worked out in the comments). The same models run through LiteRT.js in
// tst_export_tflite (integerOperatorsAgainstLiteRt).
#include <QtTest>

#include <cmath>

#include "core/error.h"
#include "export/tflite_integer.h"
#include "test_support.h"
#include "tflite_support.h"

using namespace qs;
using namespace qs::tflite_fixed;
using test::TinyTflite;
using tflite::Activation;
using tflite::BuiltinOperator;
using tflite::BuiltinOptions;

namespace {

std::vector<int8_t> runInt8(const TinyTflite& m, const std::vector<std::vector<int8_t>>& inputs,
                            const std::vector<std::vector<int64_t>>& shapes,
                            TfliteArithmetic arithmetic = TfliteArithmetic::Reference)
{
    const std::vector<uint8_t> bytes = m.serialize();
    const TfliteIntegerExecutor e = TfliteIntegerExecutor::fromBytes(bytes, "one-op model", arithmetic);
    std::vector<Tensor> in;
    for (size_t k = 0; k < inputs.size(); ++k)
        in.push_back(Tensor::fromVector(DType::I8, shapes[k], inputs[k]));
    const std::vector<Tensor> out = e.run(in);
    return {out.at(0).values<int8_t>().begin(), out.at(0).values<int8_t>().end()};
}

flatbuffer::Table activationOnly(int field, Activation a)
{
    flatbuffer::Table t;
    t.scalar<int8_t>(field, int8_t(a));
    return t;
}

} // namespace

class TestTfliteInteger : public QObject {
    Q_OBJECT
private slots:
    void fixedPoint()
    {
        // frexp: 0.5 = 0.5·2^0, 1 = 0.5·2^1, 0.75 = 0.75·2^0, 0.1 = 0.8·2^−3.
        QCOMPARE(quantizeMultiplier(0.5).value, int32_t(1) << 30);
        QCOMPARE(quantizeMultiplier(0.5).shift, 0);
        QCOMPARE(quantizeMultiplier(1.0).value, int32_t(1) << 30);
        QCOMPARE(quantizeMultiplier(1.0).shift, 1);
        QCOMPARE(quantizeMultiplier(0.75).value, int32_t(1610612736));
        QCOMPARE(quantizeMultiplier(0.1).value, int32_t(1717986918)); // round(0.8 · 2^31)
        QCOMPARE(quantizeMultiplier(0.1).shift, -3);
        QCOMPARE(quantizeMultiplier(0.0).value, 0);
        // (a·b + 2^30) / 2^31 truncated; a negative product nudged by 1 − 2^30: −3.5 → −3, 3.5 → 4.
        QCOMPARE(saturatingRoundingDoublingHighMul(1 << 30, 1 << 30), int32_t(1) << 29);
        QCOMPARE(saturatingRoundingDoublingHighMul(7, 1 << 30), 4);
        QCOMPARE(saturatingRoundingDoublingHighMul(-7, 1 << 30), -3);
        QCOMPARE(saturatingRoundingDoublingHighMul(INT32_MIN, INT32_MIN), INT32_MAX);
        // Rounding to nearest, ties away from zero.
        QCOMPARE(roundingDivideByPot(5, 1), 3);
        QCOMPARE(roundingDivideByPot(-5, 1), -3);
        QCOMPARE(roundingDivideByPot(7, 2), 2);
        QCOMPARE(roundingDivideByPot(-6, 2), -2);
        QCOMPARE(roundingDivideByPot(6, 2), 2);
        // 100 · 0.1: SRDHM gives 80 (79.99… + ½ truncated), then 80 / 2^3 = 10; −25 · 0.1 = −2.5 → −3.
        QCOMPARE(multiplyByQuantizedMultiplier(100, quantizeMultiplier(0.1)), 10);
        QCOMPARE(multiplyByQuantizedMultiplier(-25, quantizeMultiplier(0.1)), -3);
        QCOMPARE(saturatingRoundingDoublingHighMul16(-32768, -32768), int16_t(32767));
        QCOMPARE(roundingDivideByPot16(int16_t(-5), 1), int16_t(-3));
    }

    void conv2dPerChannel()
    {
        // Input NHWC [1,1,2,2], scale 0.5, zero point 1: codes 3 −1 | 5 1 = reals 1 −1 | 2 0.
        // Weights [2,1,1,2] per channel, scales 0.25 and 0.125: (4 2) and (8 −8) = (1 0.5), (1 −1).
        // Biases 8 and −16 at scales 0.125, 0.0625 (= 1 and −1). Output scale 0.25, zero point −2.
        // Pixel 0, (x − zp) = (2, −2): channel 0 acc 4·2 + 2·(−2) + 8 = 12, × 0.5 = 6, − 2 → 4;
        //   channel 1 acc 8·2 + (−8)(−2) − 16 = 16, × 0.25 = 4, − 2 → 2.
        // Pixel 1, (4, 0): 16 + 8 = 24 × 0.5 = 12 → 10; 32 − 16 = 16 × 0.25 = 4 → 2.
        TinyTflite m;
        const int32_t x = m.int8("x", {1, 1, 2, 2}, 0.5f, 1);
        const int32_t w = m.int8PerChannel("w", {2, 1, 1, 2}, {0.25f, 0.125f}, 0, {4, 2, 8, -8});
        const int32_t b = m.int32("b", {2}, {8, -16}, {0.125f, 0.0625f});
        const int32_t y = m.int8("y", {1, 1, 2, 2}, 0.25f, -2);
        flatbuffer::Table o;
        o.scalar<int8_t>(tflite::conv2d::padding, int8_t(tflite::Padding::Valid));
        o.scalar<int32_t>(tflite::conv2d::stride_w, 1);
        o.scalar<int32_t>(tflite::conv2d::stride_h, 1);
        m.op(BuiltinOperator::Conv2D, {x, w, b}, {y}, BuiltinOptions::Conv2DOptions, o);
        m.inputs = {x}, m.outputs = {y};
        QCOMPARE(runInt8(m, {{3, -1, 5, 1}}, {{1, 1, 2, 2}}), (std::vector<int8_t>{4, 2, 10, 2}));
    }

    void depthwiseSamePaddingIsTheZeroPoint()
    {
        // 2×2 input, zero point 3, codes 4 5 6 7 = 1 2 3 4; 3×3 weights 1…9 (scale 1), SAME: the
        // padding contributes nothing (it is the zero point). Output (0,0) sees weights 5 6 8 9 on
        // 1 2 3 4: 5 + 12 + 24 + 36 = 77; (0,1): 4 5 7 8 → 4 + 10 + 21 + 32 = 67; (1,0): 2 3 5 6 →
        // 2 + 6 + 15 + 24 = 47; (1,1): 1 2 4 5 → 1 + 4 + 12 + 20 = 37. Multiplier 1, zero point 0.
        TinyTflite m;
        const int32_t x = m.int8("x", {1, 2, 2, 1}, 1.0f, 3);
        const int32_t w = m.int8PerChannel("w", {1, 3, 3, 1}, {1.0f}, 3, {1, 2, 3, 4, 5, 6, 7, 8, 9});
        const int32_t b = m.int32("b", {1}, {0}, {1.0f});
        const int32_t y = m.int8("y", {1, 2, 2, 1}, 1.0f, 0);
        flatbuffer::Table o;
        o.scalar<int8_t>(tflite::depthwise::padding, int8_t(tflite::Padding::Same));
        o.scalar<int32_t>(tflite::depthwise::stride_w, 1);
        o.scalar<int32_t>(tflite::depthwise::stride_h, 1);
        o.scalar<int32_t>(tflite::depthwise::depth_multiplier, 1);
        m.op(BuiltinOperator::DepthwiseConv2D, {x, w, b}, {y}, BuiltinOptions::DepthwiseConv2DOptions, o);
        m.inputs = {x}, m.outputs = {y};
        QCOMPARE(runInt8(m, {{4, 5, 6, 7}}, {{1, 2, 2, 1}}), (std::vector<int8_t>{77, 67, 47, 37}));
    }

    void fullyConnectedWithRelu()
    {
        // Input scale 1, zero point 1: codes 2 3 0 = 1 2 −1. Weights scale 0.5: rows (2 2 2), (2 −2 0).
        // Biases 2, 0 at scale 0.5. Output scale 1, zero point 0, RELU.
        // Row 0: 2 + 4 − 2 + 2 = 6, × 0.5 = 3. Row 1: 2 − 4 + 0 = −2, × 0.5 = −1, RELU → 0.
        TinyTflite m;
        const int32_t x = m.int8("x", {1, 3}, 1.0f, 1);
        const int32_t w = m.int8("w", {2, 3}, 0.5f, 0, {2, 2, 2, 2, -2, 0});
        const int32_t b = m.int32("b", {2}, {2, 0}, {0.5f});
        const int32_t y = m.int8("y", {1, 2}, 1.0f, 0);
        m.op(BuiltinOperator::FullyConnected, {x, w, b}, {y}, BuiltinOptions::FullyConnectedOptions,
             activationOnly(tflite::fully_connected::fused_activation_function, Activation::Relu));
        m.inputs = {x}, m.outputs = {y};
        QCOMPARE(runInt8(m, {{2, 3, 0}}, {{1, 3}}), (std::vector<int8_t>{3, 0}));
    }

    void addWithItsLeftShift()
    {
        // a: scale 0.5, zp 0, codes 4 −3 (2, −1.5); b: scale 0.25, zp 2, codes 10 1 (2, −0.25);
        // out: scale 1, zp −1. Twice the larger scale is 1: multipliers 0.5, 0.25, 2^−20.
        // Element 0: 4·2^20 → 2097152; 8·2^20 → 2097152; sum 4194304 × 2^−20 = 4, − 1 → 3.
        // Element 1: −3·2^20 → −1572864; −1·2^20 → −262144; sum −1835008 → −1.75 → −2, − 1 → −3.
        TinyTflite m;
        const int32_t a = m.int8("a", {2}, 0.5f, 0);
        const int32_t b = m.int8("b", {2}, 0.25f, 2);
        const int32_t y = m.int8("y", {2}, 1.0f, -1);
        m.op(BuiltinOperator::Add, {a, b}, {y}, BuiltinOptions::AddOptions,
             activationOnly(tflite::add_mul::fused_activation_function, Activation::None));
        m.inputs = {a, b}, m.outputs = {y};
        QCOMPARE(runInt8(m, {{4, -3}, {10, 1}}, {{2}, {2}}), (std::vector<int8_t>{3, -3}));
    }

    void mulBroadcastsAConstant()
    {
        // a [1,1,2,2] scale 0.5: codes 2 4 −2 6 = 1 2 −1 3; b, a per-channel constant [2] at 0.5:
        // codes 4 −2 = 2 −1. Products 2 −2 −2 −3 at output scale 0.5 → 4 −4 −4 −6.
        TinyTflite m;
        const int32_t a = m.int8("a", {1, 1, 2, 2}, 0.5f, 0);
        const int32_t b = m.int8("b", {2}, 0.5f, 0, {4, -2});
        const int32_t y = m.int8("y", {1, 1, 2, 2}, 0.5f, 0);
        m.op(BuiltinOperator::Mul, {a, b}, {y}, BuiltinOptions::MulOptions,
             activationOnly(tflite::add_mul::fused_activation_function, Activation::None));
        m.inputs = {a}, m.outputs = {y};
        QCOMPARE(runInt8(m, {{2, 4, -2, 6}}, {{1, 1, 2, 2}}), (std::vector<int8_t>{4, -4, -4, -6}));
    }

    void pools()
    {
        // Two channels, 2×2: channel 0 codes 1 2 3 5, channel 1 their negatives.
        // AVERAGE 2×2: (11 + 2) / 4 = 3; (−11 − 2) / 4 = −3 (truncated). MAX: 5, −1.
        // AVERAGE 3×3 SAME stride 1: every window holds the 4 inputs only → 3 and −3 everywhere.
        const std::vector<int8_t> codes = {1, -1, 2, -2, 3, -3, 5, -5};
        for (const auto& [op, filter, padding, expected] :
             std::vector<std::tuple<BuiltinOperator, int, tflite::Padding, std::vector<int8_t>>>{
                 {BuiltinOperator::AveragePool2D, 2, tflite::Padding::Valid, {3, -3}},
                 {BuiltinOperator::MaxPool2D, 2, tflite::Padding::Valid, {5, -1}},
                 {BuiltinOperator::AveragePool2D, 3, tflite::Padding::Same, {3, -3, 3, -3, 3, -3, 3, -3}}}) {
            TinyTflite m;
            const int32_t x = m.int8("x", {1, 2, 2, 2}, 0.5f, 0);
            const int32_t outSide = padding == tflite::Padding::Same ? 2 : 1;
            const int32_t y = m.int8("y", {1, outSide, outSide, 2}, 0.5f, 0);
            flatbuffer::Table o;
            o.scalar<int8_t>(tflite::pool2d::padding, int8_t(padding));
            o.scalar<int32_t>(tflite::pool2d::stride_w, padding == tflite::Padding::Same ? 1 : 2);
            o.scalar<int32_t>(tflite::pool2d::stride_h, padding == tflite::Padding::Same ? 1 : 2);
            o.scalar<int32_t>(tflite::pool2d::filter_width, filter);
            o.scalar<int32_t>(tflite::pool2d::filter_height, filter);
            m.op(op, {x}, {y}, BuiltinOptions::Pool2DOptions, o);
            m.inputs = {x}, m.outputs = {y};
            QCOMPARE(runInt8(m, {codes}, {{1, 2, 2, 2}}), expected);
        }
    }

    void meanFoldsTheCountIntoTheMultiplier()
    {
        // Scale 0.5, zero point 1 in and out; channel 0 codes 1 2 3 5: sum 11 − 4·1 = 7; the
        // multiplier 1 = 2^30·2^1 becomes 2^30·2^−1 with 1/4 folded in: SRDHM(7) = 4 (3.5), / 2 = 2,
        // + 1 → 3. Channel 1 codes −1 −2 −3 −5: −11 − 4 = −15 → SRDHM −7 (−7.5), / 2 → −4, + 1 → −3.
        TinyTflite m;
        const int32_t x = m.int8("x", {1, 2, 2, 2}, 0.5f, 1);
        const int32_t axes = m.int32("axes", {2}, {1, 2});
        const int32_t y = m.int8("y", {1, 1, 1, 2}, 0.5f, 1);
        flatbuffer::Table o;
        o.scalar<bool>(tflite::reducer::keep_dims, true);
        m.op(BuiltinOperator::Mean, {x, axes}, {y}, BuiltinOptions::ReducerOptions, o);
        m.inputs = {x}, m.outputs = {y};
        QCOMPARE(runInt8(m, {{1, -1, 2, -2, 3, -3, 5, -5}}, {{1, 2, 2, 2}}), (std::vector<int8_t>{3, -3}));
    }

    void logisticAndHardSwish()
    {
        // LOGISTIC, input scale 0.1: σ(0) = 0.5 → 128 − 128 = 0; σ(12.7) → 256 → 127 (clamped);
        // σ(−12.8) → 0 − 128; σ(2) = 0.8808 → round(225.48) − 128 = 97.
        {
            TinyTflite m;
            const int32_t x = m.int8("x", {4}, 0.1f, 0);
            const int32_t y = m.int8("y", {4}, 1.0f / 256.0f, -128);
            m.op(BuiltinOperator::Logistic, {x}, {y});
            m.inputs = {x}, m.outputs = {y};
            QCOMPARE(runInt8(m, {{0, 127, -128, 20}}, {{4}}), (std::vector<int8_t>{0, 127, -128, 97}));
        }
        // HARD_SWISH, scale 0.05 in and out: x·relu6(x + 3)/6 through the int16 fixed-point path.
        // 0 → 0, −4 → 0 exactly; every code within one of the real function's rounding.
        TinyTflite m;
        const int32_t x = m.int8("x", {256}, 0.05f, 0);
        const int32_t y = m.int8("y", {256}, 0.05f, 0);
        m.op(BuiltinOperator::HardSwish, {x}, {y}, BuiltinOptions::HardSwishOptions, {});
        m.inputs = {x}, m.outputs = {y};
        std::vector<int8_t> all(256);
        for (int c = 0; c < 256; ++c)
            all[size_t(c)] = int8_t(c - 128);
        const std::vector<int8_t> out = runInt8(m, {all}, {{256}});
        int exact = 0;
        for (int c = 0; c < 256; ++c) {
            const double v = 0.05 * (c - 128), real = v * std::clamp(v + 3.0, 0.0, 6.0) / 6.0;
            const int expected = std::clamp(int(std::lround(real / 0.05)), -128, 127);
            QVERIFY2(std::abs(out[size_t(c)] - expected) <= 1, qPrintable(QString("code %1").arg(c - 128)));
            exact += out[size_t(c)] == expected;
        }
        QCOMPARE(out[128], int8_t(0));
        QCOMPARE(out[128 - 80], int8_t(0));
        QVERIFY(exact >= 200); // the fixed-point path is off by one only near ties
    }

    void quantizeAndDequantizeAtTheEdges()
    {
        // QUANTIZE at scale 0.5, zero point −1: 0.25 → round(0.5) = 1 → 0; −0.25 → −1 → −2 (half
        // away from zero); 100 → 127 (clamped); 0.74 → 1 → 0. DEQUANTIZE: (q + 1) · 0.5.
        TinyTflite m;
        const int32_t f = m.float32("f", {4});
        const int32_t q = m.int8("q", {4}, 0.5f, -1);
        const int32_t g = m.float32("g", {4});
        m.op(BuiltinOperator::Quantize, {f}, {q});
        m.op(BuiltinOperator::Dequantize, {q}, {g});
        m.inputs = {f}, m.outputs = {g};
        const std::vector<uint8_t> bytes = m.serialize();
        const TfliteIntegerExecutor e = TfliteIntegerExecutor::fromBytes(bytes, "edges", TfliteArithmetic::Reference);
        const Tensor out =
            e.run({Tensor::fromVector(DType::F32, {4}, std::vector<float>{0.25f, -0.25f, 100.0f, 0.74f})}).at(0);
        QCOMPARE(std::vector<float>(out.values<float>().begin(), out.values<float>().end()),
                 (std::vector<float>{0.5f, -0.5f, 64.0f, 0.5f}));
        // int8 → int8 QUANTIZE (CONCATENATION's requantization): scale 0.5 zp 0 → scale 0.25 zp 3:
        // code 5 (2.5) → 10 + 3 = 13; −7 (−3.5) → −14 + 3 = −11.
        TinyTflite r;
        const int32_t a = r.int8("a", {2}, 0.5f, 0);
        const int32_t b = r.int8("b", {2}, 0.25f, 3);
        r.op(BuiltinOperator::Quantize, {a}, {b});
        r.inputs = {a}, r.outputs = {b};
        QCOMPARE(runInt8(r, {{5, -7}}, {{2}}), (std::vector<int8_t>{13, -11}));
    }

    void layoutOperators()
    {
        { // PAD with the zero point −3: [1,1,1,1] code 5 padded one row above and one column after.
            TinyTflite m;
            const int32_t x = m.int8("x", {1, 1, 1, 1}, 1.0f, -3);
            const int32_t p = m.int32("p", {4, 2}, {0, 0, 1, 0, 0, 1, 0, 0});
            const int32_t y = m.int8("y", {1, 2, 2, 1}, 1.0f, -3);
            m.op(BuiltinOperator::Pad, {x, p}, {y}, BuiltinOptions::PadOptions, {});
            m.inputs = {x}, m.outputs = {y};
            QCOMPARE(runInt8(m, {{5}}, {{1, 1, 1, 1}}), (std::vector<int8_t>{-3, -3, 5, -3}));
        }
        { // TRANSPOSE [1,2,3] by (0,2,1): 0 1 2 / 3 4 5 → 0 3 / 1 4 / 2 5.
            TinyTflite m;
            const int32_t x = m.int8("x", {1, 2, 3}, 1.0f, 0);
            const int32_t p = m.int32("perm", {3}, {0, 2, 1});
            const int32_t y = m.int8("y", {1, 3, 2}, 1.0f, 0);
            m.op(BuiltinOperator::Transpose, {x, p}, {y}, BuiltinOptions::TransposeOptions, {});
            m.inputs = {x}, m.outputs = {y};
            QCOMPARE(runInt8(m, {{0, 1, 2, 3, 4, 5}}, {{1, 2, 3}}), (std::vector<int8_t>{0, 3, 1, 4, 2, 5}));
        }
        { // CONCATENATION on the channels: (1 2) and (3 4) → 1 2 3 4.
            TinyTflite m;
            const int32_t a = m.int8("a", {1, 1, 1, 2}, 1.0f, 0);
            const int32_t b = m.int8("b", {1, 1, 1, 2}, 1.0f, 0);
            const int32_t y = m.int8("y", {1, 1, 1, 4}, 1.0f, 0);
            flatbuffer::Table o;
            o.scalar<int32_t>(tflite::concatenation::axis, 3);
            m.op(BuiltinOperator::Concatenation, {a, b}, {y}, BuiltinOptions::ConcatenationOptions, o);
            m.inputs = {a, b}, m.outputs = {y};
            QCOMPARE(runInt8(m, {{1, 2}, {3, 4}}, {{1, 1, 1, 2}, {1, 1, 1, 2}}), (std::vector<int8_t>{1, 2, 3, 4}));
        }
        { // RESIZE_NEAREST_NEIGHBOR ×2 (floor, no half-pixel centers): 1 2 → 1 1 2 2 on both rows.
            TinyTflite m;
            const int32_t x = m.int8("x", {1, 1, 2, 1}, 1.0f, 0);
            const int32_t s = m.int32("size", {2}, {2, 4});
            const int32_t y = m.int8("y", {1, 2, 4, 1}, 1.0f, 0);
            m.op(BuiltinOperator::ResizeNearestNeighbor, {x, s}, {y}, BuiltinOptions::ResizeNearestNeighborOptions,
                 flatbuffer::Table());
            m.inputs = {x}, m.outputs = {y};
            QCOMPARE(runInt8(m, {{1, 2}}, {{1, 1, 2, 1}}), (std::vector<int8_t>{1, 1, 2, 2, 1, 1, 2, 2}));
        }
    }

    void transposeConvScattersAndSubSubtracts()
    {
        // TRANSPOSE_CONV, input [1, 2, 1, 1] codes 1 2 (scale 1, zp 0), filter [1, 3, 1, 1] taps 1 3 5,
        // stride 2, SAME to an output of 4 rows: the leading pad is ((2 − 1)·2 + 3 − 4) / 2 = 0, so input
        // row r lands on rows 2r, 2r + 1, 2r + 2. Row 0: 1·1 = 1; row 1: 1·3 = 3; row 2: 1·5 + 2·1 = 7;
        // row 3: 2·3 = 6 (2·5 falls off the end). Bias 10, multiplier 1: 11 13 17 16.
        TinyTflite m;
        const int32_t shape = m.int32("shape", {4}, {1, 4, 1, 1});
        const int32_t w = m.int8("w", {1, 3, 1, 1}, 1.0f, 0, {1, 3, 5});
        const int32_t x = m.int8("x", {1, 2, 1, 1}, 1.0f, 0);
        const int32_t b = m.int32("b", {1}, {10}, {1.0f});
        const int32_t y = m.int8("y", {1, 4, 1, 1}, 1.0f, 0);
        flatbuffer::Table o;
        o.scalar<int8_t>(tflite::transpose_conv::padding, int8_t(tflite::Padding::Same));
        o.scalar<int32_t>(tflite::transpose_conv::stride_w, 1);
        o.scalar<int32_t>(tflite::transpose_conv::stride_h, 2);
        m.op(BuiltinOperator::TransposeConv, {shape, w, x, b}, {y}, BuiltinOptions::TransposeConvOptions, o);
        m.inputs = {x}, m.outputs = {y};
        QCOMPARE(runInt8(m, {{1, 2}}, {{1, 2, 1, 1}}), (std::vector<int8_t>{11, 13, 17, 16}));

        // SUB as addWithItsLeftShift's ADD, the scaled second input subtracted: element 0 is
        // 2097152 − 2097152 = 0 → 0 − 1 = −1; element 1 is −1572864 + 262144 = −1310720 → −1.25,
        // rounded to −1, − 1 → −2.
        TinyTflite s;
        const int32_t a = s.int8("a", {2}, 0.5f, 0);
        const int32_t c = s.int8("b", {2}, 0.25f, 2);
        const int32_t d = s.int8("y", {2}, 1.0f, -1);
        s.op(BuiltinOperator::Sub, {a, c}, {d}, BuiltinOptions::SubOptions,
             activationOnly(tflite::add_mul::fused_activation_function, Activation::None));
        s.inputs = {a, c}, s.outputs = {d};
        QCOMPARE(runInt8(s, {{4, -3}, {10, 1}}, {{2}, {2}}), (std::vector<int8_t>{-1, -2}));
    }

    // Arm NN 20.08's TfLite parser never reads RESIZE_BILINEAR's half_pixel_centers, and the Arm NN
    // simulation reproduces that: a row of codes 0 4 (scale 1) resized from 2 to 4 columns. With
    // half-pixel centers (LiteRT) the columns sit at −0.25 (clamped to 0), 0.25, 0.75, 1.25
    // (clamped): 0 1 3 4. Asymmetric (Arm NN) at 0, 0.5, 1, 1.5: 0 2 4 4. Arm NN's parser takes
    // TRANSPOSE_CONV with three inputs only, so the simulation refuses one with a bias input,
    // naming the operator.
    void armnnDropsHalfPixelCentersAndRefusesABiasInput()
    {
        TinyTflite r;
        const int32_t size = r.int32("size", {2}, {1, 4});
        const int32_t x = r.int8("x", {1, 1, 2, 1}, 1.0f, 0);
        const int32_t y = r.int8("y", {1, 1, 4, 1}, 1.0f, 0);
        flatbuffer::Table ro;
        ro.scalar<bool>(tflite::resize_bilinear::half_pixel_centers, true);
        r.op(BuiltinOperator::ResizeBilinear, {x, size}, {y}, BuiltinOptions::ResizeBilinearOptions, ro);
        r.inputs = {x}, r.outputs = {y};
        QCOMPARE(runInt8(r, {{0, 4}}, {{1, 1, 2, 1}}), (std::vector<int8_t>{0, 1, 3, 4}));
        QCOMPARE(runInt8(r, {{0, 4}}, {{1, 1, 2, 1}}, TfliteArithmetic::ArmnnReference),
                 (std::vector<int8_t>{0, 2, 4, 4}));

        TinyTflite m;
        const int32_t shape = m.int32("shape", {4}, {1, 1, 1, 1});
        const int32_t w = m.int8("w", {1, 1, 1, 3}, 1.0f, 0, {1, 1, 1});
        const int32_t in = m.int8("x", {1, 1, 1, 3}, 1.0f, 0);
        const int32_t out = m.int8("y", {1, 1, 1, 1}, 2.0f, 0);
        const int32_t bias = m.int32("b", {1}, {0}, {1.0f});
        flatbuffer::Table o;
        o.scalar<int8_t>(tflite::transpose_conv::padding, int8_t(tflite::Padding::Valid));
        o.scalar<int32_t>(tflite::transpose_conv::stride_w, 1);
        o.scalar<int32_t>(tflite::transpose_conv::stride_h, 1);
        m.op(BuiltinOperator::TransposeConv, {shape, w, in, bias}, {out}, BuiltinOptions::TransposeConvOptions, o);
        m.inputs = {in}, m.outputs = {out};
        QCOMPARE(runInt8(m, {{1, 2, 3}}, {{1, 1, 1, 3}}), (std::vector<int8_t>{3})); // 6 / 2
        try {
            runInt8(m, {{1, 2, 3}}, {{1, 1, 1, 3}}, TfliteArithmetic::ArmnnReference);
            QFAIL("a four-input TRANSPOSE_CONV ran in the Arm NN simulation");
        } catch (const Error& e) {
            QVERIFY2(std::string(e.what()).find("(TRANSPOSE_CONV)") != std::string::npos, e.what());
        }
    }

    void malformedProgramsAreErrors()
    {
        {
            // A STRIDED_SLICE with a mask, and a TRANSPOSE_CONV whose output-shape input is not its
            // output's shape, are refused by name.
            TinyTflite m;
            const int32_t x = m.int8("x", {1, 4}, 1.0f, 0);
            const int32_t begin = m.int32("begin", {2}, {0, 0}), end = m.int32("end", {2}, {1, 4});
            const int32_t strides = m.int32("strides", {2}, {1, 2});
            const int32_t y = m.int8("y", {1, 2}, 1.0f, 0);
            flatbuffer::Table o;
            o.scalar<int32_t>(tflite::strided_slice::begin_mask, 1);
            m.op(BuiltinOperator::StridedSlice, {x, begin, end, strides}, {y}, BuiltinOptions::StridedSliceOptions, o);
            m.inputs = {x}, m.outputs = {y};
            const std::vector<uint8_t> bytes = m.serialize();
            const QString error = test::errorOf([&] { TfliteIntegerExecutor::fromBytes(bytes, "s.tflite"); });
            QVERIFY2(error.contains("s.tflite: operator 0 (STRIDED_SLICE)") && error.contains("masks"),
                     qPrintable(error));
            TinyTflite t;
            const int32_t shape = t.int32("shape", {4}, {1, 5, 1, 1});
            const int32_t w = t.int8("w", {1, 3, 1, 1}, 1.0f, 0, {1, 3, 5});
            const int32_t in = t.int8("x", {1, 2, 1, 1}, 1.0f, 0);
            const int32_t out = t.int8("y", {1, 4, 1, 1}, 1.0f, 0);
            flatbuffer::Table to;
            to.scalar<int32_t>(tflite::transpose_conv::stride_w, 1);
            to.scalar<int32_t>(tflite::transpose_conv::stride_h, 2);
            t.op(BuiltinOperator::TransposeConv, {shape, w, in}, {out}, BuiltinOptions::TransposeConvOptions, to);
            t.inputs = {in}, t.outputs = {out};
            const std::vector<uint8_t> tb = t.serialize();
            const QString terror = test::errorOf([&] { TfliteIntegerExecutor::fromBytes(tb, "t.tflite"); });
            QVERIFY2(terror.contains("t.tflite: operator 0 (TRANSPOSE_CONV)") && terror.contains("output shape"),
                     qPrintable(terror));
        }
        TinyTflite m;
        const int32_t a = m.int8("a", {2}, 0.5f, 0);
        const int32_t b = m.int8("b", {2}, 0.25f, 0);
        const int32_t y = m.int8("y", {4}, 0.5f, 0);
        flatbuffer::Table o;
        o.scalar<int32_t>(tflite::concatenation::axis, 0);
        m.op(BuiltinOperator::Concatenation, {a, b}, {y}, BuiltinOptions::ConcatenationOptions, o);
        m.inputs = {a, b}, m.outputs = {y};
        const std::vector<uint8_t> bytes = m.serialize();
        QString error = test::errorOf([&] { TfliteIntegerExecutor::fromBytes(bytes, "m.tflite"); });
        QVERIFY2(error.contains("m.tflite: operator 0 (CONCATENATION)") && error.contains("'b'"), qPrintable(error));
        // Cut anywhere: an Error, never a crash.
        int errors = 0;
        for (size_t cut = 0; cut < bytes.size(); cut += 7) {
            const std::vector<uint8_t> shorter(bytes.begin(), bytes.begin() + std::ptrdiff_t(cut));
            errors += !test::errorOf([&] { TfliteIntegerExecutor::fromBytes(shorter, "cut"); }).isEmpty();
        }
        QCOMPARE(errors, int((bytes.size() + 6) / 7));
        // An operator outside the subset (builtin 5, DEPTH_TO_SPACE) is named.
        TinyTflite u;
        const int32_t x = u.int8("x", {2}, 1.0f, 0);
        u.op(BuiltinOperator(5), {x}, {x});
        const std::vector<uint8_t> unknown = u.serialize();
        error = test::errorOf([&] { TfliteIntegerExecutor::fromBytes(unknown, "u.tflite"); });
        QVERIFY2(error.contains("builtin operator 5"), qPrintable(error));
    }
};

QTEST_GUILESS_MAIN(TestTfliteInteger)
#include "tst_tflite_integer.moc"
