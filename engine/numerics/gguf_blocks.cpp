#include "numerics/gguf_blocks.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <string>

#include "core/error.h"
#include "core/half.h"

// Bit-exactness with ggml depends on evaluating every float expression as
// written: CMake compiles this file with -ffp-contract=off (no fused
// multiply-add), and nothing here may be reassociated or vectorized into a
// different summation order.

namespace qs {
namespace {

constexpr int kQK = 32;   // elements per block of the 32-types
constexpr int kQKK = 256; // elements per super-block of the k types

// The block layouts, as ggml's block_<type> structs (ggml-common.h). Scales are
// fp16 bit patterns. Packed without padding: every member is a byte array or a
// uint16_t at an even offset.
struct BlockQ8_0 {
    uint16_t d;
    int8_t qs[kQK];
};
struct BlockQ4_0 {
    uint16_t d;
    uint8_t qs[kQK / 2];
};
struct BlockQ4_1 {
    uint16_t d, m;
    uint8_t qs[kQK / 2];
};
struct BlockQ5_0 {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[kQK / 2];
};
struct BlockQ5_1 {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[kQK / 2];
};
struct BlockQ4K {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qs[kQKK / 2];
};
struct BlockQ5K {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qh[kQKK / 8];
    uint8_t qs[kQKK / 2];
};
struct BlockQ6K {
    uint8_t ql[kQKK / 2];
    uint8_t qh[kQKK / 4];
    int8_t scales[kQKK / 16];
    uint16_t d;
};
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ4K) == 144);
static_assert(sizeof(BlockQ5K) == 176);
static_assert(sizeof(BlockQ6K) == 210);
static_assert(std::endian::native == std::endian::little, "GGUF blocks are little-endian, as is this host");

constexpr float kGroupMaxEps = 1e-15f; // ggml's GROUP_MAX_EPS: a group below this absmax is all zero

float half(uint16_t h)
{
    return fp16ToFloat(h);
}

// Round to nearest, ties to even, through float addition of 1.5·2^23 (ggml's
// nearest_int): for |f| above 2^22 the result wraps exactly as ggml's does.
int nearestInt(float f)
{
    const float shifted = f + 12582912.f;
    const int32_t bits = std::bit_cast<int32_t>(shifted);
    return (bits & 0x007fffff) - 0x00400000;
}

// ---- the 32-element types ----

// The element of largest magnitude, with its sign (the first one on ties).
float signedAbsMax(const float* x, int n)
{
    float amax = 0, max = 0;
    for (int j = 0; j < n; ++j)
        if (amax < std::fabs(x[j])) {
            amax = std::fabs(x[j]);
            max = x[j];
        }
    return max;
}

void minMax(const float* x, int n, float& min, float& max)
{
    min = FLT_MAX;
    max = -FLT_MAX;
    for (int j = 0; j < n; ++j) {
        if (x[j] < min)
            min = x[j];
        if (x[j] > max)
            max = x[j];
    }
}

void encodeQ8_0(const float* x, BlockQ8_0& b)
{
    float amax = 0;
    for (int j = 0; j < kQK; ++j)
        amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    b.d = floatToFp16(d);
    for (int j = 0; j < kQK; ++j)
        b.qs[j] = int8_t(std::round(x[j] * id));
}

// q4_0 and q5_0: codes (x / d + offset) truncated, d = (signed absmax) / −offset.
template <int Offset> int truncatedCode(float v, float id)
{
    const int code = int(int8_t(int(v * id + (float(Offset) + 0.5f))));
    return std::min(2 * Offset - 1, code);
}

void encodeQ4_0(const float* x, BlockQ4_0& b)
{
    const float d = signedAbsMax(x, kQK) / -8;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    b.d = floatToFp16(d);
    for (int j = 0; j < kQK / 2; ++j)
        b.qs[j] = uint8_t(truncatedCode<8>(x[j], id) | (truncatedCode<8>(x[j + kQK / 2], id) << 4));
}

