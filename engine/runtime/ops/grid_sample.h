#pragma once
// GridSample (ops/grid_sample.cpp).

#include "runtime/op_registry.h"

namespace qs::ops {

void gridSample(KernelContext& ctx);

} // namespace qs::ops
