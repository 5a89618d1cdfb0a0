#pragma once
// Einsum (ops/einsum.cpp).

#include "runtime/op_registry.h"

namespace qs::ops {

void einsum(KernelContext& ctx);

} // namespace qs::ops
