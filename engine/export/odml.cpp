#include "export/odml.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <nlohmann/json.hpp>

#include "calib/observer.h"
#include "core/atomic_file.h"
#include "core/error.h"

namespace qs {

namespace {

using OpScheme = OdmlScheme;

struct OpEntry {
    OpScheme scheme;
    float fixedScale = 0; // FixedScale: the output's scale and zero point
    int fixedZeroPoint = 0;
    bool constantOperands = false; // float constant inputs are int8 operands (Add's constant)
};

// The one op table: every op ODML strict mode accepts. Clip, Relu, Div, MatMul,
// Gather, Conv, ConvTranspose and Gemm are refined per node (classify()).
const std::map<std::string, OpEntry>& opTable()
{
    static const std::map<std::string, OpEntry> table = {
        {"Conv", {OpScheme::Layer}},
        {"ConvTranspose", {OpScheme::Layer}},
        {"Gemm", {OpScheme::Layer}},
        {"MatMul", {OpScheme::Layer}},
        {"Gather", {OpScheme::Layer}},
        {"Relu", {OpScheme::OwnScale}},
        {"Clip", {OpScheme::PassThrough}},
        {"MaxPool", {OpScheme::PassThrough}},
        {"AveragePool", {OpScheme::PassThrough}},
        {"Reshape", {OpScheme::PassThrough}},
        {"Flatten", {OpScheme::PassThrough}},
        {"Transpose", {OpScheme::PassThrough}},
        {"Squeeze", {OpScheme::PassThrough}},
        {"Unsqueeze", {OpScheme::PassThrough}},
        {"Identity", {OpScheme::PassThrough}},
        {"Dropout", {OpScheme::PassThrough}},
        {"Pad", {OpScheme::PassThrough}},
        {"Resize", {OpScheme::PassThrough}},
        {"Upsample", {OpScheme::PassThrough}},
        {"Slice", {OpScheme::PassThrough}},
        {"Split", {OpScheme::PassThrough}},
        {"DepthToSpace", {OpScheme::PassThrough}},
        {"SpaceToDepth", {OpScheme::PassThrough}},
        {"Add", {OpScheme::OwnScale, 0, 0, true}},
        {"Sub", {OpScheme::OwnScale, 0, 0, true}},
        {"Mul", {OpScheme::OwnScale, 0, 0, true}},
        {"Div", {OpScheme::OwnScale, 0, 0, true}},
        {"Concat", {OpScheme::OwnScale, 0, 0, true}},
        {"PRelu", {OpScheme::OwnScale, 0, 0, true}},
        {"GlobalAveragePool", {OpScheme::OwnScale}},
        {"ReduceMean", {OpScheme::OwnScale}},
        {"HardSwish", {OpScheme::OwnScale}},
        {"HardSigmoid", {OpScheme::OwnScale}},
        {"LeakyRelu", {OpScheme::OwnScale}},
        {"Sigmoid", {OpScheme::FixedScale, 1.0f / 256.0f, -128}},
        {"Softmax", {OpScheme::FixedScale, 1.0f / 256.0f, -128}},
        {"Tanh", {OpScheme::FixedScale, 1.0f / 128.0f, 0}},
        {"LogSoftmax", {OpScheme::FixedScale, 16.0f / 256.0f, 127}},
    };
    return table;
}

std::string_view schemeName(OpScheme s)
{
    switch (s) {
    case OpScheme::Layer:
        return "layer";
    case OpScheme::PassThrough:
        return "pass_through";
    case OpScheme::OwnScale:
        return "own_scale";
    case OpScheme::FixedScale:
        return "fixed_scale";
    case OpScheme::Fused:
        return "fused";
    case OpScheme::NotQuantized:
        return "not_quantized";
    }
    return "?";
}

// One value that gets its own activation range.
struct ActivationValue {
    CalibrationMethod method = CalibrationMethod::parse("minmax");
    CalibrationTarget target;
    std::vector<int> batchAxes{0};
    bool methodFromLayer = false;
    std::optional<std::pair<float, int>> fixed; // a FixedScale op's output: (scale, zero point)
};

// The values of the graph that hold float data computed from the data of a
// graph input (what the integer model holds as int8): an embedding's output
// (a constant table gathered by token ids) is one; shapes, indices, masks and
// values computed from constants or from Shape/Size only are not.
std::set<std::string> floatActivationValues(const Model& model)
{
    std::map<std::string, DType> declared;
    for (const std::vector<ValueInfo>* list : {&model.valueInfos, &model.outputs})
        for (const ValueInfo& v : *list)
            if (v.dtype)
                declared[v.name] = *v.dtype;
    static const std::set<std::string> kNeverFloat = {
        "Shape",       "Size",           "NonZero", "ArgMax", "ArgMin", "Equal", "Less",  "Greater",
        "LessOrEqual", "GreaterOrEqual", "Not",     "And",    "Or",     "Xor",   "IsNaN", "IsInf"};
    std::set<std::string> fromData, floats;
    for (const ValueInfo& v : model.inputs) {
        fromData.insert(v.name);
        if (v.dtype && isFloatingDType(*v.dtype))
            floats.insert(v.name);
    }
    for (const NamedTensor& t : model.initializers())
        if (isFloatingDType(t.tensor.dtype()))
            floats.insert(t.name);
    for (const Node& node : model.nodes) {
        bool dataInput = false, floatInput = false;
        for (const std::string& in : node.inputs)
            dataInput = dataInput || fromData.contains(in), floatInput = floatInput || floats.contains(in);
        const bool data = dataInput && node.opType != "Shape" && node.opType != "Size";
        for (size_t k = 0; k < node.outputs.size(); ++k) {
            const std::string& out = node.outputs[k];
            if (out.empty())
                continue;
            if (data)
                fromData.insert(out);
            bool isFloat = floatInput && !kNeverFloat.contains(node.opType) &&
                           !(k > 0 && (node.opType == "MaxPool" || node.opType == "TopK" || node.opType == "Dropout"));
            if (node.opType == "Cast") {
                const int64_t to = node.intAttribute("to", 1);
                isFloat = to == 1 || to == 10 || to == 11 || to == 16;
            }
            if (const auto d = declared.find(out); d != declared.end())
                isFloat = isFloatingDType(d->second);
            if (isFloat)
                floats.insert(out);
        }
    }
    std::set<std::string> values;
    for (const std::string& v : fromData)
        if (floats.contains(v))
            values.insert(v);
    return values;
}

// Clip's [min, max] when both are constants (an absent bound is ±infinity);
// nullopt when a bound is computed.
std::optional<std::pair<float, float>> clipBounds(const Model& model, const Node& node)
{
    float lo = -INFINITY, hi = INFINITY;
    if (const Attribute* a = node.attribute("min"); a && a->kind == Attribute::Kind::Float)
        lo = a->f;
    if (const Attribute* a = node.attribute("max"); a && a->kind == Attribute::Kind::Float)
        hi = a->f;
    for (size_t k = 1; k < 3 && k < node.inputs.size(); ++k) {
        if (node.inputs[k].empty())
            continue;
        const Tensor* t = model.initializer(node.inputs[k]);
        if (!t || t->numel() != 1 || !isFloatingDType(t->dtype()))
            return std::nullopt;
        (k == 1 ? lo : hi) = t->toFloat32().values<float>()[0];
    }
    return std::pair{lo, hi};
}

// The LiteRT fused activation a Relu or a Clip is, if any: RELU, RELU6, RELU_N1_TO_1.
std::optional<std::string> fusedActivation(const Model& model, const Node& node)
{
    if (node.opType == "Relu")
        return "RELU";
    if (node.opType != "Clip")
        return std::nullopt;
    const auto bounds = clipBounds(model, node);
    if (!bounds)
        return std::nullopt;
    const auto [lo, hi] = *bounds;
    if (lo == 0 && std::isinf(hi) && hi > 0)
        return "RELU";
    if (lo == 0 && hi == 6)
        return "RELU6";
    if (lo == -1 && hi == 1)
        return "RELU_N1_TO_1";
    return std::nullopt;
}

// Ops whose LiteRT kernel takes a fused activation on its output.
bool takesFusedActivation(const Node& node, OpScheme scheme)
{
    if (scheme == OpScheme::Layer)
        return node.opType != "Gather";
    return node.opType == "Add" || node.opType == "Sub" || node.opType == "Mul" || node.opType == "Div" ||
           node.opType == "Concat";
}

// Observes the values that get their own range, after the node producing them.
class RangeObserver : public NodeObserver {
public:
    RangeObserver(std::map<std::string, Observer>& observers, std::map<std::string, Shape>& shapes,
                  std::map<std::string, std::vector<int64_t>>& integers)
        : observers_(observers), shapes_(shapes), integers_(integers)
    {
    }
    void afterNode(NodeEvent& event) override
    {
        for (size_t k = 0; k < event.outputs.size() && k < event.node->outputs.size(); ++k) {
            const Tensor& t = event.outputs[k];
            shapes_.try_emplace(event.node->outputs[k], t.shape());
            if ((t.dtype() == DType::I64 || t.dtype() == DType::I32) && t.numel() <= kMaxIntegers) {
                std::vector<int64_t> v;
                if (t.dtype() == DType::I64)
                    v.assign(t.values<int64_t>().begin(), t.values<int64_t>().end());
                else
                    v.assign(t.values<int32_t>().begin(), t.values<int32_t>().end());
                integers_.try_emplace(event.node->outputs[k], std::move(v));
            }
            const auto found = observers_.find(event.node->outputs[k]);
            if (found != observers_.end() && !event.outputs[k].empty())
                found->second.observe(event.outputs[k]);
        }
    }

private:
    static constexpr int64_t kMaxIntegers = 16; // shape arithmetic, not data
    std::map<std::string, Observer>& observers_;
    std::map<std::string, Shape>& shapes_;
    std::map<std::string, std::vector<int64_t>>& integers_;
};

void checkScales(const std::vector<float>& scales, const std::string& tensor)
{
    for (size_t i = 0; i < scales.size(); ++i)
        if (!std::isfinite(scales[i]) || scales[i] <= 0)
            throw Error("tensor '" + tensor + "': ODML scale " + std::to_string(i) + " is " +
                        std::to_string(scales[i]) + "; scales must be finite and positive");
}

nlohmann::ordered_json point(const std::string& tensor, const char* kind, const char* dtype,
                             const std::vector<float>& scales, const std::vector<int64_t>& zeroPoints, bool narrowRange,
                             std::optional<int> dimension)
{
    checkScales(scales, tensor);
    nlohmann::ordered_json p;
    p["tensor"] = tensor;
    p["kind"] = kind;
    p["dtype"] = dtype;
    p["scale"] = scales;
    p["zero_point"] = zeroPoints;
    p["narrow_range"] = narrowRange;
    p["quantization_dimension"] = dimension ? nlohmann::ordered_json(*dimension) : nlohmann::ordered_json(nullptr);
    return p;
}

QuantParams int8PerTensor(const Range& range, bool symmetric, const std::string& name)
{
    return quantParamsFromRanges(QType::Int8, BlockLayout::perTensor({1}), std::span<const Range>(&range, 1), symmetric,
                                 {}, name);
}

} // namespace

std::string nodeLabel(const Node& node, size_t index)
{
    // Appended piece by piece: GCC 12 warns (-Wrestrict, falsely) on `"#" + std::to_string(...)`.
    std::string label = "node '";
    if (node.name.empty())
        label += '#', label += std::to_string(index);
    else
        label += node.name;
    label += "' (";
    label += node.opType;
    label += ")";
    return label;
}

std::string OdmlQuantization::root(std::string value) const
{
    for (auto it = aliasOf.find(value); it != aliasOf.end(); it = aliasOf.find(value))
        value = it->second;
    return value;
}

const Tensor* OdmlQuantization::constant(const Model& model, const std::string& value) const
{
    const auto c = constantAlias.find(value);
    return model.initializer(c != constantAlias.end() ? c->second : value);
}

const QuantParams* OdmlQuantization::activation(const std::string& value) const
{
    const auto found = activations.find(root(value));
    return found == activations.end() ? nullptr : &found->second;
}

OdmlQuantization computeOdmlQuantization(const Interpreter& interpreter, const QuantizationPlan& plan,
                                         DataSource& calib, const OdmlOptions& options, const CancellationToken& cancel,
                                         const ProgressCallback& progress)
{
    const Model& model = interpreter.model();
    if (plan.mode() != QuantizationMode::Odml)
        throw Error("ODML export needs a plan built in odml mode, this one is " +
                    std::string(quantizationModeName(plan.mode())));
    OdmlQuantization result;
    int64_t& batchesRun = result.batches;

    std::set<std::string> graphValues;
    for (const ValueInfo& v : model.inputs)
        graphValues.insert(v.name);
    for (const ValueInfo& v : model.outputs)
        graphValues.insert(v.name);
    for (const auto& [name, range] : options.fixedRanges) {
        if (!graphValues.count(name))
            throw Error("fixed ODML range for '" + name + "': not an input or output of the model");
        if (!std::isfinite(range.min) || !std::isfinite(range.max) || range.min > range.max)
            throw Error("fixed ODML range for '" + name + "': needs finite min <= max");
    }

    // Classify every node (strict mode) and find which values get their own range.
    std::map<std::string, std::string>& aliasOf =
        result.aliasOf;                                 // pass-through output -> the value whose scale it shares
    std::map<std::string, ActivationValue> activations; // values with their own range
    auto root = [&](std::string v) {
        for (auto it = aliasOf.find(v); it != aliasOf.end(); it = aliasOf.find(v))
            v = it->second;
        return v;
    };
    // A pass-through op on a constant (the PyTorch exporter's Identity on a bias that
    // several convs share) gives a constant, not an activation: output -> initializer.
    std::map<std::string, std::string>& constantAlias = result.constantAlias;
    auto constantOf = [&](const std::string& v) -> const Tensor* {
        const auto c = constantAlias.find(v);
        return model.initializer(c != constantAlias.end() ? c->second : v);
    };
    const std::set<std::string> floatValues = floatActivationValues(model);
    std::map<size_t, size_t> layerOfNode;
    for (size_t l = 0; l < model.layers.size(); ++l)
        if (model.layers[l].node)
            layerOfNode[*model.layers[l].node] = l;
    std::map<std::string, size_t> readers, producer;
    for (size_t i = 0; i < model.nodes.size(); ++i) {
        for (const std::string& in : model.nodes[i].inputs)
            ++readers[in];
        for (const std::string& out : model.nodes[i].outputs)
            producer[out] = i;
    }
    for (const ValueInfo& v : model.inputs)
        if (v.dtype && isFloatingDType(*v.dtype))
            activations[v.name] = {};
    std::vector<std::string> unsupported; // every node strict mode refuses, with why
    std::vector<OpScheme>& schemes = result.schemes;
    std::map<size_t, std::pair<size_t, std::string>>& fusedInto = result.fusedInto; // node -> (producer, activation)
    for (size_t i = 0; i < model.nodes.size(); ++i) {
        const Node& node = model.nodes[i];
        bool floatOutput = false;
        for (const std::string& out : node.outputs)
            floatOutput = floatOutput || floatValues.contains(out);
        const auto entry = opTable().find(node.opType);
        if (!floatOutput) {
            // Shapes, indices, or constants: folded by the converter, no integer activation.
            if (entry != opTable().end() && entry->second.scheme == OpScheme::PassThrough && !node.inputs.empty() &&
                !node.outputs.empty() && constantOf(node.inputs[0])) {
                const auto c = constantAlias.find(node.inputs[0]);
                constantAlias[node.outputs[0]] = c != constantAlias.end() ? c->second : node.inputs[0];
            }
            schemes.push_back(OpScheme::NotQuantized);
            continue;
        }
        auto refuse = [&](const std::string& why) {
            unsupported.push_back(nodeLabel(node, i) + ": " + why);
            schemes.push_back(OpScheme::OwnScale);
        };
        if (!node.domain.empty()) {
            refuse("an op of domain '" + node.domain + "', which the LiteRT converter does not map");
            continue;
        }
        if (entry == opTable().end()) {
            refuse(node.opType == "BatchNormalization"
                       ? "a BatchNormalization, which the converter folds into the layer before it or writes as "
                         "Mul and Add; fold it first (graph/batch_norm_folding.h, as quantize --mode odml does), "
                         "or, when folding kept it, give it constant parameters and the inference form"
                       : "no LiteRT int8 kernel the converter maps it to");
            continue;
        }
        OpScheme scheme = entry->second.scheme;
        const LayerQuantization* lq = plan.forNode(i);
        if (scheme == OpScheme::Layer && !layerOfNode.contains(i)) {
            if (node.opType == "Gather")
                scheme = OpScheme::PassThrough; // GATHER on activations shares its input's scale
            else if (node.opType == "MatMul")
                scheme = OpScheme::OwnScale; // BATCH_MATMUL of two activations
            else {
                refuse("its weight is not a constant; LiteRT's int8 " + node.opType + " needs a constant weight");
                continue;
            }
        }
        if (scheme == OpScheme::Layer) {
            const QuantizableLayer& layer = model.layers[layerOfNode[i]];
            const std::string what = "layer '" + layer.modulePath + "': ";
            if (!lq) {
                refuse(what + "no rule quantizes it; add a rule with weight_qtype and act_qtype int8 that matches it");
                continue;
            }
            if (!lq->problem.empty()) {
                refuse(what + lq->problem);
                continue;
            }
            if (lq->weight && isLut(lq->weight->qtype)) {
                refuse(what + "weight_qtype " + std::string(qtypeName(lq->weight->qtype)) +
                       " is palettized (codes into a k-means table), which LiteRT's int8 kernels cannot hold; "
                       "ODML needs weight_qtype int8");
                continue;
            }
            if (!lq->weight || lq->weight->qtype != QType::Int8) {
                refuse(what + "ODML needs weight_qtype int8");
                continue;
            }
            if (lq->weight->tileSize) {
                refuse(what + "ODML has no sub-channel scales; remove tile_size");
                continue;
            }
            const bool needsActivation = node.opType != "Gather";
            if (needsActivation && (!lq->activation || lq->activation->target.qtype != QType::Int8)) {
                refuse(what + "ODML needs act_qtype int8");
                continue;
            }
            if (needsActivation) {
                const std::string input = root(lq->activation->value);
                ActivationValue& a = activations[input];
                if (!a.methodFromLayer) {
                    a.method = lq->activation->method;
                    a.target = lq->activation->target;
                    a.batchAxes = lq->activation->batchAxes;
                    a.methodFromLayer = true;
                }
            }
        }
        if (node.opType == "Clip" && !clipBounds(model, node)) {
            refuse("its min or max is computed, not a constant; LiteRT clips by constants");
            continue;
        }
        if (node.opType == "Div" && (node.inputs.size() < 2 || !constantOf(node.inputs[1]))) {
            refuse("it divides by a value that is not a constant; LiteRT has no int8 DIV (a division by a "
                   "constant becomes a MUL)");
            continue;
        }
        if (const std::optional<std::string> activation = fusedActivation(model, node)) {
            // Fused into the op producing its input when that op takes a fused activation
            // and nothing else reads its output: that output is never materialised.
            scheme = OpScheme::OwnScale;
            const std::string& in = node.inputs.empty() ? std::string() : node.inputs[0];
            const auto p = producer.find(in);
            if (p != producer.end() && schemes.size() > p->second && readers[in] == 1 && !graphValues.contains(in) &&
                takesFusedActivation(model.nodes[p->second], schemes[p->second]) &&
                model.nodes[p->second].outputs.front() == in && activations.contains(in) &&
                !activations[in].methodFromLayer) {
                scheme = OpScheme::Fused;
                activations.erase(in);
                fusedInto[i] = {p->second, *activation};
            }
        }
        schemes.push_back(scheme);
        for (size_t k = 0; k < node.outputs.size(); ++k) {
            const std::string& output = node.outputs[k];
            if (output.empty() || !floatValues.contains(output))
                continue; // MaxPool's indices, Dropout's mask: not values of the integer model
            if (scheme != OpScheme::PassThrough) {
                ActivationValue& a = activations[output];
                if (scheme == OpScheme::FixedScale)
                    a.fixed = std::pair{entry->second.fixedScale, entry->second.fixedZeroPoint};
            } else if (!node.inputs.empty() && (k == 0 || node.opType == "Split")) {
                aliasOf[output] = node.inputs[0];
            }
        }
    }
    if (!unsupported.empty()) {
        std::string list;
        for (const std::string& u : unsupported)
            list += (list.empty() ? "" : "; ") + u;
        throw Error(model.sourcePath.filename().string() + ": ODML strict mode quantizes every op to int8, and " +
                    std::to_string(unsupported.size()) +
                    (unsupported.size() == 1 ? " node cannot be" : " nodes cannot be") + ": " + list +
                    ". Replace or remove these ops in the model (or quantize in ptq mode, which leaves what it "
                    "cannot quantize float)");
    }

    // Calibration: the float model, observers on every value with its own range.
    std::map<std::string, Observer> observers;
    for (const auto& [name, a] : activations) {
        if (a.fixed)
            continue; // the kernel fixes it: nothing to calibrate
        ObserverConfig config;
        config.batchAxes = a.batchAxes;
        config.histogramBinsPerSide = a.method.needsHistogram() ? 2048 : 0;
        observers.emplace(name, Observer(name, config));
    }
    calib.rewind();
    RangeObserver observer(observers, result.shapes, result.integers);
    const int64_t total = std::min(calib.batchCount(), options.maxBatches.value_or(calib.batchCount()));
    while (batchesRun < total) {
        cancel.check();
        std::optional<Batch> batch = calib.next();
        if (!batch)
            break;
        for (const auto& [name, tensor] : batch->inputs) {
            result.shapes.try_emplace(name, tensor.shape());
            const auto found = observers.find(name);
            if (found != observers.end())
                found->second.observe(tensor);
        }
        try {
            interpreter.run(batch->inputs, {cancel, &observer});
        } catch (const Cancelled&) {
            throw;
        } catch (const Error& e) {
            throw Error(calib.path().string() + ": batch " + std::to_string(batchesRun) + ": " + e.what());
        }
        ++batchesRun;
        if (progress)
            progress(0.9 * double(batchesRun) / double(std::max<int64_t>(total, 1)), "calibration");
    }
    if (batchesRun == 0)
        throw Error(calib.path().string() + ": no calibration batch to compute ODML activation ranges from");

    // Activation points (a fixed range given for a pass-through output sets the value it passes through).
    std::map<std::string, Range> fixed;
    for (const auto& [name, range] : options.fixedRanges)
        fixed[root(name)] = range;
    std::map<std::string, QuantParams>& actParams = result.activations;
    std::map<std::string, std::pair<Range, bool>> calibrated; // value -> (range, symmetric)
    for (const auto& [name, a] : activations) {
        if (a.fixed) {
            result.fixedByKernel.insert(name);
            // LiteRT's kernel fixes this output's parameters (LOGISTIC, SOFTMAX, TANH, LOG_SOFTMAX).
            const auto [scale, zero] = *a.fixed;
            QuantParams p =
                int8PerTensor({float(double(-128 - zero) * scale), float(double(127 - zero) * scale)}, false, name);
            p.scales.assign(1, scale);
            p.zeroPoints.assign(1, zero);
            actParams[name] = p;
            continue;
        }
        const auto f = fixed.find(name);
        const auto o = observers.find(name);
        if (f == fixed.end() && (o == observers.end() || o->second.batches() == 0))
            throw Error(model.sourcePath.filename().string() + ": value '" + name +
                        "' was never computed during calibration, so it has no ODML range");
        std::vector<Range> ranges;
        if (f == fixed.end())
            ranges = o->second.ranges(a.method, a.target);
        if (f == fixed.end() && ranges.size() != 1)
            throw Error(model.sourcePath.filename().string() + ": value '" + name + "': calibration gave " +
                        std::to_string(ranges.size()) + " ranges where ODML needs one per tensor");
        const Range range = f != fixed.end() ? f->second : ranges.front();
        const bool symmetric = f != fixed.end() ? false : a.method.resolveSymmetric(a.target.symmetric);
        calibrated[name] = {range, symmetric};
    }
    for (const auto& [name, c] : calibrated)
        actParams[name] = int8PerTensor(c.first, c.second, name);
    return result;
}

OdmlSummary exportOdml(const Interpreter& interpreter, const QuantizationPlan& plan, const WeightQuantizer& weights,
                       DataSource& calib, const OdmlOptions& options, const std::filesystem::path& out,
                       const CancellationToken& cancel, const ProgressCallback& progress)
{
    const Model& model = interpreter.model();
    const OdmlQuantization q = computeOdmlQuantization(interpreter, plan, calib, options, cancel, progress);
    OdmlSummary summary;
    summary.path = out;
    summary.batches = q.batches;
    const std::map<std::string, QuantParams>& actParams = q.activations;
    const std::vector<OpScheme>& schemes = q.schemes;
    const std::map<size_t, std::pair<size_t, std::string>>& fusedInto = q.fusedInto;
    auto root = [&](const std::string& v) { return q.root(v); };
    auto constantOf = [&](const std::string& v) { return q.constant(model, v); };
    nlohmann::ordered_json points = nlohmann::ordered_json::array();
    auto addActivation = [&](const std::string& value) {
        const auto found = actParams.find(root(value));
        if (found == actParams.end())
            throw Error(model.sourcePath.filename().string() + ": value '" + value + "' passes through '" +
                        root(value) + "', which is neither an activation nor a constant; it has no ODML range");
        const QuantParams& p = found->second;
        if (p.scales.size() != 1 || (!p.symmetric && p.zeroPoints.size() != 1))
            throw Error(model.sourcePath.filename().string() + ": value '" + value +
                        "': ODML activations take one scale and zero point");
        const float s = p.scales[0];
        const int64_t z = p.symmetric ? 0 : p.zeroPoints[0];
        nlohmann::ordered_json j = point(value, "activation", "i8", p.scales, {z}, false, {});
        j["range"] = {float(double(-128 - z) * s), float(double(127 - z) * s)};
        if (root(value) != value)
            j["shares_scale_with"] = root(value);
        if (q.fixedByKernel.contains(root(value)))
            j["fixed_by_kernel"] = true;
        points.push_back(j);
        ++summary.activations;
    };
    std::set<std::string> annotated;
    for (const ValueInfo& v : model.inputs)
        if (actParams.count(v.name) && annotated.insert(v.name).second)
            addActivation(v.name);

    // Weights, biases and constants, node by node; then each node's outputs.
    nlohmann::ordered_json ops = nlohmann::ordered_json::array();
    for (size_t i = 0; i < model.nodes.size(); ++i) {
        cancel.check();
        const Node& node = model.nodes[i];
        const LayerQuantization* lq = plan.forNode(i);
        std::optional<size_t> weightInput, biasInput;
        if (schemes[i] == OpScheme::Layer) {
            if (!lq || lq->layer >= model.layers.size())
                throw Error(nodeLabel(node, i) + ": the quantization plan has no layer for this node");
            const QuantizableLayer& layer = model.layers[lq->layer];
            weightInput = layer.weightInput;
            if ((node.opType == "Conv" || node.opType == "ConvTranspose" || node.opType == "Gemm") &&
                node.inputs.size() > 2 && constantOf(node.inputs[2]))
                biasInput = 2;
            const Tensor* weight = model.initializer(layer.weightName);
            if (!weight)
                throw Error(nodeLabel(node, i) + ", layer '" + layer.modulePath + "': its weight '" + layer.weightName +
                            "' is not a constant of the model");
            const Tensor& w = *weight;
            if (lq->biasCorrection)
                throw Error("layer '" + layer.modulePath +
                            "': the ODML export annotates the model's own float weights and biases, so it cannot "
                            "carry bias_correction; remove bias_correction for ODML");
            if (lq->weightAlgorithm.kind != WeightAlgorithmKind::Rtn)
                throw Error("layer '" + layer.modulePath +
                            "': the ODML export annotates the float weights with "
                            "their scales, so it cannot carry the weights algorithm " +
                            lq->weightAlgorithm.toString() + " chose; use algorithm rtn for ODML");
            QuantizationSpec spec = *lq->weight;
            spec.options.narrowRange = true;
            if (!spec.method.resolveSymmetric(spec.symmetric))
                throw Error("layer '" + layer.modulePath + "': ODML weights are symmetric; weight_calibration '" +
                            spec.method.toString() + "' is not");
            spec.symmetric = true;
            const auto cached = weights.find(lq->layer);
            const QuantParams wp = cached && cached->spec.options.narrowRange && cached->transposedAxes.empty()
                                       ? cached->quantization.params
                                       : computeQuantization(w, spec, layer.weightName).params;
            const bool perChannel = !wp.layout.isPerTensor();
            Shape shape = w.shape();
            int dimension = layer.channelAxis;
            if (node.opType == "MatMul" && shape.size() > 2) {
                shape = {w.numel() / shape.back(), shape.back()};
                dimension = 1;
            }
            std::vector<int64_t> zeros(wp.scales.size(), 0);
            nlohmann::ordered_json j = point(layer.weightName, "weight", "i8", wp.scales, zeros, true,
                                             perChannel ? std::optional<int>(dimension) : std::nullopt);
            j["shape"] = shape;
            if (annotated.insert(layer.weightName).second) { // a shared weight is annotated once
                points.push_back(j);
                ++summary.weights;
            }
            if (biasInput) {
                const std::string& biasName = node.inputs[*biasInput];
                const Tensor* bias = constantOf(biasName);
                const int64_t channels = bias->numel();
                // A grouped ConvTranspose's weight [I, O/g, k…] has O/g scales along axis 1,
                // each shared by output channel j of every group (channel c = group·O/g + j).
                const int64_t scaleCount = int64_t(wp.scales.size());
                const bool sharedAcrossGroups = perChannel && node.opType == "ConvTranspose" && layer.groups > 1 &&
                                                scaleCount * layer.groups == channels;
                if (perChannel && scaleCount != channels && !sharedAcrossGroups)
                    throw Error("tensor '" + biasName + "': " + std::to_string(channels) + " biases for " +
                                std::to_string(wp.scales.size()) + " weight channels");
                const auto input = actParams.find(root(lq->activation->value));
                if (input == actParams.end())
                    throw Error(nodeLabel(node, i) + ": its input '" + lq->activation->value +
                                "' has no ODML range, so its bias '" + biasName + "' has no scale");
                const float inputScale = input->second.scales[0];
                std::vector<float> scales(static_cast<size_t>(channels));
                for (int64_t c = 0; c < channels; ++c)
                    scales[size_t(c)] = inputScale * wp.scales[perChannel ? size_t(c % scaleCount) : 0];
                points.push_back(point(biasName, "bias", "i32", scales,
                                       std::vector<int64_t>(static_cast<size_t>(channels), 0), false, 0));
                annotated.insert(biasName);
                ++summary.biases;
            }
        }
        // Float constants an arithmetic op reads are int8 operands (a Div's divisor as
        // its reciprocal: the converter multiplies by it). Other ops' float constants
        // (Clip's bounds, Resize's scales, Pad's value) are parameters, not operands.
        const auto entry = opTable().find(node.opType);
        const bool operands =
            schemes[i] != OpScheme::NotQuantized && entry != opTable().end() && entry->second.constantOperands;
        for (size_t k = 0; operands && k < node.inputs.size(); ++k) {
            const std::string& name = node.inputs[k];
            const Tensor* constant = constantOf(name);
            if (k == weightInput || k == biasInput || !constant || !isFloatingDType(constant->dtype()) ||
                annotated.count(name))
                continue;
            const bool reciprocal = node.opType == "Div" && k == 1;
            const Tensor x = constant->toFloat32();
            Range range{0, 0};
            for (float v : x.values<float>()) {
                if (reciprocal)
                    v = 1.0f / v;
                if (!std::isfinite(v))
                    throw Error("tensor '" + name + "': holds a NaN or infinite value" +
                                (reciprocal ? std::string(" (or a 0 it divides by)") : std::string()) +
                                "; ODML needs finite constants");
                range.min = std::min(range.min, v), range.max = std::max(range.max, v);
            }
            const QuantParams p = int8PerTensor(range, false, name);
            if (p.zeroPoints.size() != 1)
                throw Error("tensor '" + name + "': ODML constants take one zero point");
            nlohmann::ordered_json j = point(name, "constant", "i8", p.scales, {int64_t(p.zeroPoints[0])}, false, {});
            if (reciprocal)
                j["reciprocal"] = true;
            points.push_back(j);
            annotated.insert(name);
            ++summary.constants;
        }
        for (const std::string& output : node.outputs)
            if (!output.empty() && (actParams.count(output) || q.aliasOf.count(output)) &&
                annotated.insert(output).second)
                addActivation(output);
        nlohmann::ordered_json op = {
            {"node", node.name}, {"op_type", node.opType}, {"scheme", std::string(schemeName(schemes[i]))}};
        if (const auto f = fusedInto.find(i); f != fusedInto.end()) {
            op["fused_into"] = model.nodes[f->second.first].name;
            op["activation"] = f->second.second;
        }
        ops.push_back(std::move(op));
        ++summary.ops;
        ++summary.opsByScheme[std::string(schemeName(schemes[i]))];
    }

    nlohmann::ordered_json doc;
    doc["format"] = "quantscope-odml";
    doc["format_version"] = 1;
    doc["tool_version"] = QUANTSCOPE_VERSION;
    doc["model"] = model.sourcePath.filename().string();
    doc["calibration"] = {{"data", calib.path().filename().string()}, {"batches", summary.batches}};
    doc["quantization_points"] = std::move(points);
    doc["ops"] = std::move(ops);
    const std::string text = doc.dump(2) + "\n";
    writeFileAtomically(out, text.data(), text.size());
    if (progress)
        progress(1.0, "done");
    return summary;
}

} // namespace qs
