#pragma once
// The NodeObserver that runs a model fake-quantized: before each node a plan
// layer governs, the weight input is replaced by the cached fake-quantized
// weight and, when the layer's rule sets act_qtype, the data input by its
// fake-quantized copy — with the static range from calibration or, for a
// dynamic activation, a range calibrated on this batch with the layer's method.
// The stored values are not changed, so the float path and the quantized path
// can run side by side on the same batch.

#include <cstddef>
#include <map>
#include <optional>
#include <vector>

#include "graph/model.h"
#include "runtime/activation_calibration.h"
#include "runtime/interpreter.h"
#include "runtime/quantization_plan.h"
#include "runtime/weight_quantizer.h"

namespace qs {

class QuantizationHook : public NodeObserver {
public:
    // `staticActivations` (from staticActivations()) must hold every plan layer
    // with a static activation that is enabled; a missing one is an Error
    // naming the value ("needs calibration"). All references must outlive the hook.
    QuantizationHook(const Model& model, const QuantizationPlan& plan, const WeightQuantizer& weights,
                     const std::map<size_t, StaticActivation>& staticActivations);

    // Which model layers are quantized: all plan layers by default; the
    // isolated and sensitivity analyses enable one, or all but one.
    void setEnabledLayers(std::optional<std::vector<bool>> enabledByModelLayer);
    void setQuantizeWeights(bool on) { weights_ = on; }
    void setQuantizeActivations(bool on) { activations_ = on; }

    // Optional: another observer called after this one's beforeNode and
    // around afterNode (e.g. one that records layer outputs).
    void setNext(NodeObserver* next) { next_ = next; }

    void beforeNode(NodeEvent& event) override;
    void afterNode(NodeEvent& event) override;

private:
    const Model& model_;
    const QuantizationPlan& plan_;
    const WeightQuantizer& weightCache_;
    const std::map<size_t, StaticActivation>& static_;
    std::optional<std::vector<bool>> enabled_;
    bool weights_ = true;
    bool activations_ = true;
    NodeObserver* next_ = nullptr;
};

} // namespace qs
