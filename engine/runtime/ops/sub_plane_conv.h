#pragma once
// Paths of a 2-D float Conv on weights packed for the GEMM: the implicit GEMM
// (grouped convs) and the position-rows product (group 1), which read the
// input split into stride sub-planes (SubPlanes), and the transposed product
// for 1 x 1 windows with few output positions. Each finishes its outputs with
// the bias, residual addend and activation folded into the node.

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "gemm/sgemm.h"
#include "runtime/op_registry.h"
#include "runtime/ops/conv_plan.h"
#include "runtime/ops/window_geometry.h"

namespace qs::ops {

// The padded input of a 2-D window split by row and column residue modulo
// the strides into sh x sw sub-planes of HS x WS (sub-plane (a, b) holds
// padded rows a, a + sh, ... and columns b, b + sw, ...): each window tap then
// reads consecutive values for consecutive outputs, at any stride. A window
// of rows (fillRows) keeps rows [t0, t0 + rows) of every sub-plane.
struct SubPlanes {
    int64_t HP, HS, WS, sub, plane; // padded rows; sub-plane extent; floats per sub-plane, per input plane
    // Per column residue b: the sub-plane columns [first, second) that hold
    // input (the rest is padding). Computed here once, not per row (a 16 ->
    // 64 conv on 23 x 23, single thread, fastest of 5000: 0.074 -> 0.070 ms).
    std::vector<std::pair<int64_t, int64_t>> inputColumns;

    explicit SubPlanes(const WindowGeometry& g)
        : HP((g.output[0] - 1) * g.strides[0] + (g.kernel[0] - 1) * g.dilations[0] + 1),
          HS((HP + g.strides[0] - 1) / g.strides[0]),
          WS(((g.output[1] - 1) * g.strides[1] + (g.kernel[1] - 1) * g.dilations[1] + g.strides[1]) / g.strides[1]),
          sub(HS * WS), plane(g.strides[0] * g.strides[1] * sub)
    {
        const int64_t W = g.input[1], sw = g.strides[1], pw = g.padBegin[1];
        for (int64_t b = 0; b < sw; ++b) {
            // Sub-plane column i is padded column b + i * sw, input column b + i * sw - pw.
            const int64_t i0 = std::min(WS, pw > b ? (pw - b + sw - 1) / sw : 0);
            inputColumns.emplace_back(i0, std::max(i0, std::min(WS, W + pw > b ? (W + pw - b + sw - 1) / sw : 0)));
        }
    }

    // `planes` whole input planes of x into dst, one after the other, every element written.
    void fill(const float* x, int64_t planes, const WindowGeometry& g, float* dst) const;

    // Rows [t0, t0 + rows) of the sub-planes of one input plane (src) into
    // dst, sub-plane after sub-plane, each `stride` rows long (rows past the
    // padded input are zeros; rows past `rows` are left alone).
    void fillRows(const float* src, const WindowGeometry& g, int64_t t0, int64_t rows, int64_t stride,
                  float* dst) const;

    // Where row (c, kh, kw) of the virtual column matrix starts, for
    // `channels` channels whose sub-planes are `stride` rows long.
    std::vector<int64_t> rowOffsets(int64_t channels, const WindowGeometry& g, int64_t stride) const;
};

// 2-D Conv as an implicit GEMM, with no column matrix. Each (image,
// channel)'s input is copied once, zero-padded to what the windows reach
// (HP x WP), and split by row and column residue modulo the strides into
// sh x sw sub-planes of HS x WS (sub-plane (a, b) holds padded rows a, a + sh,
// ... and columns b, b + sw, ...). Row (c, kh, kw) of the virtual column matrix
// is then one sub-plane read from a fixed offset on, column q standing for
// output (q / WS, q % WS): consecutive outputs read consecutive inputs, for
// every tap and stride. The WS - OW columns per output row that fall between
// rows are computed and dropped.
void implicitGemmConv(const KernelContext& ctx, const gemm::PackedMatrix& packed, const float* x, const float* bias,
                      const float* addend, const FusedActivation* activation, int64_t N, int64_t C, int64_t group,
                      int64_t Mg, const WindowGeometry& g, const ConvOutput& y);

// 2-D Conv (group 1; Conv sends it 1 x 1 windows only) with few output
// positions in the whole batch (a late stage's 3 x 3 planes at batch 1) and
// many output channels, where the
// weights are the large operand, read once per run. The product runs
// transposed, Y^T [N * P, M] = columns^T [N * P, K] * W^T [K, M], on weights
// packed once as the product's columns (`weights`: W^T, [K, M]): each weight
// is loaded in a vector of output channels and used for every position,
// where the other paths broadcast it to a vector with only N * P useful
// lanes. Each output is the same k-ordered sum as theirs (the same bits).
void fewPositionsConv(const KernelContext& ctx, const gemm::PackedColumnMatrix& weights, const float* x,
                      const float* bias, const float* addend, const FusedActivation* activation, int64_t N, int64_t C,
                      int64_t M, const WindowGeometry& g, const ConvOutput& y);

// 2-D Conv (group 1) with the output positions as the product's rows and the
// output channels as its vectors, for planes too small for a vector of
// positions: Y^T = A W^T, where row p of A is read straight from the
// batch's sub-planes (each tap of output p at a fixed offset past p's own
// place there) and W^T is packed once as the product's columns (`weights`).
// A tile of up to 12 positions (6 with AVX2) runs against one strip of
// output channels; only real outputs are computed, where the paths that put
// positions in the vectors pad a 5 x 5 plane (25 outputs) to 32 lanes and
// copy its column matrix first. Each output is the same sum, depth block by
// depth block, as the other paths' (the same bits).
void positionRowsConv(const KernelContext& ctx, const gemm::PackedColumnMatrix& weights, const float* x,
                      const float* bias, const float* addend, const FusedActivation* activation, int64_t N, int64_t C,
                      const WindowGeometry& g, const ConvOutput& y);

} // namespace qs::ops
