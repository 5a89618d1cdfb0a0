#pragma once
// Pooling: MaxPool (with its Indices output), AveragePool, LpPool and their
// global forms, over [N, C, spatial...] inputs.

#include "runtime/op_registry.h"

namespace qs::ops {

void maxPool(KernelContext& ctx);
void averagePool(KernelContext& ctx);
void lpPool(KernelContext& ctx);
void globalAveragePool(KernelContext& ctx);
void globalMaxPool(KernelContext& ctx);
void globalLpPool(KernelContext& ctx);

} // namespace qs::ops
