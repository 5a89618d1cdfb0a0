#pragma once
// Quantize, dequantize and fake-quantize whole tensors, fast: oneTBB over
// chunks of elements, the layout walked as runs sharing one scale
// (quant/layout_walk.h), vectorizable inner loops (quant/fast_grids.h).
// Results equal the scalar reference of quant/reference.h bit for bit, and do
// not depend on the thread count (stochastic draws are keyed by flat index).
//
// The formula, per element x of a group with scale s and zero point z:
//   v = x / s + z            a true division (not x · (1/s), which differs in the
//                            last ulp); integer-like types add z (0 when symmetric)
//   q = the grid value of v  nearest (round half to even, saturating) or stochastic
//   fake-quant = (q − z) · s    for integer-like types (never −0),
//                q · s          for float formats, nf4 and microscaling elements
//                               (the sign of zero is kept for float formats).
//
// Inputs: float32, float16 or bfloat16 (converted on the fly). A NaN or Inf
// element is an Error naming the tensor and the first such flat index.

#include <cstdint>
#include <span>
#include <string_view>

#include "core/tensor.h"
#include "numerics/rounding.h"
#include "quant/scale.h"

namespace qs {

// The storage dtype of one code per element: int8 → int8, uint8 → uint8,
// int16 → int16; every other type → uint8 holding numerics'
// codeOfGridValue (signed sub-byte integers in two's complement within their
// bits, float formats their bit pattern, nf4 its index, binary 0/1).
DType codeDType(QType t);

// Throws Error naming the tensor unless `params` describe a tensor of `shape`:
// the layout's shape, one finite positive scale per group, one zero point per
// group within the type's grid when asymmetric.
void checkQuantParams(const QuantParams& params, const Shape& shape, std::string_view tensorName);

// dequantize(quantize(x)) as float32, same shape as the input.
Tensor fakeQuantize(const Tensor& input, const QuantParams& params, Rounding rounding = Rounding::Nearest,
                    uint64_t seed = 0, std::string_view tensorName = "input");
// The same into a caller's buffer of input.numel() floats. It may be a float32
// input's own storage (element for element) when rounding to nearest on an
// element grid (not GGUF blocks or lut types); otherwise it may not alias the input.
void fakeQuantizeInto(const Tensor& input, const QuantParams& params, std::span<float> out,
                      Rounding rounding = Rounding::Nearest, uint64_t seed = 0, std::string_view tensorName = "input");

// One code per element, dtype codeDType(params.qtype), same shape as the input.
Tensor quantize(const Tensor& input, const QuantParams& params, Rounding rounding = Rounding::Nearest,
                uint64_t seed = 0, std::string_view tensorName = "input");
// Codes as float32 values, (q − z) · s. Codes wider than the type's bits use their low bits only.
Tensor dequantize(const Tensor& codes, const QuantParams& params);

// Packed codes: a 1-D uint8 tensor laid out by numerics/packing.h (1-, 2- and 4-bit
// codes share bytes; other widths up to 8 take one byte each; int16 is two bytes
// per element, little-endian).
Tensor quantizePacked(const Tensor& input, const QuantParams& params, Rounding rounding = Rounding::Nearest,
                      uint64_t seed = 0, std::string_view tensorName = "input");
Tensor dequantizePacked(const Tensor& packed, const QuantParams& params);

} // namespace qs
