#include "runtime/ops/conv_integer.h"

#include <Eigen/Core>
#include <string>
#include <tbb/parallel_for.h>
#include <vector>

#include "runtime/ops/conv_plan.h"
#include "runtime/ops/im2col.h"
#include "runtime/ops/quantize_linear.h"

namespace qs::ops {

namespace {

// An 8-bit tensor minus its zero point as int32; the zero point is a scalar or
// holds one value per each of `slices` equal leading slices (W's output channels).
std::vector<int32_t> centredCodes(const KernelContext& ctx, const Tensor& t, const Tensor* zp, int64_t slices,
                                  const char* name)
{
    if (t.dtype() != DType::U8 && t.dtype() != DType::I8)
        ctx.fail(std::string(name) + " must be int8 or uint8, not " + std::string(dtypeName(t.dtype())));
    if (zp && (zp->dtype() != t.dtype() || (zp->numel() != 1 && zp->numel() != slices)))
        ctx.fail(std::string(name) + "'s zero point " + shapeToString(zp->shape()) + " must be a scalar or hold " +
                 std::to_string(slices) + " values of " + std::string(dtypeName(t.dtype())));
    auto read = [](const Tensor& v, size_t i) {
        return v.dtype() == DType::U8 ? int32_t(v.values<uint8_t>()[i]) : int32_t(v.values<int8_t>()[i]);
    };
    const int64_t sliceSize = slices > 0 ? t.numel() / slices : 1;
    std::vector<int32_t> out(size_t(t.numel()));
    for (size_t i = 0; i < out.size(); ++i)
        out[i] = read(t, i) - (zp ? read(*zp, zp->numel() == 1 ? 0 : size_t(int64_t(i) / sliceSize)) : 0);
    return out;
}

// (x - x_zero_point) convolved with (w - w_zero_point), exactly in int32.
Tensor integerConv(const KernelContext& ctx, size_t xi, size_t xZero, size_t wi, size_t wZero, ConvPlan& plan)
{
    const Tensor& X = ctx.input(xi);
    const Tensor& Wt = ctx.input(wi);
    plan = planConv(ctx, X, Wt);
    // Zero points are subtracted first, so padding contributes zero as the op defines.
    const std::vector<int32_t> x = centredCodes(ctx, X, ctx.optionalInput(xZero), 1, "x");
    const std::vector<int32_t> w = centredCodes(ctx, Wt, ctx.optionalInput(wZero), plan.M, "w");
    Tensor Y(DType::I32, plan.outputShape);
    int32_t* y = Y.mutableValues<int32_t>().data();
    const int64_t inSpatial = shapeElementCount(plan.g.input), P = shapeElementCount(plan.g.output);
    const int64_t K = plan.Cg * shapeElementCount(plan.kernel);
    using IntMatrix = Eigen::Matrix<int32_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    tbb::parallel_for(int64_t(0), plan.N * plan.group, [&](int64_t ng) {
        ctx.checkCancelled();
        const int64_t n = ng / plan.group, gi = ng % plan.group;
        std::vector<int32_t> col(size_t(K * P));
        const int32_t* xg = x.data() + (n * plan.C + gi * plan.Cg) * inSpatial;
        if (plan.kernel.size() == 2)
            im2col2d(xg, plan.Cg, plan.g, 0, P, RowMajorColumns<int32_t>{col.data(), P});
        else
            im2col(xg, plan.Cg, plan.g, 0, P, col.data());
        Eigen::Map<IntMatrix>(y + (n * plan.M + gi * plan.Mg) * P, plan.Mg, P).noalias() =
            Eigen::Map<const IntMatrix>(w.data() + gi * plan.Mg * K, plan.Mg, K) *
            Eigen::Map<const IntMatrix>(col.data(), K, P);
    });
    return Y;
}

} // namespace

void convInteger(KernelContext& ctx)
{
    ConvPlan plan;
    ctx.setOutput(0, integerConv(ctx, 0, 2, 1, 3, plan));
}

void qLinearConv(KernelContext& ctx)
{
    ConvPlan plan;
    Tensor acc = integerConv(ctx, 0, 2, 3, 5, plan);
    auto scale = [&](size_t i, int64_t count, const char* name) {
        const Tensor& t = ctx.input(i);
        if (t.dtype() != DType::F32 || (t.numel() != 1 && t.numel() != count))
            ctx.fail(std::string(name) + " " + shapeToString(t.shape()) + " must be float32 with 1 or " +
                     std::to_string(count) + " values");
        return t.values<float>();
    };
    const auto xScale = scale(1, 1, "x_scale");
    const auto wScale = scale(4, plan.M, "w_scale");
    const auto yScale = scale(6, 1, "y_scale");
    const int64_t P = shapeElementCount(plan.g.output);
    if (const Tensor* B = ctx.optionalInput(8)) {
        // The bias is already in the accumulator's units (x_scale * w_scale).
        if (B->dtype() != DType::I32 || B->numel() != plan.M)
            ctx.fail("B must be int32 with " + std::to_string(plan.M) + " values");
        auto a = acc.mutableValues<int32_t>();
        for (size_t e = 0; e < a.size(); ++e)
            a[e] += B->values<int32_t>()[size_t((int64_t(e) / P) % plan.M)];
    }
    auto multiplier = [&](int64_t e) {
        const int64_t m = (e / P) % plan.M;
        return xScale[0] * wScale[wScale.size() == 1 ? 0 : size_t(m)] / yScale[0];
    };
    ctx.setOutput(0, requantize(ctx, acc, multiplier, ctx.optionalInput(7)));
}

} // namespace qs::ops
