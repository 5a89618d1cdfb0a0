#pragma once
// QuantizeLinear / DequantizeLinear (per-tensor, per-axis, blocked with
// block_size; int8, uint8, int16, uint16, int32) and DynamicQuantizeLinear
// (uint8 with a per-tensor scale and zero point computed from the data).

#include "runtime/op_registry.h"

namespace qs::ops {

void quantizeLinear(KernelContext& ctx);
void dequantizeLinear(KernelContext& ctx);
void dynamicQuantizeLinear(KernelContext& ctx);

} // namespace qs::ops
