#include "runtime/ops/quantize_linear.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tbb/parallel_for.h>

#include "graph/onnx_element_type.h"
#include "numerics/rounding.h"

namespace qs::ops {

namespace {

// How the scale and zero point map onto x: x viewed as [outer, axisLength,
// inner]; element (o, a, i) uses parameter (o * axisParams + a / block) * inner + i
// for blocked, a for per-axis and 0 for per-tensor parameters.
struct ParameterLayout {
    enum class Kind { PerTensor, PerAxis, Blocked } kind = Kind::PerTensor;
    int64_t outer = 1, axisLength = 1, inner = 1, axisParams = 1, block = 1;

    int64_t index(int64_t element) const
    {
        if (kind == Kind::PerTensor)
            return 0;
        const int64_t i = element % inner, a = (element / inner) % axisLength;
        if (kind == Kind::PerAxis)
            return a;
        const int64_t o = element / (inner * axisLength);
        return (o * axisParams + a / block) * inner + i;
    }
};

ParameterLayout parameterLayout(const KernelContext& ctx, const Tensor& x, const Tensor& scale)
{
    ParameterLayout layout;
    if (scale.rank() == 0 || (scale.rank() == 1 && scale.numel() == 1 && ctx.intAttribute("block_size", 0) <= 0))
        return layout;
    const int rank = x.rank();
    int64_t axis = ctx.intAttribute("axis", 1);
    if (axis < -rank || axis >= rank)
        ctx.fail("axis " + std::to_string(axis) + " is out of range for x " + shapeToString(x.shape()));
    if (axis < 0)
        axis += rank;
    for (int d = 0; d < rank; ++d)
        (d < axis ? layout.outer : d > axis ? layout.inner : layout.axisLength) *= x.dim(d);
    const int64_t block = ctx.intAttribute("block_size", 0);
    if (block <= 0) {
        if (scale.rank() != 1 || scale.numel() != layout.axisLength)
            ctx.fail("scale " + shapeToString(scale.shape()) + " must be a scalar or hold one value per slice (" +
                     std::to_string(layout.axisLength) + ") along axis " + std::to_string(axis));
        layout.kind = ParameterLayout::Kind::PerAxis;
        return layout;
    }
    layout.kind = ParameterLayout::Kind::Blocked;
    layout.block = block;
    layout.axisParams = (layout.axisLength + block - 1) / block;
    Shape expected = x.shape();
    expected[size_t(axis)] = layout.axisParams;
    if (scale.shape() != expected)
        ctx.fail("scale " + shapeToString(scale.shape()) + " must be " + shapeToString(expected) + " for block_size " +
                 std::to_string(block) + " along axis " + std::to_string(axis));
    return layout;
}

// The zero point as int32 values (all zero when absent), checked against the scale's shape.
std::vector<int32_t> zeroPoints(const KernelContext& ctx, const Tensor* zp, const Tensor& scale)
{
    if (!zp)
        return std::vector<int32_t>(size_t(scale.numel()), 0);
    if (zp->shape() != scale.shape() && zp->numel() != scale.numel())
        ctx.fail("zero point " + shapeToString(zp->shape()) + " must have the scale's shape " +
                 shapeToString(scale.shape()));
    std::vector<int32_t> v(size_t(zp->numel()));
    auto copy = [&](auto span) { std::copy(span.begin(), span.end(), v.begin()); };
    switch (zp->dtype()) {
    case DType::I8:
        copy(zp->values<int8_t>());
        break;
    case DType::U8:
        copy(zp->values<uint8_t>());
        break;
    case DType::I16:
        copy(zp->values<int16_t>());
        break;
    case DType::U16:
        copy(zp->values<uint16_t>());
        break;
    case DType::I32:
        copy(zp->values<int32_t>());
        break;
    default:
        ctx.fail("zero point type " + std::string(dtypeName(zp->dtype())) + " is not supported");
    }
    return v;
}

const Tensor& floatScale(const KernelContext& ctx, size_t i)
{
    const Tensor& s = ctx.input(i);
    if (s.dtype() != DType::F32)
        ctx.fail("scale must be float32, not " + std::string(dtypeName(s.dtype())));
    return s;
}

template <class T>
void quantizeInto(const float* x, int64_t n, const ParameterLayout& layout, const float* scale,
                  const std::vector<int32_t>& zp, T* y)
{
    constexpr double lo = double(std::numeric_limits<T>::min()), hi = double(std::numeric_limits<T>::max());
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, 1 << 14), [&](const tbb::blocked_range<int64_t>& r) {
        for (int64_t i = r.begin(); i < r.end(); ++i) {
            const int64_t p = layout.index(i);
            // Divide (not multiply by a reciprocal) so that ties land where ONNX puts them.
            const double q = double(roundHalfEven(x[i] / scale[p])) + double(zp[size_t(p)]);
            y[i] = T(std::clamp(std::isnan(q) ? 0.0 : q, lo, hi));
        }
    });
}

