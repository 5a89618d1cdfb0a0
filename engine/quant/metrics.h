#pragma once
// Error metrics of a quantized tensor against its float original.
//   mse              Σ(x − x̂)² / n
//   sqnr_db          10·log10(Σx² / Σ(x − x̂)²); +∞ when x̂ equals x, −∞ when x is all
//                    zero and x̂ is not
//   max_abs_error    max |x − x̂|
//   cosine           Σx·x̂ / sqrt(Σx² · Σx̂²); 1 when both are all zero, 0 when only one is
//   fraction_clipped elements outside their group's range [min, max] by more than
//                    2^−20 of its edge (the scale's float rounding), divided by n; the
//                    ranges are where the quantizer saturates (saturationRanges in
//                    quant/scale.h), so every value whose code saturated counts
// Sums are accumulated in double, in parallel over fixed chunks combined in a
// fixed order, so results do not depend on the thread count.

#include <cstdint>
#include <span>

#include "core/block_layout.h"
#include "quant/scale.h"

namespace qs {

struct ErrorMetrics {
    double mse = 0;
    double sqnrDb = 0;
    double maxAbsError = 0;
    double cosine = 1;
    double fractionClipped = 0;
};

// The sums the metrics are computed from. The sums of pieces, added, are the
// sums of their concatenation: metrics over many batches accumulate these.
struct ErrorSums {
    int64_t count = 0;
    double signal = 0;    // Σx²
    double noise = 0;     // Σ(x − x̂)²
    double cross = 0;     // Σx·x̂
    double quantized = 0; // Σx̂²
    double maxAbs = 0;    // max |x − x̂|
    void add(const ErrorSums& other);
    // mse, sqnrDb, maxAbsError and cosine; fractionClipped is 0.
    ErrorMetrics metrics() const;
};

// The sums of `quantized` against `original` (same length).
ErrorSums errorSums(std::span<const float> original, std::span<const float> quantized);

// MSE, SQNR, max abs error and cosine of `quantized` against `original` (same length).
ErrorMetrics errorMetrics(std::span<const float> original, std::span<const float> quantized);

// The fraction of elements of x (row-major over layout.shape) outside the range
// of their group; ranges has one entry per group of the layout.
double fractionClipped(std::span<const float> x, const BlockLayout& layout, std::span<const Range> ranges);

} // namespace qs