void encodeQ5_0(const float* x, BlockQ5_0& b)
{
    const float d = signedAbsMax(x, kQK) / -16;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    b.d = floatToFp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
        const int lo = truncatedCode<16>(x[j], id), hi = truncatedCode<16>(x[j + kQK / 2], id);
        b.qs[j] = uint8_t((lo & 0x0f) | ((hi & 0x0f) << 4));
        qh |= uint32_t((lo >> 4) & 1) << j;
        qh |= uint32_t((hi >> 4) & 1) << (j + kQK / 2);
    }
    std::memcpy(b.qh, &qh, sizeof qh);
}

// q4_1 and q5_1: d = (max − min) / levels, m = min, codes (x − min) / d truncated after + 0.5.
void encodeQ4_1(const float* x, BlockQ4_1& b)
{
    float min, max;
    minMax(x, kQK, min, max);
    const float d = (max - min) / 15;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    b.d = floatToFp16(d);
    b.m = floatToFp16(min);
    auto code = [&](float v) { return std::min(15, int(int8_t(int((v - min) * id + 0.5f)))); };
    for (int j = 0; j < kQK / 2; ++j)
        b.qs[j] = uint8_t(code(x[j]) | (code(x[j + kQK / 2]) << 4));
}

void encodeQ5_1(const float* x, BlockQ5_1& b)
{
    float min, max;
    minMax(x, kQK, min, max);
    const float d = (max - min) / 31;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    b.d = floatToFp16(d);
    b.m = floatToFp16(min);
    auto code = [&](float v) { return int(uint8_t(int((v - min) * id + 0.5f))); };
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
        const int lo = code(x[j]), hi = code(x[j + kQK / 2]);
        b.qs[j] = uint8_t((lo & 0x0f) | ((hi & 0x0f) << 4));
        qh |= uint32_t((lo >> 4) & 1) << j;
        qh |= uint32_t((hi >> 4) & 1) << (j + kQK / 2);
    }
    std::memcpy(b.qh, &qh, sizeof qh);
}

// ---- the k types: scale searches ----

// Symmetric codes in [−nmax, nmax − 1] for a group of n, with the scale that
// minimises the x²-weighted squared error over 19 candidate inverse scales
// around nmax / (signed absmax) (ggml's make_qx_quants, rmse_type 1, no
// importance weights). Writes code + nmax to L; returns the scale (0 for an
// all-zero group, whose codes are 0).
float symmetricScaleSearch(int n, int nmax, const float* x, int8_t* L)
{
    float amax = 0, max = 0;
    for (int i = 0; i < n; ++i)
        if (std::fabs(x[i]) > amax) {
            amax = std::fabs(x[i]);
            max = x[i];
        }
    if (amax < kGroupMaxEps) {
        std::fill(L, L + n, int8_t(0));
        return 0.f;
    }
    auto codeOf = [nmax](float v) { return std::clamp(nearestInt(v), -nmax, nmax - 1); };
    // Weighted sums Σ w·x·l and Σ w·l² of the codes under inverse scale `iscale`.
    auto sums = [&](float iscale, float& sumlx, float& suml2) {
        sumlx = 0;
        suml2 = 0;
        for (int i = 0; i < n; ++i) {
            const int l = codeOf(iscale * x[i]);
            const float w = x[i] * x[i];
            sumlx += w * x[i] * float(l);
            suml2 += w * float(l) * float(l);
        }
    };
    float iscale = float(-nmax) / max;
    for (int i = 0; i < n; ++i)
        L[i] = int8_t(codeOf(iscale * x[i]) + nmax);
    float sumlx, suml2;
    sums(iscale, sumlx, suml2);
    float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int step = -9; step <= 9; ++step) {
        if (step == 0)
            continue;
        iscale = -(float(nmax) + 0.1f * float(step)) / max;
        sums(iscale, sumlx, suml2);
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i)
                L[i] = int8_t(codeOf(iscale * x[i]) + nmax);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

