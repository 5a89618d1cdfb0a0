#include "runtime/ops/activation.h"

namespace qs {

namespace {

// One loop per activation, so that each vectorizes on its own. Without a
// bias nothing is added: x + 0.0f would turn -0.0f into +0.0f.
template <bool AddBias, class F> void map(float* x, int64_t n, float bias, F f)
{
    for (int64_t i = 0; i < n; ++i)
        x[i] = f(AddBias ? x[i] + bias : x[i]);
}

template <bool AddBias> void applyActivation(const FusedActivation& act, float* x, int64_t n, float bias)
{
    const float p = act.a, q = act.b;
    using Kind = FusedActivation::Kind;
    switch (act.kind) {
    case Kind::Relu: map<AddBias>(x, n, bias, [](float v) { return ops::reluOf(v); }); break;
    case Kind::LeakyRelu: map<AddBias>(x, n, bias, [p](float v) { return ops::leakyReluOf(v, p); }); break;
    case Kind::Clip: map<AddBias>(x, n, bias, [p, q](float v) { return ops::clipOf(v, p, q); }); break;
    case Kind::HardSigmoid: map<AddBias>(x, n, bias, [p, q](float v) { return ops::hardSigmoidOf(v, p, q); }); break;
    case Kind::HardSwish: map<AddBias>(x, n, bias, [](float v) { return ops::hardSwishOf(v); }); break;
    }
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
