#pragma once
// What the distribution view plots, computed off the GUI thread from engine
// results (no painting, no raw values kept): the histogram of a weight or of
// an activation, its clipping range, the histogram of its fake-quantized
// values on the same bins, and the element-wise error x − fake_quant(x) split
// into rounding error (x inside its group's range) and clipping error
// (outside). A tensor of any size becomes a few hundred numbers here.
//
// Weights are binned from their values (exact). Activations come from the
// calibration observer's histogram: every bin's count is taken to sit at the
// bin's centre, so fake-quant, error and clipped counts are estimates up to a
// bin width (`estimated` says so and the view shows it).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "quantization/tensor_quantization.h"
#include "calib/histogram.h"
#include "calib/observer.h"
#include "core/cancellation.h"
#include "quant/reference.h"

namespace qs {

// How many standard deviations from the mean make an element an outlier.
inline constexpr double kOutlierSigmas = 6.0;

struct DistributionData {
    std::string tensor; // the weight's initializer or the activation's value name
    bool activation = false;
    bool estimated = false;         // binned from an observer histogram, not from values
    int64_t elements = 0;           // elements counted (the chosen channel's, when one is chosen)
    std::optional<int64_t> channel; // the channel shown; none = the whole tensor
    int64_t channels = 1;           // channels along the channel axis (1 = per tensor)

    Histogram values;    // x
    Histogram fakeQuant; // fake_quant(x) on the same bins as `values`
    Range range;         // the clipping range drawn: the group's, or the envelope of all groups' ranges
    // The grid of the group shown (one scale): set when the shown elements share one scale.
    std::optional<GroupQuant> grid;

    int64_t clipped = 0;        // elements outside their own group's range
    double clippedFraction = 0; // clipped / elements: analysis' fractionClipped
    int64_t outliers = 0;       // elements further than kOutlierSigmas standard deviations from the mean
    double mean = 0, stddev = 0;

    Histogram roundingError;   // x − fake_quant(x) of the elements inside their range
    Histogram clippingError;   // x − fake_quant(x) of the elements outside their range
    int64_t roundingCount = 0; // elements in roundingError
    int64_t clippingCount = 0; // elements in clippingError

    // All channels as a heat strip: channels × stripBins counts over [values.lo, values.hi],
    // row c = channel c; with each channel's clipping range.
    int64_t stripBins = 0;
    std::vector<int64_t> strip;
    std::vector<Range> channelRanges;
};

// A weight `x` (float32 in the axis order of q.params.layout), its fake-quantized
// values (same shape) and its quantization. channelAxis < 0 = no channels.
// With `channel`, only that index along the channel axis is counted.
DistributionData weightDistribution(const Tensor& x, const Tensor& fakeQuant, const TensorQuantization& q,
                                    int channelAxis, std::optional<int64_t> channel, std::string tensorName,
                                    size_t bins = 256, const CancellationToken& cancel = {});

// An activation from its observer (per-tensor group 0) and the parameters its rule gives it.
DistributionData activationDistribution(const Observer& observer, const QuantParams& params, Range range,
                                        size_t bins = 256);

// The grid values (value units) of a group inside [lo, hi], at most maxCount of
// them (none when more would fall inside: the grid is too dense to draw).
std::vector<float> gridValuesIn(const GroupQuant& g, double lo, double hi, size_t maxCount);

} // namespace qs
