#pragma once
// Depthwise 2-D convolution (one input and one output channel per group): the
// two paths Conv takes for it, per channel (depthwise2d) and kChannelBlock
// channels at once (depthwiseBlock). Both sum the bias, then the taps row by
// row, so they give the same results. MaxPool's windows over kChannelBlock
// channels at once (maxPoolBlock) share depthwiseBlock's interleaving.

#include <algorithm>
#include <cstdint>
#include <vector>

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include "gemm/sgemm.h"
#include "runtime/ops/conv_plan.h"
#include "runtime/ops/sub_plane_conv.h"
#include "runtime/ops/window_geometry.h"

namespace qs::ops {

// Channels depthwiseBlock interleaves into one vector.
inline constexpr int64_t kChannelBlock = 16;
// A part of a channel-blocked plane (depthwiseBlock, maxPoolBlock): outputs at least.
inline constexpr int64_t kChannelBlockPartOutputs = 128;

// Calls fn(n, c0, channels, oh0, oh1) in parallel for every image n of N,
// block of channels [c0, c0 + channels) of C (kChannelBlock at most) and
// part [oh0, oh1) of the output rows of g: planes split into parts of at
// least kChannelBlockPartOutputs outputs when there are fewer (image, block)
// tasks than the threads want (mnasnet's 48 channels at stride 2 from
// 48 x 48 were three tasks at batch 1), so each part interleaves only the
// input rows its windows read.
template <class Fn> void forEachChannelBlockPart(int64_t N, int64_t C, const WindowGeometry& g, Fn&& fn)
{
    const int64_t blocks = (C + kChannelBlock - 1) / kChannelBlock, OH = g.output[0];
    const int64_t wantedParts =
        (kConvTasksPerThread * tbb::this_task_arena::max_concurrency() + N * blocks - 1) / (N * blocks);
    const int64_t parts = std::clamp<int64_t>(
        std::min(wantedParts, OH * g.output[1] / kChannelBlockPartOutputs), 1, OH);
    tbb::parallel_for(int64_t(0), N * blocks * parts, [&](int64_t task) {
        const int64_t part = task % parts, nb = task / parts, c0 = (nb % blocks) * kChannelBlock;
        fn(nb / blocks, c0, std::min(kChannelBlock, C - c0), part * OH / parts, (part + 1) * OH / parts);
    });
}

// What depthwise2d computes once per node rather than per channel (its
// divisions cost as much as a small plane's multiply-adds): the zero-padded
// input's sub-planes (one per row and column residue of the strides, as the
// implicit GEMM splits its input) and where each tap starts in them.
struct DepthwisePlanes {
    explicit DepthwisePlanes(const WindowGeometry& g);

    WindowGeometry g;
    SubPlanes sub;
    std::vector<int64_t> taps; // tap t's first input of output 0 in the sub-planes
    int64_t span = 0;          // outputs computed (with WS - OW dropped per row but the last)
    int64_t planesSize = 0;    // the sub-planes' floats, with slack for the last block of outputs
    int64_t gridSize = 0;      // the computed outputs' floats, rounded up to whole blocks
    uint64_t id = 0;           // tells a thread whether its zeroed buffer already has this layout
    // Unit strides on a plane whose sub-plane and grid would outgrow L1:
    // output row by output row from a ring of padded input rows of rowFloats
    // each, the sums stored straight into the output (the same bits).
    bool byRows = false;
    int64_t rowFloats = 0;
};

// One channel: x (H x W) against its taps w (KH x KW) plus bias into y (OH x
// OW), in the sub-planes of `planes` (made from the node's geometry); with
// `clamp` (an epilogue of a Relu or Clip only), each sum stored clamped, the
// bits of the separate activation. (Applied after the copy-out, a Clip took
// a sixth of a 32-channel 3 x 3 conv on 48 x 48.)
void depthwise2d(const float* x, const float* w, float bias, const DepthwisePlanes& planes, float* y,
                 const gemm::Epilogue* clamp = nullptr);
// A depthwise conv's weights (channels x kernelSize taps) interleaved for
// depthwiseBlock, once per weight tensor (a node's memo keeps them): block b's
// tap t of its channel c at (b * kernelSize + t) * kChannelBlock + c, zero
// for the lanes past the last channel. (Interleaved per block and call, they
// took as long as a 5 x 5 conv's sums on 3 x 3 planes.)
struct DepthwiseBlockTaps {
    DepthwiseBlockTaps(const float* w, int64_t channels, int64_t kernelSize);
    const float* block(int64_t b) const { return taps.data() + b * kernelSize * kChannelBlock; }

    int64_t kernelSize;
    std::vector<float> taps;
};

// Channels [0, channels) of x (planes of H x W) against their interleaved
// taps (DepthwiseBlockTaps::block) plus bias (nullptr: none) into output rows
// [oh0, oh1) of y (planes of OH x OW), channels <= kChannelBlock; with `clamp`
// (an epilogue of a Relu or Clip only), each sum stored clamped. (Parts of a
// plane let a batch of one with few blocks of channels use every thread; each
// part interleaves the input rows its windows read.)
void depthwiseBlock(const float* x, int64_t channels, const float* taps, const float* bias, const WindowGeometry& g,
                    int64_t oh0, int64_t oh1, float* y, const gemm::Epilogue* clamp = nullptr);

// MaxPool of channels [0, channels) of x (planes of H x W) into output rows
// [oh0, oh1) of y (planes of OH x OW), channels <= kChannelBlock: one vector
// of the block's channels per pixel, so a small plane's window is KH x KW
// vector maxima, however narrow its rows. Taps are taken row by row into a
// running std::max from -inf (an equal later value does not replace the
// maximum, a NaN never enters it); padding, and the windows' reach past it
// with ceil_mode, never wins.
void maxPoolBlock(const float* x, int64_t channels, const WindowGeometry& g, int64_t oh0, int64_t oh1, float* y);

} // namespace qs::ops
