#pragma once
// ConvTranspose: the float transposed convolution (W^T X scattered into the
// output), with output_shape, output_padding and auto_pad as ONNX defines them.

#include "runtime/op_registry.h"

namespace qs::ops {

void convTranspose(KernelContext& ctx);

} // namespace qs::ops
