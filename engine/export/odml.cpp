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

enum class OpScheme { Layer, PassThrough, OwnScale };

const std::map<std::string, OpScheme>& opSchemes()
{
    static const std::map<std::string, OpScheme> table = {
        {"Conv", OpScheme::Layer},           {"ConvTranspose", OpScheme::Layer},
        {"Gemm", OpScheme::Layer},           {"MatMul", OpScheme::Layer},
        {"Gather", OpScheme::Layer},         {"Relu", OpScheme::PassThrough},
        {"MaxPool", OpScheme::PassThrough},  {"Reshape", OpScheme::PassThrough},
        {"Flatten", OpScheme::PassThrough},  {"Transpose", OpScheme::PassThrough},
        {"Squeeze", OpScheme::PassThrough},  {"Unsqueeze", OpScheme::PassThrough},
        {"Identity", OpScheme::PassThrough}, {"Dropout", OpScheme::PassThrough},
        {"Add", OpScheme::OwnScale},         {"Sub", OpScheme::OwnScale},
        {"Mul", OpScheme::OwnScale},         {"Concat", OpScheme::OwnScale},
        {"AveragePool", OpScheme::OwnScale}, {"GlobalAveragePool", OpScheme::OwnScale},
    };
    return table;
}

std::string_view schemeName(OpScheme s)
{
    return s == OpScheme::Layer ? "layer" : s == OpScheme::PassThrough ? "pass_through" : "own_scale";
}

std::string nodeLabel(const Node& node, size_t index)
{
    return "node '" + (node.name.empty() ? "#" + std::to_string(index) : node.name) + "' (" + node.opType + ")";
}

// One value that gets its own activation range.
struct ActivationValue {
    CalibrationMethod method = CalibrationMethod::parse("minmax");
    CalibrationTarget target;
    std::vector<int> batchAxes{0};
    bool methodFromLayer = false;
};

// Observes the values that get their own range, after the node producing them.
class RangeObserver : public NodeObserver {
public:
    explicit RangeObserver(std::map<std::string, Observer>& observers) : observers_(observers) {}
    void afterNode(NodeEvent& event) override
    {
        for (size_t k = 0; k < event.outputs.size() && k < event.node->outputs.size(); ++k) {
            const auto found = observers_.find(event.node->outputs[k]);
            if (found != observers_.end() && !event.outputs[k].empty())
                found->second.observe(event.outputs[k]);
        }
    }

private:
    std::map<std::string, Observer>& observers_;
};

void checkScales(const std::vector<float>& scales, const std::string& tensor)
{
    for (size_t i = 0; i < scales.size(); ++i)
        if (!std::isfinite(scales[i]) || scales[i] <= 0)
            throw Error("tensor '" + tensor + "': ODML scale " + std::to_string(i) + " is " +
                        std::to_string(scales[i]) + "; scales must be finite and positive");
}

nlohmann::ordered_json point(const std::string& tensor, const char* kind, const char* dtype,
                             const std::vector<float>& scales, const std::vector<int64_t>& zeroPoints,
                             bool narrowRange, std::optional<int> dimension)
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
    return quantParamsFromRanges(QType::Int8, BlockLayout::perTensor({1}), std::span<const Range>(&range, 1),
                                 symmetric, {}, name);
}

} // namespace

