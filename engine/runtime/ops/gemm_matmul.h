#pragma once
// Matrix products: Gemm (transposes, alpha, beta, broadcast C) and MatMul
// (NumPy semantics: N-D batches with broadcasting, 1-D operands).

#include "runtime/op_registry.h"

namespace qs::ops {

void gemm(KernelContext& ctx);
void matMul(KernelContext& ctx);

} // namespace qs::ops
