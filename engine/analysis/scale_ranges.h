#pragma once
// What the scale-range view plots, computed off the GUI thread: per channel
// of a weight, the data's min/max and the calibrated range it is clipped to,
// the whole tensor's range for contrast, and the scales (per channel, or per
// tile as a channels × tiles grid) with their spread. A wide spread of
// per-channel ranges is what tells a user per-channel scales or cross-layer
// equalization are needed.

#include <cstdint>
#include <string>
#include <vector>

#include "quantization/tensor_quantization.h"

namespace qs {

struct ScaleRangeData {
    std::string tensor;
    int channelAxis = 0;                // normalised
    int64_t channels = 0;               // channels along channelAxis
    std::vector<float> channelMin;      // data min per channel
    std::vector<float> channelMax;      // data max per channel
    std::vector<Range> calibrated;      // per channel: the envelope of its groups' calibrated ranges
    float tensorMin = 0, tensorMax = 0; // the whole tensor's data range
    Range tensorCalibrated;             // the envelope of every group's calibrated range

    // Scales: one per group, as a channels × tilesPerChannel grid (tilesPerChannel = 1:
    // one scale per channel; a per-tensor weight has channels × 1 copies of its one scale).
    std::vector<float> scales;
    int64_t tilesPerChannel = 1;
    bool perTensor = false;
    double scaleMin = 0, scaleMax = 0, scaleMean = 0, scaleStd = 0;
    double spread() const { return scaleMin > 0 ? scaleMax / scaleMin : 0; } // max / min

    // Channel indices by decreasing absmax (max(|min|, |max|)), ties by index.
    std::vector<int64_t> sortedByAbsMax() const;
    double channelAbsMax(int64_t c) const;
};

// `w` is float32 in the axis order of q.params.layout; `channelAxis` its channel axis.
// Throws Error naming the tensor when the layout's groups do not split along
// the channel axis (microscaling blocks) or the shapes disagree.
ScaleRangeData scaleRanges(const Tensor& w, const TensorQuantization& q, int channelAxis, std::string tensorName);

} // namespace qs
