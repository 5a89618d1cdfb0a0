#pragma once
// com.microsoft.MatMulNBits (ONNX Runtime's contrib op, opset 1): A [..., K]
// times a weight stored transposed and block-quantized, B [N, K] as uint8
// [N, ceil(K / block_size), block_size · bits / 8] with `bits` (2, 4 or 8)
// codes per byte, the lower k in the low bits; per-block float scales
// [N · blocks]; zero points packed the same way per row as uint8
// [N · ceil(blocks · bits / 8)] or float [N · blocks], else 2^(bits−1); an
// optional float bias [N] (input 5). The weight is dequantized as
// (q − zero point) · scale and multiplied in float: the accuracy_level
// attribute (ONNX Runtime's int8 activations at 4) is read and ignored, so
// the result is what MatMul of the dequantized weight computes. g_idx (input 4)
// is refused.

#include "runtime/op_registry.h"

namespace qs::ops {

void matMulNBits(KernelContext& ctx);

} // namespace qs::ops
