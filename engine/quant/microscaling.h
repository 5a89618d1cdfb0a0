#pragma once
// Block scales of the microscaling types, computed from the data.
//
// mxfp8 / mxfp4 (OCP Microscaling Formats v1.0, section 6.3): per block of 32,
//   shared exponent X = floor(log2(block absmax)) − emax_elem, emax_elem = 8 for e4m3,
//   2 for e2m1, clamped to E8M0's range [−127, 127]; the block scale is 2^X.
//   Elements whose magnitude exceeds the element format's max after scaling are
//   clamped to it (the kernels' saturating cast).
//   An all-zero block gets X = −127 (E8M0 code 0, the smallest scale): any scale
//   represents zeros exactly, and the smallest one is what the formula tends to
//   as the block absmax goes to 0.
// nvfp4 (NVIDIA's two-level scaling): a per-tensor fp32 global scale
//   G = tensor absmax / (448 · 6), or 1 for an all-zero tensor, raised to FLT_MIN
//   when smaller; per block of 16, the e4m3 block scale b = e4m3(block absmax / 6 / G)
//   (round to nearest even, saturating at 448). A block whose b rounds to zero
//   (all-zero or tiny next to the tensor's absmax) gets e4m3's smallest
//   subnormal 2^−9, so every scale stays non-zero.
// QuantParams::scales holds the decoded block scale in tensor units: 2^X for MX,
// b · G for nvfp4 (globalScale = G).

#include <cstdint>
#include <string_view>

#include "core/tensor.h"
#include "quant/scale.h"

namespace qs {

// Scales of a microscaling type for `input` (float32, float16 or bfloat16), in
// blocks of qtypeInfo(t).blockSize along `axis` (default the last; the last
// block may be shorter). Throws Error naming the tensor and the block index when
// a block holds a NaN or Inf, and for a non-microscaling type.
QuantParams microscalingParams(const Tensor& input, QType t, int axis = -1, std::string_view tensorName = "input");

// The OCP MX shared exponent of a block with this absmax (> 0, finite), clamped to [−127, 127].
int mxSharedExponent(float blockAbsMax, QType t);

} // namespace qs
