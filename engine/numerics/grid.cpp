#include "numerics/grid.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "numerics/float_formats.h"
#include "numerics/nf4.h"
#include "numerics/rounding.h"

namespace qs {
namespace {

// The element format that carries the values: microscaling types round their
// elements like the element type (the block scale is the caller's business).
QType valueType(QType t)
{
    return qtypeInfo(t).element;
}

uint8_t encodeFloat(QType t, float v)
{
    switch (t) {
    case QType::Fp8E4M3:
        return encodeFp8E4M3(v);
    case QType::Fp8E5M2:
        return encodeFp8E5M2(v);
    default:
        return encodeFp4E2M1(v);
    }
}

float decodeFloat(QType t, uint8_t code)
{
    switch (t) {
    case QType::Fp8E4M3:
        return decodeFp8E4M3(code);
    case QType::Fp8E5M2:
        return decodeFp8E5M2(code);
    default:
        return decodeFp4E2M1(code);
    }
}

// Sign bit of a float format's code.
uint8_t floatSignBit(QType t)
{
    return t == QType::Fp4E2M1 ? 0x8 : 0x80;
}

// Returns hi with probability (v − lo) / (hi − lo): exactly when u < that ratio.
float pickNeighbour(float lo, float hi, float v, float u)
{
    return u < (v - lo) / (hi - lo) ? hi : lo;
}

float stochasticFloat(QType t, float v, float u)
{
    const float maxValue = qtypeInfo(t).maxFinite;
    if (v >= maxValue)
        return maxValue;
    if (v <= -maxValue)
        return -maxValue;
    // Largest magnitude code whose value does not exceed |v|; its successor is
    // the next magnitude up (magnitude codes are ordered like their values).
    const float a = std::fabs(v);
    const uint8_t sign = floatSignBit(t);
    uint8_t m = encodeFloat(t, a);
    if (decodeFloat(t, m) > a)
        --m;
    const float below = decodeFloat(t, m);
    if (below == a)
        return v; // representable (keeps the sign of zero)
    const float above = decodeFloat(t, uint8_t(m + 1));
    if (v > 0)
        return pickNeighbour(below, above, v, u);
    // Negative: the neighbours are −above < v < −below; −below keeps a negative zero.
    return pickNeighbour(-above, decodeFloat(t, uint8_t(m | sign)), v, u);
}

float stochasticNf4(float v, float u)
{
    const auto& book = nf4Codebook();
    if (v <= book.front())
        return book.front();
    if (v >= book.back())
        return book.back();
    const auto upper = std::lower_bound(book.begin(), book.end(), v); // first entry >= v
    if (*upper == v)
        return *upper; // the codebook's own value: −0 input gives the table's +0
    return pickNeighbour(*(upper - 1), *upper, v, u);
}

} // namespace

float nearestGridValue(QType t, IntegerGrid grid, float v)
{
    if (std::isnan(v))
        return v; // documented in grid.h: NaN stays NaN for every kind
    const QType e = valueType(t);
    switch (qtypeInfo(e).kind) {
    case QKind::Integer:
    case QKind::Ternary:
        return std::clamp(roundHalfEven(v), float(grid.qmin), float(grid.qmax));
    case QKind::Binary:
        return v >= 0 ? 1.0f : -1.0f;
    case QKind::Float:
        return decodeFloat(e, encodeFloat(e, v));
    case QKind::Codebook:
        return decodeNf4(encodeNf4(v));
    case QKind::Microscaling:
    case QKind::GgufBlock:
    case QKind::Lut:
        break; // an element type is never microscaling; GGUF blocks have no element grid
    }
    throw Error(std::string(qtypeName(t)) + " has no element grid");
}

float stochasticGridValue(QType t, IntegerGrid grid, float v, float u)
{
    if (std::isnan(v))
        return v;
    const QType e = valueType(t);
    switch (qtypeInfo(e).kind) {
    case QKind::Integer:
    case QKind::Ternary: {
        const float qmin = float(grid.qmin), qmax = float(grid.qmax);
        if (v <= qmin)
            return qmin;
        if (v >= qmax)
            return qmax;
        const float lo = std::floor(v);
        return lo == v ? v : pickNeighbour(lo, lo + 1.0f, v, u);
    }
    case QKind::Binary:
        if (v <= -1.0f)
            return -1.0f;
        if (v >= 1.0f)
            return 1.0f;
        return pickNeighbour(-1.0f, 1.0f, v, u);
    case QKind::Float:
        return stochasticFloat(e, v, u);
    case QKind::Codebook:
        return stochasticNf4(v, u);
    case QKind::Microscaling:
    case QKind::GgufBlock:
    case QKind::Lut:
        break;
    }
    throw Error(std::string(qtypeName(t)) + " has no element grid");
}

uint32_t codeOfGridValue(QType t, float g)
{
    const QType e = valueType(t);
    const QuantTypeInfo& info = qtypeInfo(e);
    const uint32_t mask = (1u << info.bits) - 1u;
    switch (info.kind) {
    case QKind::Integer:
    case QKind::Ternary: {
        if (std::isnan(g))
            return 0;
        // Clamp before converting so that an off-grid value can never be UB.
        const float c = std::clamp(g, float(info.qmin), float(info.qmax));
        return uint32_t(int32_t(c)) & mask;
    }
    case QKind::Binary:
        return g < 0 ? 0u : 1u;
    case QKind::Float:
        return encodeFloat(e, g);
    case QKind::Codebook:
        return encodeNf4(g);
    case QKind::Microscaling:
    case QKind::GgufBlock:
    case QKind::Lut:
        break;
    }
    throw Error(std::string(qtypeName(t)) + " has no element codes");
}

float gridValueOfCode(QType t, uint32_t code)
{
    const QType e = valueType(t);
    const QuantTypeInfo& info = qtypeInfo(e);
    const uint32_t mask = (1u << info.bits) - 1u;
    code &= mask;
    switch (info.kind) {
    case QKind::Integer:
        if (info.isSigned && (code >> (info.bits - 1)) != 0)
            return float(int64_t(code) - (int64_t(1) << info.bits)); // sign-extend
        return float(code);
    case QKind::Ternary:
        if (code == 2)
            throw Error("ternary code 2 is not a valid code (expected 0, 1 or 3 for −1)");
        return code == 3 ? -1.0f : float(code);
    case QKind::Binary:
        return code ? 1.0f : -1.0f;
    case QKind::Float:
        return decodeFloat(e, uint8_t(code));
    case QKind::Codebook:
        return decodeNf4(uint8_t(code));
    case QKind::Microscaling:
    case QKind::GgufBlock:
    case QKind::Lut:
        break;
    }
    throw Error(std::string(qtypeName(t)) + " has no element codes");
}

} // namespace qs
