#include "export/tflite_armnn.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"

namespace qs::armnn_reference {

namespace tf = tflite;
using tf::BuiltinOperator;
using Spec = TfliteProgram::TensorSpec;
using Operation = TfliteProgram::Operation;

namespace {

// armnn::Dequantize: float(code − offset) × scale, in float.
float decode(int8_t code, float scale, int32_t zp)
{
    return float(int32_t(code) - zp) * scale;
}

float decode(int8_t code, const Spec& t)
{
    return decode(code, t.scales[0], t.zeroPoint());
}

// armnn::Quantize: offset + round(value / scale) (half away from zero), clamped in float.
int8_t encode(float x, const Spec& t)
{
    const float v = float(t.zeroPoint()) + std::round(x / t.scales[0]);
    return int8_t(std::min(std::max(v, -128.0f), 127.0f));
}

// The activation layer the parser adds after an operator with a fused activation.
int8_t activate(int8_t code, tf::Activation a, const Spec& t)
{
    if (a == tf::Activation::None)
        return code;
    const float x = decode(code, t);
    float y = x;
    if (a == tf::Activation::Relu)
        y = std::max(0.0f, x);
    else if (a == tf::Activation::Relu6) // BoundedReLu, a = 6, b = 0: min(a, max(b, x))
        y = std::min(6.0f, std::max(0.0f, x));
    else if (a == tf::Activation::ReluN1To1)
        y = std::min(1.0f, std::max(-1.0f, x));
    return encode(y, t);
}

int8_t encodeActivated(float x, tf::Activation a, const Spec& t)
{
    return activate(encode(x, t), a, t);
}

// A channel's weight scale (per tensor or per output channel).
float channelScale(const Spec& w, size_t c)
{
    return w.scales[w.scales.size() == 1 ? 0 : c];
}

// The decoded biases: ScaledInt32(PerAxis)Decoder, float(value) × scale; without a scale the
// value itself (Int32Decoder).
std::vector<float> biases(const Operation& op, const std::vector<Spec>& T, size_t channels)
{
    if (op.inputs.size() < 3 || op.inputs[2] < 0)
        return {};
    const Spec& b = T[size_t(op.inputs[2])];
    const std::vector<int32_t> v = b.int32Values();
    std::vector<float> out(channels);
    for (size_t c = 0; c < channels && c < v.size(); ++c)
        out[c] = b.scales.empty() ? float(v[c]) : float(v[c]) * b.scales[b.scales.size() == 1 ? 0 : c];
    return out;
}

// ComputePaddingHeightWidth / the parser's CalcPadding: the leading padding of SAME.
int32_t leadingPad(tf::Padding padding, int32_t in, int32_t filter, int32_t stride, int32_t dilation, int32_t out)
{
    if (padding == tf::Padding::Valid)
        return 0;
    const int32_t effective = (filter - 1) * dilation + 1;
    return std::max<int32_t>((out - 1) * stride + effective - in, 0) / 2;
}

struct Dims4 {
    int32_t n, h, w, c;
    explicit Dims4(const std::vector<int32_t>& s) : n(s.at(0)), h(s.at(1)), w(s.at(2)), c(s.at(3)) {}
    size_t at(int32_t b, int32_t y, int32_t x, int32_t k) const
    {
        return size_t(((int64_t(b) * h + y) * w + x) * c + k);
    }
};

// ConvImpl's Convolve: per output, input channel outermost, then filter row and column.
void convolution(const Operation& op, const std::vector<Spec>& T, std::vector<std::vector<int8_t>>& q, bool depthwise)
{
    const Spec &inT = T[size_t(op.inputs[0])], &wT = T[size_t(op.inputs[1])], &outT = T[size_t(op.outputs[0])];
    const Dims4 in(inT.shape), out(outT.shape);
    const int32_t kh = wT.shape[1], kw = wT.shape[2], depth = depthwise ? 1 : wT.shape[3];
    const std::vector<float> bias = biases(op, T, size_t(out.c));
    const auto* w = reinterpret_cast<const int8_t*>(wT.data.data());
    const std::vector<int8_t>& x = q[size_t(op.inputs[0])];
    std::vector<int8_t>& y = q[size_t(op.outputs[0])];
    const int32_t padH = leadingPad(op.padding, in.h, kh, op.strideH, op.dilationH, out.h);
    const int32_t padW = leadingPad(op.padding, in.w, kw, op.strideW, op.dilationW, out.w);
    const float inScale = inT.scales[0];
    const int32_t inZp = inT.zeroPoint();
    for (int32_t b = 0; b < out.n; ++b)
        for (int32_t oy = 0; oy < out.h; ++oy)
            for (int32_t ox = 0; ox < out.w; ++ox)
                for (int32_t oc = 0; oc < out.c; ++oc) {
                    const float ws = channelScale(wT, size_t(oc));
                    const int32_t y0 = oy * op.strideH - padH, x0 = ox * op.strideW - padW;
                    float sum = 0.0f;
                    for (int32_t ic = 0; ic < depth; ++ic)
                        for (int32_t fy = 0; fy < kh; ++fy) {
                            const int32_t iy = y0 + fy * op.dilationH;
                            for (int32_t fx = 0; fx < kw; ++fx) {
                                const int32_t ix = x0 + fx * op.dilationW;
                                if (iy < 0 || iy >= in.h || ix < 0 || ix >= in.w)
                                    continue; // the padding: 0.0 × weight adds nothing
                                const int8_t code = depthwise
                                                        ? w[size_t((fy * kw + fx) * out.c + oc)]
                                                        : w[size_t(((int64_t(oc) * kh + fy) * kw + fx) * depth + ic)];
                                const int32_t channel = depthwise ? oc / op.depthMultiplier : ic;
                                sum += decode(code, ws, 0) * decode(x[in.at(b, iy, ix, channel)], inScale, inZp);
                            }
                        }
                    if (!bias.empty())
                        sum += bias[size_t(oc)];
                    y[out.at(b, oy, ox, oc)] = encodeActivated(sum, op.activation, outT);
                }
}

void fullyConnected(const Operation& op, const std::vector<Spec>& T, std::vector<std::vector<int8_t>>& q)
{
    const Spec &inT = T[size_t(op.inputs[0])], &wT = T[size_t(op.inputs[1])], &outT = T[size_t(op.outputs[0])];
    const int32_t outputs = wT.shape[0], depth = wT.shape[1];
    const int64_t batches = inT.numel() / depth;
    const std::vector<float> bias = biases(op, T, size_t(outputs));
    const auto* w = reinterpret_cast<const int8_t*>(wT.data.data());
    const std::vector<int8_t>& x = q[size_t(op.inputs[0])];
    std::vector<int8_t>& y = q[size_t(op.outputs[0])];
    for (int64_t b = 0; b < batches; ++b)
        for (int32_t o = 0; o < outputs; ++o) {
            const float ws = channelScale(wT, size_t(o));
            float sum = 0.0f;
            for (int32_t d = 0; d < depth; ++d)
                sum += decode(w[int64_t(o) * depth + d], ws, 0) * decode(x[size_t(b * depth + d)], inT);
            if (!bias.empty())
                sum += bias[size_t(o)];
            y[size_t(b * outputs + o)] = encodeActivated(sum, op.activation, outT);
        }
}

// ElementwiseFunction: each operand decoded (broadcast to the output's shape), added, subtracted
// or multiplied.
void binary(const Operation& op, const std::vector<Spec>& T, std::vector<std::vector<int8_t>>& q)
{
    const Spec &aT = T[size_t(op.inputs[0])], &bT = T[size_t(op.inputs[1])], &outT = T[size_t(op.outputs[0])];
    const std::vector<int32_t>& shape = outT.shape;
    auto strides = [&](const std::vector<int32_t>& operand) {
        std::vector<int64_t> s(shape.size(), 0);
        int64_t stride = 1;
        for (size_t k = 0; k < operand.size(); ++k) {
            const size_t axis = operand.size() - 1 - k, outAxis = shape.size() - 1 - k;
            s[outAxis] = operand[axis] == 1 ? 0 : stride;
            stride *= operand[axis];
        }
        return s;
    };
    const std::vector<int64_t> sa = strides(aT.shape), sb = strides(bT.shape);
    const std::vector<int8_t>&a = q[size_t(op.inputs[0])], &b = q[size_t(op.inputs[1])];
    std::vector<int8_t>& y = q[size_t(op.outputs[0])];
    std::vector<int32_t> index(shape.size(), 0);
    for (size_t i = 0; i < y.size(); ++i) {
        int64_t ia = 0, ib = 0;
        for (size_t k = 0; k < shape.size(); ++k)
            ia += index[k] * sa[k], ib += index[k] * sb[k];
        const float x1 = decode(a[size_t(ia)], aT), x2 = decode(b[size_t(ib)], bT);
        const float r = op.op == BuiltinOperator::Add ? x1 + x2 : op.op == BuiltinOperator::Sub ? x1 - x2 : x1 * x2;
        y[i] = encodeActivated(r, op.activation, outT);
        for (size_t k = shape.size(); k-- > 0;) {
            if (++index[k] < shape[k])
                break;
            index[k] = 0;
        }
    }
}

// Pooling2d with PaddingMethod::Exclude: the taps inside the input only; the average divides
// their float sum by their count.
void pool(const Operation& op, const std::vector<Spec>& T, std::vector<std::vector<int8_t>>& q)
{
    const Spec &inT = T[size_t(op.inputs[0])], &outT = T[size_t(op.outputs[0])];
    const Dims4 in(inT.shape), out(outT.shape);
    const int32_t padH = leadingPad(op.padding, in.h, op.filterH, op.strideH, 1, out.h);
    const int32_t padW = leadingPad(op.padding, in.w, op.filterW, op.strideW, 1, out.w);
    const std::vector<int8_t>& x = q[size_t(op.inputs[0])];
    std::vector<int8_t>& y = q[size_t(op.outputs[0])];
    const bool maxPool = op.op == BuiltinOperator::MaxPool2D;
    for (int32_t b = 0; b < out.n; ++b)
        for (int32_t oy = 0; oy < out.h; ++oy)
            for (int32_t ox = 0; ox < out.w; ++ox)
                for (int32_t c = 0; c < out.c; ++c) {
                    const int32_t y0 = std::max(0, oy * op.strideH - padH);
                    const int32_t y1 = std::min(in.h, oy * op.strideH - padH + op.filterH);
                    const int32_t x0 = std::max(0, ox * op.strideW - padW);
                    const int32_t x1 = std::min(in.w, ox * op.strideW - padW + op.filterW);
                    float result = maxPool ? std::numeric_limits<float>::lowest() : 0.0f;
                    if (y1 <= y0 || x1 <= x0) { // a window on the padding only: 0 by convention
                        y[out.at(b, oy, ox, c)] = encodeActivated(0.0f, op.activation, outT);
                        continue;
                    }
                    for (int32_t iy = y0; iy < y1; ++iy)
                        for (int32_t ix = x0; ix < x1; ++ix) {
                            const float v = decode(x[in.at(b, iy, ix, c)], inT);
                            if (maxPool)
                                result = v > result ? v : result;
                            else
                                result += v;
                        }
                    if (!maxPool)
                        result /= float((y1 - y0) * (x1 - x0));
                    y[out.at(b, oy, ox, c)] = encodeActivated(result, op.activation, outT);
                }
}

// Mean: a float sum per output in the input's row-major order, divided by the count.
void mean(const Operation& op, const std::vector<Spec>& T, std::vector<std::vector<int8_t>>& q)
{
    const Spec &inT = T[size_t(op.inputs[0])], &outT = T[size_t(op.outputs[0])];
    const TfliteMeanReduction r = tfliteMeanReduction(op, T);
    const int64_t count = r.count;
    std::vector<float> sums(size_t(outT.numel()), 0.0f);
    const std::vector<int8_t>& x = q[size_t(op.inputs[0])];
    for (size_t i = 0; i < x.size(); ++i)
        sums.at(size_t(r.outputOf[i])) += decode(x[i], inT);
    std::vector<int8_t>& y = q[size_t(op.outputs[0])];
    for (size_t i = 0; i < sums.size(); ++i)
        y[i] = encode(sums[i] / float(count), outT);
}

void concatenation(const Operation& op, const std::vector<Spec>& T, std::vector<std::vector<int8_t>>& q)
{
    const Spec& outT = T[size_t(op.outputs[0])];
    const int rank = int(outT.shape.size());
    const int axis = op.axis < 0 ? op.axis + rank : op.axis;
    int64_t outer = 1, inner = 1;
    for (int k = 0; k < axis; ++k)
        outer *= outT.shape[size_t(k)];
    for (int k = axis + 1; k < rank; ++k)
        inner *= outT.shape[size_t(k)];
    std::vector<int8_t>& y = q[size_t(op.outputs[0])];
    size_t at = 0;
    for (int64_t o = 0; o < outer; ++o)
        for (int32_t t : op.inputs) {
            const Spec& inT = T[size_t(t)];
            const int64_t chunk = inT.shape.at(size_t(axis)) * inner;
            const int8_t* src = q[size_t(t)].data() + o * chunk;
            for (int64_t k = 0; k < chunk; ++k)
                y[at++] = encodeActivated(decode(src[k], inT), op.activation, outT);
        }
}

void softmax(const Operation& op, const std::vector<Spec>& T, std::vector<std::vector<int8_t>>& q)
{
    const Spec &inT = T[size_t(op.inputs[0])], &outT = T[size_t(op.outputs[0])];
    const int64_t depth = inT.shape.back(), rows = inT.numel() / std::max<int64_t>(depth, 1);
    const std::vector<int8_t>& x = q[size_t(op.inputs[0])];
    std::vector<int8_t>& y = q[size_t(op.outputs[0])];
    for (int64_t r = 0; r < rows; ++r) {
        const int8_t* row = x.data() + r * depth;
        float top = std::numeric_limits<float>::lowest();
        for (int64_t k = 0; k < depth; ++k)
            top = std::max(top, decode(row[k], inT));
        float sum = 0.0f;
        for (int64_t k = 0; k < depth; ++k)
            sum += std::exp((decode(row[k], inT) - top) * op.beta);
        for (int64_t k = 0; k < depth; ++k)
            y[size_t(r * depth + k)] = encode(std::exp((decode(row[k], inT) - top) * op.beta) / sum, outT);
    }
}

// TransposeConvolution2dImpl: each decoded input times each decoded weight added in float into the
// output pixel it lands on (row = input row × stride − leading pad + filter row), the sums running
// over input row, input column, output channel, filter row, filter column, input channel (in that
// nesting), so each output collects its products input pixel by input pixel, input channel
// innermost; then encoded. Arm NN's parser takes the 3-input form only: no bias here.
void transposeConvolution(const Operation& op, const std::vector<Spec>& T, std::vector<std::vector<int8_t>>& q)
{
    const Spec &inT = T[size_t(op.inputs[2])], &wT = T[size_t(op.inputs[1])], &outT = T[size_t(op.outputs[0])];
    const Dims4 in(inT.shape), out(outT.shape);
    const int32_t kh = wT.shape[1], kw = wT.shape[2];
    const int32_t padH = leadingPad(op.padding, out.h, kh, op.strideH, 1, in.h);
    const int32_t padW = leadingPad(op.padding, out.w, kw, op.strideW, 1, in.w);
    const auto* w = reinterpret_cast<const int8_t*>(wT.data.data());
    const std::vector<int8_t>& x = q[size_t(op.inputs[2])];
    std::vector<int8_t>& y = q[size_t(op.outputs[0])];
    std::vector<float> acc(y.size(), 0.0f);
    for (int32_t b = 0; b < in.n; ++b)
        for (int32_t iy = 0; iy < in.h; ++iy)
            for (int32_t ix = 0; ix < in.w; ++ix)
                for (int32_t oc = 0; oc < out.c; ++oc) {
                    const float ws = channelScale(wT, size_t(oc));
                    for (int32_t fy = 0; fy < kh; ++fy) {
                        const int32_t oy = iy * op.strideH - padH + fy;
                        for (int32_t fx = 0; fx < kw; ++fx) {
                            const int32_t ox = ix * op.strideW - padW + fx;
                            if (oy < 0 || oy >= out.h || ox < 0 || ox >= out.w)
                                continue;
                            float& sum = acc[out.at(b, oy, ox, oc)];
                            for (int32_t ic = 0; ic < in.c; ++ic) {
                                const int8_t wc = w[size_t(((int64_t(oc) * kh + fy) * kw + fx) * in.c + ic)];
                                sum += decode(x[in.at(b, iy, ix, ic)], inT) * decode(wc, ws, 0);
                            }
                        }
                    }
                }
    for (size_t i = 0; i < y.size(); ++i)
        y[i] = encode(acc[i], outT);
}

// Resize: each output pixel's source coordinate is its index × in / out (align_corners: × (in − 1)
// / (out − 1)), in float; bilinear interpolates the decoded corners (lerp(a, b, w) = w·b +
// (1 − w)·a, along the row first), nearest neighbour takes floor(coordinate). Arm NN 20.08's TfLite
// parser never reads half_pixel_centers: Arm NN computes these asymmetric coordinates for a model
// that asks for half-pixel ones, and so does this simulation of it (as it reproduces the PAD fault).
void resize(const Operation& op, const std::vector<Spec>& T, std::vector<std::vector<int8_t>>& q)
{
    const Spec &inT = T[size_t(op.inputs[0])], &outT = T[size_t(op.outputs[0])];
    const Dims4 in(inT.shape), out(outT.shape);
    const bool bilinear = op.op == BuiltinOperator::ResizeBilinear;
    auto scaleOf = [&](int32_t inSize, int32_t outSize) {
        return op.alignCorners && outSize > 1 ? float(inSize - 1) / float(outSize - 1) : float(inSize) / float(outSize);
    };
    const float scaleY = scaleOf(in.h, out.h), scaleX = scaleOf(in.w, out.w);
    const std::vector<int8_t>& x = q[size_t(op.inputs[0])];
    std::vector<int8_t>& y = q[size_t(op.outputs[0])];
    for (int32_t b = 0; b < out.n; ++b)
        for (int32_t oy = 0; oy < out.h; ++oy) {
            const float fy = float(oy) * scaleY, fy0 = std::floor(fy);
            const int32_t y0 = int32_t(std::max(fy0, 0.0f)), y1 = std::min(y0 + 1, in.h - 1);
            const float wy = fy - fy0;
            for (int32_t ox = 0; ox < out.w; ++ox) {
                const float fx = float(ox) * scaleX, fx0 = std::floor(fx);
                const int32_t x0 = int32_t(std::max(fx0, 0.0f)), x1 = std::min(x0 + 1, in.w - 1);
                const float wx = fx - fx0;
                for (int32_t c = 0; c < out.c; ++c) {
                    const float a = decode(x[in.at(b, y0, x0, c)], inT);
                    float v = a;
                    if (bilinear) {
                        const float top = wx * decode(x[in.at(b, y0, x1, c)], inT) + (1.0f - wx) * a;
                        const float bottom = wx * decode(x[in.at(b, y1, x1, c)], inT) +
                                             (1.0f - wx) * decode(x[in.at(b, y1, x0, c)], inT);
                        v = wy * bottom + (1.0f - wy) * top;
                    }
                    y[out.at(b, oy, ox, c)] = encode(v, outT);
                }
            }
        }
}

// PAD: the codes it adds are 0 unless the PAD is folded into its CONV_2D (the zero point, 0.0).
void pad(const Operation& op, const std::vector<Spec>& T, std::vector<std::vector<int8_t>>& q, bool folded)
{
    const Spec &inT = T[size_t(op.inputs[0])], &outT = T[size_t(op.outputs[0])];
    const std::vector<int32_t> pads = T[size_t(op.inputs[1])].int32Values();
    const int rank = int(inT.shape.size());
    std::vector<int8_t>& y = q[size_t(op.outputs[0])];
    std::fill(y.begin(), y.end(), folded ? int8_t(outT.zeroPoint()) : int8_t(0));
    const std::vector<int8_t>& x = q[size_t(op.inputs[0])];
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

// The operators this file computes as CpuRef does, and those that only move codes (the caller's).
bool simulated(BuiltinOperator op)
{
    switch (op) {
    case BuiltinOperator::Conv2D:
    case BuiltinOperator::DepthwiseConv2D:
    case BuiltinOperator::TransposeConv:
    case BuiltinOperator::FullyConnected:
    case BuiltinOperator::Add:
    case BuiltinOperator::Sub:
    case BuiltinOperator::Mul:
    case BuiltinOperator::AveragePool2D:
    case BuiltinOperator::MaxPool2D:
    case BuiltinOperator::Mean:
    case BuiltinOperator::Concatenation:
    case BuiltinOperator::Softmax:
    case BuiltinOperator::Pad:
    case BuiltinOperator::Logistic:
    case BuiltinOperator::HardSwish:
    case BuiltinOperator::Quantize:
    case BuiltinOperator::ResizeBilinear:
    case BuiltinOperator::ResizeNearestNeighbor:
        return true;
    default:
        return movesCodes(op);
    }
}

} // namespace

bool movesCodes(BuiltinOperator op)
{
    return op == BuiltinOperator::Reshape || op == BuiltinOperator::Transpose || op == BuiltinOperator::Slice ||
           op == BuiltinOperator::StridedSlice || op == BuiltinOperator::Dequantize;
}

void check(const TfliteProgram& program, size_t operation, const std::string& label)
{
    const Operation& op = program.operations.at(operation);
    const auto& T = program.tensors;
    if (op.op == BuiltinOperator::PadV2)
        throw Error(label + ": Arm NN 20.08's TfLite parser has no PADV2");
    if (op.op == BuiltinOperator::Conv2D &&
        T.at(size_t(op.inputs.at(0))).shape.at(3) != T.at(size_t(op.inputs.at(1))).shape.at(3))
        throw Error(label + ": a grouped CONV_2D, whose groups Arm NN 20.08's TfLite parser ignores (write the "
                            "groups split: --tflite-grouped-conv split)");
    if (op.op == BuiltinOperator::FullyConnected && T.at(size_t(op.inputs.at(1))).scales.size() > 1)
        throw Error(label + ": per-channel FULLY_CONNECTED weights, on which Arm NN 20.08 aborts");
    if (op.op == BuiltinOperator::TransposeConv && op.inputs.size() != 3)
        throw Error(label + ": a TRANSPOSE_CONV with a bias input, which Arm NN 20.08's TfLite parser refuses (it "
                            "takes exactly three inputs: write the bias as an ADD, --tflite-transpose-conv-bias add)");
    if (op.op == BuiltinOperator::TransposeConv && op.activation != tf::Activation::None)
        throw Error(label + ": a TRANSPOSE_CONV with a fused activation, which Arm NN 20.08's TfLite parser does not "
                            "read");
    if (op.op == BuiltinOperator::TransposeConv && op.padding != tf::Padding::Valid)
        throw Error(label + ": a TRANSPOSE_CONV with SAME padding, whose placement in Arm NN 20.08 the simulation "
                            "does not know");
    if (op.op == BuiltinOperator::ResizeNearestNeighbor && op.alignCorners)
        throw Error(label + ": a RESIZE_NEAREST_NEIGHBOR with align_corners, whose coordinates in Arm NN 20.08 the "
                            "simulation does not know");
    if (!simulated(op.op))
        throw Error(label + ": the simulation of Arm NN 20.08 has no arithmetic for " + tfliteOperatorName(op.op));
}

bool padFolded(const TfliteProgram& program, size_t operation)
{
    const Operation& pad = program.operations.at(operation);
    if (pad.op != BuiltinOperator::Pad)
        return false;
    const int32_t padded = pad.outputs.at(0);
    int readers = 0;
    bool conv = false;
    for (const Operation& op : program.operations)
        for (size_t k = 0; k < op.inputs.size(); ++k)
            if (op.inputs[k] == padded) {
                ++readers;
                conv = op.op == BuiltinOperator::Conv2D && k == 0;
            }
    for (int32_t o : program.outputs)
        readers += o == padded;
    return readers == 1 && conv;
}

bool run(const Operation& op, const std::vector<Spec>& T, std::vector<std::vector<int8_t>>& q,
         std::vector<std::vector<float>>& f, bool padFolded)
{
    std::vector<int8_t>& y = q[size_t(op.outputs[0])];
    switch (op.op) {
    case BuiltinOperator::Conv2D:
    case BuiltinOperator::DepthwiseConv2D:
        convolution(op, T, q, op.op == BuiltinOperator::DepthwiseConv2D);
        return true;
    case BuiltinOperator::FullyConnected:
        fullyConnected(op, T, q);
        return true;
    case BuiltinOperator::Add:
    case BuiltinOperator::Sub:
    case BuiltinOperator::Mul:
        binary(op, T, q);
        return true;
    case BuiltinOperator::TransposeConv:
        transposeConvolution(op, T, q);
        return true;
    case BuiltinOperator::ResizeBilinear:
    case BuiltinOperator::ResizeNearestNeighbor:
        resize(op, T, q);
        return true;
    case BuiltinOperator::AveragePool2D:
    case BuiltinOperator::MaxPool2D:
        pool(op, T, q);
        return true;
    case BuiltinOperator::Mean:
        mean(op, T, q);
        return true;
    case BuiltinOperator::Concatenation:
        concatenation(op, T, q);
        return true;
    case BuiltinOperator::Softmax:
        softmax(op, T, q);
        return true;
    case BuiltinOperator::Pad:
        pad(op, T, q, padFolded);
        return true;
    case BuiltinOperator::Logistic:
    case BuiltinOperator::HardSwish: {
        const Spec &inT = T[size_t(op.inputs[0])], &outT = T[size_t(op.outputs[0])];
        const std::vector<int8_t>& x = q[size_t(op.inputs[0])];
        const bool logistic = op.op == BuiltinOperator::Logistic;
        for (size_t i = 0; i < y.size(); ++i) {
            const float v = decode(x[i], inT);
            y[i] = encode(logistic ? 1.0f / (1.0f + std::exp(-v)) : v * std::min(std::max(v + 3.0f, 0.0f), 6.0f) / 6,
                          outT);
        }
        return true;
    }
    case BuiltinOperator::Quantize: {
        const Spec &inT = T[size_t(op.inputs[0])], &outT = T[size_t(op.outputs[0])];
        if (inT.type == tf::TensorType::Float32) {
            const std::vector<float>& x = f[size_t(op.inputs[0])];
            for (size_t i = 0; i < y.size(); ++i)
                y[i] = encode(x[i], outT);
        } else {
            const std::vector<int8_t>& x = q[size_t(op.inputs[0])];
            for (size_t i = 0; i < y.size(); ++i)
                y[i] = encode(decode(x[i], inT), outT);
        }
        return true;
    }
    default:
        if (!movesCodes(op.op)) // check() refused it: never LiteRT's arithmetic in its place
            throw Error(std::string("the simulation of Arm NN 20.08 has no arithmetic for ") +
                        tfliteOperatorName(op.op));
        return false;
    }
}

} // namespace qs::armnn_reference
