#include "runtime/ops/normalization.h"

#include <algorithm>
#include <cmath>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "runtime/broadcast.h"

namespace qs::ops {

namespace {

// A per-channel parameter: float32 with `count` values.
std::span<const float> channelParameter(const KernelContext& ctx, size_t i, int64_t count, const char* name)
{
    const Tensor& t = ctx.floatInput(i);
    if (t.numel() != count)
        ctx.fail(std::string(name) + " " + shapeToString(t.shape()) + " must hold " + std::to_string(count) +
                 " values");
    return t.values<float>();
}

// Mean and 1/sqrt(variance + epsilon) of n values.
std::pair<float, float> moments(const float* x, int64_t n, float epsilon)
{
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i)
        sum += x[i];
    const double mean = n > 0 ? sum / double(n) : 0.0;
    double squares = 0.0;
    for (int64_t i = 0; i < n; ++i)
        squares += (x[i] - mean) * (x[i] - mean);
    const double variance = n > 0 ? squares / double(n) : 0.0;
    return {float(mean), float(1.0 / std::sqrt(variance + double(epsilon)))};
}

} // namespace

void batchNormalization(KernelContext& ctx)
{
    const Tensor& X = ctx.floatInput(0);
    if (X.rank() < 2)
        ctx.fail("X " + shapeToString(X.shape()) + " must be [N, C, ...]");
    const int64_t N = X.dim(0), C = X.dim(1), spatial = X.numel() / std::max<int64_t>(1, N * C);
    const float epsilon = ctx.floatAttribute("epsilon", 1e-5f);
    const auto scale = channelParameter(ctx, 1, C, "scale");
    const auto bias = channelParameter(ctx, 2, C, "B");
    const auto inputMean = channelParameter(ctx, 3, C, "mean");
    const auto inputVar = channelParameter(ctx, 4, C, "var");
    const float* x = X.values<float>().data();
    // Training mode normalizes with the batch's own statistics (population variance)
    // and also returns the updated running statistics.
    const bool training = ctx.intAttribute("training_mode", 0) != 0;
    std::vector<float> mean(inputMean.begin(), inputMean.end()), var(inputVar.begin(), inputVar.end());
    if (training) {
        const float momentum = ctx.floatAttribute("momentum", 0.9f);
        Tensor runningMean(DType::F32, {C}), runningVar(DType::F32, {C});
        for (int64_t c = 0; c < C; ++c) {
            double sum = 0.0, squares = 0.0;
            for (int64_t n = 0; n < N; ++n)
                for (int64_t i = 0; i < spatial; ++i)
                    sum += x[(n * C + c) * spatial + i];
            const double m = N * spatial > 0 ? sum / double(N * spatial) : 0.0;
            for (int64_t n = 0; n < N; ++n)
                for (int64_t i = 0; i < spatial; ++i) {
                    const double d = x[(n * C + c) * spatial + i] - m;
                    squares += d * d;
                }
            mean[size_t(c)] = float(m);
            var[size_t(c)] = N * spatial > 0 ? float(squares / double(N * spatial)) : 0.0f;
            runningMean.mutableValues<float>()[size_t(c)] =
                inputMean[size_t(c)] * momentum + mean[size_t(c)] * (1.0f - momentum);
            runningVar.mutableValues<float>()[size_t(c)] =
                inputVar[size_t(c)] * momentum + var[size_t(c)] * (1.0f - momentum);
        }
        ctx.setOutput(1, std::move(runningMean));
        ctx.setOutput(2, std::move(runningVar));
    }
    Tensor Y = Tensor::uninitialized(DType::F32, X.shape()); // every element is written below
    float* y = Y.mutableValues<float>().data();
    tbb::parallel_for(int64_t(0), N * C, [&](int64_t nc) {
        const size_t c = size_t(nc % C);
        const float a = scale[c] / std::sqrt(var[c] + epsilon), b = bias[c] - mean[c] * a;
        for (int64_t i = nc * spatial; i < (nc + 1) * spatial; ++i)
            y[i] = x[i] * a + b;
    });
    ctx.setOutput(0, std::move(Y));
}

