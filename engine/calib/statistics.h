#pragma once
// Per-group statistics of fp32 data over any BlockLayout: min, max (absmax is
// max(−min, max)) and, when asked, the sum of squares for rms. Parallel over
// oneTBB; NaN or Inf in the data is an Error naming the tensor and the first
// flat index.

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/block_layout.h"

namespace qs {

struct GroupStatistics {
    std::vector<float> min;         // per group, row-major over the layout's grid; 0 for an empty group
    std::vector<float> max;         // per group; 0 for an empty group
    std::vector<double> sumSquares; // per group; empty unless asked for
    std::vector<int64_t> count;     // elements per group

    float absMax(size_t g) const { return std::max(-min[g], max[g]); }
    // sqrt(sum of squares / count); 0 for an empty group. Needs sumSquares.
    float rms(size_t g) const;
};

// Statistics of `x` (row-major, layout.shape) per group of `layout`.
// `tensorName` names the tensor in errors.
GroupStatistics groupStatistics(std::span<const float> x, const BlockLayout& layout, std::string_view tensorName,
                                bool withSumSquares);

// The smallest and largest of `rows` rows of n values, row r at p + r * ld
// (none: +inf and −inf), and whether all were finite (min and max say nothing
// otherwise). Serial: for a task's own piece of a tensor.
struct Extremes {
    float min;
    float max;
    bool finite;
};
Extremes extremesOf(const float* p, int64_t rows, int64_t n, int64_t ld);

// Throws Error naming the tensor, the first non-finite value's flat index and
// its multi-index when x holds a NaN or an Inf; does nothing otherwise.
void checkFinite(std::span<const float> x, const Shape& shape, std::string_view tensorName);

} // namespace qs
