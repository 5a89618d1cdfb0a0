#pragma once
// What the method-comparison view plots, computed off the GUI thread: the
// histogram of a tensor and, per calibration method, the range it chooses and
// the error it gives (MSE, SQNR, clipped fraction), best (lowest MSE) first.
//
// Weights: analysis' compareMethods on the values, with the percentile p and
// the rms factor s the user set (a p or s compareMethods does not try is
// measured the same way). Activations: each method's range from the
// calibration observer, the error estimated on the observer's histogram
// (every bin's count at its centre).

#include <string>
#include <vector>

#include "quantization/method_comparison.h"
#include "calib/histogram.h"
#include "calib/observer.h"
#include "core/cancellation.h"

namespace qs {

struct MethodComparisonData {
    std::string tensor;
    bool activation = false;
    bool estimated = false;            // errors from a histogram, not from values
    Histogram values;                  // the tensor's values over a span holding every method's range
    std::vector<MethodResult> results; // applicable ones by MSE (ties: method order), then the skipped
    // The lowest-MSE applicable method, or null when none applies.
    const MethodResult* best() const;
};

// The methods compared for percentile p and rms factor s (method strings, in order).
std::vector<std::string> comparisonMethods(double percentile, double rmsFactor);

MethodComparisonData compareWeightMethods(const Tensor& x, const QuantizationSpec& spec, double percentile,
                                          double rmsFactor, std::string tensorName, size_t bins = 256,
                                          const CancellationToken& cancel = {});

MethodComparisonData compareActivationMethods(const Observer& observer, const CalibrationTarget& target,
                                              double percentile, double rmsFactor, size_t bins = 256,
                                              const CancellationToken& cancel = {});

} // namespace qs
