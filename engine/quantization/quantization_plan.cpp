#include "quantization/quantization_plan.h"

#include <algorithm>
#include <cstdio>

#include "calib/compatibility.h"
#include "core/block_layout.h"
#include "core/error.h"
#include "numerics/qtype.h"
#include "quant/scale.h"
#include "quantization/rule_resolution.h"
#include "rules/rule.h"

namespace qs {
namespace {

// The node input a layer's op reads its activation from: of inputs 0 and 1,
// the one that is not the weight. Gather (indices) and unknown ops have none.
std::optional<size_t> dataInputOf(const QuantizableLayer& layer, const Node& node)
{
    static constexpr std::string_view kOps[] = {"Conv", "ConvTranspose", "Gemm", "MatMul"};
    if (std::find(std::begin(kOps), std::end(kOps), layer.opType) == std::end(kOps) || !layer.weightInput)
        return std::nullopt;
    const size_t input = *layer.weightInput == 0 ? 1 : 0;
    if (input >= node.inputs.size() || node.inputs[input].empty())
        return std::nullopt;
    return input;
}

// The axis of the activation that the op contracts: where microscaling blocks run.
int activationContractionAxis(const QuantizableLayer& layer, const Node& node, size_t input)
{
    if (layer.opType == "Conv" || layer.opType == "ConvTranspose")
        return 1; // [N, C, spatial...]
    if (layer.opType == "Gemm")
        return node.intAttribute("transA", 0) != 0 ? 0 : 1;
    return input == 0 ? -1 : -2; // MatMul: x·W contracts x's last axis, W·x contracts x's second-to-last
}

// The order of the weight's axes it is quantized in (see LayerQuantization::weightAxes).
std::vector<int> quantizationAxes(const QuantizableLayer& layer, bool alongContraction)
{
    const int rank = int(layer.weightShape.size());
    if (!alongContraction || layer.contractionAxes.empty())
        return {};
    const int contraction = normalizeAxis(layer.contractionAxes.front(), rank, "contraction axis");
    if (contraction == rank - 1)
        return {};
    std::vector<int> axes;
    for (int a = 0; a < rank; ++a)
        if (a != contraction)
            axes.push_back(a);
    axes.push_back(contraction);
    return axes;
}

// Names in the layer's note the fields the rule sets that do not apply to the weight's qtype
// (`granularity` too when `withGranularity`), and why (`because`).
void noteFieldsThatDoNotApply(const QuantizationRule& rule, const QuantizationSpec& spec, LayerQuantization& lq,
                              bool withGranularity, const char* because)
{
    std::vector<std::string> ignored;
    if (withGranularity && rule.granularity != QuantizationSpec{}.granularity)
        ignored.push_back("granularity");
    if (rule.symmetric)
        ignored.push_back("symmetric");
    if (rule.narrowRange)
        ignored.push_back("narrow_range");
    if (rule.scaleRestriction != ScaleRestriction::Float)
        ignored.push_back("scale_restriction");
    if (rule.rounding != Rounding::Nearest)
        ignored.push_back("rounding");
    if (ignored.empty())
        return;
    std::string fields;
    for (size_t i = 0; i < ignored.size(); ++i)
        fields += (i == 0 ? "" : i + 1 == ignored.size() ? " and " : ", ") + ignored[i];
    lq.note += (lq.note.empty() ? "" : "; ") + fields + (ignored.size() == 1 ? " does" : " do") +
               " not apply to the weight's " + std::string(qtypeName(spec.qtype)) + ", " + because;
}

// A GGUF block format is encoded exactly as llama.cpp's reference quantizer
// does: the rule's fields that would change that do not apply to the weight.
// Each one the rule sets is named in the layer's note, and the spec is reset
// to the defaults so that equal encodings compare (and cache) equal.
void ggufWeightSpec(const QuantizationRule& rule, QuantizationSpec& spec, LayerQuantization& lq)
{
    noteFieldsThatDoNotApply(rule, spec, lq, true, "whose blocks are encoded as llama.cpp's reference quantizer does");
    const QType t = spec.qtype;
    const CalibrationMethod method = spec.method;
    const int axis = spec.axis;
    spec = QuantizationSpec{};
    spec.qtype = t;
    spec.method = method; // checked below: only absmax is accepted
    spec.axis = axis;
    lq.weightRounding = Rounding::Nearest;
    lq.weightSeed = 0;
}

// A lut type finds its table by k-means on the weight's values: the rule's
// fields about a scale's range and rounding do not apply (granularity and
// tile_size do: they cut the groups). Each one the rule sets is named in the
// layer's note, and reset so that equal encodings compare (and cache) equal.
void lutWeightSpec(const QuantizationRule& rule, QuantizationSpec& spec, LayerQuantization& lq)
{
    noteFieldsThatDoNotApply(rule, spec, lq, false,
                             "whose table is found by k-means and whose values take their nearest entry");
    spec.symmetric.reset();
    spec.options = ScaleOptions{};
    lq.weightRounding = Rounding::Nearest;
    lq.weightSeed = 0;
}

// Why GPTQ, AWQ or AdaRound cannot run on this layer as written, or "": it needs the layer's
// calibration inputs as rows of the weight's contraction (MatMul x·W and Gemm
// with a 2-D weight, Conv over 1-D or 2-D inputs, grouped and depthwise included,
// explicit pads).
std::string algorithmProblem(const Model& model, const QuantizableLayer& layer, const QuantizationSpec& spec,
                             LayerQuantization& lq)
{
    // (The messages read "algorithm <name> ...": the name alone, never "algorithm" twice.)
    const std::string name(lq.weightAlgorithm.kind != WeightAlgorithmKind::Rtn ? lq.weightAlgorithm.name()
                                                                               : std::string_view("bias_correction"));
    if (!layer.node || !layer.weightInput)
        return "algorithm " + name + " needs the layer's calibration inputs, and a weights-only model has none to run";
    if (lq.weightAlgorithm.kind == WeightAlgorithmKind::Awq && lq.weightAlgorithm.awqClip &&
        spec.method.kind != CalibrationKind::AbsMax && spec.method.kind != CalibrationKind::MinMax)
        return "algorithm " + lq.weightAlgorithm.toString() + " clips the range absmax and minmax take from the " +
               "weight, and weight_calibration " + spec.method.toString() +
               " chooses its own range; use absmax or minmax, or awq," + std::to_string(lq.weightAlgorithm.awqGrid) +
               ",0";
    const Node& node = model.scopeGraph(layer.scope).nodes.at(*layer.node);
    const std::optional<size_t> input = dataInputOf(layer, node);
    if (!input)
        return "algorithm " + name + " needs a float data input, and a " + layer.opType + " layer has none";
    lq.weightAlgorithmInput = *input;
    const size_t rank = layer.weightShape.size();
    if (layer.opType == "MatMul" || layer.opType == "Gemm") {
        if (rank != 2)
            return "algorithm " + name + " takes a 2-D " + layer.opType + " weight, this one is " +
                   shapeToString(layer.weightShape);
        if (layer.opType == "MatMul" && *input != 0)
            return "algorithm " + name + " takes MatMul x·W (the weight on the right)";
        return {};
    }
    if (layer.opType == "Conv") {
        // A grouped Conv (depthwise included) is taken group by group: each group's output channels
        // against its own inputs' statistics.
        if (layer.groups < 1 || rank < 1 || layer.weightShape[0] % layer.groups != 0)
            return "algorithm " + name + ": the Conv's " + std::to_string(rank ? layer.weightShape[0] : 0) +
                   " output channels do not split into its " + std::to_string(layer.groups) + " groups";
        if (rank != 3 && rank != 4)
            return "algorithm " + name + " takes 1-D and 2-D Conv";
        if (spec.tileSize)
            return "algorithm " + name + " cuts tiles only on Gemm and MatMul weights; remove tile_size for Conv";
        if (const Attribute* pad = node.attribute("auto_pad"); pad && pad->s != "NOTSET" && pad->s != "VALID")
            return "algorithm " + name + " takes Conv with explicit pads (auto_pad " + pad->s + ")";
        return {};
    }
    return "algorithm " + name + " takes Conv, Gemm and MatMul layers, not " + layer.opType;
}

// Why bias_correction cannot run on this layer, or "": it writes the layer's bias
// input, which Conv (B) and Gemm (C, a vector of the output channels) have.
std::string biasCorrectionProblem(const Model& model, const QuantizableLayer& layer)
{
    if (layer.opType != "Conv" && layer.opType != "Gemm")
        return "bias_correction corrects a bias, and a " + layer.opType +
               " has none; it takes Conv and Gemm layers (leave it off for this one)";
    if (layer.scope != 0)
        return "bias_correction takes layers of the main graph, not of a subgraph";
    if (layer.sharesWeightOf)
        return "bias_correction: this layer shares its weight with '" +
               model.layers.at(*layer.sharesWeightOf).modulePath + "', and the correction is of one layer's bias";
    const Node& node = model.scopeGraph(layer.scope).nodes.at(*layer.node);
    for (const char* scale : {"alpha", "beta"})
        if (const Attribute* a = node.attribute(scale); a && layer.opType == "Gemm" && a->f != 1.0f)
            return std::string("bias_correction takes Gemm with ") + scale + " = 1 (this one has " +
                   std::to_string(a->f) + ")";
    if (node.inputs.size() > 2 && !node.inputs[2].empty()) {
        const Tensor* bias = model.initializer(node.inputs[2]);
        if (!bias)
            return "bias_correction needs a constant bias, and '" + node.inputs[2] + "' is computed";
        const int axis = normalizeAxis(layer.channelAxis, int(layer.weightShape.size()), "channel axis");
        if (bias->rank() != 1 || bias->shape()[0] != layer.weightShape[size_t(axis)])
            return "bias_correction needs a bias of one value per output channel, and '" + node.inputs[2] + "' is " +
                   shapeToString(bias->shape());
    }
    return {};
}

// The weight half of a layer's quantization; sets `problem` when the rule cannot apply.
void planWeight(const Model& model, const QuantizableLayer& layer, const QuantizationRule& rule, LayerQuantization& lq)
{
    QuantizationSpec spec;
    spec.qtype = *rule.weightQType;
    spec.method = rule.weightCalibration;
    spec.granularity = rule.granularity;
    spec.axis = layer.channelAxis;
    spec.tileSize = rule.tileSize;
    spec.symmetric = rule.symmetric;
    spec.options = {rule.narrowRange, rule.scaleRestriction};
    const bool microscaling = hasOwnBlockScales(spec.qtype); // microscaling or GGUF blocks
    if (microscaling && spec.tileSize) {
        lq.note = "tile_size does not apply to " + std::string(qtypeName(spec.qtype)) +
                  ", which has its own blocks of " + std::to_string(qtypeInfo(spec.qtype).blockSize) +
                  " along the contraction axis";
        spec.tileSize.reset();
    }
    lq.weightRounding = rule.rounding;
    lq.weightSeed = rule.roundingSeed;
    lq.weightAlgorithm = rule.algorithm;
    lq.biasCorrection = rule.biasCorrection;
    if (isGgufBlock(spec.qtype))
        ggufWeightSpec(rule, spec, lq);
    if (isLut(spec.qtype))
        lutWeightSpec(rule, spec, lq);
    lq.weight = spec;

    const std::string what = "weight '" + layer.weightName + "' " + shapeToString(layer.weightShape);
    try {
        if ((spec.tileSize || microscaling) && layer.contractionAxes.empty())
            throw Error("the layer has no contraction axis to cut tiles or blocks along");
        lq.weightAxes = quantizationAxes(layer, spec.tileSize.has_value() || microscaling);
        if (const MethodCompatibility c =
                methodCompatibility(spec.qtype, spec.method, spec.symmetric, "weight_calibration");
            !c)
            throw Error(c.reason);
        if (isGgufBlock(spec.qtype)) {
            // ggml's rows are the contraction axis (the weight's input features), moved last.
            const int rank = int(layer.weightShape.size());
            const int contraction = normalizeAxis(layer.contractionAxes.front(), rank, "contraction axis");
            const int64_t rowLength = layer.weightShape[size_t(contraction)];
            const int blockSize = qtypeInfo(spec.qtype).blockSize;
            if (rowLength % blockSize != 0)
                throw Error("layer '" + layer.modulePath + "': " + std::string(qtypeName(spec.qtype)) +
                            " encodes rows along the contraction axis (axis " + std::to_string(contraction) + ", " +
                            std::to_string(rowLength) + " input features) in blocks of " + std::to_string(blockSize) +
                            ", and " + std::to_string(rowLength) + " is not a multiple of " +
                            std::to_string(blockSize) +
                            (blockSize == 256 ? "; use q8_0, q4_0, q4_1, q5_0 or q5_1 (blocks of 32) for this layer"
                                              : "; leave this layer float or use another type"));
        }
        if (lq.readsCalibrationInputs())
            if (const std::string why = algorithmProblem(model, layer, spec, lq); !why.empty())
                throw Error(why);
        if (lq.biasCorrection)
            if (const std::string why = biasCorrectionProblem(model, layer); !why.empty())
                throw Error(why);
        if (microscaling)
            return;
        Shape shape = layer.weightShape;
        if (!lq.weightAxes.empty()) {
            for (size_t i = 0; i < lq.weightAxes.size(); ++i)
                shape[i] = layer.weightShape[size_t(lq.weightAxes[i])];
            spec.axis = int(std::find(lq.weightAxes.begin(), lq.weightAxes.end(),
                                      normalizeAxis(layer.channelAxis, int(shape.size()), "channel axis")) -
                            lq.weightAxes.begin());
        }
        (void)layoutFor(shape, spec);
    } catch (const Error& e) {
        lq.problem = what + ": " + e.what();
    }
}

// The activation half of a layer's quantization (or a note why it does not apply).
void planActivation(const Model& model, const QuantizableLayer& layer, const QuantizationRule& rule,
                    QuantizationMode mode, LayerQuantization& lq)
{
    auto addNote = [&lq](const std::string& text) { lq.note += (lq.note.empty() ? "" : "; ") + text; };
    if (!layer.node) {
        addNote("act_qtype does not apply: a weights-only model has no activations");
        return;
    }
    const Node& node = model.scopeGraph(layer.scope).nodes.at(*layer.node);
    const std::optional<size_t> input = dataInputOf(layer, node);
    if (!input) {
        addNote("act_qtype does not apply: a " + layer.opType + " layer has no float data input to quantize");
        return;
    }
    ActivationQuantization a;
    a.value = layer.scope ? model.scopePath(layer.scope) + "/" + node.inputs[*input] : node.inputs[*input];
    a.input = *input;
    a.method = rule.actMethod(CalibrationMethod::parse(mode == QuantizationMode::Odml ? "minmax" : "absmax"));
    a.target.qtype = *rule.actQType;
    a.target.options = {rule.narrowRange, rule.scaleRestriction};
    a.target.symmetric = rule.symmetric;
    a.staticScale = rule.actStaticScale;
    a.batchAxes = rule.actBatchAxes;
    a.rounding = rule.rounding;
    a.seed = rule.roundingSeed;
    a.blockAxis = activationContractionAxis(layer, node, *input);
    lq.activation = a;

    const std::string what = "activation '" + a.value + "'";
    try {
        if (isMicroscaling(a.target.qtype) && a.staticScale)
            throw Error(std::string(qtypeName(a.target.qtype)) +
                        " computes its block scales from each batch; set act_static_scale to false");
        if (const MethodCompatibility c =
                methodCompatibility(a.target.qtype, a.method, a.target.symmetric, "act_calibration");
            !c)
            throw Error(c.reason);
    } catch (const Error& e) {
        lq.problem += (lq.problem.empty() ? "" : "; ") + what + ": " + e.what();
    }
}

// How a plan entry quantizes its layer's weight, for the shared-weight error:
// "int8 per_channel absmax (rule 2)", "float (rule 2 sets no weight_qtype)",
// "float (no rule matches)".
std::string describeWeightQuantization(const LayerQuantization* lq)
{
    if (!lq)
        return "float (no rule matches it)";
    const std::string rule = "rule " + std::to_string(lq->rule);
    if (!lq->weight)
        return "float (" + rule + " sets no weight_qtype)";
    const QuantizationSpec& w = *lq->weight;
    std::string text =
        std::string(qtypeName(w.qtype)) + " " + std::string(granularityName(w.granularity)) + " " + w.method.toString();
    if (w.tileSize) {
        char tile[32];
        std::snprintf(tile, sizeof tile, "%g", *w.tileSize);
        text += ", tile_size " + std::string(tile);
    }
    if (w.symmetric)
        text += *w.symmetric ? ", symmetric" : ", asymmetric";
    if (w.options.narrowRange)
        text += ", narrow range";
    if (w.options.restriction != ScaleRestriction::Float)
        text += ", " + std::string(scaleRestrictionName(w.options.restriction)) + " scales";
    if (lq->weightRounding != Rounding::Nearest)
        text += ", " + std::string(roundingName(lq->weightRounding)) + " rounding (seed " +
                std::to_string(lq->weightSeed) + ")";
    if (lq->weightAlgorithm.kind != WeightAlgorithmKind::Rtn)
        text += ", algorithm " + lq->weightAlgorithm.toString();
    return text + " (" + rule + ")";
}

bool sameWeightQuantization(const LayerQuantization* a, const LayerQuantization* b)
{
    const bool aQuantized = a && a->weight, bQuantized = b && b->weight;
    if (aQuantized != bQuantized)
        return false;
    return !aQuantized || (*a->weight == *b->weight && a->weightRounding == b->weightRounding &&
                           a->weightAlgorithm == b->weightAlgorithm &&
                           (a->weightRounding == Rounding::Nearest || a->weightSeed == b->weightSeed));
}

} // namespace

std::string_view quantizationModeName(QuantizationMode m)
{
    return m == QuantizationMode::Odml ? "odml" : "ptq";
}

std::optional<QuantizationMode> parseQuantizationMode(std::string_view name)
{
    if (name == "ptq")
        return QuantizationMode::Ptq;
    if (name == "odml")
        return QuantizationMode::Odml;
    return std::nullopt;
}

QuantizationPlan QuantizationPlan::build(const Model& model, const RuleSet& rules, QuantizationMode mode)
{
    QuantizationPlan plan;
    plan.mode_ = mode;
    plan.resolution_ = resolveRules(rules, model);
    plan.byLayer_.assign(model.layers.size(), std::nullopt);
    plan.byNode_.assign(1 + model.subgraphs.size(), {});
    for (size_t scope = 0; scope < plan.byNode_.size(); ++scope)
        plan.byNode_[scope].assign(model.scopeGraph(scope).nodes.size(), std::nullopt);
    for (size_t l = 0; l < model.layers.size(); ++l) {
        const std::optional<size_t> rule = plan.resolution_.ruleOfLayer[l];
        if (!rule)
            continue;
        const QuantizableLayer& layer = model.layers[l];
        const QuantizationRule& r = rules.rules()[*rule];
        LayerQuantization lq;
        lq.layer = l;
        lq.rule = *rule;
        lq.equalize = r.equalize;
        lq.highBiasAbsorption = r.highBiasAbsorption;
        lq.smoothAlpha = r.smoothAlpha;
        if (r.weightQType)
            planWeight(model, layer, r, lq);
        if (r.actQType)
            planActivation(model, layer, r, mode, lq);
        plan.byLayer_[l] = plan.layers_.size();
        if (layer.node && layer.scope < plan.byNode_.size() && *layer.node < plan.byNode_[layer.scope].size())
            plan.byNode_[layer.scope][*layer.node] = plan.layers_.size();
        plan.layers_.push_back(std::move(lq));
    }
    // A weight several layers read is one quantizer (QuantizableLayer::sharesWeightOf).
    for (size_t l = 0; l < model.layers.size(); ++l) {
        const QuantizableLayer& layer = model.layers[l];
        if (!layer.sharesWeightOf)
            continue;
        const QuantizableLayer& first = model.layers.at(*layer.sharesWeightOf);
        const LayerQuantization* a = plan.forLayer(*layer.sharesWeightOf);
        const LayerQuantization* b = plan.forLayer(l);
        if (!sameWeightQuantization(a, b))
            throw Error("layers '" + first.modulePath + "' and '" + layer.modulePath + "' read the same weight '" +
                        layer.weightName + "', which is quantized once for both, but the rules quantize it as " +
                        describeWeightQuantization(a) + " in the first and as " + describeWeightQuantization(b) +
                        " in the second; make the rules that match these layers agree on the weight");
    }
    return plan;
}

const LayerQuantization* QuantizationPlan::forLayer(size_t layer) const
{
    if (layer >= byLayer_.size() || !byLayer_[layer])
        return nullptr;
    return &layers_[*byLayer_[layer]];
}

const LayerQuantization* QuantizationPlan::forNode(size_t scope, size_t node) const
{
    if (scope >= byNode_.size() || node >= byNode_[scope].size() || !byNode_[scope][node])
        return nullptr;
    return &layers_[*byNode_[scope][node]];
}

std::vector<ObservedActivation> QuantizationPlan::observedActivations() const
{
    std::vector<ObservedActivation> out;
    for (const LayerQuantization& lq : layers_) {
        if (!lq.activation || !lq.problem.empty())
            continue;
        auto it = std::find_if(out.begin(), out.end(),
                               [&](const ObservedActivation& o) { return o.value == lq.activation->value; });
        if (it == out.end()) {
            ObservedActivation o;
            o.value = lq.activation->value;
            o.config.batchAxes = lq.activation->batchAxes;
            o.config.channelAxis = -1;
            out.push_back(std::move(o));
            it = out.end() - 1;
        }
        it->layers.push_back(lq.layer);
    }
    return out;
}

QuantizationPlan QuantizationPlan::withAlgorithm(const Model& model, const WeightAlgorithm& algorithm,
                                                 std::vector<KeptRounding>* kept) const
{
    QuantizationPlan plan = *this;
    // Why each plan layer cannot take `algorithm` ("" = it can), then one answer per shared weight.
    std::vector<std::string> why(plan.layers_.size());
    for (size_t i = 0; i < plan.layers_.size(); ++i) {
        LayerQuantization& lq = plan.layers_[i];
        if (!lq.weight || !lq.problem.empty())
            continue;
        if (algorithm.kind == WeightAlgorithmKind::Rtn)
            continue; // every grid takes round-to-nearest
        LayerQuantization trial = lq;
        trial.weightAlgorithm = algorithm;
        const std::string name(algorithm.name());
        if (qtypeInfo(lq.weight->qtype).kind != QKind::Integer)
            why[i] = name + " rounds onto an integer grid, and weight_qtype " +
                     std::string(qtypeName(lq.weight->qtype)) + " is not one";
        else if (lq.weightRounding != Rounding::Nearest)
            why[i] = name + " replaces the rounding, and the rule asks for stochastic rounding";
        else
            why[i] = algorithmProblem(model, model.layers.at(lq.layer), *lq.weight, trial);
        if (why[i].empty())
            lq.weightAlgorithmInput = trial.weightAlgorithmInput;
    }
    // Twice: a reader that keeps makes the first keep, and the first then every other reader.
    for (int pass = 0; pass < 2; ++pass) {
        for (size_t i = 0; i < plan.layers_.size(); ++i) {
            const QuantizableLayer& layer = model.layers.at(plan.layers_[i].layer);
            if (!layer.sharesWeightOf || !plan.byLayer_.at(*layer.sharesWeightOf))
                continue;
            const size_t first = *plan.byLayer_[*layer.sharesWeightOf];
            if (why[first].empty() && !why[i].empty())
                why[first] =
                    "it shares its weight with '" + layer.modulePath + "', which keeps its rounding: " + why[i];
            if (why[i].empty() && !why[first].empty())
                why[i] = "it shares its weight with '" + model.layers.at(plan.layers_[first].layer).modulePath +
                         "', which keeps its rounding: " + why[first];
        }
    }
    for (size_t i = 0; i < plan.layers_.size(); ++i) {
        LayerQuantization& lq = plan.layers_[i];
        if (!lq.weight || !lq.problem.empty())
            continue;
        if (why[i].empty())
            lq.weightAlgorithm = algorithm;
        else if (kept)
            kept->push_back({lq.layer, why[i]});
    }
    return plan;
}

} // namespace qs
