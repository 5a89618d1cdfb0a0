#pragma once
// The integer convolutions ConvInteger and QLinearConv.

#include "runtime/op_registry.h"

namespace qs::ops {

// Conv of int8/uint8 codes minus their zero points (x: scalar; w: scalar or per
// output channel), accumulated exactly in int32.
void convInteger(KernelContext& ctx);
// ConvInteger of the codes plus the int32 bias, requantized to the output's
// scale and zero point (per-channel w_scale allowed).
void qLinearConv(KernelContext& ctx);

} // namespace qs::ops
