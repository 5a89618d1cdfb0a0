#pragma once
// Quantizing one tensor the way a rule would, end to end: a qtype, a
// calibration method string, a granularity and scale options give the groups'
// calibrated ranges (calib) and from them the QuantParams (quant); the
// microscaling types compute their own block scales from the data instead, the
// lut types a k-means table per group (quant/palettization.h), and
// the GGUF block formats are encoded as llama.cpp's reference quantizers do
// (blocks along the last axis; granularity, axis, tile size, symmetry and the
// scale options do not apply to them).
// What `quantscope-cli fake-quant` and `compare-methods` run on an .npy.
// Granularity and tile size mean what a rule's `granularity` and `tile_size` mean.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "calib/method.h"
#include "core/cancellation.h"
#include "core/tensor.h"
#include "quant/scale.h"
#include "rules/rule.h"

namespace qs {

struct QuantizationSpec {
    QType qtype = QType::Int8;                         // the quantized type
    CalibrationMethod method;                          // how each group's range is found (default absmax)
    Granularity granularity = Granularity::PerChannel; // per_tensor or per_channel, as in a rule
    int axis = 0;                                      // the channel axis (negative counts from the end)
    std::optional<double> tileSize;                    // per_channel only: also split the last axis into
                                                       // tiles of this many elements (a rule's tile_size;
                                                       // a value in (0, 1) means 1/tile_count)
    std::optional<bool> symmetric;                     // overrides the method's symmetry when it allows
    ScaleOptions options;                              // narrow range, scale restriction

    // Whether two specs quantize a tensor the same way: every field equal, so
    // a field added later takes part without anyone remembering to add it.
    bool operator==(const QuantizationSpec&) const = default;
};

// The groups of a tensor of `shape` under the spec's granularity (not for
// microscaling types: their blocks are fixed by the type). Throws Error for an
// axis out of range or a tile size the last axis cannot take.
BlockLayout layoutFor(const Shape& shape, const QuantizationSpec& spec);

struct TensorQuantization {
    QuantParams params;
    // Per group, the calibrated range as the scale reads it (symmetric methods:
    // ±absmax; unsigned types with a symmetric method: [0, absmax]; asymmetric: widened
    // to include 0); microscaling blocks: ±scale · the element format's largest value;
    // GGUF blocks: the block's own [min, max] widened to include 0 (also `saturation`:
    // their reference quantizers fit every block to its data, so nothing counts as clipped);
    // lut types: the table's [first, last] entry (saturation: unbounded, as a nearest
    // entry is never a clipped value's only error).
    std::vector<Range> ranges;
    // Per group, the range outside of which values saturate under the scale actually
    // used (saturationRanges in quant/scale.h: pow2/fp16 restrictions, narrow range and
    // the grid's ends included): what the clipped fraction counts against.
    std::vector<Range> saturation;
    // What the calibration did that the user should know (CalibrationReport::note);
    // empty when there is nothing to say.
    std::string note;
};

// Calibrates and computes the quantization parameters of `x` (float32, float16
// or bfloat16; other dtypes are converted to float32 first). A lut type's tables
// are found group by group in parallel; `cancel` is checked between groups
// (the others take no time worth cancelling). Throws Error naming
// `tensorName` for a NaN/Inf, a method the qtype cannot use (an asymmetric method
// on a float or codebook type), a microscaling type with a method other than absmax,
// or an unsigned type under a symmetric method on data with negative values.
TensorQuantization computeQuantization(const Tensor& x, const QuantizationSpec& spec, std::string_view tensorName,
                                       const CancellationToken& cancel = {});

} // namespace qs
