#pragma once
// The elementwise activations a Conv can apply to its own output when the
// interpreter folds Conv -> Relu (or Clip, LeakyRelu, HardSigmoid, HardSwish,
// Sigmoid, Sigmoid + Mul) into one step: one definition of each, used by the standalone kernels
// (elementwise.cpp) and by the fused epilogue alike, so a fused run writes the
// same bits as the two nodes run one after the other.

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace qs {

namespace ops {

template <class T> T reluOf(T v)
{
    return v > T(0) ? v : T(0);
}
template <class T> T leakyReluOf(T v, T alpha)
{
    return v < T(0) ? alpha * v : v;
}
// min(max()) rather than std::clamp (faster in a map over a large tensor); NaN still passes through.
template <class T> T hardSigmoidOf(T v, T alpha, T beta)
{
    return std::min(std::max(alpha * v + beta, T(0)), T(1));
}
// A multiply by 1/6 instead of a division (a fraction of an ulp apart) and
// min(max()) instead of std::clamp: together 1.4x faster on a 1M-element map.
template <class T> T hardSwishOf(T v)
{
    return v * std::min(std::max(v * T(1.0 / 6.0) + T(0.5), T(0)), T(1));
}
template <class T> T clipOf(T v, T lo, T hi)
{
    return v < lo ? lo : (hi < v ? hi : v);
}

// e^v for v <= 0 (or NaN) in float, written without branches so that a loop
// over it vectorises (where compiled with -fno-trapping-math, as
// activation.cpp is: else GCC keeps the selects as branches): v = n ln 2 + r
// with |r| <= ln(2)/2 (ln 2 split in two so that n ln 2 is exact), e^r by
// Cephes' degree-7 polynomial (within 2 ulp of the correctly rounded value),
// 2^n from the exponent bits. Below ln(FLT_MIN) the result would be
// subnormal: it is 0. Its multiply-adds are fused (std::fma), so every
// instruction set rounds them alike: the AVX2 and AVX-512 loops take FMA
// instructions (a SiLU map 0.415 -> 0.285 ns per value, AVX-512, one
// thread, in L2), the baseline calls glibc's fmaf, which is slower there but
// keeps the bits.
inline float expOfNonPositive(float v)
{
    constexpr float kLowest = -87.3365447f; // ln(2^-126)
    const bool underflows = v < kLowest;
    const float x = underflows ? kLowest : v;
    // x log2(e) rounded to an integer n: adding 1.5 * 2^23 leaves n in the low
    // mantissa bits (and -126 <= n <= 0 keeps 2^n a normal number).
    const float shifted = std::fma(x, 1.44269504088896341f, 12582912.0f);
    const float n = shifted - 12582912.0f;
    const float r = std::fma(n, 2.12194440e-4f, std::fma(n, -0.693359375f, x));
    float p = 1.9875691500e-4f;
    p = std::fma(p, r, 1.3981999507e-3f);
    p = std::fma(p, r, 8.3334519073e-3f);
    p = std::fma(p, r, 4.1665795894e-2f);
    p = std::fma(p, r, 1.6666665459e-1f);
    p = std::fma(p, r, 5.0000001201e-1f);
    const float er = std::fma(p * r, r, r) + 1.0f;
    const uint32_t exponent = (std::bit_cast<uint32_t>(shifted) - 0x4B400000u + 127u) << 23;
    return underflows ? 0.0f : er * std::bit_cast<float>(exponent);
}

// 1 / (1 + e^-v), with e^-|v| so that nothing overflows: e/(1+e) below 0.
inline float sigmoidOf(float v)
{
    const float e = expOfNonPositive(-std::fabs(v));
    return (v >= 0.0f ? 1.0f : e) / (1.0f + e);
}
inline double sigmoidOf(double v)
{
    const double e = std::exp(-std::fabs(v));
    return (v >= 0.0 ? 1.0 : e) / (1.0 + e);
}
// SiLU / Swish: v sigmoid(v), rounded as Mul(v, Sigmoid(v)) rounds.
template <class T> T swishOf(T v)
{
    return v * sigmoidOf(v);
}

} // namespace ops

// An activation folded into the node before it, with its parameters
// (Clip: a = min, b = max; LeakyRelu: a = alpha; HardSigmoid: a = alpha, b = beta).
// Swish is a Sigmoid and the Mul of its input by its output, folded together.
struct FusedActivation {
    enum class Kind { Relu, LeakyRelu, Clip, HardSigmoid, HardSwish, Sigmoid, Swish };
    Kind kind = Kind::Relu;
    float a = 0, b = 0;

    // x[i] = activation(x[i]) for i in [0, n).
    void apply(float* x, int64_t n) const;
};

// y[i] = activation((from[i] + *bias) + addend[i]) for i in [0, n): a Conv's
// sums finished as its output, with what the interpreter folded into it. The
// bias, the addend and the activation only when given (without any, a copy;
// from may be y), each step rounded as the separate Conv, Add and activation
// nodes would.
void finishOutputs(const float* from, float* y, int64_t n, const float* bias, const float* addend,
                   const FusedActivation* activation);

// finishOutputs on `rows` rows of n values of one channel (one bias): row r
// from from + r * fromLd into y + r * yLd, its addend at addend + r * yLd. A
// conv's output rows from sums computed wider than the plane, in one call
// (a call per row of 47 outputs took a quarter of a stem's time).
void finishPlane(const float* from, int64_t fromLd, float* y, int64_t yLd, int64_t rows, int64_t n,
                 const float* bias, const float* addend, const FusedActivation* activation);

// finishOutputs in place on `rows` rows of n values, row r at y + r * ld with
// bias[r] and addend + r * ld. Rows that follow each other (ld = n: a conv's
// output channels on a whole small plane) take one pass after their biases,
// not a call per row: 960 channels of 3 x 3 spent more on the calls than on
// the values. The same bits either way.
void finishRows(float* y, int64_t rows, int64_t n, int64_t ld, const float* bias, const float* addend,
                const FusedActivation* activation);

} // namespace qs
