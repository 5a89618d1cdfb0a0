// Window functions: w[n] = sum_k (-1)^k a_k cos(2 pi k n / N), N = size for a
// periodic window and size - 1 for a symmetric one.

#include "runtime/ops/signal.h"

#include <cmath>
#include <numbers>

#include "runtime/tensor_cast.h"

namespace qs::ops {

namespace {

void window(KernelContext& ctx, double a0, double a1, double a2)
{
    const Tensor& sizeT = ctx.input(0);
    if (sizeT.numel() != 1)
        ctx.fail("size must be a scalar");
    const int64_t size = castTensor(sizeT, DType::I64).values<int64_t>()[0];
    if (size < 0)
        ctx.fail("size must not be negative");
    const bool periodic = ctx.intAttribute("periodic", 1) != 0;
    const std::optional<DType> type = dtypeOfOnnxElementType(ctx.intAttribute("output_datatype", 1));
    if (!type)
        ctx.fail("output_datatype is not a supported element type");
    const double n = double(periodic ? size : size - 1);
    Tensor w(DType::F64, {size});
    double* p = w.mutableValues<double>().data();
    for (int64_t i = 0; i < size; ++i) {
        const double x = n > 0 ? 2.0 * std::numbers::pi * double(i) / n : 0.0;
        p[i] = a0 - a1 * std::cos(x) + a2 * std::cos(2.0 * x);
    }
    ctx.setOutput(0, castTensor(w, *type));
}

} // namespace

void hannWindow(KernelContext& ctx)
{
    window(ctx, 0.5, 0.5, 0.0);
}
void hammingWindow(KernelContext& ctx)
{
    window(ctx, 25.0 / 46.0, 1.0 - 25.0 / 46.0, 0.0);
}
void blackmanWindow(KernelContext& ctx)
{
    window(ctx, 0.42, 0.5, 0.08);
}

} // namespace qs::ops
