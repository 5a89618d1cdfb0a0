#pragma once
// K-means palettization (lut1 … lut8), as coremltools' palettizer does it: each
// group of a tensor (the whole tensor, a channel or a tile: the same BlockLayout
// as the integer types) gets a table of 2^bits float32 entries, and every
// element is replaced by its nearest entry.
//
// The table of one group (m values, k = 2^bits entries), deterministic:
//   - d distinct values, d <= k: the table is those values, ascending, padded
//     with copies of the largest (no error at all).
//   - otherwise Lloyd's algorithm in one dimension. Initialisation: K entries
//     evenly spaced over the group's [min, max], entry j = min + (max − min)·j / (K − 1)
//     in double, rounded to float32 (no random draws); when that is not strictly
//     increasing in float32 (a range of a few ulps), quantiles of the distinct
//     values instead, entry j = u[floor((j + 0.5) · d / K)] for the d distinct
//     values u ascending.
//     Assignment: nearestLutEntry below. Update: each entry becomes the mean of
//     its members, summed in double in ascending order, rounded to float32; an
//     entry no value chose (an empty cluster) keeps its value, which keeps the
//     table strictly increasing (in one dimension every other cluster's mean
//     stays on its side of it). Stops when an update changes no value's entry
//     (an exact fixed point: the tolerance is zero) or after kLutMaxIterations
//     updates.
// The simulated value of an element is table[code] with code = nearestLutEntry:
// the number of midpoints (t[j] + t[j+1]) / 2, computed exactly in double, that
// lie strictly below the value. So a value exactly between two entries takes the
// lower one, and quantize, fakeQuantize and the k-means' last assignment agree
// bit for bit.

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/block_layout.h"
#include "core/cancellation.h"
#include "core/tensor.h"
#include "quant/scale.h"

namespace qs {

inline constexpr int kLutMaxIterations = 100;

// The table of one group's values (any order; finite), 2^bits entries ascending.
// `iterations`, when given, receives the number of Lloyd updates run.
std::vector<float> kmeansLut(std::span<const float> values, int bits, int* iterations = nullptr);

// The index of the entry of `table` (ascending) nearest to x (see the header comment).
int nearestLutEntry(std::span<const float> table, float x);

// Params of `x` (float32/float16/bfloat16) for lut type `t` over `layout`:
// QuantParams::lut holds the tables, groups in parallel (oneTBB), `cancel`
// checked between groups. Throws Error naming the tensor and the first flat
// index of a NaN or Inf.
QuantParams lutParams(const Tensor& x, QType t, const BlockLayout& layout, std::string_view tensorName,
                      const CancellationToken& cancel = {});

// Throws Error naming the tensor unless `params` are lut params of a tensor of
// `shape`: the layout's shape, one table of 2^bits finite ascending entries per group.
void checkLutParams(const QuantParams& params, const Shape& shape, std::string_view tensorName);

// table[code] for every element, into `out` (input.numel() floats).
void lutFakeQuantizeInto(const Tensor& input, const QuantParams& params, std::span<float> out,
                         std::string_view tensorName);
// One uint8 code per element (the entry index), the input's shape.
Tensor lutQuantize(const Tensor& input, const QuantParams& params, std::string_view tensorName);
// table[code] as float32; a code beyond the table is an Error.
Tensor lutDequantize(const Tensor& codes, const QuantParams& params);

} // namespace qs
