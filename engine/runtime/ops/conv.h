#pragma once
// Conv: float convolution over any number of spatial axes, grouped and
// depthwise, with the activation and residual Add the interpreter folds into
// it. (ConvInteger and QLinearConv: conv_integer.h; ConvTranspose:
// conv_transpose.h; the window geometry pooling shares: window_geometry.h.)

#include "runtime/op_registry.h"

namespace qs::ops {

void conv(KernelContext& ctx);

} // namespace qs::ops
