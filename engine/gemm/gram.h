#pragma once
// Products of double matrices for the algorithms that read layers' input
// Hessians (quantization/input_hessian, GPTQ): the Gram matrix XᵀX of
// calibration rows, GPTQ's update of the columns still to be rounded, and the
// triangular inverse behind its Cholesky factor of H⁻¹.
//
// Eigen's double product runs on SSE2 in a build without -march=native, two
// lanes, no fused multiply-add; these run on micro-kernels chosen at run time
// (AVX-512: 16 × 12 sums in registers; AVX2 + FMA: 8 × 6; else 4 × 4 on SSE2).
// Depth blocks of kGramDepthBlock: per block, both operands' strips are packed
// k-major and every element's block sum, computed in k order from zero, is
// added to C. So every element sums the same products in the same order
// however a caller splits C into tiles or tasks: the results do not depend on
// the threads.

#include <cstdint>

#include "gemm/simd_level.h"

namespace qs::gemm {

inline constexpr int64_t kGramDepthBlock = 128;

// C(i, j) ±= Σ_k a[k·lda + i] · b[k·ldb + j] for i < m, j < n, k < depth (+=, or
// −= with `subtract`): C = A·Bᵀ for column-major A (m × depth) and B (n × depth).
// C is column-major with leading dimension ldc. With `lowerOnly` (A and B the
// same columns: a diagonal tile) the parts of C above its diagonal are skipped
// (elements just above it may still be added to). One thread.
void addProduct(SimdLevel level, int64_t depth, const double* a, int64_t lda, int64_t m, const double* b,
                int64_t ldb, int64_t n, double* c, int64_t ldc, bool subtract = false, bool lowerOnly = false);

// H(r0 + i, c0 + j) += Σ_k x[k·ld + r0 + i] · x[k·ld + c0 + j] for i < rn, j < cn,
// k < rows: a tile of XᵀX for X row-major with `ld` doubles per row, into H
// column-major (ldh; an Eigen::MatrixXd's data()). `lowerOnly` as above, for a
// diagonal tile (r0 = c0) of a lower triangle. One thread.
void addGramTile(SimdLevel level, const double* x, int64_t rows, int64_t ld, int64_t r0, int64_t rn, int64_t c0,
                 int64_t cn, double* h, int64_t ldh, bool lowerOnly);

// C ±= A·Bᵀ as addProduct, in blocks of C's longer side over oneTBB's threads
// (the same bits for any thread count).
void addProductParallel(SimdLevel level, int64_t depth, const double* a, int64_t lda, int64_t m, const double* b,
                        int64_t ldb, int64_t n, double* c, int64_t ldc, bool subtract = false);

// L ← L⁻¹ in place for a lower-triangular L (n × n, column-major, leading
// dimension ld, nonzero diagonal; the strict upper triangle is neither read
// nor written). Recursive halves, the off-diagonal blocks on the products
// above: about n³/3 multiply-adds.
void invertLowerTriangular(SimdLevel level, double* l, int64_t n, int64_t ld);

} // namespace qs::gemm