// Codes in [0, nmax] with a scale and a min (x ≈ scale·l − theMin, theMin ≥ 0)
// minimising the weighted squared error: a start from the group's range (the
// min raised to at most 0), then nstep + 1 candidate inverse scales
// (rmin + rdelta·step + nmax) / (max − min), each refit by weighted least
// squares (ggml's make_qkx2_quants with use_mad false). Laux is scratch.
float scaleMinSearch(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* theMin, uint8_t* Laux,
                     float rmin, float rdelta, int nstep)
{
    float min = x[0], max = x[0];
    float sumW = weights[0];
    float sumX = sumW * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min)
            min = x[i];
        if (x[i] > max)
            max = x[i];
        sumW += weights[i];
        sumX += weights[i] * x[i];
    }
    if (min > 0)
        min = 0;
    if (max == min) {
        std::fill(L, L + n, uint8_t(0));
        *theMin = -min;
        return 0.f;
    }
    auto codeOf = [nmax](float v) { return std::clamp(nearestInt(v), 0, nmax); };
    float iscale = float(nmax) / (max - min);
    float scale = 1 / iscale;
    float bestError = 0;
    for (int i = 0; i < n; ++i) {
        L[i] = uint8_t(codeOf(iscale * (x[i] - min)));
        const float diff = scale * float(L[i]) + min - x[i];
        bestError += weights[i] * (diff * diff);
    }
    for (int step = 0; step <= nstep; ++step) {
        iscale = (rmin + rdelta * float(step) + float(nmax)) / (max - min);
        float sumL = 0, sumL2 = 0, sumXL = 0;
        for (int i = 0; i < n; ++i) {
            const int l = codeOf(iscale * (x[i] - min));
            Laux[i] = uint8_t(l);
            const float w = weights[i];
            sumL += w * float(l);
            sumL2 += w * float(l) * float(l);
            sumXL += w * float(l) * x[i];
        }
        const float det = sumW * sumL2 - sumL * sumL;
        if (!(det > 0))
            continue;
        float thisScale = (sumW * sumXL - sumX * sumL) / det;
        float thisMin = (sumL2 * sumX - sumL * sumXL) / det;
        if (thisMin > 0) {
            thisMin = 0;
            thisScale = sumXL / sumL2;
        }
        float error = 0;
        for (int i = 0; i < n; ++i) {
            const float diff = thisScale * float(Laux[i]) + thisMin - x[i];
            error += weights[i] * (diff * diff);
        }
        if (error < bestError) {
            std::copy(Laux, Laux + n, L);
            bestError = error;
            scale = thisScale;
            min = thisMin;
        }
    }
    *theMin = -min;
    return scale;
}

