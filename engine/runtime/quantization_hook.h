#pragma once
// The NodeObserver that runs a model fake-quantized: before each node a plan
// layer governs, the weight input is replaced by the cached fake-quantized
// weight and, when the layer's rule sets act_qtype, the data input by its
// fake-quantized copy — with the static range from calibration or, for a
// dynamic activation, a range calibrated on this batch with the layer's method.
// The stored values are not changed, so the float path and the quantized path
// can run side by side on the same batch.
//
// Layers the plan gives a problem stay float, as do weights the quantizer
// reports a problem for (both are shown to the user where they are computed);
// a weight that is neither cached nor a problem is an Error (update() was not
// run with this plan). Inputs that are not floating point (integer
// activations) are never quantized. Replacements take the dtype of the input
// they replace (fp16 models get fp16 fake-quant values). beforeNode keeps no
// state, so one hook may serve concurrent runs.

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "graph/model.h"
#include "quantization/quantization_plan.h"
#include "quantization/weight_quantizer.h"
#include "runtime/activation_calibration.h"
#include "runtime/interpreter.h"

namespace qs {

// The fake-quantized copy of an activation `x` (float32, float16, bfloat16 or
// float64; the result has x's dtype): with `staticActivation`'s parameters
// when given, else with a range calibrated on x alone (a per-tensor
// calibrateRanges with the layer's method; microscaling types: their block
// scales along a.blockAxis). What the hook does to a data input. With
// `inPlace` (the caller owns x's storage: NodeEvent::ownedInputs), a float32 x
// whose range is calibrated on it and rounded to nearest on an element grid
// is overwritten and returned; other cases still make a copy. `extremes`, when
// given, are x's smallest and largest elements, all of x finite
// (NodeEvent::inputExtremes): a range by absmax or minmax then comes from them
// without reading x.
Tensor fakeQuantizeActivation(const Tensor& x, const ActivationQuantization& a,
                              const StaticActivation* staticActivation, bool inPlace = false,
                              const Range* extremes = nullptr);

class QuantizationHook : public NodeObserver {
public:
    // `staticActivations` (from staticActivations()) must hold every plan layer
    // with a static activation that is enabled; a missing one is an Error
    // naming the value ("needs calibration"). All references must outlive the hook.
    QuantizationHook(const Model& model, const QuantizationPlan& plan, const WeightQuantizer& weights,
                     const std::map<size_t, StaticActivation>& staticActivations);

    // Which model layers are quantized: all plan layers by default; the
    // isolated and sensitivity analyses enable one, or all but one. A mask
    // whose size is not the model's layer count is an Error. A weight several
    // layers share is one quantizer: every layer reading it reads it quantized
    // as soon as one of them is enabled (its activation follows its own flag).
    void setEnabledLayers(std::optional<std::vector<bool>> enabledByModelLayer);
    bool isEnabled(size_t modelLayer) const;
    bool isWeightEnabled(size_t modelLayer) const;
    void setQuantizeWeights(bool on) { weights_ = on; }
    void setQuantizeActivations(bool on) { activations_ = on; }

    // Optional: another observer called after this one's beforeNode and
    // around afterNode (e.g. one that records layer outputs).
    void setNext(NodeObserver* next) { next_ = next; }

    void beforeNode(NodeEvent& event) override;
    void afterNode(NodeEvent& event) override;
    // The hook rewrites layer inputs only, which fusion leaves as they are; the
    // next observer decides.
    // A bias-corrected layer without a bias gets its correction added to its output
    // after it runs, which fusion would hide: then every node.
    bool needsEveryNode() const override { return addsAfterNode_ || (next_ && next_->needsEveryNode()); }
    // Outputs: only a bias correction's (afterNode), and what the next observer reads.
    bool readsOutputs() const override { return addsAfterNode_ || (next_ && next_->readsOutputs()); }
    // Layers inside If/Loop/Scan bodies are quantized as any other (a Loop's
    // weight once, the same at every iteration); the next observer is shown
    // subgraph nodes only if it sees subgraphs itself.
    bool seesSubgraphs() const override { return true; }
    // Plan layers' nodes, and the nodes the next observer watches.
    bool observesNode(size_t scope, size_t nodeIndex) const override;
    // The activations quantized with a dynamic range by absmax or minmax: their
    // writers gather the extremes that range needs.
    bool wantsExtremesOf(std::string_view value) const override;

private:
    const Model& model_;
    const QuantizationPlan& plan_;
    const WeightQuantizer& weightCache_;
    const std::map<size_t, StaticActivation>& static_;
    std::optional<std::vector<bool>> enabled_;
    std::vector<bool> weightEnabled_; // with enabled_: per model layer, whether its weight's group is enabled
    bool weights_ = true;
    bool activations_ = true;
    NodeObserver* next_ = nullptr;
    bool addsAfterNode_ = false; // some bias_correction layer has no bias input
    // Values, as wantsExtremesOf answers (asked for every node of every run: hashed).
    struct NameHash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };
    std::unordered_set<std::string, NameHash, std::equal_to<>> rangedFromExtremes_;
};

} // namespace qs
