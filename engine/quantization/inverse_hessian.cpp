#include "quantization/inverse_hessian.h"

#include <Eigen/Cholesky>

#include "gemm/gram.h"

namespace qs {

std::optional<Eigen::MatrixXd> choleskyOfInverse(const Eigen::MatrixXd& h)
{
    const Eigen::Index n = h.rows();
    Eigen::MatrixXd m = Eigen::MatrixXd::Zero(n, n); // J·H·J, factored in place into L, then inverted in place into L⁻¹
    for (Eigen::Index j = 0; j < n; ++j)
        for (Eigen::Index i = j; i < n; ++i)
            m(i, j) = h(n - 1 - i, n - 1 - j);
    {
        const Eigen::LLT<Eigen::Ref<Eigen::MatrixXd>, Eigen::Lower> llt(m);
        if (llt.info() != Eigen::Success)
            return std::nullopt;
    }
    gemm::invertLowerTriangular(gemm::simdLevel(), m.data(), n, n);
    // M(i, j) = (J·L⁻ᵀ·J)(i, j) = L⁻¹(n − 1 − j, n − 1 − i).
    Eigen::MatrixXd factor = Eigen::MatrixXd::Zero(n, n);
    for (Eigen::Index j = 0; j < n; ++j)
        for (Eigen::Index i = j; i < n; ++i)
            factor(i, j) = m(n - 1 - j, n - 1 - i);
    return factor;
}

} // namespace qs