// TensorProto element types that QuantizeLinear may produce.
DType quantizedDType(const KernelContext& ctx, int64_t onnxType)
{
    const std::optional<DType> t = dtypeOfOnnxElementType(onnxType);
    if (!t || (*t != DType::U8 && *t != DType::I8 && *t != DType::U16 && *t != DType::I16 && *t != DType::I32))
        ctx.fail("output_dtype " + std::to_string(onnxType) + " is not an integer type the runtime supports");
    return *t;
}

} // namespace

void quantizeLinear(KernelContext& ctx)
{
    const Tensor& X = ctx.input(0);
    if (X.dtype() != DType::F32)
        ctx.fail("x must be float32, not " + std::string(dtypeName(X.dtype())));
    const Tensor& scale = floatScale(ctx, 1);
    const Tensor* zp = ctx.optionalInput(2);
    DType outType = zp ? zp->dtype() : DType::U8;
    if (const int64_t od = ctx.intAttribute("output_dtype", 0); od != 0) {
        outType = quantizedDType(ctx, od);
        if (zp && zp->dtype() != outType)
            ctx.fail("output_dtype disagrees with the zero point's type " + std::string(dtypeName(zp->dtype())));
    }
    const ParameterLayout layout = parameterLayout(ctx, X, scale);
    const std::vector<int32_t> zeros = zeroPoints(ctx, zp, scale);
    Tensor Y(outType, X.shape());
    const float* x = X.values<float>().data();
    const float* s = scale.values<float>().data();
    switch (outType) {
    case DType::I8:
        quantizeInto(x, X.numel(), layout, s, zeros, Y.mutableValues<int8_t>().data());
        break;
    case DType::U8:
        quantizeInto(x, X.numel(), layout, s, zeros, Y.mutableValues<uint8_t>().data());
        break;
    case DType::I16:
        quantizeInto(x, X.numel(), layout, s, zeros, Y.mutableValues<int16_t>().data());
        break;
    case DType::U16:
        quantizeInto(x, X.numel(), layout, s, zeros, Y.mutableValues<uint16_t>().data());
        break;
    case DType::I32:
        quantizeInto(x, X.numel(), layout, s, zeros, Y.mutableValues<int32_t>().data());
        break;
    default:
        ctx.fail("output type " + std::string(dtypeName(outType)) + " is not supported");
    }
    ctx.setOutput(0, std::move(Y));
}

