#pragma once
// AWQ (Lin, Tang, Tang, Yang, Dang, Gan, Han 2023, "Activation-aware Weight
// Quantization"): before rounding, input channel j of the weight is scaled by
// s_j, and the rounded weight is divided by s_j again, so that the channels the
// activations make large lose less to rounding:
//   Ŵ = Q(W·diag(s))·diag(s)⁻¹,
// with Q the rule's own round-to-nearest (its grid, granularity, tiles and
// calibration method, on the scaled weight). Here (docs/algorithms.md):
//   - s_j = max(m_j^α, 1e-4), m_j = mean |x_j| over the layer's calibration
//     inputs (Conv: over the im2col entries of input channel j, its kernel
//     positions and padding included), then s /= sqrt(max(s)·min(s)) as the
//     authors' code does; s is rounded to float32, the products W·s and the
//     quotients Q(W·s)/s are float32;
//   - α is searched over i/grid, i = 0..grid-1 (α = 0 is round-to-nearest), and
//     the first α with the least ||W·Xᵀ − Ŵ·Xᵀ||² = Σ_rows e·H·eᵀ / (2/n), H the
//     layer's input Hessian 2·XᵀX/n (quantization/input_hessian.h), is kept.
//   - with clip (the default; the paper's clipping search, the authors'
//     `auto_clip`), after s: each weight group G of W·s (the rule's group: a row
//     per channel, a row's tile, or the whole tensor per tensor) is clamped to r
//     times its range, [−r·max|v|, r·max|v|] on a symmetric grid (absmax) and
//     [r·min v, r·max v] on an asymmetric one (minmax), the bounds rounded to
//     float32, for r = 1 − i/40, i = 0..19 (1 down to 0.525); the rule's
//     round-to-nearest then takes its parameters from the clamped group, and the
//     first r with the least loss Σ_rows e_G·H_GG·e_Gᵀ (the group's own features,
//     e = W − Q(clamp(W·s))/s) is kept, group by group. r = 1 is no clipping.
// The simulated weight is Ŵ, bit for bit; the exports write the codes of
// Q(clamp(W·s)) (`grid`) and s (`inputScale`).

#include <functional>
#include <string_view>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "core/cancellation.h"
#include "core/tensor.h"
#include "quantization/tensor_quantization.h"
#include "rules/weight_algorithm.h"

namespace qs {

// The rule's round-to-nearest of a float32 weight in its own axis order: its
// parameters (over the axis order the weight quantizer uses) and its
// fake-quantized values in the weight's own order.
using GridRounding = std::function<std::pair<TensorQuantization, Tensor>(const Tensor& weight)>;

// The weight groups the clipping search clips, in the weight's own axis order:
// the rule's groups (per tensor, per channel, or tiles along the input features).
struct AwqClipGroups {
    std::vector<int64_t> groupOf; // per element of the weight, row-major in its own order
    int64_t count = 0;
    bool symmetric = true; // absmax: clip to ±r·max|v|; minmax: to [r·min, r·max]
};

// The groups of a weight of shape `ownShape` quantized as `spec` (its channel
// axis and tiles over the weight permuted by `axes`, empty = its own order).
// Throws Error naming `tensorName` when clipping is not defined for the spec:
// a calibration method other than absmax and minmax (they choose the range
// themselves), or a type whose blocks the type fixes.
AwqClipGroups awqClipGroups(const Shape& ownShape, const std::vector<int>& axes, const QuantizationSpec& spec,
                            std::string_view tensorName);

// The clipping ratios tried: 1 − i/40, i = 0..kAwqClipRatios-1.
inline constexpr int kAwqClipRatios = 20;
inline double awqClipRatio(int i)
{
    return 1.0 - double(i) / 40.0;
}

struct AwqResult {
    TensorQuantization quantization; // the parameters of the clipped scaled weight
    Tensor grid;                     // float32, the weight's shape: Q(clamp(W·diag(s))), points of the grid
    Tensor rounded;                  // float32, the weight's shape: grid / s, the simulated weight
    Tensor scaled;                   // float32, the weight's shape: W·diag(s), before clipping
    Tensor clipped;                  // float32, the weight's shape: W·diag(s) clamped group by group
    std::vector<int> clipIndex;      // per group (AwqClipGroups order): ratio 1 − i/40 kept; empty without clip
    // float32, the weight's rank, 1 on every axis but inputAxis (its length there): s.
    Tensor inputScale;
    int alphaIndex = 0; // α = alphaIndex / grid
    double alpha = 0;
    std::vector<double> losses; // Σ_rows e·H·eᵀ per grid point
};

// Quantizes `weight` (any float dtype, its own axis order; channel axis
// `channelAxis`, input channels on `inputAxis`, which must be the first of the
// other axes: the Hessian's features are those axes in order) against
// `hessian` (features × features) and `meanAbs` (mean |x| per feature). Throws
// Error naming `tensorName` for sizes that do not fit or non-finite statistics;
// Cancelled between grid points and clipping ratios. With algorithm.awqClip,
// `clipGroups` (awqClipGroups) must be given.
AwqResult awqQuantize(const Tensor& weight, int channelAxis, int inputAxis, const WeightAlgorithm& algorithm,
                      const Eigen::MatrixXd& hessian, const Eigen::VectorXd& meanAbs, const GridRounding& roundOnGrid,
                      std::string_view tensorName, const CancellationToken& cancel = {},
                      const AwqClipGroups* clipGroups = nullptr);

// A grouped layer (a grouped or depthwise Conv of G groups, weight [O, I, k…] with
// I = C/G): `hessians` holds one Hessian per group (features I·k…), `meanAbs` the
// mean |x| of every group's features, group after group (C·k…). s stays one per
// input channel of the layer (C of them): m_j is the mean |x| of channel j over
// its own group's im2col entries, s is normalised over all C, and output channel
// o (of group o div (O/G)) is scaled by its group's s. The loss is Σ_g over the
// group's rows e·H_g·eᵀ, as is the clipping search's (each row against its own
// group's H_g). inputScale is then [O, I, 1, …] (the channel axis too): output
// channel o's entries are the s of its group's input channels.
AwqResult awqQuantize(const Tensor& weight, int channelAxis, int inputAxis, const WeightAlgorithm& algorithm,
                      const std::vector<Eigen::MatrixXd>& hessians, const Eigen::VectorXd& meanAbs,
                      const GridRounding& roundOnGrid, std::string_view tensorName,
                      const CancellationToken& cancel = {}, const AwqClipGroups* clipGroups = nullptr);

} // namespace qs
