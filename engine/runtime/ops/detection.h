#pragma once
// Kernels of detection heads (ops/detection.cpp).

#include "runtime/op_registry.h"

namespace qs::ops {

void nonMaxSuppression(KernelContext& ctx);

} // namespace qs::ops
