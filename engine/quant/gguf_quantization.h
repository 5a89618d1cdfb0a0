#pragma once
// Whole tensors in GGUF's block formats (numerics/gguf_blocks.h): rows are the
// tensor's last axis, as ggml's rows are its innermost dimension. A weight
// whose contraction axis is not last is transposed first by the caller (the
// weight quantizer does, as for microscaling types), so blocks always run
// along the layer's input features.
//
// The fake-quantized tensor is exactly decode(encode(x)): what llama.cpp
// reads back from the file. kernels.h's fakeQuantize dispatches here for a
// GgufBlock qtype; quantize/dequantize (one code per element) refuse them.

#include <span>
#include <string_view>

#include "core/tensor.h"
#include "quant/scale.h"

namespace qs {

// The QuantParams of a GGUF type for `input` (float32, float16 or bfloat16,
// rank >= 1): groups are the (super-)blocks along the last axis; scales[g] is
// an informative step for views and reports, the block's absmax over the type's
// largest code magnitude (kDegenerateScale for an all-zero block), not what the
// encoder stores. Cheap: nothing is encoded.
// Throws Error naming the tensor when the last axis is not a multiple of the
// block size, or an element is NaN or infinite.
QuantParams ggufBlockParams(const Tensor& input, QType t, std::string_view tensorName = "input");

// decode(encode(x)) into out (input.numel() floats), rows in parallel.
// Throws as ggufBlockParams.
void ggufFakeQuantizeInto(const Tensor& input, QType t, std::span<float> out, std::string_view tensorName = "input");

// The block bytes of every row: uint8 [rows, ggufRowBytes(t, last axis)],
// rows in row-major order of the leading axes (what a GGUF file stores).
Tensor ggufEncode(const Tensor& input, QType t, std::string_view tensorName = "input");
// Back to float32 of `shape` from ggufEncode's bytes.
Tensor ggufDecode(const Tensor& bytes, QType t, const Shape& shape);

} // namespace qs
