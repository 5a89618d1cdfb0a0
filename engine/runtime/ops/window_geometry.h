#pragma once
// The sliding-window geometry that the convolutions (Conv, ConvInteger,
// QLinearConv) share with pooling: kernel extent, strides, dilations, pads,
// auto_pad.

#include <cstdint>
#include <vector>

#include "runtime/op_registry.h"

namespace qs::ops {

// The geometry of a sliding window over the spatial axes of an [N, C, d...] input.
struct WindowGeometry {
    std::vector<int64_t> input;     // spatial input sizes
    std::vector<int64_t> kernel;    // window sizes
    std::vector<int64_t> strides;   // default 1
    std::vector<int64_t> dilations; // default 1
    std::vector<int64_t> padBegin;  // resolved pads (auto_pad applied)
    std::vector<int64_t> padEnd;
    std::vector<int64_t> output; // spatial output sizes
};

// Reads strides, dilations, pads and auto_pad of `ctx`'s node for a window of
// size `kernel` over spatial `input` sizes, and computes the output sizes
// (floor, or ceil when `ceilMode`, as ONNX pooling defines it). Errors name
// the node and the attribute that does not fit.
WindowGeometry resolveWindow(const KernelContext& ctx, const std::vector<int64_t>& input,
                             const std::vector<int64_t>& kernel, bool ceilMode, bool hasDilations);

} // namespace qs::ops
