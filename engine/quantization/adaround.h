#pragma once
// AdaRound (Nagel, Amjad, van Baalen, Louizos, Blankevoort 2020, "Up or Down?
// Adaptive Rounding for Post-Training Quantization"): every weight keeps the
// floor of its grid value and learns whether to add 1, from the layer's output
// error on its calibration inputs. Here (docs/algorithms.md):
//   - the grid is the rule's own (the scales and zero points round-to-nearest
//     computes, narrow range, saturation): v = W/s + z in float32 as the kernels
//     compute it, W̃ = s·(clip(floor(v) + h(V), qmin, qmax) − z);
//   - h(V) = clip(sigmoid(V)·(ζ − γ) + γ, 0, 1), ζ = 1.1, γ = −0.1, V initialised
//     so that h(V) = v − floor(v) (W̃ = W where nothing saturates);
//   - the loss is the paper's layer-wise objective E‖W·x − W̃·x‖² (summed over the
//     outputs, averaged over the calibration inputs x: Conv's im2col patches),
//     computed exactly from M = E[x·xᵀ] = H/2 as Σ_rows ΔW·M·ΔWᵀ, plus
//     λ·Σ(1 − |2h(V) − 1|^β): no regulariser for the first 20% of the steps,
//     then β falls linearly from 20 to 2;
//   - Adam (lr 0.01, β1 0.9, β2 0.999, ε 1e-8) on V; at the end h(V) ≥ 0.5 rounds up.
// The rows (output channels) are independent problems: they run in fixed blocks
// of kAdaroundBlockRows on oneTBB, so the result is the same for any thread count.

#include <string_view>
#include <vector>

#include <Eigen/Core>

#include "core/cancellation.h"
#include "core/tensor.h"
#include "quantization/tensor_quantization.h"
#include "rules/weight_algorithm.h"

namespace qs {

inline constexpr double kAdaroundZeta = 1.1;
inline constexpr double kAdaroundGamma = -0.1;
inline constexpr double kAdaroundWarmup = 0.2; // fraction of the steps without the regulariser
inline constexpr double kAdaroundBetaStart = 20;
inline constexpr double kAdaroundBetaEnd = 2;
inline constexpr double kAdaroundLearningRate = 0.01;
inline constexpr int64_t kAdaroundBlockRows = 16;

struct AdaroundResult {
    TensorQuantization quantization; // round-to-nearest's parameters over x's layout
    Tensor rounded;                  // float32, x's shape: the fake-quantized weight
    double rtnLoss = 0;              // E‖ΔW·x‖² of round-to-nearest (ties up) on the calibration statistics
    double loss = 0;                 // the same of the AdaRound weight
    int64_t flipped = 0;             // weights rounded the other way than to nearest
};

// Quantizes `x` (float32: the weight in the axis order it is quantized in,
// channel axis spec.axis) against `hessian` (H = 2·E[x·xᵀ], features ×
// features, the features being x's non-channel axes in order). Integer qtypes
// only. Throws Error naming `tensorName` for a Hessian of the wrong size or a
// non-finite one; Cancelled while it runs.
AdaroundResult adaroundQuantize(const Tensor& x, const QuantizationSpec& spec, const WeightAlgorithm& algorithm,
                                const Eigen::MatrixXd& hessian, std::string_view tensorName,
                                const CancellationToken& cancel = {});

// A grouped layer (a grouped or depthwise Conv): one Hessian per group, x's rows
// (the channel axis, in order) split into that many equal parts, group g's rows
// against H_g. The grid is computed from the whole weight as above (a per-tensor
// scale is one for every group); the blocks of rows run inside each group.
AdaroundResult adaroundQuantize(const Tensor& x, const QuantizationSpec& spec, const WeightAlgorithm& algorithm,
                                const std::vector<Eigen::MatrixXd>& hessians, std::string_view tensorName,
                                const CancellationToken& cancel = {});

} // namespace qs
