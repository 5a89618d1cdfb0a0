#include "export/tflite_integer.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "export/tflite_armnn.h"

namespace qs {

namespace tf = tflite;
using tf::BuiltinOperator;

// ---- the fixed-point primitives

namespace tflite_fixed {

Multiplier quantizeMultiplier(double real)
{
    if (real == 0.0)
        return {};
    int shift = 0;
    const double q = std::frexp(real, &shift); // real = q · 2^shift, q in [0.5, 1)
    auto fixed = int64_t(std::round(q * double(int64_t(1) << 31)));
    if (fixed == (int64_t(1) << 31)) {
        fixed /= 2;
        ++shift;
    }
    if (shift < -31) // too small to represent: zero
        return {};
    if (shift > 30) { // LiteRT clamps the largest multipliers the same way
        shift = 30;
        fixed = std::numeric_limits<int32_t>::max();
    }
    return {int32_t(fixed), shift};
}

int32_t saturatingRoundingDoublingHighMul(int32_t a, int32_t b)
{
    if (a == b && a == std::numeric_limits<int32_t>::min())
        return std::numeric_limits<int32_t>::max();
    const int64_t ab = int64_t(a) * int64_t(b);
    const int64_t nudge = ab >= 0 ? (int64_t(1) << 30) : (1 - (int64_t(1) << 30));
    return int32_t((ab + nudge) / (int64_t(1) << 31)); // C++ division truncates toward zero, as gemmlowp's
}

int32_t roundingDivideByPot(int32_t x, int exponent)
{
    const int64_t mask = (int64_t(1) << exponent) - 1;
    const int64_t remainder = int64_t(x) & mask;
    const int64_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return int32_t((int64_t(x) >> exponent) + (remainder > threshold ? 1 : 0));
}

int32_t multiplyByQuantizedMultiplier(int32_t x, Multiplier m)
{
    const int left = m.shift > 0 ? m.shift : 0, right = m.shift > 0 ? 0 : -m.shift;
    // LiteRT multiplies in int32 (overflow there is undefined); saturate instead.
    const int64_t shifted = std::clamp<int64_t>(int64_t(x) * (int64_t(1) << left), std::numeric_limits<int32_t>::min(),
                                                std::numeric_limits<int32_t>::max());
    return roundingDivideByPot(saturatingRoundingDoublingHighMul(int32_t(shifted), m.value), right);
}

int16_t saturatingRoundingDoublingHighMul16(int16_t a, int16_t b)
{
    if (a == b && a == std::numeric_limits<int16_t>::min())
        return std::numeric_limits<int16_t>::max();
    const int32_t ab = int32_t(a) * int32_t(b);
    const int32_t nudge = ab >= 0 ? (1 << 14) : (1 - (1 << 14));
    return int16_t((ab + nudge) / (1 << 15));
}

int16_t roundingDivideByPot16(int16_t x, int exponent)
{
    const int32_t mask = (1 << exponent) - 1;
    const int32_t remainder = int32_t(x) & mask;
    const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return int16_t((int32_t(x) >> exponent) + (remainder > threshold ? 1 : 0));
}

} // namespace tflite_fixed

using namespace tflite_fixed;

namespace {

using Spec = TfliteProgram::TensorSpec;
using Operation = TfliteProgram::Operation;

int32_t clampInt8(int32_t v)
{
    return std::clamp<int32_t>(v, -128, 127);
}

// TfLiteRound (half away from zero) of a float, as an int32.
int32_t roundToInt(float x)
{
    return int32_t(std::round(x));
}

// ComputePaddingHeightWidth: the leading padding of SAME (VALID has none).
int32_t leadingPad(tf::Padding padding, int32_t in, int32_t filter, int32_t stride, int32_t dilation, int32_t out)
{
    if (padding == tf::Padding::Valid)
        return 0;
    const int32_t effective = (filter - 1) * dilation + 1;
    return std::max<int32_t>((out - 1) * stride + effective - in, 0) / 2;
}

// The row-major strides of `shape`, and the strides of `operand` broadcast to `shape` (0 on a broadcast axis).
std::vector<int64_t> broadcastStrides(const std::vector<int32_t>& operand, const std::vector<int32_t>& shape)
{
    std::vector<int64_t> strides(shape.size(), 0);
    int64_t stride = 1;
    for (size_t k = 0; k < operand.size(); ++k) {
        const size_t axis = operand.size() - 1 - k, outAxis = shape.size() - 1 - k;
        strides[outAxis] = operand[axis] == 1 ? 0 : stride;
        stride *= operand[axis];
    }
    return strides;
}

} // namespace

// What each operation needs beyond its tensors, computed once.
// XNNPACK's int8 ADD: both inputs scaled by integer multipliers with a shared shift chosen so
// that the larger multiplier has 21 bits, a rounding bias folding in the zero points.
struct XnnpackAdd {
    int32_t a = 0, b = 0, bias = 0, shift = 0;
};

struct TfliteIntegerExecutor::Prepared {
    bool xnnpack = false;              // TfliteArithmetic::Xnnpack
    bool padFolded = false;            // TfliteArithmetic::ArmnnReference: a PAD Arm NN folds into its CONV_2D
    std::vector<Multiplier> channel;   // CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED: per output channel
    std::vector<float> channelScale;   // the same, as XNNPACK's float requantization scales
    float scale = 0.0f;                // MUL's product scale (XNNPACK)
    XnnpackAdd add;                    // ADD (XNNPACK)
    Multiplier input1, input2, output; // ADD (input1, input2, output), MUL and MEAN (output)
    int32_t actMin = -128, actMax = 127;
    std::array<int8_t, 256> table{}; // LOGISTIC, HARD_SWISH, QUANTIZE int8 → int8: the code each code becomes
};

namespace {

// CalculateActivationRangeQuantized for int8.
void activationRange(tf::Activation a, const Spec& out, int32_t& lo, int32_t& hi)
{
    const float scale = out.scales.at(0);
    const int32_t zp = out.zeroPoint();
    auto quantize = [&](float f) { return zp + roundToInt(f / scale); };
    lo = -128, hi = 127;
    if (a == tf::Activation::Relu) {
        lo = std::max(lo, quantize(0.0f));
    } else if (a == tf::Activation::Relu6) {
        lo = std::max(lo, quantize(0.0f)), hi = std::min(hi, quantize(6.0f));
    } else if (a == tf::Activation::ReluN1To1) {
        lo = std::max(lo, quantize(-1.0f)), hi = std::min(hi, quantize(1.0f));
    }
}

// HARD_SWISH of one code, as reference_ops::HardSwish computes it with HardSwishPrepare's parameters.
int8_t hardSwishCode(int8_t code, const Spec& in, const Spec& out)
{
    const float hiresInputScale = (1.0f / 128.0f) * in.scales[0];
    const float reluishScale = 3.0f / 32768.0f;
    auto downscale = [](int32_t m) {
        constexpr int32_t kRounding = 1 << 15;
        if (m >= std::numeric_limits<int32_t>::max() - kRounding)
            return int16_t(std::numeric_limits<int16_t>::max());
        return int16_t((m + kRounding) >> 16);
    };
    const Multiplier outputM = quantizeMultiplier(double(hiresInputScale / out.scales[0]));
    const Multiplier reluishM = quantizeMultiplier(double(hiresInputScale / reluishScale));
    const int16_t outputFixed = downscale(outputM.value), reluishFixed = downscale(reluishM.value);
    auto saturatingLeftShift = [](int16_t v, int amount) {
        return int16_t(std::clamp<int64_t>(int64_t(v) * (int64_t(1) << amount), -32768, 32767));
    };
    const auto inputValue = int16_t(int32_t(code) - in.zeroPoint());
    const auto hires = int16_t(inputValue * (1 << 7));
    const int16_t preshiftOutput = saturatingRoundingDoublingHighMul16(hires, outputFixed);
    int16_t reluish = hires;
    if (reluishM.shift > 0)
        reluish = saturatingLeftShift(reluish, reluishM.shift - 1);
    reluish = saturatingRoundingDoublingHighMul16(reluish, reluishFixed);
    if (reluishM.shift > 0)
        reluish = saturatingLeftShift(reluish, 1);
    if (reluishM.shift < 0)
        reluish = roundingDivideByPot16(reluish, -reluishM.shift);
    reluish = int16_t((int32_t(reluish) + (1 << 15)) >> 1);
    // SaturatingDoublingHighMul: truncating, not rounding.
    const int16_t product = reluish == preshiftOutput && reluish == std::numeric_limits<int16_t>::min()
                                ? std::numeric_limits<int16_t>::max()
                                : int16_t((int32_t(reluish) * int32_t(preshiftOutput)) / (1 << 15));
    const int32_t value = int32_t(roundingDivideByPot16(product, -outputM.shift)) + out.zeroPoint();
    return int8_t(clampInt8(value));
}

} // namespace

const char* tfliteArithmeticName(TfliteArithmetic arithmetic)
{
    switch (arithmetic) {
    case TfliteArithmetic::Reference:
        return "reference";
    case TfliteArithmetic::ArmnnReference:
        return "armnn";
    default:
        return "xnnpack";
    }
}

std::optional<TfliteArithmetic> parseTfliteArithmetic(const std::string& name)
{
    for (TfliteArithmetic a :
         {TfliteArithmetic::Xnnpack, TfliteArithmetic::Reference, TfliteArithmetic::ArmnnReference})
        if (name == tfliteArithmeticName(a))
            return a;
    return std::nullopt;
}

TfliteIntegerExecutor::~TfliteIntegerExecutor() = default;
TfliteIntegerExecutor::TfliteIntegerExecutor(TfliteIntegerExecutor&&) noexcept = default;

TfliteIntegerExecutor TfliteIntegerExecutor::fromBytes(std::span<const uint8_t> bytes, const std::string& what,
                                                       TfliteArithmetic arithmetic)
{
    return TfliteIntegerExecutor(TfliteProgram::read(bytes, what), what, arithmetic);
}

TfliteIntegerExecutor::TfliteIntegerExecutor(TfliteProgram program, std::string what, TfliteArithmetic arithmetic)
    : program_(std::move(program)), what_(std::move(what)), arithmetic_(arithmetic)
{
    const bool xnnpack = arithmetic == TfliteArithmetic::Xnnpack;
    const auto& T = program_.tensors;
    for (size_t k = 0; k < program_.operations.size(); ++k) {
        const Operation& op = program_.operations[k];
        const std::string label = what_ + ": operator " + std::to_string(k) + " (" + tfliteOperatorName(op.op) + ")";
        auto need = [&](bool ok, const std::string& why) {
            if (!ok)
                throw Error(label + ": " + why);
        };
        auto int8Tensor = [&](int32_t index, bool perTensor) {
            const Spec& t = T.at(size_t(index));
            need(t.type == tf::TensorType::Int8 && !t.scales.empty() && (!perTensor || t.scales.size() == 1),
                 "tensor '" + t.name + "' is not an int8 tensor quantized " +
                     (perTensor ? "per tensor" : "per tensor or per channel"));
            return &t;
        };
        need(!op.outputs.empty() && !op.inputs.empty(), "it has no input or no output");
        Prepared p;
        p.xnnpack = xnnpack;
        if (arithmetic == TfliteArithmetic::ArmnnReference) {
            armnn_reference::check(program_, k, label);
            p.padFolded = armnn_reference::padFolded(program_, k);
        }
        const BuiltinOperator code = op.op;
        const bool float2int =
            code == BuiltinOperator::Quantize && T[size_t(op.inputs[0])].type == tf::TensorType::Float32;
        const Spec* out = code == BuiltinOperator::Dequantize ? nullptr : int8Tensor(op.outputs[0], true);
        // TRANSPOSE_CONV reads (output shape, weight, input[, bias]): its activation is input 2.
        const bool transposeConv = code == BuiltinOperator::TransposeConv;
        need(!transposeConv || op.inputs.size() >= 3, "three or four inputs expected (output shape, weight, input, "
                                                      "bias)");
        const size_t dataInput = transposeConv ? 2 : 0;
        const Spec* in =
            code == BuiltinOperator::Dequantize || !float2int ? int8Tensor(op.inputs[dataInput], true) : nullptr;
        if (code == BuiltinOperator::Dequantize)
            need(T[size_t(op.outputs[0])].type == tf::TensorType::Float32, "its output is not float32");
        if (out)
            activationRange(op.activation, *out, p.actMin, p.actMax);
        switch (code) {
        case BuiltinOperator::Conv2D:
        case BuiltinOperator::DepthwiseConv2D:
        case BuiltinOperator::TransposeConv:
        case BuiltinOperator::FullyConnected: {
            need(op.inputs.size() >= 2, "it has no weight");
            const Spec* w = int8Tensor(op.inputs[1], false);
            need(w->constant(), "its weight '" + w->name + "' is not a constant");
            for (int64_t z : w->zeroPoints)
                need(z == 0, "its weight '" + w->name + "' has a non-zero zero point");
            const bool dw = code == BuiltinOperator::DepthwiseConv2D;
            const size_t channels = size_t(w->shape.at(dw ? 3 : 0));
            need(w->scales.size() == 1 || w->scales.size() == channels,
                 "its weight '" + w->name + "' has " + std::to_string(w->scales.size()) + " scales for " +
                     std::to_string(channels) + " output channels");
            const size_t biasInput = transposeConv ? 3 : 2;
            if (op.inputs.size() > biasInput && op.inputs[biasInput] >= 0) {
                const Spec& b = T[size_t(op.inputs[biasInput])];
                need(b.type == tf::TensorType::Int32 && b.constant() && b.numel() == int64_t(channels),
                     "its bias '" + b.name + "' is not a constant int32 vector of " + std::to_string(channels));
            }
            if (transposeConv) {
                const Spec& shape = T[size_t(op.inputs[0])];
                need(shape.type == tf::TensorType::Int32 && shape.constant() && shape.int32Values() == out->shape,
                     "its output shape is not a constant int32 vector equal to its output's shape");
                need(in->shape.size() == 4 && w->shape.size() == 4 && out->shape.size() == 4 &&
                         w->shape[3] == in->shape[3] && w->shape[0] == out->shape[3] && in->shape[0] == out->shape[0],
                     "input [N, H, W, I], weight [O, kh, kw, I] and output [N, H, W, O] do not match");
                need(op.strideW > 0 && op.strideH > 0, "strides must be positive");
            } else if (code != BuiltinOperator::FullyConnected) {
                need(T[size_t(op.inputs[0])].shape.size() == 4 && w->shape.size() == 4 && out->shape.size() == 4,
                     "input, weight and output must be 4-D");
                need(op.strideW > 0 && op.strideH > 0 && op.dilationW > 0 && op.dilationH > 0,
                     "strides and dilations must be positive");
                if (code == BuiltinOperator::Conv2D) {
                    const int32_t depth = T[size_t(op.inputs[0])].shape[3], perGroup = w->shape[3];
                    need(perGroup > 0 && depth % perGroup == 0 && int32_t(channels) % (depth / perGroup) == 0,
                         "its filter's depth " + std::to_string(perGroup) + " does not divide the input's depth " +
                             std::to_string(depth) + " into groups of its " + std::to_string(channels) + " outputs");
                }
            } else {
                need(w->shape.size() == 2, "its weight must be 2-D");
            }
            for (size_t c = 0; c < channels; ++c) {
                const double ws = w->scales[w->scales.size() == 1 ? 0 : c];
                p.channel.push_back(quantizeMultiplier(double(in->scales[0]) * ws / double(out->scales[0])));
                // XNNPACK computes the scale in float: input × kernel / output.
                p.channelScale.push_back(in->scales[0] * float(ws) / out->scales[0]);
            }
            break;
        }
        case BuiltinOperator::Add:
        case BuiltinOperator::Sub: {
            need(op.inputs.size() == 2, "two inputs expected");
            const Spec* a = int8Tensor(op.inputs[0], true);
            const Spec* b = int8Tensor(op.inputs[1], true);
            const double twiceMax = 2.0 * double(std::max(a->scales[0], b->scales[0]));
            p.input1 = quantizeMultiplier(double(a->scales[0]) / twiceMax);
            p.input2 = quantizeMultiplier(double(b->scales[0]) / twiceMax);
            p.output = quantizeMultiplier(twiceMax / (double(1 << 20) * double(out->scales[0])));
            // XNNPACK subtracts as it adds, with the second input's scale negated.
            const float as = a->scales[0] / out->scales[0],
                        bs = (code == BuiltinOperator::Sub ? -1.0f : 1.0f) * b->scales[0] / out->scales[0];
            const int exponent = std::ilogb(std::max(as, std::fabs(bs))); // the float's unbiased exponent
            need(!xnnpack || (exponent >= -10 && exponent < 8),
                 "its input/output scale ratios are outside XNNPACK's range [2^-10, 2^8)");
            p.add.shift = 20 - exponent;
            p.add.a = int32_t(std::lrintf(std::ldexp(as, p.add.shift)));
            p.add.b = int32_t(std::lrintf(std::ldexp(bs, p.add.shift)));
            p.add.bias = (1 << (p.add.shift - 1)) - p.add.a * a->zeroPoint() - p.add.b * b->zeroPoint();
            break;
        }
        case BuiltinOperator::Mul: {
            need(op.inputs.size() == 2, "two inputs expected");
            const Spec* a = int8Tensor(op.inputs[0], true);
            const Spec* b = int8Tensor(op.inputs[1], true);
            p.output = quantizeMultiplier(double(a->scales[0] * b->scales[0] / out->scales[0])); // float, as mul.cc
            p.scale = a->scales[0] * b->scales[0] / out->scales[0];
            break;
        }
        case BuiltinOperator::Mean:
            need(op.inputs.size() == 2 && T[size_t(op.inputs[1])].type == tf::TensorType::Int32 &&
                     T[size_t(op.inputs[1])].constant(),
                 "its axes are not a constant int32 tensor");
            p.output = quantizeMultiplier(double(in->scales[0]) / double(out->scales[0]));
            break;
        case BuiltinOperator::Quantize:
            if (!float2int && xnnpack) {
                // XNNPACK's int8 conversion: an 8-bit fixed-point multiplier, rounding half up.
                const int32_t multiplier = int32_t(std::lrintf(256.0f * (in->scales[0] / out->scales[0])));
                for (int c = -128; c < 128; ++c)
                    p.table[size_t(c + 128)] =
                        int8_t(clampInt8(((out->zeroPoint() << 8) + 0x80 + (c - in->zeroPoint()) * multiplier) >> 8));
            } else if (!float2int) {
                for (int c = -128; c < 128; ++c)
                    p.table[size_t(c + 128)] = int8_t(clampInt8(
                        multiplyByQuantizedMultiplier(
                            c - in->zeroPoint(), quantizeMultiplier(double(in->scales[0]) / double(out->scales[0]))) +
                        out->zeroPoint()));
            }
            break;
        case BuiltinOperator::Logistic:
            for (int c = -128; c < 128; ++c) { // LUTPopulate: the table LiteRT's int8 kernel fills in float
                const float x = in->scales[0] * float(c - in->zeroPoint());
                const float y = 1.0f / (1.0f + std::exp(-x));
                p.table[size_t(c + 128)] =
                    int8_t(clampInt8(int32_t(std::round(y * (1.0f / out->scales[0])) + float(out->zeroPoint()))));
            }
            break;
        case BuiltinOperator::HardSwish:
            for (int c = -128; c < 128; ++c)
                p.table[size_t(c + 128)] = hardSwishCode(int8_t(c), *in, *out);
            break;
        case BuiltinOperator::Concatenation:
            for (int32_t t : op.inputs) {
                const Spec* s = int8Tensor(t, true);
                need(s->scales == out->scales && s->zeroPoints == out->zeroPoints,
                     "input '" + s->name +
                         "' has other quantization parameters than the output (LiteRT's int8 "
                         "CONCATENATION needs them equal)");
            }
            break;
        case BuiltinOperator::AveragePool2D:
        case BuiltinOperator::MaxPool2D:
            need(in->shape.size() == 4 && out->shape.size() == 4, "input and output must be 4-D");
            need(op.strideW > 0 && op.strideH > 0 && op.filterW > 0 && op.filterH > 0,
                 "strides and the filter must be positive");
            break;
        case BuiltinOperator::Slice: {
            need(op.inputs.size() == 3, "three inputs expected (input, begin, size)");
            const Spec& x = T[size_t(op.inputs[0])];
            const Spec& y = T[size_t(op.outputs[0])];
            for (int k : {1, 2})
                need(T[size_t(op.inputs[size_t(k)])].type == tf::TensorType::Int32 &&
                         T[size_t(op.inputs[size_t(k)])].constant() &&
                         T[size_t(op.inputs[size_t(k)])].numel() == int64_t(x.shape.size()),
                     "its begin and size are not constant int32 vectors of the input's rank");
            const std::vector<int32_t> begin = T[size_t(op.inputs[1])].int32Values();
            const std::vector<int32_t> size = T[size_t(op.inputs[2])].int32Values();
            need(y.shape.size() == x.shape.size(), "its output has another rank than its input");
            for (size_t d = 0; d < x.shape.size(); ++d) {
                const int32_t extent = size[d] == -1 ? x.shape[d] - begin[d] : size[d];
                need(begin[d] >= 0 && extent >= 0 && int64_t(begin[d]) + extent <= x.shape[d] && extent == y.shape[d],
                     "its begin and size do not select its output's shape from its input");
            }
            need(in->scales == out->scales && in->zeroPoints == out->zeroPoints,
                 "its output has other quantization parameters than its input (SLICE copies codes)");
            break;
        }
        case BuiltinOperator::StridedSlice: {
            need(op.inputs.size() == 4, "four inputs expected (input, begin, end, strides)");
            const Spec& x = T[size_t(op.inputs[0])];
            const Spec& y = T[size_t(op.outputs[0])];
            for (int k : {1, 2, 3})
                need(T[size_t(op.inputs[size_t(k)])].type == tf::TensorType::Int32 &&
                         T[size_t(op.inputs[size_t(k)])].constant() &&
                         T[size_t(op.inputs[size_t(k)])].numel() == int64_t(x.shape.size()),
                     "its begin, end and strides are not constant int32 vectors of the input's rank");
            need(op.masks == 0, "it has begin, end, ellipsis, new-axis or shrink masks (the simulation runs none)");
            const std::vector<int32_t> begin = T[size_t(op.inputs[1])].int32Values();
            const std::vector<int32_t> end = T[size_t(op.inputs[2])].int32Values();
            const std::vector<int32_t> strides = T[size_t(op.inputs[3])].int32Values();
            need(y.shape.size() == x.shape.size(), "its output has another rank than its input");
            for (size_t d = 0; d < x.shape.size(); ++d) {
                need(strides[d] > 0, "its strides are not positive (the simulation runs positive strides)");
                need(begin[d] >= 0 && begin[d] <= end[d] && end[d] <= x.shape[d] &&
                         (end[d] - begin[d] + strides[d] - 1) / strides[d] == y.shape[d],
                     "its begin, end and strides do not select its output's shape from its input");
            }
            need(in->scales == out->scales && in->zeroPoints == out->zeroPoints,
                 "its output has other quantization parameters than its input (STRIDED_SLICE copies codes)");
            break;
        }
        case BuiltinOperator::ResizeBilinear: {
            need(op.inputs.size() == 2 && T[size_t(op.inputs[1])].type == tf::TensorType::Int32 &&
                     T[size_t(op.inputs[1])].constant() && T[size_t(op.inputs[1])].numel() == 2,
                 "its size is not a constant int32 pair");
            need(in->shape.size() == 4 && out->shape.size() == 4 && in->shape[0] == out->shape[0] &&
                     in->shape[3] == out->shape[3] &&
                     T[size_t(op.inputs[1])].int32Values() == std::vector<int32_t>{out->shape[1], out->shape[2]},
                 "its input and output are not 4-D images of the same batch and depth, its size the output's");
            need(!(op.alignCorners && op.halfPixelCenters), "it sets both align_corners and half_pixel_centers");
            need(in->scales == out->scales && in->zeroPoints == out->zeroPoints,
                 "its output has other quantization parameters than its input (int8 RESIZE_BILINEAR interpolates "
                 "codes)");
            break;
        }
        case BuiltinOperator::PadV2: {
            need(op.inputs.size() == 3, "three inputs expected (input, paddings, value)");
            const Spec& value = T[size_t(op.inputs[2])];
            need(value.type == tf::TensorType::Int8 && value.constant() && value.numel() == 1 &&
                     value.data.size() == 1 && value.scales == out->scales && value.zeroPoints == out->zeroPoints,
                 "its padding value is not one constant int8 code at the output's scale");
            need(in->scales == out->scales && in->zeroPoints == out->zeroPoints,
                 "its output has other quantization parameters than its input");
            [[fallthrough]];
        }
        case BuiltinOperator::Pad:
        case BuiltinOperator::Transpose:
        case BuiltinOperator::ResizeNearestNeighbor:
            need(op.inputs.size() >= 2 && T[size_t(op.inputs[1])].type == tf::TensorType::Int32 &&
                     T[size_t(op.inputs[1])].constant(),
                 "its second input is not a constant int32 tensor");
            if (code == BuiltinOperator::Transpose) {
                const size_t rank = T[size_t(op.inputs[0])].shape.size();
                std::vector<int32_t> perm = T[size_t(op.inputs[1])].int32Values();
                bool permutation = perm.size() == rank && out->shape.size() == rank;
                for (size_t k = 0; permutation && k < rank; ++k)
                    permutation = perm[k] >= 0 && size_t(perm[k]) < rank &&
                                  out->shape[k] == T[size_t(op.inputs[0])].shape[size_t(perm[k])];
                std::sort(perm.begin(), perm.end());
                permutation = permutation && std::adjacent_find(perm.begin(), perm.end()) == perm.end();
                need(permutation, "its perm is not a permutation of the input's axes giving the output's shape");
            }
            break;
        default:
            break;
        }
        prepared_.push_back(std::move(p));
    }
}

// ---- execution

namespace {

struct Values {
    std::vector<std::vector<int8_t>> q; // int8 tensors
    std::vector<std::vector<float>> f;  // float32 tensors
};

struct Dims4 {
    int32_t n, h, w, c;
    explicit Dims4(const std::vector<int32_t>& s) : n(s.at(0)), h(s.at(1)), w(s.at(2)), c(s.at(3)) {}
    size_t at(int32_t b, int32_t y, int32_t x, int32_t k) const
    {
        return size_t(((int64_t(b) * h + y) * w + x) * c + k);
    }
};

// XNNPACK's float requantization of a scaled accumulator: clamped to the fused activation's range
// (less the zero point), rounded half to even, plus the zero point.
int32_t xnnpackRound(float scaled, const TfliteIntegerExecutor::Prepared& p, int32_t outZp)
{
    scaled = std::clamp(scaled, float(p.actMin - outZp), float(p.actMax - outZp));
    return int32_t(std::lrintf(scaled)) + outZp;
}

// An int32 accumulator of output channel `c` to its int8 code (clamped by the caller): LiteRT's
// fixed-point multiplier, or XNNPACK's float scale, clamp and round half to even (its magic-number
// rounding) before the zero point is added.
int32_t requantize(int32_t acc, const TfliteIntegerExecutor::Prepared& p, size_t c, int32_t outZp)
{
    const size_t k = p.channel.size() == 1 ? 0 : c;
    if (!p.xnnpack)
        return multiplyByQuantizedMultiplier(acc, p.channel[k]) + outZp;
    return xnnpackRound(float(acc) * p.channelScale[k], p, outZp);
}

void convolution(const Operation& op, const TfliteIntegerExecutor::Prepared& p, const std::vector<Spec>& T, Values& v,
                 bool depthwise)
{
    const Spec &inT = T[size_t(op.inputs[0])], &wT = T[size_t(op.inputs[1])], &outT = T[size_t(op.outputs[0])];
    const Dims4 in(inT.shape), out(outT.shape);
    const int32_t kh = wT.shape[1], kw = wT.shape[2];
    const int32_t inZp = inT.zeroPoint(), outZp = outT.zeroPoint();
    const std::vector<int32_t> bias =
        op.inputs.size() > 2 && op.inputs[2] >= 0 ? T[size_t(op.inputs[2])].int32Values() : std::vector<int32_t>();
    const auto* w = reinterpret_cast<const int8_t*>(wT.data.data());
    const std::vector<int8_t>& x = v.q[size_t(op.inputs[0])];
    std::vector<int8_t>& y = v.q[size_t(op.outputs[0])];
    const int32_t padH = leadingPad(op.padding, in.h, kh, op.strideH, op.dilationH, out.h);
    const int32_t padW = leadingPad(op.padding, in.w, kw, op.strideW, op.dilationW, out.w);
    const int32_t inDepth = depthwise ? 1 : wT.shape[3];
    // A grouped CONV_2D: output channel oc reads the inDepth input channels of its group.
    const int32_t outPerGroup = depthwise ? 1 : out.c / (in.c / inDepth);
    for (int32_t b = 0; b < out.n; ++b)
        for (int32_t oy = 0; oy < out.h; ++oy)
            for (int32_t ox = 0; ox < out.w; ++ox)
                for (int32_t oc = 0; oc < out.c; ++oc) {
                    const int32_t y0 = oy * op.strideH - padH, x0 = ox * op.strideW - padW;
                    int32_t acc = 0;
                    for (int32_t fy = 0; fy < kh; ++fy) {
                        const int32_t iy = y0 + fy * op.dilationH;
                        if (iy < 0 || iy >= in.h)
                            continue;
                        for (int32_t fx = 0; fx < kw; ++fx) {
                            const int32_t ix = x0 + fx * op.dilationW;
                            if (ix < 0 || ix >= in.w)
                                continue;
                            if (depthwise) {
                                const int32_t ic = oc / op.depthMultiplier;
                                acc += int32_t(w[size_t((fy * kw + fx) * out.c + oc)]) *
                                       (int32_t(x[in.at(b, iy, ix, ic)]) - inZp);
                            } else {
                                const int8_t* wRow = w + ((int64_t(oc) * kh + fy) * kw + fx) * inDepth;
                                const int8_t* xRow = x.data() + in.at(b, iy, ix, (oc / outPerGroup) * inDepth);
                                for (int32_t ic = 0; ic < inDepth; ++ic)
                                    acc += int32_t(wRow[ic]) * (int32_t(xRow[ic]) - inZp);
                            }
                        }
                    }
                    if (!bias.empty())
                        acc += bias[size_t(oc)];
                    acc = requantize(acc, p, size_t(oc), outZp);
                    y[out.at(b, oy, ox, oc)] = int8_t(std::clamp(acc, p.actMin, p.actMax));
                }
}

// TRANSPOSE_CONV as reference_integer_ops::TransposeConv scatters it: each input pixel, less the
// zero point, times each filter tap added into the int32 sum of the output pixel it lands on
// (oy = iy·stride − leading padding + fy); then the bias and the per-channel requantization of
// CONV_2D. XNNPACK's deconvolution gathers the same integer sums (the taps outside the input read
// its zero point) and requantizes them as its convolution does, in float.
void transposeConvolution(const Operation& op, const TfliteIntegerExecutor::Prepared& p, const std::vector<Spec>& T,
                          Values& v)
{
    const Spec &inT = T[size_t(op.inputs[2])], &wT = T[size_t(op.inputs[1])], &outT = T[size_t(op.outputs[0])];
    const Dims4 in(inT.shape), out(outT.shape);
    const int32_t kh = wT.shape[1], kw = wT.shape[2];
    const int32_t inZp = inT.zeroPoint(), outZp = outT.zeroPoint();
    const std::vector<int32_t> bias =
        op.inputs.size() > 3 && op.inputs[3] >= 0 ? T[size_t(op.inputs[3])].int32Values() : std::vector<int32_t>();
    const auto* w = reinterpret_cast<const int8_t*>(wT.data.data());
    const std::vector<int8_t>& x = v.q[size_t(op.inputs[2])];
    std::vector<int8_t>& y = v.q[size_t(op.outputs[0])];
    // The padding of the convolution this one transposes: from the output's size to the input's.
    const int32_t padH = leadingPad(op.padding, out.h, kh, op.strideH, 1, in.h);
    const int32_t padW = leadingPad(op.padding, out.w, kw, op.strideW, 1, in.w);
    std::vector<int32_t> acc(y.size(), 0);
    for (int32_t b = 0; b < in.n; ++b)
        for (int32_t iy = 0; iy < in.h; ++iy)
            for (int32_t ix = 0; ix < in.w; ++ix)
                for (int32_t fy = 0; fy < kh; ++fy) {
                    const int32_t oy = iy * op.strideH - padH + fy;
                    if (oy < 0 || oy >= out.h)
                        continue;
                    for (int32_t fx = 0; fx < kw; ++fx) {
                        const int32_t ox = ix * op.strideW - padW + fx;
                        if (ox < 0 || ox >= out.w)
                            continue;
                        const int8_t* xRow = x.data() + in.at(b, iy, ix, 0);
                        for (int32_t oc = 0; oc < out.c; ++oc) {
                            const int8_t* wRow = w + ((int64_t(oc) * kh + fy) * kw + fx) * in.c;
                            int32_t sum = 0;
                            for (int32_t ic = 0; ic < in.c; ++ic)
                                sum += int32_t(wRow[ic]) * (int32_t(xRow[ic]) - inZp);
                            acc[out.at(b, oy, ox, oc)] += sum;
                        }
                    }
                }
    for (size_t i = 0; i < acc.size(); ++i) {
        const size_t oc = i % size_t(out.c);
        const int32_t sum = acc[i] + (bias.empty() ? 0 : bias[oc]);
        y[i] = int8_t(std::clamp(requantize(sum, p, oc, outZp), p.actMin, p.actMax));
    }
}

void fullyConnected(const Operation& op, const TfliteIntegerExecutor::Prepared& p, const std::vector<Spec>& T,
                    Values& v)
{
    const Spec &inT = T[size_t(op.inputs[0])], &wT = T[size_t(op.inputs[1])], &outT = T[size_t(op.outputs[0])];
    const int32_t outputs = wT.shape[0], depth = wT.shape[1];
    const int64_t batches = inT.numel() / depth;
    const int32_t inZp = inT.zeroPoint(), outZp = outT.zeroPoint();
    const std::vector<int32_t> bias =
        op.inputs.size() > 2 && op.inputs[2] >= 0 ? T[size_t(op.inputs[2])].int32Values() : std::vector<int32_t>();
    const auto* w = reinterpret_cast<const int8_t*>(wT.data.data());
    const std::vector<int8_t>& x = v.q[size_t(op.inputs[0])];
    std::vector<int8_t>& y = v.q[size_t(op.outputs[0])];
    for (int64_t b = 0; b < batches; ++b)
        for (int32_t o = 0; o < outputs; ++o) {
            int32_t acc = 0;
            for (int32_t d = 0; d < depth; ++d)
                acc += int32_t(w[int64_t(o) * depth + d]) * (int32_t(x[size_t(b * depth + d)]) - inZp);
            if (!bias.empty())
                acc += bias[size_t(o)];
            acc = requantize(acc, p, size_t(o), outZp);
            y[size_t(b * outputs + o)] = int8_t(std::clamp(acc, p.actMin, p.actMax));
        }
}

// ADD and MUL, with numpy broadcasting of either operand to the output's shape.
void binary(const Operation& op, const TfliteIntegerExecutor::Prepared& p, const std::vector<Spec>& T, Values& v)
{
    const Spec &aT = T[size_t(op.inputs[0])], &bT = T[size_t(op.inputs[1])], &outT = T[size_t(op.outputs[0])];
    const std::vector<int32_t>& shape = outT.shape;
    const std::vector<int64_t> sa = broadcastStrides(aT.shape, shape), sb = broadcastStrides(bT.shape, shape);
    const std::vector<int8_t>& a = v.q[size_t(op.inputs[0])];
    const std::vector<int8_t>& b = v.q[size_t(op.inputs[1])];
    std::vector<int8_t>& y = v.q[size_t(op.outputs[0])];
    const int32_t aZp = aT.zeroPoint(), bZp = bT.zeroPoint(), outZp = outT.zeroPoint();
    const bool add = op.op == BuiltinOperator::Add, sub = op.op == BuiltinOperator::Sub;
    std::vector<int32_t> index(shape.size(), 0);
    for (size_t i = 0; i < y.size(); ++i) {
        int64_t ia = 0, ib = 0;
        for (size_t k = 0; k < shape.size(); ++k)
            ia += index[k] * sa[k], ib += index[k] * sb[k];
        const int32_t x1 = int32_t(a[size_t(ia)]) - aZp, x2 = int32_t(b[size_t(ib)]) - bZp;
        int32_t r;
        if ((add || sub) && p.xnnpack) { // SUB: the second multiplier is negative
            const int32_t acc = p.add.bias + int32_t(a[size_t(ia)]) * p.add.a + int32_t(b[size_t(ib)]) * p.add.b;
            r = (acc >> p.add.shift) + outZp; // an arithmetic shift: rounding half up, with the bias
        } else if (add || sub) {
            const int32_t s1 = multiplyByQuantizedMultiplier(x1 * (1 << 20), p.input1);
            const int32_t s2 = multiplyByQuantizedMultiplier(x2 * (1 << 20), p.input2);
            r = multiplyByQuantizedMultiplier(sub ? s1 - s2 : s1 + s2, p.output) + outZp;
        } else {
            r = p.xnnpack ? xnnpackRound(float(x1 * x2) * p.scale, p, outZp)
                          : multiplyByQuantizedMultiplier(x1 * x2, p.output) + outZp;
        }
        y[i] = int8_t(std::clamp(r, p.actMin, p.actMax));
        for (size_t k = shape.size(); k-- > 0;) {
            if (++index[k] < shape[k])
                break;
            index[k] = 0;
        }
    }
}

void pool(const Operation& op, const TfliteIntegerExecutor::Prepared& p, const std::vector<Spec>& T, Values& v)
{
    const Dims4 in(T[size_t(op.inputs[0])].shape), out(T[size_t(op.outputs[0])].shape);
    const int32_t padH = leadingPad(op.padding, in.h, op.filterH, op.strideH, 1, out.h);
    const int32_t padW = leadingPad(op.padding, in.w, op.filterW, op.strideW, 1, out.w);
    const std::vector<int8_t>& x = v.q[size_t(op.inputs[0])];
    std::vector<int8_t>& y = v.q[size_t(op.outputs[0])];
    const bool maxPool = op.op == BuiltinOperator::MaxPool2D;
    for (int32_t b = 0; b < out.n; ++b)
        for (int32_t oy = 0; oy < out.h; ++oy)
            for (int32_t ox = 0; ox < out.w; ++ox)
                for (int32_t c = 0; c < out.c; ++c) {
                    const int32_t y0 = oy * op.strideH - padH, x0 = ox * op.strideW - padW;
                    const int32_t fy0 = std::max(0, -y0), fy1 = std::min(op.filterH, in.h - y0);
                    const int32_t fx0 = std::max(0, -x0), fx1 = std::min(op.filterW, in.w - x0);
                    int32_t acc = maxPool ? -128 : 0, count = 0;
                    for (int32_t fy = fy0; fy < fy1; ++fy)
                        for (int32_t fx = fx0; fx < fx1; ++fx) {
                            const int32_t value = x[in.at(b, y0 + fy, x0 + fx, c)];
                            acc = maxPool ? std::max(acc, value) : acc + value;
                            ++count;
                        }
                    if (!maxPool && count > 0) // rounded division, half away from zero
                        acc = acc > 0 ? (acc + count / 2) / count : (acc - count / 2) / count;
                    y[out.at(b, oy, ox, c)] = int8_t(std::clamp(acc, p.actMin, p.actMax));
                }
}

// MEAN as reference_ops::QuantizedMeanOrSum: the int32 sum, less the zero points, through the
// input/output multiplier with 1/count folded into it.
void mean(const Operation& op, const TfliteIntegerExecutor::Prepared& p, const std::vector<Spec>& T, Values& v)
{
    const Spec &inT = T[size_t(op.inputs[0])], &outT = T[size_t(op.outputs[0])];
    const TfliteMeanReduction r = tfliteMeanReduction(op, T);
    const int64_t count = r.count;
    std::vector<int32_t> sums(size_t(outT.numel()), 0); // of the raw codes
    const std::vector<int8_t>& x = v.q[size_t(op.inputs[0])];
    for (size_t i = 0; i < x.size(); ++i)
        sums.at(size_t(r.outputOf[i])) += x[i];
    std::vector<int8_t>& y = v.q[size_t(op.outputs[0])];
    const int32_t inZp = inT.zeroPoint(), outZp = outT.zeroPoint();
    // reference_ops::QuantizedMeanOrSum: the sum less the zero points through the input/output
    // multiplier with 1/count folded into it. (LiteRT's optimized spatial kernel, the raw sum plus a
    // truncated zero-point bias, matched LiteRT.js on more codes of a one-op model but agreed worse
    // on the zoo: 38.4 against 44.3 dB on MobileNet V2.)
    Multiplier m = p.output;
    int shift = 63 - __builtin_clzll(uint64_t(count));
    shift = std::min(shift, 32);
    shift = std::min(shift, 31 + m.shift);
    m.value = int32_t((int64_t(m.value) << shift) / count);
    m.shift -= shift;
    if (p.xnnpack) { // the sum less the zero points through one float scale, 1/count folded in
        const float scale = inT.scales[0] / (outT.scales[0] * float(count));
        for (size_t i = 0; i < sums.size(); ++i)
            y[i] = int8_t(xnnpackRound(float(sums[i] - inZp * int32_t(count)) * scale, p, outZp));
        return;
    }
    for (size_t i = 0; i < sums.size(); ++i)
        y[i] = int8_t(clampInt8(multiplyByQuantizedMultiplier(int32_t(sums[i] - inZp * count), m) + outZp));
}

void concatenation(const Operation& op, const TfliteIntegerExecutor::Prepared& p, const std::vector<Spec>& T, Values& v)
{
    const Spec& outT = T[size_t(op.outputs[0])];
    const int rank = int(outT.shape.size());
    const int axis = op.axis < 0 ? op.axis + rank : op.axis;
    int64_t outer = 1, inner = 1;
    for (int k = 0; k < axis; ++k)
        outer *= outT.shape[size_t(k)];
    for (int k = axis + 1; k < rank; ++k)
        inner *= outT.shape[size_t(k)];
    std::vector<int8_t>& y = v.q[size_t(op.outputs[0])];
    size_t at = 0;
    for (int64_t o = 0; o < outer; ++o)
        for (int32_t t : op.inputs) {
            const int64_t chunk = T[size_t(t)].shape.at(size_t(axis)) * inner;
            const int8_t* src = v.q[size_t(t)].data() + o * chunk;
            for (int64_t k = 0; k < chunk; ++k)
                y[at++] = int8_t(std::clamp<int32_t>(src[k], p.actMin, p.actMax));
        }
}

void pad(const Operation& op, const std::vector<Spec>& T, Values& v)
{
    const Spec &inT = T[size_t(op.inputs[0])], &outT = T[size_t(op.outputs[0])];
    const std::vector<int32_t> pads = T[size_t(op.inputs[1])].int32Values();
    const int rank = int(inT.shape.size());
    std::vector<int8_t>& y = v.q[size_t(op.outputs[0])];
    // PAD fills with the zero point (the code of 0.0), PADV2 with its constant's code.
    const bool stated = op.op == BuiltinOperator::PadV2;
    std::fill(y.begin(), y.end(),
              stated ? reinterpret_cast<const int8_t*>(T[size_t(op.inputs[2])].data.data())[0]
                     : int8_t(outT.zeroPoint()));
    const std::vector<int8_t>& x = v.q[size_t(op.inputs[0])];
    std::vector<int32_t> index(size_t(rank), 0);
    for (size_t i = 0; i < x.size(); ++i) {
        int64_t o = 0;
        for (int k = 0; k < rank; ++k)
            o = o * outT.shape[size_t(k)] + index[size_t(k)] + pads[size_t(2 * k)];
        y[size_t(o)] = x[i];
        for (int k = rank; k-- > 0;) {
            if (++index[size_t(k)] < inT.shape[size_t(k)])
                break;
            index[size_t(k)] = 0;
        }
    }
}

// Row-major strides of `shape`.
std::vector<int64_t> stridesOf(const std::vector<int32_t>& shape)
{
    std::vector<int64_t> strides(shape.size(), 1);
    for (size_t k = shape.size(); k-- > 1;)
        strides[k - 1] = strides[k] * shape[k];
    return strides;
}

// Moves codes: the output's element at index (i0, i1, ...) of `outShape` is the input's at
// offset base + i0·strides[0] + i1·strides[1] + ...
void moveCodes(const std::vector<int8_t>& x, std::vector<int8_t>& y, const std::vector<int32_t>& outShape, int64_t base,
               const std::vector<int64_t>& strides)
{
    const size_t rank = outShape.size();
    std::vector<int32_t> index(rank, 0);
    for (size_t i = 0; i < y.size(); ++i) {
        int64_t from = base;
        for (size_t k = 0; k < rank; ++k)
            from += index[k] * strides[k];
        y[i] = x[size_t(from)];
        for (size_t k = rank; k-- > 0;) {
            if (++index[k] < outShape[k])
                break;
            index[k] = 0;
        }
    }
}

void transpose(const Operation& op, const std::vector<Spec>& T, Values& v)
{
    const Spec &inT = T[size_t(op.inputs[0])], &outT = T[size_t(op.outputs[0])];
    const std::vector<int32_t> perm = T[size_t(op.inputs[1])].int32Values();
    const std::vector<int64_t> inStrides = stridesOf(inT.shape);
    std::vector<int64_t> strides(perm.size());
    for (size_t k = 0; k < perm.size(); ++k)
        strides[k] = inStrides[size_t(perm[k])];
    moveCodes(v.q[size_t(op.inputs[0])], v.q[size_t(op.outputs[0])], outT.shape, 0, strides);
}

// SLICE copies the codes of a box: begin and size were checked against the shapes in prepare.
void slice(const Operation& op, const std::vector<Spec>& T, Values& v)
{
    const Spec &inT = T[size_t(op.inputs[0])], &outT = T[size_t(op.outputs[0])];
    const std::vector<int32_t> begin = T[size_t(op.inputs[1])].int32Values();
    const std::vector<int64_t> strides = stridesOf(inT.shape);
    int64_t base = 0;
    for (size_t k = 0; k < strides.size(); ++k)
        base += int64_t(begin[k]) * strides[k];
    moveCodes(v.q[size_t(op.inputs[0])], v.q[size_t(op.outputs[0])], outT.shape, base, strides);
}

void resizeNearest(const Operation& op, const std::vector<Spec>& T, Values& v)
{
    const Dims4 in(T[size_t(op.inputs[0])].shape), out(T[size_t(op.outputs[0])].shape);
    auto scale = [&](int32_t i, int32_t o) {
        return op.alignCorners && o > 1 ? float(i - 1) / float(o - 1) : float(i) / float(o);
    };
    const float sh = scale(in.h, out.h), sw = scale(in.w, out.w), offset = op.halfPixelCenters ? 0.5f : 0.0f;
    auto source = [&](int32_t o, float s, int32_t size) {
        const float at = (float(o) + offset) * s;
        int32_t i = std::min<int32_t>(op.alignCorners ? roundToInt(at) : int32_t(std::floor(at)), size - 1);
        return op.halfPixelCenters ? std::max(0, i) : i;
    };
    const std::vector<int8_t>& x = v.q[size_t(op.inputs[0])];
    std::vector<int8_t>& y = v.q[size_t(op.outputs[0])];
    for (int32_t b = 0; b < out.n; ++b)
        for (int32_t oy = 0; oy < out.h; ++oy)
            for (int32_t ox = 0; ox < out.w; ++ox)
                std::memcpy(&y[out.at(b, oy, ox, 0)], &x[in.at(b, source(oy, sh, in.h), source(ox, sw, in.w), 0)],
                            size_t(out.c));
}

// STRIDED_SLICE with positive strides and no masks (checked in prepare): every stride-th code of a box.
void stridedSlice(const Operation& op, const std::vector<Spec>& T, Values& v)
{
    const Spec &inT = T[size_t(op.inputs[0])], &outT = T[size_t(op.outputs[0])];
    const std::vector<int32_t> begin = T[size_t(op.inputs[1])].int32Values();
    const std::vector<int32_t> step = T[size_t(op.inputs[3])].int32Values();
    std::vector<int64_t> strides = stridesOf(inT.shape);
    int64_t base = 0;
    for (size_t k = 0; k < strides.size(); ++k) {
        base += int64_t(begin[k]) * strides[k];
        strides[k] *= step[k];
    }
    moveCodes(v.q[size_t(op.inputs[0])], v.q[size_t(op.outputs[0])], outT.shape, base, strides);
}

// RESIZE_BILINEAR of int8 codes (input and output share their parameters).
// Reference: reference_ops::ResizeBilinearInteger — source coordinates in 10 fractional bits,
// the four products summed in 20 bits and rounded half away from zero.
// XNNPACK (ibilinear): coordinates and weights in float, the weights rounded to 11 bits,
// interpolated horizontally then vertically in integers, rounded half up at 22 bits.
void resizeBilinear(const Operation& op, const TfliteIntegerExecutor::Prepared& p, const std::vector<Spec>& T,
                    Values& v)
{
    const Dims4 in(T[size_t(op.inputs[0])].shape), out(T[size_t(op.outputs[0])].shape);
    const std::vector<int8_t>& x = v.q[size_t(op.inputs[0])];
    std::vector<int8_t>& y = v.q[size_t(op.outputs[0])];
    struct Tap {
        int32_t lo, hi, weight; // the two source rows (columns) and the weight of `hi`
    };
    std::vector<Tap> rows(size_t(out.h)), columns(size_t(out.w));
    if (p.xnnpack) {
        auto taps = [&](int32_t inSize, int32_t outSize, std::vector<Tap>& t) {
            const int32_t adjustment = op.alignCorners && outSize != 1 ? 1 : 0;
            const float scale = float(inSize - adjustment) / float(outSize - adjustment);
            const bool legacy = op.alignCorners || !op.halfPixelCenters;
            const float offset = 0.5f * scale - 0.5f;
            for (int32_t o = 0; o < outSize; ++o) {
                float at = float(o) * scale;
                if (!legacy)
                    at = std::min(std::max(at + offset, 0.0f), float(inSize - 1));
                const int32_t lo = int32_t(at);
                t[size_t(o)] = {lo, std::min(lo + 1, inSize - 1), int32_t(std::lrintf((at - float(lo)) * 2048.0f))};
            }
        };
        taps(in.h, out.h, rows), taps(in.w, out.w, columns);
        for (int32_t b = 0; b < out.n; ++b)
            for (int32_t oy = 0; oy < out.h; ++oy)
                for (int32_t ox = 0; ox < out.w; ++ox) {
                    const Tap r = rows[size_t(oy)], c = columns[size_t(ox)];
                    for (int32_t k = 0; k < out.c; ++k) {
                        const int32_t tl = x[in.at(b, r.lo, c.lo, k)], tr = x[in.at(b, r.lo, c.hi, k)];
                        const int32_t bl = x[in.at(b, r.hi, c.lo, k)], br = x[in.at(b, r.hi, c.hi, k)];
                        const int32_t top = tl * 2048 + (tr - tl) * c.weight;
                        const int32_t bottom = bl * 2048 + (br - bl) * c.weight;
                        const int32_t acc = top * 2048 + (bottom - top) * r.weight;
                        y[out.at(b, oy, ox, k)] = int8_t((acc + (1 << 21)) >> 22);
                    }
                }
        return;
    }
    auto taps = [&](int32_t inSize, int32_t outSize, std::vector<Tap>& t) {
        int32_t scale = ((1 << 10) * inSize + outSize / 2) / outSize;
        if (op.alignCorners && outSize > 1)
            scale = ((1 << 10) * (inSize - 1) + (outSize - 1) / 2) / (outSize - 1);
        for (int32_t o = 0; o < outSize; ++o) {
            const int32_t at = op.halfPixelCenters ? o * scale + scale / 2 - (1 << 9) : o * scale;
            const int32_t lo = std::max(at / (1 << 10), 0);
            const int32_t hi = std::min((at + (1 << 10) - 1) / (1 << 10), inSize - 1);
            t[size_t(o)] = {lo, hi, at - (1 << 10) * lo}; // may exceed 1 or be negative where lo == hi
        }
    };
    taps(in.h, out.h, rows), taps(in.w, out.w, columns);
    for (int32_t b = 0; b < out.n; ++b)
        for (int32_t oy = 0; oy < out.h; ++oy)
            for (int32_t ox = 0; ox < out.w; ++ox) {
                const Tap r = rows[size_t(oy)], c = columns[size_t(ox)];
                const int64_t wy = r.weight, wx = c.weight;
                for (int32_t k = 0; k < out.c; ++k) {
                    const int64_t sum = int64_t(x[in.at(b, r.lo, c.lo, k)]) * ((1 << 10) - wy) * ((1 << 10) - wx) +
                                        int64_t(x[in.at(b, r.hi, c.lo, k)]) * wy * ((1 << 10) - wx) +
                                        int64_t(x[in.at(b, r.lo, c.hi, k)]) * ((1 << 10) - wy) * wx +
                                        int64_t(x[in.at(b, r.hi, c.hi, k)]) * wy * wx;
                    const int64_t round = sum > 0 ? (1 << 19) : -(1 << 19);
                    y[out.at(b, oy, ox, k)] = int8_t(clampInt8(int32_t((sum + round) / (1 << 20))));
                }
            }
}

// SOFTMAX over the last axis, in double from the dequantized codes (not LiteRT's fixed-point
// kernel: it can differ from it by one code), rounded onto the output's grid.
void softmax(const Operation& op, const std::vector<Spec>& T, Values& v)
{
    const Spec &inT = T[size_t(op.inputs[0])], &outT = T[size_t(op.outputs[0])];
    const int64_t depth = inT.shape.back(), rows = inT.numel() / std::max<int64_t>(depth, 1);
    const std::vector<int8_t>& x = v.q[size_t(op.inputs[0])];
    std::vector<int8_t>& y = v.q[size_t(op.outputs[0])];
    const double scale = double(inT.scales[0]) * double(op.beta);
    for (int64_t r = 0; r < rows; ++r) {
        const int8_t* row = x.data() + r * depth;
        const int32_t top = *std::max_element(row, row + depth);
        double sum = 0;
        for (int64_t k = 0; k < depth; ++k)
            sum += std::exp(scale * (row[k] - top));
        for (int64_t k = 0; k < depth; ++k) {
            const double p = std::exp(scale * (row[k] - top)) / sum;
            y[size_t(r * depth + k)] =
                int8_t(clampInt8(int32_t(std::round(p / double(outT.scales[0]))) + outT.zeroPoint()));
        }
    }
}

} // namespace

std::vector<Tensor> TfliteIntegerExecutor::run(const std::vector<Tensor>& inputs) const
{
    const std::vector<Spec>& T = program_.tensors;
    if (inputs.size() != program_.inputs.size())
        throw Error(what_ + ": " + std::to_string(program_.inputs.size()) + " inputs expected, got " +
                    std::to_string(inputs.size()));
    Values v;
    v.q.resize(T.size());
    v.f.resize(T.size());
    for (size_t k = 0; k < T.size(); ++k)
        if (T[k].type == tf::TensorType::Int8 && T[k].constant())
            v.q[k].assign(reinterpret_cast<const int8_t*>(T[k].data.data()),
                          reinterpret_cast<const int8_t*>(T[k].data.data()) + T[k].data.size());
    for (size_t k = 0; k < inputs.size(); ++k) {
        const Spec& s = T[size_t(program_.inputs[k])];
        if (inputs[k].numel() != s.numel())
            throw Error(what_ + ": input '" + s.name + "' takes " + std::to_string(s.numel()) + " values, got " +
                        std::to_string(inputs[k].numel()));
        if (s.type == tf::TensorType::Float32) {
            const Tensor x = inputs[k].toFloat32();
            v.f[size_t(program_.inputs[k])].assign(x.values<float>().begin(), x.values<float>().end());
        } else if (s.type == tf::TensorType::Int8 && inputs[k].dtype() == DType::I8) {
            v.q[size_t(program_.inputs[k])].assign(inputs[k].values<int8_t>().begin(),
                                                   inputs[k].values<int8_t>().end());
        } else {
            throw Error(what_ + ": input '" + s.name + "' takes " +
                        (s.type == tf::TensorType::Int8 ? "int8" : "float32") + " values");
        }
    }
    for (size_t k = 0; k < program_.operations.size(); ++k) {
        const Operation& op = program_.operations[k];
        const Prepared& p = prepared_[k];
        const Spec& outT = T[size_t(op.outputs[0])];
        if (outT.type == tf::TensorType::Int8)
            v.q[size_t(op.outputs[0])].assign(size_t(outT.numel()), 0);
        if (arithmetic_ == TfliteArithmetic::ArmnnReference && armnn_reference::run(op, T, v.q, v.f, p.padFolded))
            continue;
        const std::vector<int8_t>& x = v.q[size_t(op.inputs[0])];
        std::vector<int8_t>& y = v.q[size_t(op.outputs[0])];
        switch (op.op) {
        case BuiltinOperator::Conv2D:
        case BuiltinOperator::DepthwiseConv2D:
            convolution(op, p, T, v, op.op == BuiltinOperator::DepthwiseConv2D);
            break;
        case BuiltinOperator::TransposeConv:
            transposeConvolution(op, p, T, v);
            break;
        case BuiltinOperator::FullyConnected:
            fullyConnected(op, p, T, v);
            break;
        case BuiltinOperator::Add:
        case BuiltinOperator::Sub:
        case BuiltinOperator::Mul:
            binary(op, p, T, v);
            break;
        case BuiltinOperator::AveragePool2D:
        case BuiltinOperator::MaxPool2D:
            pool(op, p, T, v);
            break;
        case BuiltinOperator::Mean:
            mean(op, p, T, v);
            break;
        case BuiltinOperator::Concatenation:
            concatenation(op, p, T, v);
            break;
        case BuiltinOperator::Pad:
        case BuiltinOperator::PadV2:
            pad(op, T, v);
            break;
        case BuiltinOperator::Transpose:
            transpose(op, T, v);
            break;
        case BuiltinOperator::Slice:
            slice(op, T, v);
            break;
        case BuiltinOperator::ResizeNearestNeighbor:
            resizeNearest(op, T, v);
            break;
        case BuiltinOperator::ResizeBilinear:
            resizeBilinear(op, p, T, v);
            break;
        case BuiltinOperator::StridedSlice:
            stridedSlice(op, T, v);
            break;
        case BuiltinOperator::Softmax:
            softmax(op, T, v);
            break;
        case BuiltinOperator::Reshape:
            if (x.size() != y.size())
                throw Error(what_ + ": operator " + std::to_string(k) + " (RESHAPE) changes the element count");
            y = x;
            break;
        case BuiltinOperator::Logistic:
        case BuiltinOperator::HardSwish:
            for (size_t i = 0; i < y.size(); ++i)
                y[i] = p.table[size_t(int32_t(x[i]) + 128)];
            break;
        case BuiltinOperator::Quantize: {
            const Spec& inT = T[size_t(op.inputs[0])];
            if (inT.type == tf::TensorType::Float32) { // AffineQuantize
                const std::vector<float>& fx = v.f[size_t(op.inputs[0])];
                const float scale = outT.scales[0];
                const int32_t zp = outT.zeroPoint();
                for (size_t i = 0; i < y.size(); ++i)
                    y[i] = int8_t(clampInt8(roundToInt(fx[i] / scale) + zp));
            } else {
                for (size_t i = 0; i < y.size(); ++i)
                    y[i] = p.table[size_t(int32_t(x[i]) + 128)];
            }
            break;
        }
        case BuiltinOperator::Dequantize: {
            const Spec& inT = T[size_t(op.inputs[0])];
            const double scale = inT.scales[0];
            const int32_t zp = inT.zeroPoint();
            std::vector<float>& fy = v.f[size_t(op.outputs[0])];
            fy.resize(x.size());
            for (size_t i = 0; i < x.size(); ++i)
                fy[i] = float(scale * double(int32_t(x[i]) - zp));
            break;
        }
        }
    }
    std::vector<Tensor> outputs;
    for (int32_t o : program_.outputs) {
        const Spec& s = T[size_t(o)];
        Shape shape(s.shape.begin(), s.shape.end());
        if (s.type == tf::TensorType::Float32)
            outputs.push_back(Tensor::fromVector(DType::F32, shape, v.f[size_t(o)]));
        else
            outputs.push_back(Tensor::fromVector(DType::I8, shape, v.q[size_t(o)]));
    }
    return outputs;
}

} // namespace qs