void layerNormalization(KernelContext& ctx)
{
    const Tensor& X = ctx.floatInput(0);
    const int rank = X.rank();
    int64_t axis = ctx.intAttribute("axis", -1);
    if (axis < -rank || axis >= rank)
        ctx.fail("axis " + std::to_string(axis) + " is out of range for shape " + shapeToString(X.shape()));
    if (axis < 0)
        axis += rank;
    const float epsilon = ctx.floatAttribute("epsilon", 1e-5f);
    int64_t outer = 1, n = 1;
    for (int d = 0; d < rank; ++d)
        (d < axis ? outer : n) *= X.dim(d);
    // Scale and B broadcast to X's trailing [axis:] shape.
    auto trailing = [&](const Tensor& t, const char* name) {
        if (t.dtype() != DType::F32 || t.rank() > rank - axis)
            ctx.fail(std::string(name) + " " + shapeToString(t.shape()) +
                     " does not broadcast to the normalized shape");
        const int off = rank - t.rank();
        for (int d = 0; d < t.rank(); ++d)
            if (t.dim(d) != 1 && t.dim(d) != X.dim(off + d))
                ctx.fail(std::string(name) + " " + shapeToString(t.shape()) +
                         " does not broadcast to the normalized shape");
        if (t.numel() == n || t.numel() == 1)
            return t.numel() == 1 ? Tensor(t.reshaped({1})) : t;
        // A partly broadcast parameter: expand once to n values.
        Tensor full(DType::F32, {n});
        auto dst = full.mutableValues<float>();
        const auto src = t.values<float>();
        for (int64_t i = 0; i < n; ++i) {
            int64_t rem = i, srcIndex = 0, stride = 1;
            for (int d = t.rank(); d-- > 0;) {
                const int64_t size = X.dim(off + d);
                const int64_t coord = rem % size;
                rem /= size;
                if (t.dim(d) != 1)
                    srcIndex += coord * stride;
                stride *= t.dim(d);
            }
            dst[size_t(i)] = src[size_t(srcIndex)];
        }
        return full;
    };
    const Tensor scale = trailing(ctx.input(1), "Scale");
    const Tensor* B = ctx.optionalInput(2);
    const Tensor bias = B ? trailing(*B, "B") : Tensor();
    Shape statShape = X.shape();
    for (int d = int(axis); d < rank; ++d)
        statShape[size_t(d)] = 1;
    // (Every row's outputs and statistics are written below.)
    Tensor Y = Tensor::uninitialized(DType::F32, X.shape()), Mean = Tensor::uninitialized(DType::F32, statShape),
           InvStd = Tensor::uninitialized(DType::F32, statShape);
    const float* x = X.values<float>().data();
    float* y = Y.mutableValues<float>().data();
    float* meanOut = Mean.mutableValues<float>().data();
    float* invStdOut = InvStd.mutableValues<float>().data();
    const float* s = scale.values<float>().data();
    const float* b = B ? bias.values<float>().data() : nullptr;
    const bool scalarScale = scale.numel() == 1, scalarBias = B && bias.numel() == 1;
    auto rows = [&](int64_t begin, int64_t end) {
        for (int64_t row = begin; row < end; ++row) {
            const float* xr = x + row * n;
            float* yr = y + row * n;
            const auto [mean, invStd] = moments(xr, n, epsilon);
            meanOut[row] = mean;
            invStdOut[row] = invStd;
            for (int64_t i = 0; i < n; ++i) {
                const float v = (xr[i] - mean) * invStd * s[scalarScale ? 0 : i];
                yr[i] = b ? v + b[scalarBias ? 0 : i] : v;
            }
        }
    };
    // Waking a worker thread costs more than normalizing a small tensor.
    if (outer * n < kParallelElementwiseThreshold)
        rows(0, outer);
    else
        tbb::parallel_for(
            tbb::blocked_range<int64_t>(
                0, outer, size_t(std::max<int64_t>(1, kParallelElementwiseThreshold / 4 / std::max<int64_t>(n, 1)))),
            [&](const tbb::blocked_range<int64_t>& r) { rows(r.begin(), r.end()); });
    ctx.setOutput(0, std::move(Y));
    if (ctx.wantsOutput(1))
        ctx.setOutput(1, std::move(Mean));
    if (ctx.wantsOutput(2))
        ctx.setOutput(2, std::move(InvStd));
}

