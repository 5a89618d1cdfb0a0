#pragma once
// Softmax, LogSoftmax and Hardmax: before opset 13 over the input flattened to
// [prod(shape[:axis]), prod(shape[axis:])] (axis default 1); from opset 13
// along the one axis (default -1).

#include "runtime/op_registry.h"

namespace qs::ops {

void softmax(KernelContext& ctx);
void logSoftmax(KernelContext& ctx);
void hardmax(KernelContext& ctx);

} // namespace qs::ops
