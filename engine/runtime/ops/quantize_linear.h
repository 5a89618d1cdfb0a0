#pragma once
// QuantizeLinear / DequantizeLinear (per-tensor, per-axis, blocked with
// block_size; int8, uint8, int16, uint16, int32) and DynamicQuantizeLinear
// (uint8 with a per-tensor scale and zero point computed from the data).
// DequantizeLinear also reads int4/uint4 and float8 x: the ONNX loader widens
// them to int8/uint8 and to float32 (io/onnx_tensor.h), so a float32 x is
// taken as float8 values (y = x · scale, a zero point must be 0).

#include <functional>

#include "runtime/op_registry.h"

namespace qs::ops {

void quantizeLinear(KernelContext& ctx);
void dequantizeLinear(KernelContext& ctx);
void dynamicQuantizeLinear(KernelContext& ctx);

// Requantizes exact int32 accumulators (of QLinearMatMul, QLinearConv) to the
// type of `zeroPoint` (uint8 when absent; int8 or uint8):
// saturate(roundHalfEven(acc * multiplier(e)) + zero point), where
// multiplier(e) is element e's input scale product over the output scale.
Tensor requantize(const KernelContext& ctx, const Tensor& accumulators, const std::function<float(int64_t)>& multiplier,
                  const Tensor* zeroPoint);

} // namespace qs::ops
