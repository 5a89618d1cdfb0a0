#pragma once
// Activation calibration: runs the float model on calibration batches with an
// Observer (calib/observer.h) on exactly the activations the plan quantizes,
// and keeps the statistics, not ranges — so changing a rule's act_calibration
// method recomputes ranges from the same statistics without running the model
// again. The statistics serialize to JSON (the session file and
// `quantscope-cli quantize --calib` reuse them).

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "calib/observer.h"
#include "core/cancellation.h"
#include "io/data_source.h"
#include "quant/scale.h"
#include "quantization/input_hessian.h"
#include "quantization/quantization_plan.h"
#include "runtime/interpreter.h"

namespace qs {

class ActivationStatistics {
public:
    // The observer of a value, or null when it was not observed.
    const Observer* find(const std::string& value) const;
    const std::map<std::string, Observer>& observers() const { return observers_; }
    int64_t batches() const { return batches_; }
    // Whether every activation `plan` quantizes statically was observed with
    // the batch axes it asks for, and every layer whose algorithm reads
    // calibration inputs has its Hessian (if not, calibration must run again).
    bool covers(const QuantizationPlan& plan) const;

    void add(Observer observer);
    void setBatches(int64_t batches) { batches_ = batches; }

    // Per plan layer whose algorithm reads calibration inputs (gptq), the
    // Hessian of its inputs (quantization/input_hessian.h). Not written to JSON
    // (a session file restores the observers only: such layers calibrate again).
    const LayerHessians& hessians() const { return hessians_; }
    void setHessians(LayerHessians hessians) { hessians_ = std::move(hessians); }

    nlohmann::json toJson() const;
    // Throws Error naming the field for a malformed document.
    static ActivationStatistics fromJson(const nlohmann::json& j);
    void save(const std::filesystem::path& file) const; // atomic write
    static ActivationStatistics load(const std::filesystem::path& file);

private:
    std::map<std::string, Observer> observers_;
    LayerHessians hessians_;
    int64_t batches_ = 0;
};

// Which observed activations keep histograms. Counting every value into a
// histogram costs more than the statistics: on mobilenet_v3_small it adds
// 60-80% to a float run, the statistics 10% (docs/benchmarks.md).
enum class KeptHistograms : uint8_t {
    // Every observed activation: any method, and the distribution charts, can
    // use the statistics afterwards without running the model again (the GUI).
    All,
    // Only activations a layer calibrates with a histogram method (percentile,
    // mse, entropy): what the plan needs and no more (a one-shot CLI run).
    AsPlanNeeds,
};

struct CalibrationOptions {
    std::optional<int64_t> maxBatches; // stop after this many batches; default all
    int histogramBinsPerSide = 2048;   // resolution of the observers' histograms
    KeptHistograms histograms = KeptHistograms::All;
};

// Calibration one batch at a time, for callers that hold their own batches
// (calibrateActivations drives it over a DataSource; bench-model times it).
class ActivationCalibrator {
public:
    // Observers for every activation of plan.observedActivations(), with
    // histograms of `histogramBinsPerSide` bins per side where `kept` says, and
    // a Hessian for every layer whose algorithm reads calibration inputs. The
    // interpreter and the plan must outlive the calibrator.
    ActivationCalibrator(const Interpreter& interpreter, const QuantizationPlan& plan, int histogramBinsPerSide = 2048,
                         KeptHistograms kept = KeptHistograms::All);
    ~ActivationCalibrator();
    ActivationCalibrator(const ActivationCalibrator&) = delete;
    ActivationCalibrator& operator=(const ActivationCalibrator&) = delete;

    // Runs one batch in float (every graph input by name), feeding the
    // observers; returns the graph outputs. Cancelled between nodes.
    std::map<std::string, Tensor> observe(std::map<std::string, Tensor> inputs, const CancellationToken& cancel = {});
    int64_t batches() const { return batches_; }
    // The statistics of the batches observed so far; the calibrator is spent.
    ActivationStatistics finish();

private:
    class Feeder;
    const Interpreter& interpreter_;
    std::map<std::string, Observer> observers_;
    std::map<size_t, std::shared_ptr<InputHessian>> hessians_; // plan layer -> its Hessian, accumulating
    std::unique_ptr<Feeder> feeder_;
    int64_t batches_ = 0;
};

// Runs `data` (rewound first) through `interpreter` in float, observing every
// activation of plan.observedActivations(). Progress is reported per batch
// and the token checked per batch and between nodes. Throws Error naming the
// data file for a batch the model rejects, Cancelled on cancellation.
ActivationStatistics calibrateActivations(const Interpreter& interpreter, const QuantizationPlan& plan,
                                          DataSource& data, const CalibrationOptions& options = {},
                                          const CancellationToken& cancel = {}, const ProgressCallback& progress = {});

// A statically quantized activation's range and parameters.
struct StaticActivation {
    Range range;
    QuantParams params; // one group (per tensor)
};

// The static range and parameters of activation `a` from its observer: the
// range of the rule's method, one scale for the whole tensor. The one place
// observer statistics become an activation's quantization parameters (the
// per-batch dynamic ones aside). Throws Error as Observer::ranges does.
StaticActivation staticActivationFrom(const Observer& observer, const ActivationQuantization& a);

// Per plan layer with a static activation: its range from the statistics with
// the layer's method. Throws Error naming the value when the statistics lack it.
std::map<size_t, StaticActivation> staticActivations(const QuantizationPlan& plan,
                                                     const ActivationStatistics& statistics);

} // namespace qs
