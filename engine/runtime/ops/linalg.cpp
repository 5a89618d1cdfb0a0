// Det: determinants of the trailing [M, M] matrices by Eigen's partial-pivot
// LU, in double, returned in the input's element type.

#include "runtime/ops/linalg.h"

#include <Eigen/LU>

#include "runtime/tensor_cast.h"

namespace qs::ops {

void det(KernelContext& ctx)
{
    const Tensor& x = ctx.input(0);
    if (x.rank() < 2 || x.dim(x.rank() - 1) != x.dim(x.rank() - 2))
        ctx.fail("needs [..., M, M] square matrices, got " + shapeToString(x.shape()));
    const int64_t m = x.dim(x.rank() - 1);
    const Tensor values = castTensor(x, DType::F64);
    Shape outShape(x.shape().begin(), x.shape().end() - 2);
    Tensor out(DType::F64, outShape);
    double* dst = out.mutableValues<double>().data();
    using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    for (int64_t i = 0; i < out.numel(); ++i) {
        const Eigen::Map<const RowMajor> a(values.values<double>().data() + i * m * m, m, m);
        dst[i] = m == 0 ? 1.0 : a.partialPivLu().determinant();
    }
    ctx.setOutput(0, castTensor(out, x.dtype()));
}

} // namespace qs::ops
