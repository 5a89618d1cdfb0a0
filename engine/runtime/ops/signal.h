#pragma once
// Kernels of the signal family (ops/signal.cpp): window functions.

#include "runtime/op_registry.h"

namespace qs::ops {

void hannWindow(KernelContext& ctx);
void hammingWindow(KernelContext& ctx);
void blackmanWindow(KernelContext& ctx);

} // namespace qs::ops
