#pragma once
// The scalar reference of quantization: one element at a time, the group found
// with BlockLayout::groupOf and the value rounded with numerics/grid.h. Obviously
// correct and slow; the kernels in quant/kernels.h must equal it bit for bit.
//
// Per element x of group g (scale s, zero point z, 0 when symmetric):
//   v = x / s + z      (a true float division, then a float addition; integer types only add z)
//   q = nearestGridValue(v)  or  stochasticGridValue(v, stochasticUniform(seed, flat index))
//   fake-quant value = (q − z) · s     (q − z is exact in float)
// Binary, ternary, float, nf4 and microscaling elements use the same formula with z = 0.

#include <cstdint>

#include "core/tensor.h"
#include "numerics/rounding.h"
#include "quant/scale.h"

namespace qs {

// The quantization of one group: what the per-element formula needs. Callers
// that have no QuantParams (an MSE search over candidate scales) fill it
// directly: grid = integerGrid(t, narrowRange) for integer-like types, {0, 0}
// otherwise; zeroPoint 0 when symmetric.
struct GroupQuant {
    QType qtype = QType::Int8;
    IntegerGrid grid{-128, 127}; // integer-like types only
    float scale = 1.0f;
    int32_t zeroPoint = 0;
};

// The group quantization of group `group` of `params`.
GroupQuant groupQuant(const QuantParams& params, int64_t group);

// The grid value (code units) of x: Nearest ignores u; Stochastic uses u in [0, 1).
float referenceGridValue(const GroupQuant& gq, float x, Rounding rounding, float u);
// The fake-quantized value of x with round-to-nearest. What MSE calibration calls per value.
float referenceFakeQuantizeValue(const GroupQuant& gq, float x);

// Whole tensors (input float32, float16 or bfloat16), element by element.
// Same contracts as fakeQuantize / quantize / dequantize in quant/kernels.h.
Tensor referenceFakeQuantize(const Tensor& input, const QuantParams& params, Rounding rounding, uint64_t seed);
Tensor referenceQuantize(const Tensor& input, const QuantParams& params, Rounding rounding, uint64_t seed);
Tensor referenceDequantize(const Tensor& codes, const QuantParams& params);

} // namespace qs
