#pragma once
// Kernels of the resize family (ops/resize.cpp): Resize and the older Upsample.

#include "runtime/op_registry.h"

namespace qs::ops {

void resize(KernelContext& ctx);
void upsample(KernelContext& ctx);

} // namespace qs::ops
