#pragma once
// Depthwise 2-D convolution (one input and one output channel per group): the
// two paths Conv takes for it, per channel (depthwise2d) and kChannelBlock
// channels at once (depthwiseBlock). Both sum the bias, then the taps row by
// row, so they give the same results.

#include <cstdint>

#include "runtime/ops/window_geometry.h"

namespace qs::ops {

// Channels depthwiseBlock interleaves into one vector.
inline constexpr int64_t kChannelBlock = 16;

// One channel: x (H x W) against its taps w (KH x KW) plus bias into y (OH x OW).
void depthwise2d(const float* x, const float* w, float bias, const WindowGeometry& g, float* y);
// Channels [0, channels) of x (planes of H x W) against their taps w (KH x KW
// each) plus bias (nullptr: none) into y (planes of OH x OW), channels <= kChannelBlock.
void depthwiseBlock(const float* x, int64_t channels, const float* w, const float* bias, const WindowGeometry& g,
                    float* y);

} // namespace qs::ops
