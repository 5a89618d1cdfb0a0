#pragma once
// Branch-free, vectorizable roundings onto each kind of grid, used inside the
// kernels' inner loops. Each equals numerics' nearestGridValue exactly (the
// tests check every qtype against the reference on random and adversarial data).
// v is in code units and finite (the kernels reject NaN and Inf first).

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>

#include "numerics/qtype.h"

namespace qs {

// Adding and subtracting 1.5·2^23 rounds a float with |v| < 2^22 to an integer,
// half to even, in the default rounding mode; unlike nearbyint it vectorizes
// without SSE4.1. The result is never −0.
[[gnu::always_inline]] inline float roundHalfEvenSmall(float v)
{
    constexpr float kMagic = 0x1.8p23f;
    return (v + kMagic) - kMagic;
}

// Integer and ternary grids: clamp, then round (the same as rounding then
// clamping, since the bounds are integers; clamping first keeps |v| < 2^22).
// Codes: numerics' codeOfGridValue for a grid value g, computed inline.
struct IntegerFastGrid {
    static constexpr bool kAddsZeroPoint = true;
    float qmin, qmax;
    uint32_t codeMask; // (1 << bits) − 1: two's complement within the type's bits
    [[gnu::always_inline]] float operator()(float v) const
    {
        return roundHalfEvenSmall(std::min(std::max(v, qmin), qmax));
    }
    [[gnu::always_inline]] uint32_t code(float g) const { return uint32_t(int32_t(g)) & codeMask; }
};

// {−1, +1}: zero goes to +1.
struct BinaryFastGrid {
    static constexpr bool kAddsZeroPoint = true;
    [[gnu::always_inline]] float operator()(float v) const { return v >= 0 ? 1.0f : -1.0f; }
    [[gnu::always_inline]] uint32_t code(float g) const { return g < 0 ? 0u : 1u; }
};

// A small float format (e4m3fn, e5m2, e2m1), saturating, round to nearest
// even, sign of zero kept. The rounding quantum of |v| is 2^(e − mantissaBits)
// for its binade e (at least the format's smallest normal binade, where the
// subnormals live); |v| / quantum is then a small number rounded with the
// magic constant, and both scalings by a power of two are exact.
struct FloatFastGrid {
    static constexpr bool kAddsZeroPoint = false;
    float maxFinite;
    uint32_t minNormalExponent; // biased float exponent of the format's smallest normal
    uint32_t mantissaBits;
    uint32_t signBit; // of the format's code

    static FloatFastGrid of(QType element)
    {
        switch (element) {
        case QType::Fp8E4M3:
            return {448.0f, 127 - 6, 3, 0x80};
        case QType::Fp8E5M2:
            return {57344.0f, 127 - 14, 2, 0x80};
        default:
            return {6.0f, 127, 1, 0x8}; // Fp4E2M1
        }
    }

    // The bit pattern of a grid value g (finite, on the grid): past the subnormal
    // range each binade holds 2^mantissaBits codes, and within its binade g is an
    // integer number of quanta (which carries into the exponent field by itself).
    [[gnu::always_inline]] uint32_t code(float g) const
    {
        const float a = std::fabs(g);
        const uint32_t e = std::max(std::bit_cast<uint32_t>(a) >> 23, minNormalExponent);
        const float inverse = std::bit_cast<float>((254 - e + mantissaBits) << 23);
        const uint32_t magnitude = ((e - minNormalExponent) << mantissaBits) + uint32_t(int32_t(a * inverse));
        return magnitude | ((std::bit_cast<uint32_t>(g) >> 31) * signBit);
    }

    [[gnu::always_inline]] float operator()(float v) const
    {
        const float a = std::min(std::fabs(v), maxFinite);
        const uint32_t e = std::max(std::bit_cast<uint32_t>(a) >> 23, minNormalExponent);
        const float quantum = std::bit_cast<float>((e - mantissaBits) << 23);
        const float inverse = std::bit_cast<float>((254 - e + mantissaBits) << 23);
        return std::copysign(roundHalfEvenSmall(a * inverse) * quantum, v);
    }
};

// nf4: the index is the number of decision thresholds at or below v, and the
// value is picked by a chain of selects. The thresholds are derived from
// numerics' encodeNf4 itself (the smallest float that encodes to each next
// index), so ties go wherever the reference sends them.
struct Nf4FastGrid {
    static constexpr bool kAddsZeroPoint = false;
    std::array<float, 15> thresholds;
    std::array<float, 16> values;

    static const Nf4FastGrid& instance();

    [[gnu::always_inline]] float operator()(float v) const
    {
        float g = values[0];
#pragma GCC unroll 15
        for (int k = 0; k < 15; ++k)
            g = v >= thresholds[size_t(k)] ? values[size_t(k) + 1] : g;
        return g;
    }
    // The index of codebook value g: the thresholds lie strictly above the entry below them.
    [[gnu::always_inline]] uint32_t code(float g) const
    {
        uint32_t index = 0;
#pragma GCC unroll 15
        for (int k = 0; k < 15; ++k)
            index += g >= thresholds[size_t(k)] ? 1u : 0u;
        return index;
    }
};

} // namespace qs
