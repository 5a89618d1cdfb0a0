#include "numerics/float_formats.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>

namespace qs {
namespace {

// A sign-magnitude float format with `E` exponent bits, `M` mantissa bits and
// exponent bias `Bias`, whose largest finite magnitude code is `MaxCode`.
template <int E, int M, int Bias, uint8_t MaxCode> struct SmallFloat {
    static constexpr uint8_t kSign = uint8_t(1u << (E + M));
    static constexpr float pow2(int e) { return e >= 0 ? float(1ull << e) : 1.0f / float(1ull << -e); }
    static constexpr float kMinNormal = pow2(1 - Bias);
    static constexpr float kMax = float((1 << M) | (MaxCode & ((1 << M) - 1))) * pow2((MaxCode >> M) - Bias - M);

    static float decodeMagnitude(uint8_t m)
    {
        const int exp = m >> M;
        const int man = m & ((1 << M) - 1);
        if (exp == 0) // subnormal: man · 2^(1 − Bias − M)
            return std::ldexp(float(man), 1 - Bias - M);
        return std::ldexp(float((1 << M) | man), exp - Bias - M);
    }

    // Magnitude code of |x| for finite non-NaN x, RNE, saturating to MaxCode.
    static uint8_t encodeMagnitude(float a)
    {
        if (!(a <= kMax)) // above max (including +Inf): saturate
            return MaxCode;
        if (a < kMinNormal) {
            // In units of the subnormal step the value is below 2^M; adding 2^23
            // makes the FPU round it to an integer, ties to even.
            const float units = std::ldexp(a, Bias - 1 + M);
            return uint8_t(std::bit_cast<uint32_t>(units + 0x1p23f) - std::bit_cast<uint32_t>(0x1p23f));
        }
        // Normal: round the float mantissa to M bits, ties to even; a carry moves
        // into the exponent field, which is what rounding up to the next binade
        // means. a <= max here, so the result never passes MaxCode: every value
        // that would round above max was saturated above.
        constexpr int shift = 23 - M;
        const uint32_t u = std::bit_cast<uint32_t>(a);
        const uint32_t r = u + ((1u << (shift - 1)) - 1u) + ((u >> shift) & 1u);
        return uint8_t((r >> shift) - (uint32_t(127 - Bias) << M));
    }

    static uint8_t encode(float x, uint8_t nanCode)
    {
        const uint8_t sign = std::signbit(x) ? kSign : 0;
        if (std::isnan(x))
            return uint8_t(nanCode | sign);
        return uint8_t(sign | encodeMagnitude(std::fabs(x)));
    }
};

using E4M3 = SmallFloat<4, 3, 7, 0x7e>;
using E5M2 = SmallFloat<5, 2, 15, 0x7b>;
using E2M1 = SmallFloat<2, 1, 1, 0x07>;

} // namespace

uint8_t encodeFp8E4M3(float x)
{
    return E4M3::encode(x, 0x7f);
}

float decodeFp8E4M3(uint8_t code)
{
    const uint8_t m = code & 0x7f;
    if (m == 0x7f)
        return std::copysign(NAN, (code & 0x80) ? -1.f : 1.f);
    const float a = E4M3::decodeMagnitude(m);
    return (code & 0x80) ? -a : a;
}

uint8_t encodeFp8E5M2(float x)
{
    return E5M2::encode(x, 0x7e);
}

float decodeFp8E5M2(uint8_t code)
{
    const uint8_t m = code & 0x7f;
    const bool negative = code & 0x80;
    if (m == 0x7c)
        return negative ? -INFINITY : INFINITY;
    if (m > 0x7c)
        return std::copysign(NAN, negative ? -1.f : 1.f);
    const float a = E5M2::decodeMagnitude(m);
    return negative ? -a : a;
}

uint8_t encodeFp4E2M1(float x)
{
    // e2m1 has no NaN; the header documents that NaN encodes as +0.
    return std::isnan(x) ? uint8_t(0) : E2M1::encode(x, 0);
}

float decodeFp4E2M1(uint8_t code)
{
    static constexpr std::array<float, 8> kMagnitudes{0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
    const float a = kMagnitudes[code & 0x7];
    return (code & 0x8) ? -a : a;
}

uint8_t encodeE8M0(int exponent)
{
    return uint8_t(std::clamp(exponent, -127, 127) + 127);
}

float decodeE8M0(uint8_t code)
{
    if (code == 0xff)
        return NAN;
    return std::ldexp(1.0f, int(code) - 127); // 2^-127 is a float subnormal, still exact
}

} // namespace qs
