#pragma once
// Scales and zero points from calibrated ranges (DESIGN.md, "Scales and zero points").
//   symmetric:  scale = max(|min|, |max|) / bound, zero point 0
//               bound = qmax + 0.5 for integers (qmax with narrow range),
//                       the largest finite value for float formats, 1 for nf4,
//                       1 for binary and ternary-with-narrow-range, 1.5 for ternary.
//   asymmetric: the range is widened to include 0, scale = (max − min) / (qmax − qmin),
//               zero_point = clamp(round(qmin − min / scale), qmin, qmax)  (integer types only;
//               a float, codebook or microscaling type with an asymmetric method is an Error).
//               The zero point is computed after the scale restriction, in float:
//               zp = clamp(round_half_even(qmin − min / scale), qmin, qmax), so 0 maps to code zp
//               and fake-quantizes to exactly 0.
//   unsigned integer types with a symmetric method use [0, absmax]: zero point 0, scale absmax / bound
//   (negative values clip to 0).
//   int1 (grid {−1, 0}) uses |qmin| = 1 in place of qmax in its bound.
// Never a NaN, Inf, zero or subnormal scale: a group whose range is zero (all-zero)
// gets kDegenerateScale; scales are clamped to float's normal range [FLT_MIN, FLT_MAX]
// (a range of 1e-45 gets FLT_MIN); non-finite range bounds, or min > max, are an Error
// naming the tensor and the group index.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/block_layout.h"
#include "numerics/qtype.h"

namespace qs {

enum class ScaleRestriction : uint8_t { Float, Pow2, Fp16 };
std::string_view scaleRestrictionName(ScaleRestriction r); // "float", "pow2", "fp16"
std::optional<ScaleRestriction> parseScaleRestriction(std::string_view name);
// Every restriction, in the order docs and GUI list them.
std::span<const ScaleRestriction> allScaleRestrictions();

struct ScaleOptions {
    bool narrowRange = false;                               // integer grid without its most negative code
    ScaleRestriction restriction = ScaleRestriction::Float; // how the scale itself is represented
    bool operator==(const ScaleOptions&) const = default;
};

// A calibrated range of one group, in the tensor's units.
struct Range {
    float min = 0;
    float max = 0;
};

// The scale given to a group whose calibrated range is zero.
inline constexpr float kDegenerateScale = 1.0f;

// The denominator of the symmetric scale for a type.
float symmetricBound(QType t, bool narrowRange);
// Applies a scale restriction: float keeps the scale (raised to FLT_MIN when
// smaller); pow2 is 2^round(log2 s) with the exponent clamped to [−126, 127];
// fp16 is the nearest fp16 value after clamping to fp16's finite, non-zero
// magnitudes [2^−24, 65504]. Throws Error for a scale that is not finite and positive.
float restrictScale(float scale, ScaleRestriction r);

struct QuantParams {
    QType qtype = QType::Int8;
    BlockLayout layout; // which elements share a scale
    bool symmetric = true;
    ScaleOptions options;
    std::vector<float> scales;       // one per group, row-major over layout.gridShape()
    std::vector<int32_t> zeroPoints; // one per group when asymmetric; empty when symmetric
    float globalScale = 1.0f;        // nvfp4's per-tensor fp32 scale (the block scales are e4m3 in its units)
    // lut types: per group (row-major over layout.gridShape()) its table of 2^bits
    // float32 entries, ascending; a value's code is its nearest entry's index
    // (quant/palettization.h). `scales` then hold each table's largest magnitude
    // (1 for an all-zero table), for display only. Empty for every other type.
    std::vector<float> lut;
};

// Computes scales and zero points for each group from its range. `tensorName`
// is used in error messages. Not for microscaling types (their block scales
// come from the data: see microscalingParams in quant/microscaling.h).
QuantParams quantParamsFromRanges(QType t, const BlockLayout& layout, std::span<const Range> ranges, bool symmetric,
                                  const ScaleOptions& options, std::string_view tensorName);

// Per group, the range of values that do not saturate under `p` (not for
// microscaling types): a value outside it lands on the grid's end with an error
// larger than rounding to that end could give, whatever made the grid short —
// the calibrated range, a pow2 or fp16 scale rounded down, narrow range, a zero
// point clamped to the grid.
//   integers and ternary: [(qmin − zp − 0.5)·s, (qmax − zp + 0.5)·s]
//   float formats and nf4: ±(largest finite value)·s      binary: ±s
// Computed in double, rounded to float.
std::vector<Range> saturationRanges(const QuantParams& p);

} // namespace qs
