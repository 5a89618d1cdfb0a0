#pragma once
// GPTQ (Frantar, Ashkboos, Hoefler, Alistarh 2022, Algorithm 1): rounds a
// weight's input columns one at a time and spreads each column's rounding
// error over the columns not yet rounded, through the Cholesky factor of the
// inverse Hessian of the layer's calibration inputs, so that the layer's output
// on those inputs changes least. Here (docs/algorithms.md):
//   - H += damp · mean(diag H) · I; a dead input (diag 0) gets H_ii = 1 and its
//     weights 0, as the authors' reference does;
//   - act_order: columns in descending diag(H) (stable), else in their own order;
//   - lazy batch updates in blocks of 128 columns;
//   - scales: per-tensor and per-channel from the whole float weight before the
//     loop (the rule's calibration method, as round-to-nearest computes them);
//     tiles (group-wise): a tile's scales are computed, with the same method,
//     when the first of its columns is reached, from the weight as updated by
//     the blocks before (the reference's find_params on W).
// Rounding is the engine's own (round half to even, the rule's grid, narrow range,
// zero points): the result is a fake-quantized weight that quantize() with the
// returned parameters reproduces bit for bit, so every export writes its codes.

#include <string_view>
#include <vector>

#include <Eigen/Core>

#include "core/cancellation.h"
#include "core/tensor.h"
#include "quantization/tensor_quantization.h"
#include "rules/weight_algorithm.h"

namespace qs {

// The columns are processed in blocks of this many (the paper's B).
inline constexpr int64_t kGptqBlockSize = 128;

struct GptqResult {
    TensorQuantization quantization; // parameters over x's layout (tiles: the scales chosen as they were reached)
    Tensor rounded;                  // float32, x's shape: the fake-quantized weight
};

// Quantizes `x` (float32: the weight in the axis order it is quantized in,
// channel axis spec.axis, tiles along the last axis, which must then be rank 2
// with the channel axis first) against `hessian` (features × features, the
// features being x's non-channel axes in order). Integer qtypes only. Throws
// Error naming `tensorName` for a Hessian of the wrong size, a non-finite one,
// or one that dampening leaves not positive definite; Cancelled between blocks.
GptqResult gptqQuantize(const Tensor& x, const QuantizationSpec& spec, const WeightAlgorithm& algorithm,
                        const Eigen::MatrixXd& hessian, std::string_view tensorName,
                        const CancellationToken& cancel = {});

// A grouped layer (a grouped or depthwise Conv): `hessians` holds one Hessian per
// group, and x's rows (the channel axis, in order) split into that many equal
// parts, group g's rows contracting group g's features only (H_g). The scales are
// computed as above from the whole weight (a per-tensor scale is one for every
// group); then each group's rows are rounded against H_g, with its own column
// order, dampening and Cholesky factors: groups in parallel (oneTBB), each one
// task, so the result does not depend on the threads. Errors name the group.
GptqResult gptqQuantize(const Tensor& x, const QuantizationSpec& spec, const WeightAlgorithm& algorithm,
                        const std::vector<Eigen::MatrixXd>& hessians, std::string_view tensorName,
                        const CancellationToken& cancel = {});

} // namespace qs
