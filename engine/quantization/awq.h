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
// The simulated weight is Ŵ, bit for bit; the exports write the codes of
// Q(W·s) (`grid`) and s (`inputScale`).

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

struct AwqResult {
    TensorQuantization quantization; // the parameters of the scaled weight W·diag(s)
    Tensor grid;                     // float32, the weight's shape: Q(W·diag(s)), points of the grid
    Tensor rounded;                  // float32, the weight's shape: grid / s, the simulated weight
    Tensor scaled;                   // float32, the weight's shape: W·diag(s)
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
// Cancelled between grid points.
AwqResult awqQuantize(const Tensor& weight, int channelAxis, int inputAxis, const WeightAlgorithm& algorithm,
                      const Eigen::MatrixXd& hessian, const Eigen::VectorXd& meanAbs, const GridRounding& roundOnGrid,
                      std::string_view tensorName, const CancellationToken& cancel = {});

// A grouped layer (a grouped or depthwise Conv of G groups, weight [O, I, k…] with
// I = C/G): `hessians` holds one Hessian per group (features I·k…), `meanAbs` the
// mean |x| of every group's features, group after group (C·k…). s stays one per
// input channel of the layer (C of them): m_j is the mean |x| of channel j over
// its own group's im2col entries, s is normalised over all C, and output channel
// o (of group o div (O/G)) is scaled by its group's s. The loss is Σ_g over the
// group's rows e·H_g·eᵀ. inputScale is then [O, I, 1, …] (the channel axis too):
// output channel o's entries are the s of its group's input channels.
AwqResult awqQuantize(const Tensor& weight, int channelAxis, int inputAxis, const WeightAlgorithm& algorithm,
                      const std::vector<Eigen::MatrixXd>& hessians, const Eigen::VectorXd& meanAbs,
                      const GridRounding& roundOnGrid, std::string_view tensorName,
                      const CancellationToken& cancel = {});

} // namespace qs