void dequantizeLinear(KernelContext& ctx)
{
    const Tensor& X = ctx.input(0);
    const Tensor& scale = floatScale(ctx, 1);
    const Tensor* zp = ctx.optionalInput(2);
    if (zp && zp->dtype() != X.dtype())
        ctx.fail("zero point type " + std::string(dtypeName(zp->dtype())) + " differs from x's " +
                 std::string(dtypeName(X.dtype())));
    const ParameterLayout layout = parameterLayout(ctx, X, scale);
    Tensor Y(DType::F32, X.shape());
    float* y = Y.mutableValues<float>().data();
    const float* s = scale.values<float>().data();
    if (X.dtype() == DType::F32) {
        // float8 codes, which the ONNX loader widens to their float32 values (io/onnx_tensor.h): y = x · scale.
        // A float8 zero point can only be zero.
        if (zp &&
            std::any_of(zp->values<float>().begin(), zp->values<float>().end(), [](float v) { return v != 0.0f; }))
            ctx.fail("a float8 zero point must be zero");
        const float* x = X.values<float>().data();
        tbb::parallel_for(tbb::blocked_range<int64_t>(0, X.numel(), 1 << 14),
                          [&](const tbb::blocked_range<int64_t>& r) {
                              for (int64_t i = r.begin(); i < r.end(); ++i)
                                  y[i] = x[i] * s[layout.index(i)];
                          });
        ctx.setOutput(0, std::move(Y));
        return;
    }
    const std::vector<int32_t> zeros = zeroPoints(ctx, zp, scale);
    auto dequantize = [&](auto span) {
        tbb::parallel_for(tbb::blocked_range<int64_t>(0, X.numel(), 1 << 14),
                          [&](const tbb::blocked_range<int64_t>& r) {
                              for (int64_t i = r.begin(); i < r.end(); ++i) {
                                  const int64_t p = layout.index(i);
                                  y[i] = float(int64_t(span[size_t(i)]) - zeros[size_t(p)]) * s[p];
                              }
                          });
    };
    switch (X.dtype()) {
    case DType::I8:
        dequantize(X.values<int8_t>());
        break;
    case DType::U8:
        dequantize(X.values<uint8_t>());
        break;
    case DType::I16:
        dequantize(X.values<int16_t>());
        break;
    case DType::U16:
        dequantize(X.values<uint16_t>());
        break;
    case DType::I32:
        dequantize(X.values<int32_t>());
        break;
    default:
        ctx.fail("x type " + std::string(dtypeName(X.dtype())) + " is not supported");
    }
    ctx.setOutput(0, std::move(Y));
}

void dynamicQuantizeLinear(KernelContext& ctx)
{
    const Tensor& X = ctx.input(0);
    if (X.dtype() != DType::F32)
        ctx.fail("x must be float32, not " + std::string(dtypeName(X.dtype())));
    const auto x = X.values<float>();
    // The range always includes 0 so that 0 is exact.
    float lo = 0.0f, hi = 0.0f;
    for (float v : x) {
        if (std::isnan(v))
            ctx.fail("x holds NaN; its range is undefined");
        lo = std::min(lo, v);
        hi = std::max(hi, v);
    }
    const float scale = (hi - lo) / 255.0f;
    // An all-zero input has scale 0: every value quantizes to zero point 0.
    const float zeroPoint = scale > 0.0f ? std::clamp(roundHalfEven(-lo / scale), 0.0f, 255.0f) : 0.0f;
    Tensor Y(DType::U8, X.shape());
    auto y = Y.mutableValues<uint8_t>();
    for (size_t i = 0; i < x.size(); ++i)
        y[i] = scale > 0.0f ? uint8_t(std::clamp(roundHalfEven(x[i] / scale) + zeroPoint, 0.0f, 255.0f)) : 0;
    ctx.setOutput(0, std::move(Y));
    ctx.setOutput(1, Tensor::fromVector<float>(DType::F32, {}, {scale}));
    ctx.setOutput(2, Tensor::fromVector<uint8_t>(DType::U8, {}, {uint8_t(zeroPoint)}));
}

Tensor requantize(const KernelContext& ctx, const Tensor& accumulators, const std::function<float(int64_t)>& multiplier,
                  const Tensor* zeroPoint)
{
    const DType outType = zeroPoint ? zeroPoint->dtype() : DType::U8;
    if (outType != DType::U8 && outType != DType::I8)
        ctx.fail("the output zero point must be int8 or uint8, not " + std::string(dtypeName(outType)));
    if (zeroPoint && zeroPoint->numel() != 1)
        ctx.fail("the output zero point must be a scalar");
    const float lo = outType == DType::U8 ? 0.0f : -128.0f, hi = outType == DType::U8 ? 255.0f : 127.0f;
    const float zero = !zeroPoint             ? 0.0f
                       : outType == DType::U8 ? float(zeroPoint->values<uint8_t>()[0])
                                              : float(zeroPoint->values<int8_t>()[0]);
    Tensor Y(outType, accumulators.shape());
    const auto acc = accumulators.values<int32_t>();
    for (size_t e = 0; e < acc.size(); ++e) {
        const float q = std::clamp(roundHalfEven(float(acc[e]) * multiplier(int64_t(e))) + zero, lo, hi);
        if (outType == DType::U8)
            Y.mutableValues<uint8_t>()[e] = uint8_t(q);
        else
            Y.mutableValues<int8_t>()[e] = int8_t(q);
    }
    return Y;
}

} // namespace qs::ops