OdmlSummary exportOdml(const Interpreter& interpreter, const QuantizationPlan& plan, const WeightQuantizer& weights,
                       DataSource& calib, const OdmlOptions& options, const std::filesystem::path& out,
                       const CancellationToken& cancel, const ProgressCallback& progress)
{
    const Model& model = interpreter.model();
    if (plan.mode() != QuantizationMode::Odml)
        throw Error("ODML export needs a plan built in odml mode, this one is " +
                    std::string(quantizationModeName(plan.mode())));
    OdmlSummary summary;
    summary.path = out;

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
    std::map<std::string, std::string> aliasOf;         // pass-through output -> the value whose scale it shares
    std::map<std::string, ActivationValue> activations; // values with their own range
    auto root = [&](std::string v) {
        for (auto it = aliasOf.find(v); it != aliasOf.end(); it = aliasOf.find(v))
            v = it->second;
        return v;
    };
    // A pass-through op on a constant (the PyTorch exporter's Identity on a bias that
    // several convs share) gives a constant, not an activation: output -> initializer.
    std::map<std::string, std::string> constantAlias;
    auto constantOf = [&](const std::string& v) -> const Tensor* {
        const auto c = constantAlias.find(v);
        return model.initializer(c != constantAlias.end() ? c->second : v);
    };
    for (const ValueInfo& v : model.inputs)
        if (v.dtype && isFloatingDType(*v.dtype))
            activations[v.name] = {};
    std::vector<OpScheme> schemes;
    for (size_t i = 0; i < model.nodes.size(); ++i) {
        const Node& node = model.nodes[i];
        const auto found = opSchemes().find(node.opType);
        if (found == opSchemes().end() || !node.domain.empty())
            throw Error(nodeLabel(node, i) +
                        " cannot be quantized in ODML strict mode; quantizable ops: Conv, ConvTranspose, Gemm, "
                        "MatMul, Gather, Relu, MaxPool, Reshape, Flatten, Transpose, Squeeze, Unsqueeze, Identity, "
                        "Dropout, Add, Sub, Mul, Concat, AveragePool, GlobalAveragePool");
        OpScheme scheme = found->second;
        const LayerQuantization* lq = plan.forNode(i);
        if (scheme == OpScheme::Layer) {
            if (!lq)
                throw Error(nodeLabel(node, i) + ": no rule quantizes this layer; ODML strict mode quantizes every op");
            const QuantizableLayer& layer = model.layers.at(lq->layer);
            if (!lq->problem.empty())
                throw Error(nodeLabel(node, i) + ", layer '" + layer.modulePath + "': " + lq->problem);
            if (!lq->weight || lq->weight->qtype != QType::Int8)
                throw Error(nodeLabel(node, i) + ", layer '" + layer.modulePath +
                            "': ODML needs weight_qtype int8");
            if (lq->weight->tileSize)
                throw Error(nodeLabel(node, i) + ", layer '" + layer.modulePath +
                            "': ODML has no sub-channel scales; remove tile_size");
            const bool needsActivation = node.opType != "Gather";
            if (needsActivation && (!lq->activation || lq->activation->target.qtype != QType::Int8))
                throw Error(nodeLabel(node, i) + ", layer '" + layer.modulePath + "': ODML needs act_qtype int8");
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
        schemes.push_back(scheme);
        for (size_t k = 0; k < node.outputs.size(); ++k) {
            const std::string& output = node.outputs[k];
            if (output.empty())
                continue;
            if (scheme != OpScheme::PassThrough)
                activations.try_emplace(output);
            else if (k == 0 && !node.inputs.empty() && constantOf(node.inputs[0])) {
                const auto c = constantAlias.find(node.inputs[0]);
                constantAlias[output] = c != constantAlias.end() ? c->second : node.inputs[0];
            } else if (k == 0 && !node.inputs.empty())
                aliasOf[output] = node.inputs[0];
            // A pass-through op's other outputs (MaxPool's indices, Dropout's mask) are not values of the integer model.
        }
    }

    // Calibration: the float model, observers on every value with its own range.
    std::map<std::string, Observer> observers;
    for (const auto& [name, a] : activations) {
        ObserverConfig config;
        config.batchAxes = a.batchAxes;
        config.histogramBinsPerSide = a.method.needsHistogram() ? 2048 : 0;
        observers.emplace(name, Observer(name, config));
    }
    calib.rewind();
    RangeObserver observer(observers);
    const int64_t total = std::min(calib.batchCount(), options.maxBatches.value_or(calib.batchCount()));
    while (summary.batches < total) {
        cancel.check();
        std::optional<Batch> batch = calib.next();
        if (!batch)
            break;
        for (const auto& [name, tensor] : batch->inputs) {
            const auto found = observers.find(name);
            if (found != observers.end())
                found->second.observe(tensor);
        }
        try {
            interpreter.run(batch->inputs, {cancel, &observer});
        } catch (const Cancelled&) {
            throw;
        } catch (const Error& e) {
            throw Error(calib.path().string() + ": batch " + std::to_string(summary.batches) + ": " + e.what());
        }
        ++summary.batches;
        if (progress)
            progress(0.9 * double(summary.batches) / double(std::max<int64_t>(total, 1)), "calibration");
    }
    if (summary.batches == 0)
        throw Error(calib.path().string() + ": no calibration batch to compute ODML activation ranges from");

    // Activation points (a fixed range given for a pass-through output sets the value it passes through).
    std::map<std::string, Range> fixed;
    for (const auto& [name, range] : options.fixedRanges)
        fixed[root(name)] = range;
    std::map<std::string, QuantParams> actParams;
    nlohmann::ordered_json points = nlohmann::ordered_json::array();
    for (const auto& [name, a] : activations) {
        const auto f = fixed.find(name);
        const Observer& o = observers.at(name);
        if (f == fixed.end() && o.batches() == 0)
            throw Error("value '" + name + "': never computed during calibration, so it has no ODML range");
        const Range range = f != fixed.end() ? f->second : o.ranges(a.method, a.target).at(0);
        const bool symmetric = f != fixed.end() ? false : a.method.resolveSymmetric(a.target.symmetric);
        const QuantParams p = int8PerTensor(range, symmetric, name);
        actParams[name] = p;
    }
    auto addActivation = [&](const std::string& value) {
        const auto found = actParams.find(root(value));
        if (found == actParams.end())
            throw Error(model.sourcePath.filename().string() + ": value '" + value + "' passes through '" +
                        root(value) + "', which is neither an activation nor a constant; it has no ODML range");
        const QuantParams& p = found->second;
        nlohmann::ordered_json j =
            point(value, "activation", "i8", p.scales, {p.symmetric ? 0 : int64_t(p.zeroPoints.at(0))}, false, {});
        const float s = p.scales[0];
        const int64_t z = p.symmetric ? 0 : p.zeroPoints[0];
        j["range"] = {float(double(-128 - z) * s), float(double(127 - z) * s)};
        if (root(value) != value)
            j["shares_scale_with"] = root(value);
        points.push_back(j);
        ++summary.activations;
    };
    std::set<std::string> annotated;
    for (const ValueInfo& v : model.inputs)
        if (activations.count(v.name) && annotated.insert(v.name).second)
            addActivation(v.name);

    // Weights, biases and constants, node by node; then each node's outputs.
    nlohmann::ordered_json ops = nlohmann::ordered_json::array();
    for (size_t i = 0; i < model.nodes.size(); ++i) {
        cancel.check();
        const Node& node = model.nodes[i];
        const LayerQuantization* lq = plan.forNode(i);
        std::optional<size_t> weightInput, biasInput;
        if (schemes[i] == OpScheme::Layer) {
            const QuantizableLayer& layer = model.layers.at(lq->layer);
            weightInput = layer.weightInput;
            if ((node.opType == "Conv" || node.opType == "ConvTranspose" || node.opType == "Gemm") &&
                node.inputs.size() > 2 && constantOf(node.inputs[2]))
                biasInput = 2;
            const Tensor& w = *model.initializer(layer.weightName);
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
                if (perChannel && int64_t(wp.scales.size()) != channels)
                    throw Error("tensor '" + biasName + "': " + std::to_string(channels) + " biases for " +
                                std::to_string(wp.scales.size()) + " weight channels");
                const float inputScale = actParams.at(root(lq->activation->value)).scales[0];
                std::vector<float> scales(static_cast<size_t>(channels));
                for (int64_t c = 0; c < channels; ++c)
                    scales[size_t(c)] = inputScale * wp.scales[perChannel ? size_t(c) : 0];
                points.push_back(point(biasName, "bias", "i32", scales, std::vector<int64_t>(static_cast<size_t>(channels), 0),
                                       false, 0));
                annotated.insert(biasName);
                ++summary.biases;
            }
        }
        for (size_t k = 0; k < node.inputs.size(); ++k) {
            const std::string& name = node.inputs[k];
            const Tensor* constant = constantOf(name);
            if (k == weightInput || k == biasInput || !constant || !isFloatingDType(constant->dtype()) ||
                annotated.count(name))
                continue;
            const Tensor x = constant->toFloat32();
            Range range{0, 0};
            for (const float v : x.values<float>()) {
                if (!std::isfinite(v))
                    throw Error("tensor '" + name + "': holds a NaN or infinite value; ODML needs finite constants");
                range.min = std::min(range.min, v), range.max = std::max(range.max, v);
            }
            const QuantParams p = int8PerTensor(range, false, name);
            points.push_back(point(name, "constant", "i8", p.scales, {int64_t(p.zeroPoints.at(0))}, false, {}));
            annotated.insert(name);
            ++summary.constants;
        }
        for (const std::string& output : node.outputs)
            if (!output.empty() && (activations.count(output) || aliasOf.count(output)) &&
                annotated.insert(output).second)
                addActivation(output);
        ops.push_back({{"node", node.name}, {"op_type", node.opType}, {"scheme", std::string(schemeName(schemes[i]))}});
        ++summary.ops;
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
