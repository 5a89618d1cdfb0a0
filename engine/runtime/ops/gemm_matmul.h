#pragma once
// Matrix products: Gemm (transposes, alpha, beta, broadcast C) and MatMul
// (NumPy semantics: N-D batches with broadcasting, 1-D operands), MatMulInteger.

#include "runtime/op_registry.h"

namespace qs::ops {

void gemm(KernelContext& ctx);
void matMul(KernelContext& ctx);
// MatMul of int8/uint8 operands minus their zero points (scalar, per row of A,
// per column of B), accumulated exactly in int32.
void matMulInteger(KernelContext& ctx);
// MatMulInteger of the codes, then requantized to the output's scale and zero
// point (round half to even, saturating to int8/uint8).
void qLinearMatMul(KernelContext& ctx);

} // namespace qs::ops
