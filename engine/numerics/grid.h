#pragma once
// Rounding a value that is already expressed in code units (x / scale, plus the
// zero point for integers) onto a type's grid. These are the scalar reference
// definitions every fast kernel must reproduce bit for bit.

#include <cstdint>

#include "numerics/qtype.h"

namespace qs {

// The grid value nearest to v, saturating at the grid's ends:
//   Integer/Ternary: clamp(round_half_even(v), qmin, qmax)
//   Binary: v >= 0 ? +1 : −1 (zero goes to +1)
//   Float: the value of the format's nearest code (RNE, saturating)
//   Codebook (nf4): the nearest codebook value
//   Microscaling: the element format's value (the block scale is applied by the caller)
// `grid` is used by integer-like types only.
// NaN: returns NaN for every kind, integers included (callers reject NaN
// before rounding; NaN is what makes a slipped-through NaN visible).
float nearestGridValue(QType t, IntegerGrid grid, float v);

// Stochastic rounding between the two grid neighbours lo <= v <= hi: returns hi
// with probability (v − lo) / (hi − lo), using the uniform draw u in [0, 1):
// exactly when u < (v − lo) / (hi − lo) computed in float. Neighbours are
// adjacent integers, ±1 for binary, adjacent codes of a float format (a value
// between −min_subnormal and −0 keeps the negative zero as its upper
// neighbour), adjacent nf4 entries. Saturates like nearestGridValue. Exactly
// representable values are returned unchanged. NaN returns NaN.
float stochasticGridValue(QType t, IntegerGrid grid, float v, float u);

// The code stored for grid value g (as returned above): integers their value,
// binary 0 for −1 and 1 for +1, ternary the value, float formats their bit
// pattern, nf4 its index. Bits above qtypeInfo(t).bits are zero for unsigned
// codes; signed integer codes are two's complement within `bits` (int4 −1 is
// 0xf; ternary −1 is 0x3). Microscaling types give their element's code.
// NaN: integer-like types give code 0, float formats their NaN (e2m1 +0), nf4 the zero index 7.
uint32_t codeOfGridValue(QType t, float g);
// Inverse of codeOfGridValue. Bits above `bits` are ignored. The one code that
// names no value, ternary 0x2, throws qs::Error.
float gridValueOfCode(QType t, uint32_t code);

} // namespace qs
