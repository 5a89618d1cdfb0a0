#include "runtime/ops/activation.h"

#include "runtime/ops/sgemm.h"

namespace qs {

namespace {

// One loop per activation, so that each vectorizes on its own. Without a
// bias nothing is added: x + 0.0f would turn -0.0f into +0.0f.
template <bool AddBias, class F> [[gnu::always_inline]] inline void map(float* x, int64_t n, float bias, F f)
{
    for (int64_t i = 0; i < n; ++i)
        x[i] = f(AddBias ? x[i] + bias : x[i]);
}

template <bool AddBias>
[[gnu::always_inline]] inline void applyActivationBody(const FusedActivation& act, float* x, int64_t n, float bias)
{
    const float p = act.a, q = act.b;
    using Kind = FusedActivation::Kind;
    switch (act.kind) {
    case Kind::Relu:
        map<AddBias>(x, n, bias, [](float v) { return ops::reluOf(v); });
        break;
    case Kind::LeakyRelu:
        map<AddBias>(x, n, bias, [p](float v) { return ops::leakyReluOf(v, p); });
        break;
    case Kind::Clip:
        map<AddBias>(x, n, bias, [p, q](float v) { return ops::clipOf(v, p, q); });
        break;
    case Kind::HardSigmoid:
        map<AddBias>(x, n, bias, [p, q](float v) { return ops::hardSigmoidOf(v, p, q); });
        break;
    case Kind::HardSwish:
        map<AddBias>(x, n, bias, [](float v) { return ops::hardSwishOf(v); });
        break;
    }
}

// Also compiled for AVX2 and AVX-512 (chosen by simdLevel()), without fusing
// multiply-adds: every operation rounds as in the standalone kernels, so the
// bits stay those of the unfused run.
#if defined(__x86_64__) && defined(__GNUC__)
template <bool AddBias>
[[gnu::target("avx512f"), gnu::optimize("fp-contract=off")]] void applyActivationAvx512(const FusedActivation& act,
                                                                                        float* x, int64_t n, float bias)
{
    applyActivationBody<AddBias>(act, x, n, bias);
}
template <bool AddBias>
[[gnu::target("avx2"), gnu::optimize("fp-contract=off")]] void applyActivationAvx2(const FusedActivation& act, float* x,
                                                                                   int64_t n, float bias)
{
    applyActivationBody<AddBias>(act, x, n, bias);
}
#endif

template <bool AddBias> void applyActivation(const FusedActivation& act, float* x, int64_t n, float bias)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (ops::simdLevel() == ops::SimdLevel::Avx512)
        return applyActivationAvx512<AddBias>(act, x, n, bias);
    if (ops::simdLevel() == ops::SimdLevel::Avx2)
        return applyActivationAvx2<AddBias>(act, x, n, bias);
#endif
    applyActivationBody<AddBias>(act, x, n, bias);
}

} // namespace

void FusedActivation::apply(float* x, int64_t n) const
{
    applyActivation<false>(*this, x, n, 0.0f);
}

void FusedActivation::apply(float* x, int64_t n, float bias) const
{
    applyActivation<true>(*this, x, n, bias);
}

} // namespace qs
