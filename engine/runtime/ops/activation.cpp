#include "runtime/ops/activation.h"

#include "gemm/simd_level.h"

namespace qs {

namespace {

// One loop per activation, so that each vectorizes on its own. Without a
// bias or an addend nothing is added: x + 0.0f would turn -0.0f into +0.0f.
// Rows of n values: row r from from + r * s.fromLd into x + r * s.xLd, with
// bias[r * s.biasStep] and the addend's row at addend + r * s.xLd.
struct Span {
    int64_t rows, n, fromLd, xLd, biasStep;
};
template <bool AddBias, bool AddAddend, class F>
[[gnu::always_inline]] inline void mapRow(const float* from, float* x, int64_t n, float bias, const float* addend, F f)
{
    for (int64_t i = 0; i < n; ++i) {
        float v = AddBias ? from[i] + bias : from[i];
        if constexpr (AddAddend)
            v += addend[i];
        x[i] = f(v);
    }
}
template <bool AddBias, bool AddAddend, class F>
[[gnu::always_inline]] inline void map(const float* from, float* x, const Span& s, const float* bias,
                                       const float* addend, F f)
{
    for (int64_t r = 0; r < s.rows; ++r)
        mapRow<AddBias, AddAddend>(from + r * s.fromLd, x + r * s.xLd, s.n, AddBias ? bias[r * s.biasStep] : 0.0f,
                                   AddAddend ? addend + r * s.xLd : nullptr, f);
}

// (No activation: the identity.)
template <bool AddBias, bool AddAddend>
[[gnu::always_inline]] inline void applyActivationBody(const FusedActivation* act, const float* from, float* x,
                                                       const Span& s, const float* bias, const float* addend)
{
    if (!act) {
        map<AddBias, AddAddend>(from, x, s, bias, addend, [](float v) { return v; });
        return;
    }
    const float p = act->a, q = act->b;
    using Kind = FusedActivation::Kind;
    switch (act->kind) {
    case Kind::Relu:
        map<AddBias, AddAddend>(from, x, s, bias, addend, [](float v) { return ops::reluOf(v); });
        break;
    case Kind::LeakyRelu:
        map<AddBias, AddAddend>(from, x, s, bias, addend, [p](float v) { return ops::leakyReluOf(v, p); });
        break;
    case Kind::Clip:
        map<AddBias, AddAddend>(from, x, s, bias, addend, [p, q](float v) { return ops::clipOf(v, p, q); });
        break;
    case Kind::HardSigmoid:
        map<AddBias, AddAddend>(from, x, s, bias, addend, [p, q](float v) { return ops::hardSigmoidOf(v, p, q); });
        break;
    case Kind::HardSwish:
        map<AddBias, AddAddend>(from, x, s, bias, addend, [](float v) { return ops::hardSwishOf(v); });
        break;
    case Kind::Sigmoid:
        map<AddBias, AddAddend>(from, x, s, bias, addend, [](float v) { return ops::sigmoidOf(v); });
        break;
    case Kind::Swish:
        map<AddBias, AddAddend>(from, x, s, bias, addend, [](float v) { return ops::swishOf(v); });
        break;
    }
}

// Also compiled for AVX2 and AVX-512 (chosen by simdLevel()), without fusing
// multiply-adds the code does not fuse itself (expOfNonPositive's std::fma):
// every operation rounds as in the standalone kernels, so the bits stay those
// of the unfused run. (Their targets include FMA so that std::fma is one
// instruction, the scalar remainders' too.)
#if defined(__x86_64__) && defined(__GNUC__)
template <bool AddBias, bool AddAddend>
[[gnu::target("avx512f,fma"), gnu::optimize("fp-contract=off")]] void
applyActivationAvx512(const FusedActivation* act, const float* from, float* x, const Span& s, const float* bias,
                      const float* addend)
{
    applyActivationBody<AddBias, AddAddend>(act, from, x, s, bias, addend);
}
template <bool AddBias, bool AddAddend>
[[gnu::target("avx2,fma"), gnu::optimize("fp-contract=off")]] void
applyActivationAvx2(const FusedActivation* act, const float* from, float* x, const Span& s, const float* bias, const float* addend)
{
    applyActivationBody<AddBias, AddAddend>(act, from, x, s, bias, addend);
}
#endif

template <bool AddBias, bool AddAddend>
void applyActivation(const FusedActivation* act, const float* from, float* x, const Span& s, const float* bias,
                     const float* addend)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (gemm::simdLevel() == gemm::SimdLevel::Avx512)
        return applyActivationAvx512<AddBias, AddAddend>(act, from, x, s, bias, addend);
    if (gemm::simdLevel() == gemm::SimdLevel::Avx2)
        return applyActivationAvx2<AddBias, AddAddend>(act, from, x, s, bias, addend);
#endif
    applyActivationBody<AddBias, AddAddend>(act, from, x, s, bias, addend);
}

// The bias, the addend and the activation on a span, as given (none: a copy
// where from is not x).
void finishSpan(const float* from, float* y, const Span& s, const float* bias, const float* addend,
                const FusedActivation* activation)
{
    if (bias && addend)
        applyActivation<true, true>(activation, from, y, s, bias, addend);
    else if (bias)
        applyActivation<true, false>(activation, from, y, s, bias, nullptr);
    else if (addend)
        applyActivation<false, true>(activation, from, y, s, nullptr, addend);
    else if (activation || from != y)
        applyActivation<false, false>(activation, from, y, s, nullptr, nullptr);
}

} // namespace

void FusedActivation::apply(float* x, int64_t n) const
{
    applyActivation<false, false>(this, x, x, Span{1, n, n, n, 0}, nullptr, nullptr);
}

void finishOutputs(const float* from, float* y, int64_t n, const float* bias, const float* addend,
                   const FusedActivation* activation)
{
    finishSpan(from, y, Span{1, n, n, n, 0}, bias, addend, activation);
}

void finishPlane(const float* from, int64_t fromLd, float* y, int64_t yLd, int64_t rows, int64_t n,
                 const float* bias, const float* addend, const FusedActivation* activation)
{
    finishSpan(from, y, Span{rows, n, fromLd, yLd, 0}, bias, addend, activation);
}

void finishRows(float* y, int64_t rows, int64_t n, int64_t ld, const float* bias, const float* addend,
                const FusedActivation* activation)
{
    if (ld != n) {
        finishSpan(y, y, Span{rows, n, ld, ld, 1}, bias, addend, activation);
        return;
    }
    // (y + bias rounds as finishOutputs' first step; what follows adds nothing else.)
    if (bias)
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t j = 0; j < n; ++j)
                y[r * n + j] += bias[r];
    finishOutputs(y, y, rows * n, nullptr, addend, activation);
}

} // namespace qs
