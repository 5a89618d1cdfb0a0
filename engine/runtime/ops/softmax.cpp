#include "runtime/ops/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "runtime/broadcast.h"

namespace qs::ops {

namespace {

enum class Normalizer { Softmax, LogSoftmax, Hardmax };

// One row of `n` values `stride` apart.
void normalizeRow(const float* x, float* y, int64_t n, int64_t stride, Normalizer kind)
{
    float maxValue = -std::numeric_limits<float>::infinity();
    int64_t argMax = 0;
    for (int64_t i = 0; i < n; ++i)
        if (x[i * stride] > maxValue) {
            maxValue = x[i * stride];
            argMax = i;
        }
    if (kind == Normalizer::Hardmax) {
        for (int64_t i = 0; i < n; ++i)
            y[i * stride] = i == argMax ? 1.0f : 0.0f;
        return;
    }
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        const float e = std::exp(x[i * stride] - maxValue);
        sum += e;
        if (kind == Normalizer::Softmax)
            y[i * stride] = e;
    }
    if (kind == Normalizer::Softmax) {
        const float inverse = float(1.0 / sum);
        for (int64_t i = 0; i < n; ++i)
            y[i * stride] *= inverse;
    } else {
        const float logSum = float(std::log(sum));
        for (int64_t i = 0; i < n; ++i)
            y[i * stride] = x[i * stride] - maxValue - logSum;
    }
}

void runNormalizer(KernelContext& ctx, Normalizer kind)
{
    const Tensor& X = ctx.input(0);
    if (X.dtype() != DType::F32)
        ctx.fail("input must be float32, not " + std::string(dtypeName(X.dtype())));
    const int rank = X.rank();
    const bool flattening = ctx.opset() < 13;
    int64_t axis = ctx.intAttribute("axis", flattening ? 1 : -1);
    if (axis < -rank || axis >= std::max(rank, 1))
        ctx.fail("axis " + std::to_string(axis) + " is out of range for shape " + shapeToString(X.shape()));
    if (axis < 0)
        axis += rank;
    int64_t outer = 1, n = 1, inner = 1;
    for (int d = 0; d < rank; ++d) {
        const int64_t size = X.dim(d);
        if (d < axis)
            outer *= size;
        else if (d == axis || flattening)
            n *= size;
        else
            inner *= size;
    }
    Tensor Y(DType::F32, X.shape());
    const float* x = X.values<float>().data();
    float* y = Y.mutableValues<float>().data();
    auto rows = [&](int64_t begin, int64_t end) {
        for (int64_t row = begin; row < end; ++row) {
            const int64_t o = row / inner, i = row % inner;
            const int64_t base = o * n * inner + i;
            normalizeRow(x + base, y + base, n, inner, kind);
        }
    };
    // Waking a worker thread costs more than a small tensor's whole softmax.
    if (n > 0 && outer * inner * n < kParallelElementwiseThreshold)
        rows(0, outer * inner);
    else if (n > 0)
        tbb::parallel_for(tbb::blocked_range<int64_t>(
                              0, outer * inner, size_t(std::max<int64_t>(1, kParallelElementwiseThreshold / 4 / n))),
                          [&](const tbb::blocked_range<int64_t>& r) { rows(r.begin(), r.end()); });
    ctx.setOutput(0, std::move(Y));
}

} // namespace

void softmax(KernelContext& ctx)
{
    runNormalizer(ctx, Normalizer::Softmax);
}
void logSoftmax(KernelContext& ctx)
{
    runNormalizer(ctx, Normalizer::LogSoftmax);
}
void hardmax(KernelContext& ctx)
{
    runNormalizer(ctx, Normalizer::Hardmax);
}

} // namespace qs::ops
