#pragma once
// GPTQ's factor of the inverse Hessian: the lower Cholesky factor of H⁻¹.
//
// With J the reversal of the order and J·H·J = L·Lᵀ (L lower), H⁻¹ = M·Mᵀ with
// M = J·L⁻ᵀ·J, which is lower with a positive diagonal: M is the factor. One
// Cholesky factorization and one triangular inverse (gemm/gram.h), about half
// the multiply-adds of inverting H and factoring the inverse, most of them on
// the vector kernels rather than Eigen's SSE2 ones.

#include <optional>

#include <Eigen/Core>

namespace qs {

// The lower Cholesky factor of h⁻¹ (strict upper triangle zero), or nothing
// when h (symmetric, its lower triangle read) is not positive definite.
std::optional<Eigen::MatrixXd> choleskyOfInverse(const Eigen::MatrixXd& h);

} // namespace qs
