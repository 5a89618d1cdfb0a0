#include "runtime/ops/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "gemm/simd_level.h"
#include "runtime/broadcast.h"
#include "runtime/ops/activation.h"

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

// Softmax of `rows` contiguous rows of n values (the axis is the last one, as
// attention's scores are): e^(x - max) by activation.h's branch-free exponential,
// which vectorizes, the sum in double over eight running sums in a fixed order
// (the same bits for any split of the rows), then one float inverse per row.
// Multiply-adds are fused only where the code says so (the exponential's
// std::fma), so every instruction set gives the same bits.
[[gnu::always_inline]] inline void softmaxRowsBody(const float* x, float* y, int64_t n, int64_t rows)
{
    for (int64_t r = 0; r < rows; ++r, x += n, y += n) {
        float maxValue = -std::numeric_limits<float>::infinity();
        for (int64_t i = 0; i < n; ++i)
            maxValue = x[i] > maxValue ? x[i] : maxValue;
        for (int64_t i = 0; i < n; ++i)
            y[i] = expOfNonPositive(x[i] - maxValue);
        double sums[8] = {};
        int64_t i = 0;
        for (; i + 8 <= n; i += 8)
            for (int k = 0; k < 8; ++k)
                sums[k] += double(y[i + k]);
        for (int k = 0; i < n; ++i, ++k)
            sums[k] += double(y[i]);
        const double sum = ((sums[0] + sums[1]) + (sums[2] + sums[3])) + ((sums[4] + sums[5]) + (sums[6] + sums[7]));
        const float inverse = float(1.0 / sum);
        for (int64_t j = 0; j < n; ++j)
            y[j] *= inverse;
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
[[gnu::target("avx512f,fma"), gnu::optimize("fp-contract=off")]] void softmaxRowsAvx512(const float* x, float* y, int64_t n, int64_t rows)
{
    softmaxRowsBody(x, y, n, rows);
}
[[gnu::target("avx2,fma"), gnu::optimize("fp-contract=off")]] void softmaxRowsAvx2(const float* x, float* y, int64_t n, int64_t rows)
{
    softmaxRowsBody(x, y, n, rows);
}
#endif

void softmaxRows(const float* x, float* y, int64_t n, int64_t rows)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (gemm::simdLevel() == gemm::SimdLevel::Avx512)
        return softmaxRowsAvx512(x, y, n, rows);
    if (gemm::simdLevel() == gemm::SimdLevel::Avx2)
        return softmaxRowsAvx2(x, y, n, rows);
#endif
    softmaxRowsBody(x, y, n, rows);
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
    Tensor Y = Tensor::uninitialized(DType::F32, X.shape()); // every row is written below
    const float* x = X.values<float>().data();
    float* y = Y.mutableValues<float>().data();
    auto rows = [&](int64_t begin, int64_t end) {
        if (kind == Normalizer::Softmax && inner == 1) {
            softmaxRows(x + begin * n, y + begin * n, n, end - begin);
            return;
        }
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
