#include "quant/reference.h"

#include <cmath>

#include "core/half.h"
#include "numerics/grid.h"
#include "quant/kernels.h"

namespace qs {
namespace {

float inputValue(const Tensor& t, int64_t i)
{
    switch (t.dtype()) {
    case DType::F32:
        return t.values<float>()[size_t(i)];
    case DType::F16:
        return fp16ToFloat(t.values<uint16_t>()[size_t(i)]);
    case DType::BF16:
        return bf16ToFloat(t.values<uint16_t>()[size_t(i)]);
    default:
        throw Error("quantization input must be float32, float16 or bfloat16, got " +
                    std::string(dtypeName(t.dtype())));
    }
}

void checkFinite(float x, int64_t i, std::string_view what)
{
    if (!std::isfinite(x))
        throw Error("tensor '" + std::string(what) + "': element " + std::to_string(i) + " is " +
                    (std::isnan(x) ? "NaN" : "infinite") + "; quantization needs finite values");
}

uint32_t codeMask(QType t)
{
    return uint32_t((uint64_t(1) << qtypeInfo(t).bits) - 1);
}

// The fake-quantized value of grid value g.
float valueOfGridValue(const GroupQuant& gq, float g)
{
    if (isIntegerLike(gq.qtype))
        return float(int32_t(g) - gq.zeroPoint) * gq.scale;
    if (qtypeInfo(gq.qtype).kind == QKind::Codebook)
        return (g + 0.0f) * gq.scale; // nf4's zero entry is +0: stochastic rounding may hand back v = −0
    return g * gq.scale;
}

} // namespace

GroupQuant groupQuant(const QuantParams& params, int64_t group)
{
    GroupQuant gq;
    gq.qtype = params.qtype;
    gq.grid = isIntegerLike(params.qtype) ? integerGrid(params.qtype, params.options.narrowRange) : IntegerGrid{0, 0};
    gq.scale = params.scales[size_t(group)];
    gq.zeroPoint = params.symmetric ? 0 : params.zeroPoints[size_t(group)];
    return gq;
}

float referenceGridValue(const GroupQuant& gq, float x, Rounding rounding, float u)
{
    float v = x / gq.scale;
    if (isIntegerLike(gq.qtype))
        v += float(gq.zeroPoint);
    return rounding == Rounding::Nearest ? nearestGridValue(gq.qtype, gq.grid, v)
                                         : stochasticGridValue(gq.qtype, gq.grid, v, u);
}

float referenceFakeQuantizeValue(const GroupQuant& gq, float x)
{
    return valueOfGridValue(gq, referenceGridValue(gq, x, Rounding::Nearest, 0.0f));
}

Tensor referenceFakeQuantize(const Tensor& input, const QuantParams& params, Rounding rounding, uint64_t seed)
{
    checkQuantParams(params, input.shape(), "input");
    Tensor out(DType::F32, input.shape());
    auto o = out.mutableValues<float>();
    for (int64_t i = 0; i < input.numel(); ++i) {
        const float x = inputValue(input, i);
        checkFinite(x, i, "input");
        const GroupQuant gq = groupQuant(params, params.layout.groupOf(i));
        const float u = rounding == Rounding::Stochastic ? stochasticUniform(seed, uint64_t(i)) : 0.0f;
        o[size_t(i)] = valueOfGridValue(gq, referenceGridValue(gq, x, rounding, u));
    }
    return out;
}

Tensor referenceQuantize(const Tensor& input, const QuantParams& params, Rounding rounding, uint64_t seed)
{
    checkQuantParams(params, input.shape(), "input");
    const DType codeType = codeDType(params.qtype);
    Tensor out(codeType, input.shape());
    for (int64_t i = 0; i < input.numel(); ++i) {
        const float x = inputValue(input, i);
        checkFinite(x, i, "input");
        const GroupQuant gq = groupQuant(params, params.layout.groupOf(i));
        const float u = rounding == Rounding::Stochastic ? stochasticUniform(seed, uint64_t(i)) : 0.0f;
        const uint32_t code = codeOfGridValue(params.qtype, referenceGridValue(gq, x, rounding, u));
        switch (codeType) {
        case DType::I8:
            out.mutableValues<int8_t>()[size_t(i)] = int8_t(uint8_t(code));
            break;
        case DType::I16:
            out.mutableValues<int16_t>()[size_t(i)] = int16_t(uint16_t(code));
            break;
        default:
            out.mutableValues<uint8_t>()[size_t(i)] = uint8_t(code);
            break;
        }
    }
    return out;
}

Tensor referenceDequantize(const Tensor& codes, const QuantParams& params)
{
    checkQuantParams(params, codes.shape(), "codes");
    if (codes.dtype() != codeDType(params.qtype))
        throw Error("codes of " + std::string(qtypeName(params.qtype)) + " must be " +
                    std::string(dtypeName(codeDType(params.qtype))) + ", got " + std::string(dtypeName(codes.dtype())));
    Tensor out(DType::F32, codes.shape());
    auto o = out.mutableValues<float>();
    for (int64_t i = 0; i < codes.numel(); ++i) {
        uint32_t code = 0;
        switch (codes.dtype()) {
        case DType::I8:
            code = uint8_t(codes.values<int8_t>()[size_t(i)]);
            break;
        case DType::I16:
            code = uint16_t(codes.values<int16_t>()[size_t(i)]);
            break;
        default:
            code = codes.values<uint8_t>()[size_t(i)];
            break;
        }
        const GroupQuant gq = groupQuant(params, params.layout.groupOf(i));
        o[size_t(i)] = valueOfGridValue(gq, gridValueOfCode(params.qtype, code & codeMask(params.qtype)));
    }
    return out;
}

} // namespace qs
