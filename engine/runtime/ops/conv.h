#pragma once
// Conv: float convolution over any number of spatial axes, grouped and
// depthwise, with the activation and residual Add the interpreter folds into
// it. (ConvInteger and QLinearConv: conv_integer.h; ConvTranspose:
// conv_transpose.h; the window geometry pooling shares: window_geometry.h.)

#include "runtime/op_registry.h"

namespace qs::ops {

void conv(KernelContext& ctx);
// Conv's output shape from its inputs X and W (OpKernelEntry::placedOutputShape):
// the kernel writes into an OutputPlacement of that shape, when given one and
// no residual Add is folded into it.
Shape convOutputShape(const KernelContext& ctx);

} // namespace qs::ops