// The 6-bit scale and min of sub-block j of a q4_k/q5_k super-block (12 bytes
// hold 8 pairs: sub-blocks 0-3 in the low 6 bits of bytes 0-3 and 4-7, 4-7
// split into a nibble in bytes 8-11 and two high bits on top of bytes 0-7).
void scaleMinK4(int j, const uint8_t* q, uint8_t& sc, uint8_t& m)
{
    if (j < 4) {
        sc = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        sc = uint8_t((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
        m = uint8_t((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

// q4_k and q5_k share everything but the code width and the search's parameters.
template <int Nmax> struct KScaleMin {
    uint16_t d = 0, dmin = 0;
    uint8_t scales[12] = {};
    uint8_t L[kQKK];
};

template <int Nmax> KScaleMin<Nmax> quantizeScaleMinK(const float* x, float rmin, float rdelta, int nstep)
{
    KScaleMin<Nmax> r;
    float mins[kQKK / 32], scales[kQKK / 32], weights[32];
    uint8_t Laux[32];
    float maxScale = 0, maxMin = 0;
    for (int j = 0; j < kQKK / 32; ++j) {
        const float* xs = x + 32 * j;
        float sumX2 = 0;
        for (int l = 0; l < 32; ++l)
            sumX2 += xs[l] * xs[l];
        const float avX = std::sqrt(sumX2 / 32);
        for (int l = 0; l < 32; ++l)
            weights[l] = avX + std::fabs(xs[l]);
        scales[j] = scaleMinSearch(32, Nmax, xs, weights, r.L + 32 * j, &mins[j], Laux, rmin, rdelta, nstep);
        if (scales[j] > maxScale)
            maxScale = scales[j];
        if (mins[j] > maxMin)
            maxMin = mins[j];
    }
    const float invScale = maxScale > 0 ? 63.f / maxScale : 0.f;
    const float invMin = maxMin > 0 ? 63.f / maxMin : 0.f;
    for (int j = 0; j < kQKK / 32; ++j) {
        const uint8_t ls = std::min<uint8_t>(63, uint8_t(nearestInt(invScale * scales[j])));
        const uint8_t lm = std::min<uint8_t>(63, uint8_t(nearestInt(invMin * mins[j])));
        if (j < 4) {
            r.scales[j] = ls;
            r.scales[j + 4] = lm;
        } else {
            r.scales[j + 4] = uint8_t((ls & 0x0f) | ((lm & 0x0f) << 4));
            r.scales[j - 4] |= uint8_t((ls >> 4) << 6);
            r.scales[j] |= uint8_t((lm >> 4) << 6);
        }
    }
    r.d = floatToFp16(maxScale / 63.f);
    r.dmin = floatToFp16(maxMin / 63.f);
    // Requantize with the scales as stored; a sub-block whose scale is 0 keeps
    // the codes of its search.
    for (int j = 0; j < kQKK / 32; ++j) {
        uint8_t sc, m;
        scaleMinK4(j, r.scales, sc, m);
        const float d = half(r.d) * float(sc);
        if (d == 0)
            continue;
        const float dm = half(r.dmin) * float(m);
        for (int i = 0; i < 32; ++i)
            r.L[32 * j + i] = uint8_t(std::clamp(nearestInt((x[32 * j + i] + dm) / d), 0, Nmax));
    }
    return r;
}

void encodeQ4K(const float* x, BlockQ4K& b)
{
    const KScaleMin<15> r = quantizeScaleMinK<15>(x, -1.f, 0.1f, 20);
    b.d = r.d;
    b.dmin = r.dmin;
    std::memcpy(b.scales, r.scales, sizeof b.scales);
    for (int j = 0; j < kQKK; j += 64)
        for (int l = 0; l < 32; ++l)
            b.qs[j / 2 + l] = uint8_t(r.L[j + l] | (r.L[j + l + 32] << 4));
}

void encodeQ5K(const float* x, BlockQ5K& b)
{
    const KScaleMin<31> r = quantizeScaleMinK<31>(x, -0.5f, 0.1f, 15);
    b.d = r.d;
    b.dmin = r.dmin;
    std::memcpy(b.scales, r.scales, sizeof b.scales);
    std::memset(b.qh, 0, sizeof b.qh);
    // Low nibbles as q4_k; the fifth bits of the pair (l, l + 32) of the n-th
    // 64-element chunk go to bits 2n and 2n + 1 of qh[l].
    for (int n = 0; n < kQKK / 64; ++n)
        for (int l = 0; l < 32; ++l) {
            const int lo = r.L[64 * n + l], hi = r.L[64 * n + l + 32];
            b.qs[32 * n + l] = uint8_t((lo & 0x0f) | ((hi & 0x0f) << 4));
            b.qh[l] |= uint8_t(((lo >> 4) << (2 * n)) | ((hi >> 4) << (2 * n + 1)));
        }
}

void encodeQ6K(const float* x, BlockQ6K& b)
{
    int8_t L[kQKK];
    float scales[kQKK / 16];
    float maxScale = 0, maxAbsScale = 0;
    for (int ib = 0; ib < kQKK / 16; ++ib) {
        scales[ib] = symmetricScaleSearch(16, 32, x + 16 * ib, L + 16 * ib);
        if (std::fabs(scales[ib]) > maxAbsScale) {
            maxAbsScale = std::fabs(scales[ib]);
            maxScale = scales[ib];
        }
    }
    std::memset(&b, 0, sizeof b);
    if (maxAbsScale < kGroupMaxEps)
        return; // all zero: d = 0 and every byte 0
    const float iscale = -128.f / maxScale;
    b.d = floatToFp16(1 / iscale);
    for (int ib = 0; ib < kQKK / 16; ++ib)
        b.scales[ib] = int8_t(std::min(127, nearestInt(iscale * scales[ib])));
    for (int j = 0; j < kQKK / 16; ++j) {
        const float d = half(b.d) * float(b.scales[j]);
        if (d == 0)
            continue;
        for (int i = 0; i < 16; ++i)
            L[16 * j + i] = int8_t(std::clamp(nearestInt(x[16 * j + i] / d), -32, 31) + 32);
    }
    // Per 128-element half: low nibbles of (l, l + 64) and (l + 32, l + 96)
    // share bytes of ql; the two high bits of all four share qh[l].
    for (int h = 0; h < kQKK / 128; ++h) {
        const int8_t* Lh = L + 128 * h;
        uint8_t* ql = b.ql + 64 * h;
        uint8_t* qh = b.qh + 32 * h;
        for (int l = 0; l < 32; ++l) {
            ql[l] = uint8_t((Lh[l] & 0x0f) | ((Lh[l + 64] & 0x0f) << 4));
            ql[l + 32] = uint8_t((Lh[l + 32] & 0x0f) | ((Lh[l + 96] & 0x0f) << 4));
            qh[l] =
                uint8_t((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) | ((Lh[l + 64] >> 4) << 4) | ((Lh[l + 96] >> 4) << 6));
        }
    }
}

// ---- decoding ----

void decodeQ8_0(const BlockQ8_0& b, float* y)
{
    const float d = half(b.d);
    for (int j = 0; j < kQK; ++j)
        y[j] = float(b.qs[j]) * d;
}

void decodeQ4_0(const BlockQ4_0& b, float* y)
{
    const float d = half(b.d);
    for (int j = 0; j < kQK / 2; ++j) {
        y[j] = float((b.qs[j] & 0x0f) - 8) * d;
        y[j + kQK / 2] = float((b.qs[j] >> 4) - 8) * d;
    }
}

void decodeQ4_1(const BlockQ4_1& b, float* y)
{
    const float d = half(b.d), m = half(b.m);
    for (int j = 0; j < kQK / 2; ++j) {
        y[j] = float(b.qs[j] & 0x0f) * d + m;
        y[j + kQK / 2] = float(b.qs[j] >> 4) * d + m;
    }
}

int fifthBit(const uint8_t* qh, int i)
{
    uint32_t bits;
    std::memcpy(&bits, qh, sizeof bits);
    return int((bits >> i) & 1) << 4;
}

void decodeQ5_0(const BlockQ5_0& b, float* y)
{
    const float d = half(b.d);
    for (int j = 0; j < kQK / 2; ++j) {
        y[j] = float(((b.qs[j] & 0x0f) | fifthBit(b.qh, j)) - 16) * d;
        y[j + kQK / 2] = float(((b.qs[j] >> 4) | fifthBit(b.qh, j + kQK / 2)) - 16) * d;
    }
}

void decodeQ5_1(const BlockQ5_1& b, float* y)
{
    const float d = half(b.d), m = half(b.m);
    for (int j = 0; j < kQK / 2; ++j) {
        y[j] = float((b.qs[j] & 0x0f) | fifthBit(b.qh, j)) * d + m;
        y[j + kQK / 2] = float((b.qs[j] >> 4) | fifthBit(b.qh, j + kQK / 2)) * d + m;
    }
}

// q4_k / q5_k: element l of the 64-element chunk n is sub-block 2n (l < 32) or 2n + 1.
template <class Block, class Code> void decodeScaleMinK(const Block& b, float* y, Code code)
{
    const float d = half(b.d), dmin = half(b.dmin);
    for (int n = 0; n < kQKK / 64; ++n) {
        uint8_t sc, m;
        scaleMinK4(2 * n, b.scales, sc, m);
        const float d1 = d * float(sc), m1 = dmin * float(m);
        scaleMinK4(2 * n + 1, b.scales, sc, m);
        const float d2 = d * float(sc), m2 = dmin * float(m);
        for (int l = 0; l < 32; ++l)
            y[64 * n + l] = d1 * float(code(n, l, false)) - m1;
        for (int l = 0; l < 32; ++l)
            y[64 * n + 32 + l] = d2 * float(code(n, l, true)) - m2;
    }
}

void decodeQ4K(const BlockQ4K& b, float* y)
{
    decodeScaleMinK(b, y, [&](int n, int l, bool high) {
        const uint8_t q = b.qs[32 * n + l];
        return high ? q >> 4 : q & 0x0f;
    });
}

void decodeQ5K(const BlockQ5K& b, float* y)
{
    decodeScaleMinK(b, y, [&](int n, int l, bool high) {
        const uint8_t q = b.qs[32 * n + l];
        const int bit = (b.qh[l] >> (2 * n + (high ? 1 : 0))) & 1;
        return (high ? q >> 4 : q & 0x0f) + (bit ? 16 : 0);
    });
}

void decodeQ6K(const BlockQ6K& b, float* y)
{
    const float d = half(b.d);
    for (int h = 0; h < kQKK / 128; ++h) {
        const uint8_t* ql = b.ql + 64 * h;
        const uint8_t* qh = b.qh + 32 * h;
        const int8_t* sc = b.scales + 8 * h;
        float* yh = y + 128 * h;
        for (int l = 0; l < 32; ++l) {
            const int is = l / 16;
            const int q1 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
            const int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
            const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            yh[l] = d * float(sc[is]) * float(q1);
            yh[l + 32] = d * float(sc[is + 2]) * float(q2);
            yh[l + 64] = d * float(sc[is + 4]) * float(q3);
            yh[l + 96] = d * float(sc[is + 6]) * float(q4);
        }
    }
}

// Runs `fn(const float*, Block&)` or `fn(const Block&, float*)` over a row's blocks.
template <class Block, int BlockSize, class Fn>
void encodeBlocks(std::span<const float> x, std::span<uint8_t> out, Fn fn)
{
    const size_t blocks = x.size() / BlockSize;
    for (size_t i = 0; i < blocks; ++i) {
        Block b;
        fn(x.data() + i * BlockSize, b);
        std::memcpy(out.data() + i * sizeof(Block), &b, sizeof(Block));
    }
}

template <class Block, int BlockSize, class Fn>
void decodeBlocks(std::span<const uint8_t> in, std::span<float> y, Fn fn)
{
    const size_t blocks = y.size() / BlockSize;
    for (size_t i = 0; i < blocks; ++i) {
        Block b;
        std::memcpy(&b, in.data() + i * sizeof(Block), sizeof(Block));
        fn(b, y.data() + i * BlockSize);
    }
}

} // namespace

GgufBlockFormat ggufBlockFormat(QType t)
{
    switch (t) {
    case QType::Q8_0:
        return {kQK, int(sizeof(BlockQ8_0))};
    case QType::Q4_0:
        return {kQK, int(sizeof(BlockQ4_0))};
    case QType::Q4_1:
        return {kQK, int(sizeof(BlockQ4_1))};
    case QType::Q5_0:
        return {kQK, int(sizeof(BlockQ5_0))};
    case QType::Q5_1:
        return {kQK, int(sizeof(BlockQ5_1))};
    case QType::Q4K:
        return {kQKK, int(sizeof(BlockQ4K))};
    case QType::Q5K:
        return {kQKK, int(sizeof(BlockQ5K))};
    case QType::Q6K:
        return {kQKK, int(sizeof(BlockQ6K))};
    default:
        throw Error(std::string(qtypeName(t)) + " is not a GGUF block format");
    }
}

size_t ggufRowBytes(QType t, int64_t n)
{
    const GgufBlockFormat f = ggufBlockFormat(t);
    if (n < 0 || n % f.blockSize != 0)
        throw Error(std::string(qtypeName(t)) + " needs rows whose length is a multiple of " +
                    std::to_string(f.blockSize) + ", got " + std::to_string(n));
    return size_t(n / f.blockSize) * size_t(f.blockBytes);
}

void ggufEncodeRow(QType t, std::span<const float> x, std::span<uint8_t> out)
{
    if (out.size() != ggufRowBytes(t, int64_t(x.size())))
        throw Error("GGUF row of " + std::to_string(x.size()) + " elements needs " +
                    std::to_string(ggufRowBytes(t, int64_t(x.size()))) + " bytes, got " + std::to_string(out.size()));
    switch (t) {
    case QType::Q8_0:
        return encodeBlocks<BlockQ8_0, kQK>(x, out, encodeQ8_0);
    case QType::Q4_0:
        return encodeBlocks<BlockQ4_0, kQK>(x, out, encodeQ4_0);
    case QType::Q4_1:
        return encodeBlocks<BlockQ4_1, kQK>(x, out, encodeQ4_1);
    case QType::Q5_0:
        return encodeBlocks<BlockQ5_0, kQK>(x, out, encodeQ5_0);
    case QType::Q5_1:
        return encodeBlocks<BlockQ5_1, kQK>(x, out, encodeQ5_1);
    case QType::Q4K:
        return encodeBlocks<BlockQ4K, kQKK>(x, out, encodeQ4K);
    case QType::Q5K:
        return encodeBlocks<BlockQ5K, kQKK>(x, out, encodeQ5K);
    case QType::Q6K:
        return encodeBlocks<BlockQ6K, kQKK>(x, out, encodeQ6K);
    default:
        throw Error(std::string(qtypeName(t)) + " is not a GGUF block format");
    }
}

void ggufDecodeRow(QType t, std::span<const uint8_t> in, std::span<float> out)
{
    if (in.size() != ggufRowBytes(t, int64_t(out.size())))
        throw Error("GGUF row of " + std::to_string(out.size()) + " elements needs " +
                    std::to_string(ggufRowBytes(t, int64_t(out.size()))) + " bytes, got " + std::to_string(in.size()));
    switch (t) {
    case QType::Q8_0:
        return decodeBlocks<BlockQ8_0, kQK>(in, out, decodeQ8_0);
    case QType::Q4_0:
        return decodeBlocks<BlockQ4_0, kQK>(in, out, decodeQ4_0);
    case QType::Q4_1:
        return decodeBlocks<BlockQ4_1, kQK>(in, out, decodeQ4_1);
    case QType::Q5_0:
        return decodeBlocks<BlockQ5_0, kQK>(in, out, decodeQ5_0);
    case QType::Q5_1:
        return decodeBlocks<BlockQ5_1, kQK>(in, out, decodeQ5_1);
    case QType::Q4K:
        return decodeBlocks<BlockQ4K, kQKK>(in, out, decodeQ4K);
    case QType::Q5K:
        return decodeBlocks<BlockQ5K, kQKK>(in, out, decodeQ5K);
    case QType::Q6K:
        return decodeBlocks<BlockQ6K, kQKK>(in, out, decodeQ6K);
    default:
        throw Error(std::string(qtypeName(t)) + " is not a GGUF block format");
    }
}

} // namespace qs
