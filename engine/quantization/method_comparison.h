#pragma once
// Comparing calibration methods on one tensor: each method's ranges, scales and
// error, best (lowest MSE) first. What `quantscope-cli compare-methods` shows
// and the GUI's method-comparison view plots.

#include <string>
#include <string_view>
#include <vector>

#include "analysis/metrics.h"
#include "core/cancellation.h"
#include "quantization/tensor_quantization.h"

namespace qs {

// The method strings compared, in the order they are tried:
// absmax, minmax, rms,3, percentile,99.9, percentile,99.99, mse, entropy.
// (rms,3: three standard deviations of a zero-mean distribution.)
std::vector<std::string> comparedMethods();

struct MethodResult {
    std::string method;  // canonical method string, or "<qtype> block scales" for MX types
    std::string skipped; // non-empty: why this method does not apply to the qtype
    bool symmetric = true;
    std::vector<Range> ranges;       // per group, as TensorQuantization::ranges
    std::vector<float> scales;       // per group
    std::vector<int32_t> zeroPoints; // per group when asymmetric
    ErrorMetrics metrics;
    std::string note; // as TensorQuantization::note
};

// Quantizes `x` with each compared method under `spec` (its method is ignored):
// the results that apply sorted by MSE (ties by method order), then the
// skipped ones. Microscaling types compute their own block scales: one row.
// `cancel` is checked before each method (mse and entropy take the longest);
// a cancelled comparison throws Cancelled.
std::vector<MethodResult> compareMethods(const Tensor& x, const QuantizationSpec& spec, std::string_view tensorName,
                                         const CancellationToken& cancel = {});

} // namespace qs
