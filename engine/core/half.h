#pragma once
// IEEE binary16 and bfloat16 conversions, bit-exact, round-to-nearest-even.
// Header-only so that kernels can convert on the fly inside their loops.

#include <bit>
#include <cstdint>

namespace qs {

inline float bf16ToFloat(uint16_t bits) { return std::bit_cast<float>(uint32_t(bits) << 16); }

inline uint16_t floatToBf16(float f)
{
    uint32_t u = std::bit_cast<uint32_t>(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) // NaN: keep it quiet and NaN
        return uint16_t((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return uint16_t(u >> 16);
}

inline float fp16ToFloat(uint16_t h)
{
    const uint32_t sign = uint32_t(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    const uint32_t man = h & 0x3ffu;
    if (exp == 0x1f) // Inf / NaN
        return std::bit_cast<float>(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        // zero or subnormal: man * 2^-24, exact in float
        const float mag = float(man) * 0x1p-24f;
        return sign ? -mag : mag;
    }
    return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (man << 13));
}

inline uint16_t floatToFp16(float f)
{
    const uint32_t u = std::bit_cast<uint32_t>(f);
    const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) // NaN
        return uint16_t(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) // rounds to >= 65520: overflow to Inf (IEEE)
        return uint16_t(sign | 0x7c00u);
    if (a < 0x38800000u) { // below the smallest normal 2^-14: subnormal or zero
        // Adding 0.5 (2^-1) makes the FPU round the mantissa to 2^-24 units, RNE.
        const float mag = std::bit_cast<float>(a) + 0.5f;
        return uint16_t(sign | uint16_t(std::bit_cast<uint32_t>(mag) - 0x3f000000u));
    }
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u) - (112u << 23);
    return uint16_t(sign | uint16_t(r >> 13));
}

} // namespace qs
