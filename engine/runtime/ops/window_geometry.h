#pragma once
// The sliding-window geometry that the convolutions (Conv, ConvInteger,
// QLinearConv) share with pooling: kernel extent, strides, dilations, pads,
// auto_pad.

#include <algorithm>
#include <cstdint>
#include <utility>
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

// The i in [0, count) for which offset + i * step lands in [0, size), as
// [lo, hi): a window's taps inside the input (offset: the window's start,
// step: the dilation), or the outputs whose tap does (offset: the tap's,
// step: the stride).
inline std::pair<int64_t, int64_t> stepsInside(int64_t offset, int64_t step, int64_t size, int64_t count)
{
    const auto firstAtLeast = [step](int64_t v) { return v <= 0 ? int64_t(0) : (v + step - 1) / step; };
    const int64_t lo = std::min(count, firstAtLeast(-offset));
    const int64_t hi = std::min(count, firstAtLeast(size - offset));
    return {lo, std::max(lo, hi)};
}

} // namespace qs::ops
