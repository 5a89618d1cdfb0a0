#pragma once
// What a RuleSet asks of one model: for every layer a rule applies to, how its
// weight is quantized (a QuantizationSpec) and how its input activation is
// quantized (ActivationQuantization). Built once per rule edit; cheap (no data
// is touched). The weight quantizer (quantization/weight_quantizer.h), the
// quantization hook (runtime/quantization_hook.h), calibration
// (runtime/activation_calibration.h) and the exporters all read it.
//
// The quantized activation of a layer is its data input: input 0 of Conv,
// ConvTranspose, Gemm and MatMul (MatMul with a constant right operand: the
// left one; with a constant left operand: the right one). Gather's indices are
// never quantized. Weights-only models (checkpoints) have no activations.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "calib/calibrate.h"
#include "calib/observer.h"
#include "graph/model.h"
#include "numerics/rounding.h"
#include "quantization/tensor_quantization.h"
#include "rules/ruleset.h"

namespace qs {

// How a rule set is applied. Ptq: rules as written (act_calibration defaults
// to absmax). Odml: the full-integer conversion of export/odml (act_calibration
// defaults to minmax).
enum class QuantizationMode : uint8_t { Ptq, Odml };
std::string_view quantizationModeName(QuantizationMode m); // "ptq", "odml"
std::optional<QuantizationMode> parseQuantizationMode(std::string_view name);

// One layer's quantized input activation. Always one scale per tensor.
struct ActivationQuantization {
    // The node input value that is quantized; in a subgraph, prefixed with the
    // scope's path ("Loop_0/body/h_in"): one value per scope, however often the
    // body runs (the node's input `input` names it inside the subgraph).
    std::string value;
    CalibrationMethod method;   // act_calibration, or the mode's default
    CalibrationTarget target;   // qtype (act_qtype), narrow range, scale restriction, symmetric
    bool staticScale = false;   // act_static_scale: range from calibration statistics; else from each batch
    std::vector<int> batchAxes; // act_batch_axes
    Rounding rounding = Rounding::Nearest;
    uint64_t seed = 0;
    size_t input = 0; // which node input `value` is
    // Microscaling act_qtype: the axis of the activation its blocks run along
    // (the input's contraction axis: 1 for Conv's [N, C, ...], the last for MatMul).
    int blockAxis = -1;
};

struct LayerQuantization {
    size_t layer = 0; // index into Model::layers
    size_t rule = 0;  // index of the rule that applies
    // weight_qtype set: the spec the weight is quantized with (axis = the
    // layer's channel axis; tiles along its first contraction axis, which the
    // weight quantizer moves last when it is not already).
    std::optional<QuantizationSpec> weight;
    Rounding weightRounding = Rounding::Nearest;
    uint64_t weightSeed = 0;
    // How the weight is rounded (the rule's algorithm). An algorithm other than
    // rtn reads the layer's data input (weightAlgorithmInput) during calibration.
    WeightAlgorithm weightAlgorithm;
    size_t weightAlgorithmInput = 0;
    // bias_correction: the rounded weight's output mean shift on the calibration
    // inputs (read from weightAlgorithmInput) is added to the layer's bias.
    bool biasCorrection = false;
    // equalize: the layer takes part in cross-layer equalization with its
    // neighbours that set it too (quantization/equalization.h); the session then
    // runs on the equalized model.
    bool equalize = false;
    // high_bias_absorption: with equalize, the layer's bias lower bound on the
    // calibration data moves into the next layer's bias (quantization/high_bias_absorption.h).
    bool highBiasAbsorption = false;
    // smooth_alpha (0 = off): SmoothQuant's α for this layer's input channels
    // (quantization/smoothing.h); the session then runs on the smoothed model.
    double smoothAlpha = 0;
    // Whether the weight quantizer reads the layer's calibration inputs (an
    // algorithm other than rtn, or bias_correction): calibration comes first.
    bool readsCalibrationInputs() const { return weightAlgorithm.needsCalibration() || biasCorrection; }
    // act_qtype set and the layer has a node: its input activation.
    std::optional<ActivationQuantization> activation;
    // Non-empty: why the rule cannot apply to this layer as written (e.g. a
    // tile size the contraction axis cannot take, act_qtype on a weights-only
    // model); the layer stays float and the text is shown to the user.
    std::string problem;
    // Non-empty: a part of the rule that does not apply to this layer while the
    // rest does (act_qtype on a weights-only model or on Gather, whose indices
    // are never quantized; tile_size with a microscaling type). Shown to the user.
    std::string note;
    // The weight's axes in the order it is quantized in: the first contraction
    // axis moved last when tiles or microscaling blocks run along it and it is
    // not last already; empty = the weight's own order.
    std::vector<int> weightAxes;
};

// An activation calibration must observe, and how.
struct ObservedActivation {
    std::string value;
    ObserverConfig config;      // batch axes of the first layer (model order) quantizing the value; per tensor
    std::vector<size_t> layers; // the layers whose input it is
};

// A layer that keeps its rule's rounding in a plan QuantizationPlan::withAlgorithm
// made, and why (the algorithm cannot take the layer or its weight_qtype).
struct KeptRounding {
    size_t layer = 0; // index into Model::layers
    std::string reason;
};

class QuantizationPlan {
public:
    QuantizationPlan() = default;
    // Resolves `rules` over `model.layers` (first full match, as RuleSet::resolve).
    static QuantizationPlan build(const Model& model, const RuleSet& rules,
                                  QuantizationMode mode = QuantizationMode::Ptq);

    QuantizationMode mode() const { return mode_; }
    const RuleResolution& resolution() const { return resolution_; }
    // The layers a rule applies to, in model order (problem layers included).
    const std::vector<LayerQuantization>& layers() const { return layers_; }
    const LayerQuantization* forLayer(size_t layer) const;
    // The plan layer at node `node` of scope `scope` (0: the main graph; else a
    // subgraph, Model::subgraphs), or nullptr.
    const LayerQuantization* forNode(size_t scope, size_t node) const;
    const LayerQuantization* forNode(size_t node) const { return forNode(0, node); }
    // The activations with act_qtype set (static or dynamic), one entry per
    // value, in model order of the first layer reading them. A value several
    // layers quantize is observed with the first layer's batch axes.
    std::vector<ObservedActivation> observedActivations() const;

    // This plan with every quantized layer's weight rounded by `algorithm`
    // instead of by its rule's algorithm: grids, activations and problems stay
    // as they are (a sensitivity run with an algorithm switched on). A layer the
    // algorithm cannot take (a non-integer weight_qtype, stochastic rounding, an
    // op or a Conv it refuses; layers sharing one weight all take it or all
    // keep) keeps its rule's rounding and is added to `kept`, model order.
    QuantizationPlan withAlgorithm(const Model& model, const WeightAlgorithm& algorithm,
                                   std::vector<KeptRounding>* kept = nullptr) const;

private:
    QuantizationMode mode_ = QuantizationMode::Ptq;
    RuleResolution resolution_;
    std::vector<LayerQuantization> layers_;
    std::vector<std::optional<size_t>> byLayer_;             // model layer -> index into layers_
    std::vector<std::vector<std::optional<size_t>>> byNode_; // [scope][node] -> index into layers_
};

} // namespace qs
