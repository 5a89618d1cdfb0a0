#pragma once
// Streaming observers for activations (DESIGN.md: statistics are gathered per
// batch and averaged over batches). An observer is fed one batch at a time and
// afterwards produces ranges for any calibration method without seeing the data
// again; it can be saved to JSON and loaded back.
//
// Per batch, as Qwix does for static-range activations: statistics are taken
// per sample (each index of the batch axes) and per group (per tensor, or per
// index of the channel axis), then averaged over the samples — the batch axes are
// reduced first. Those per-batch values (min, max, absmax, rms) are averaged
// over batches with a simple moving average (sum / number of batches). Besides,
// the observer keeps the all-time min and max and, per group, a GrowingHistogram
// of all values (calib/histogram.h) for the histogram methods.
//
// Ranges per method: absmax,s ±s·avg(absmax); minmax,s [s·avg(min), s·avg(max)];
// rms,s ±s·avg(rms); fixed as given; percentile from the histogram
// (histogramPercentile: exact up to a bin); mse the search of calib/clipping.h
// on the histogram of x with the all-time min/max; entropy the TensorRT search on
// the histogram of |x| (two-sided: of x) cut to the bins that hold data.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "calib/calibrate.h"
#include "calib/histogram.h"
#include "core/tensor.h"

namespace qs {

struct ObserverConfig {
    std::vector<int> batchAxes{0};   // axes whose per-index statistics are averaged (act_batch_axes)
    int channelAxis = -1;            // per-channel statistics along this axis; −1 = per tensor
    int histogramBinsPerSide = 2048; // resolution of the growing histograms; 0 keeps none
};

class Observer {
public:
    // `name` names the activation in errors.
    explicit Observer(std::string name, ObserverConfig config = {});

    // One batch of float32 values in row-major order of `shape`.
    void observe(std::span<const float> x, const Shape& shape);
    // One batch of any numeric dtype.
    void observe(const Tensor& batch);

    const std::string& name() const { return name_; }
    const ObserverConfig& config() const { return config_; }
    int64_t batches() const { return batches_; }
    int64_t groupCount() const { return int64_t(sumMin_.size()); }

    // Simple moving averages over batches of the per-batch statistics of group g.
    double averageMin(size_t g) const { return sumMin_[g] / double(batches_); }
    double averageMax(size_t g) const { return sumMax_[g] / double(batches_); }
    double averageAbsMax(size_t g) const { return sumAbsMax_[g] / double(batches_); }
    double averageRms(size_t g) const { return sumRms_[g] / double(batches_); }
    // All-time extremes of group g.
    float runningMin(size_t g) const { return runningMin_[g]; }
    float runningMax(size_t g) const { return runningMax_[g]; }
    float runningAbsMax(size_t g) const { return std::max(-runningMin_[g], runningMax_[g]); }
    // Needs histogramBinsPerSide > 0.
    const GrowingHistogram& histogram(size_t g) const { return histograms_.at(g); }

    // One range per group. Throws Error when nothing was observed, when a
    // histogram method is asked of an observer without histograms, for a
    // microscaling qtype, or for an unsigned qtype under a symmetric method when
    // the activation went negative (checkUnsignedSymmetric). Fills `report` when given.
    std::vector<Range> ranges(const CalibrationMethod& m, const CalibrationTarget& target,
                              CalibrationReport* report = nullptr) const;

    nlohmann::json toJson() const;
    static Observer fromJson(const nlohmann::json& j);

private:
    std::string name_;
    ObserverConfig config_;
    int64_t batches_ = 0;
    std::vector<double> sumMin_, sumMax_, sumAbsMax_, sumRms_; // per group, over batches
    std::vector<float> runningMin_, runningMax_;
    std::vector<GrowingHistogram> histograms_;
};

} // namespace qs
