#pragma once
// Comparing calibration methods on one tensor: each method's ranges, scales and
// error, best (lowest MSE) first. What `quantscope-cli compare-methods` shows
// and the GUI's method-comparison view plots (with the histogram it draws the
// ranges over, and for an input activation the comparison estimated from the
// calibration observer's histogram).

#include <string>
#include <string_view>
#include <vector>

#include "quant/metrics.h"
#include "quantization/tensor_quantization.h"
#include "calib/histogram.h"
#include "calib/observer.h"
#include "core/cancellation.h"

namespace qs {

// The method strings compared, in the order they are tried: absmax, minmax,
// rms,<rmsFactor>, percentile,<p> for each p, mse, entropy. The default is what
// compare-methods tries (rms,3: three standard deviations of a zero-mean
// distribution; percentile,99.9 and percentile,99.99); the charts pass the
// p and s the user set.
std::vector<std::string> comparedMethods(const std::vector<double>& percentiles = {99.9, 99.99},
                                         double rmsFactor = 3.0);

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

// Quantizes `x` with each of `methods` under `spec` (its method is ignored):
// the results that apply sorted by MSE (ties by method order), then the
// skipped ones. Microscaling types compute their own block scales: one row.
// `cancel` is checked before each method (mse and entropy take the longest);
// a cancelled comparison throws Cancelled.
std::vector<MethodResult> compareMethods(const Tensor& x, const QuantizationSpec& spec, std::string_view tensorName,
                                         const CancellationToken& cancel = {},
                                         const std::vector<std::string>& methods = comparedMethods());

// What the method-comparison view plots: the comparison and the histogram of
// the tensor over a span holding every method's range.
struct MethodComparisonData {
    std::string tensor;
    bool activation = false;
    bool estimated = false;            // errors from a histogram, not from values
    Histogram values;                  // the tensor's values over a span holding every method's range
    std::vector<MethodResult> results; // applicable ones by MSE (ties: method order), then the skipped
    // The lowest-MSE applicable method, or null when none applies.
    const MethodResult* best() const;
};

// A weight: compareMethods on its values with the percentile p and the rms factor s the user set.
MethodComparisonData compareWeightMethods(const Tensor& x, const QuantizationSpec& spec, double percentile,
                                          double rmsFactor, std::string tensorName, size_t bins = 256,
                                          const CancellationToken& cancel = {});

// An activation: each method's range from the calibration observer, the error
// estimated on the observer's histogram (every bin's count at its centre).
MethodComparisonData compareActivationMethods(const Observer& observer, const CalibrationTarget& target,
                                              double percentile, double rmsFactor, size_t bins = 256,
                                              const CancellationToken& cancel = {});

} // namespace qs
