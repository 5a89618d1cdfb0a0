#pragma once
// Empirical bias correction (Nagel, van Baalen, Blankevoort, Welling 2019,
// "Data-Free Quantization Through Weight Equalization and Bias Correction",
// section 4.2, with the expectation taken over calibration data instead of
// batch-norm statistics): quantizing W to Ŵ shifts the mean of the layer's
// output by E[Ŵx] − E[Wx] = (Ŵ − W)·E[x] per output channel; adding
// (W − Ŵ)·E[x] to the bias removes that shift on the calibration inputs.
// E[x] is the mean of each input feature the weight contracts with (MatMul and
// Gemm: the rows of the data input; Conv: the im2col entries, padding
// included, so that it is the mean over every output position).

#include <string_view>

#include <Eigen/Core>

#include "core/tensor.h"

namespace qs {

// (W − Ŵ)·E[x] per output channel: `weight` and `rounded` (any float dtype, the
// same shape, the weight's own axis order) with the output channels on
// `channelAxis` and the features in order on the other axes; `featureMeans`
// one per feature of every group, group after group. With `groups` > 1 (a
// grouped or depthwise Conv [O, C/g, k…]) output channel o belongs to group
// o div (O/g) and contracts that group's C/g·k… features only: its correction
// is over its own group's means. Throws Error naming `tensorName` when the
// sizes differ or a mean is not finite.
Eigen::VectorXd biasCorrection(const Tensor& weight, const Tensor& rounded, int channelAxis,
                               const Eigen::VectorXd& featureMeans, std::string_view tensorName, int64_t groups = 1);

// The corrected bias, float32 [O]: `bias` (float, O elements; null = zeros)
// plus `correction`, added in double and rounded once.
Tensor correctedBias(const Tensor* bias, const Eigen::VectorXd& correction, std::string_view tensorName);

} // namespace qs