void instanceNormalization(KernelContext& ctx)
{
    const Tensor& X = ctx.floatInput(0);
    if (X.rank() < 3)
        ctx.fail("X " + shapeToString(X.shape()) + " must be [N, C, spatial...]");
    const int64_t N = X.dim(0), C = X.dim(1), spatial = X.numel() / std::max<int64_t>(1, N * C);
    const float epsilon = ctx.floatAttribute("epsilon", 1e-5f);
    const auto scale = channelParameter(ctx, 1, C, "scale");
    const auto bias = channelParameter(ctx, 2, C, "B");
    Tensor Y = Tensor::uninitialized(DType::F32, X.shape()); // every element is written below
    const float* x = X.values<float>().data();
    float* y = Y.mutableValues<float>().data();
    tbb::parallel_for(int64_t(0), N * C, [&](int64_t nc) {
        const size_t c = size_t(nc % C);
        const auto [mean, invStd] = moments(x + nc * spatial, spatial, epsilon);
        for (int64_t i = nc * spatial; i < (nc + 1) * spatial; ++i)
            y[i] = (x[i] - mean) * invStd * scale[c] + bias[c];
    });
    ctx.setOutput(0, std::move(Y));
}

void groupNormalization(KernelContext& ctx)
{
    const Tensor& X = ctx.floatInput(0);
    if (X.rank() < 2)
        ctx.fail("X " + shapeToString(X.shape()) + " must be [N, C, ...]");
    const int64_t N = X.dim(0), C = X.dim(1), spatial = X.numel() / std::max<int64_t>(1, N * C);
    const int64_t groups = ctx.requiredIntAttribute("num_groups");
    if (groups < 1 || C % groups != 0)
        ctx.fail("num_groups " + std::to_string(groups) + " does not divide " + std::to_string(C) + " channels");
    const float epsilon = ctx.floatAttribute("epsilon", 1e-5f);
    // Opset 18 gives one scale and bias per group, opset 21 one per channel.
    const bool perChannel = ctx.opset() >= 21;
    const auto scale = channelParameter(ctx, 1, perChannel ? C : groups, "scale");
    const auto bias = channelParameter(ctx, 2, perChannel ? C : groups, "bias");
    const int64_t perGroup = C / groups, groupSize = perGroup * spatial;
    Tensor Y = Tensor::uninitialized(DType::F32, X.shape()); // every element is written below
    const float* x = X.values<float>().data();
    float* y = Y.mutableValues<float>().data();
    tbb::parallel_for(int64_t(0), N * groups, [&](int64_t ng) {
        const int64_t gi = ng % groups;
        const auto [mean, invStd] = moments(x + ng * groupSize, groupSize, epsilon);
        for (int64_t c = 0; c < perGroup; ++c) {
            const size_t p = size_t(perChannel ? gi * perGroup + c : gi);
            const int64_t begin = ng * groupSize + c * spatial;
            for (int64_t i = begin; i < begin + spatial; ++i)
                y[i] = (x[i] - mean) * invStd * scale[p] + bias[p];
        }
    });
    ctx.setOutput(0, std::move(Y));
}

void lrn(KernelContext& ctx)
{
    const Tensor& X = ctx.floatInput(0);
    if (X.rank() < 3)
        ctx.fail("X " + shapeToString(X.shape()) + " must be [N, C, spatial...]");
    const int64_t size = ctx.requiredIntAttribute("size");
    if (size < 1)
        ctx.fail("size must be positive");
    const float alpha = ctx.floatAttribute("alpha", 1e-4f), beta = ctx.floatAttribute("beta", 0.75f),
                bias = ctx.floatAttribute("bias", 1.0f);
    const int64_t N = X.dim(0), C = X.dim(1), spatial = X.numel() / std::max<int64_t>(1, N * C);
    // The window over channels: floor((size-1)/2) before, ceil((size-1)/2) after.
    const int64_t before = (size - 1) / 2, after = size - 1 - before;
    Tensor Y = Tensor::uninitialized(DType::F32, X.shape()); // every element is written below
    const float* x = X.values<float>().data();
    float* y = Y.mutableValues<float>().data();
    tbb::parallel_for(int64_t(0), N * C, [&](int64_t nc) {
        const int64_t n = nc / C, c = nc % C;
        const int64_t c0 = std::max<int64_t>(0, c - before), c1 = std::min<int64_t>(C - 1, c + after);
        for (int64_t i = 0; i < spatial; ++i) {
            double squares = 0.0;
            for (int64_t k = c0; k <= c1; ++k) {
                const double v = x[(n * C + k) * spatial + i];
                squares += v * v;
            }
            const double denom = std::pow(double(bias) + double(alpha) / double(size) * squares, double(beta));
            y[nc * spatial + i] = float(x[nc * spatial + i] / denom);
        }
    });
    ctx.setOutput(0, std::move(Y));
}

} // namespace qs::ops
