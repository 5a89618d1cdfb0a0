#pragma once
// Kernels of linear algebra beyond products (ops/linalg.cpp).

#include "runtime/op_registry.h"

namespace qs::ops {

void det(KernelContext& ctx);

} // namespace qs::ops
