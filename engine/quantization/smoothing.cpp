#include "quantization/smoothing.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.h"
#include "graph/value_readers.h"
#include "quantization/double_tensors.h"

namespace qs {
namespace {

bool isDefaultDomain(const Node& node)
{
    return node.domain.empty() || node.domain == "ai.onnx";
}

std::string nodeLabel(const Node& node)
{
    return node.opType + " node" + (node.name.empty() ? std::string() : " '" + node.name + "'");
}

// Why layer `index` cannot be smoothed on its own terms, or "".
std::string layerProblem(const Model& model, const QuantizationPlan& plan, size_t index, const ValueReaders& readers)
{
    const QuantizableLayer& layer = model.layers[index];
    const LayerQuantization& lq = *plan.forLayer(index);
    if (layer.scope != 0 || !layer.node)
        return "it is inside a subgraph";
    if (layer.opType == "Conv")
        return "smooth_alpha takes MatMul and Gemm; a Conv's input channels are axis 1, and folding 1/s into a "
               "producer along that axis is not implemented";
    if (layer.opType != "MatMul" && layer.opType != "Gemm")
        return "smooth_alpha takes MatMul and Gemm, and this is a " + layer.opType;
    if (!lq.problem.empty())
        return "its rule cannot apply (the layer stays float): " + lq.problem;
    if (!lq.activation)
        return "its input activation is not quantized (set act_qtype): SmoothQuant eases activation quantization";
    if (layer.weightDType != DType::F32)
        return "its weight is " + std::string(dtypeName(layer.weightDType)) +
               ", and smoothing rewrites float32 weights";
    if (layer.weightShape.size() != 2 || layer.contractionAxes.size() != 1)
        return "its weight has rank " + std::to_string(layer.weightShape.size()) + " (smoothing takes rank 2)";
    if (layer.sharesWeightOf)
        return "it shares its weight with '" + model.layers[*layer.sharesWeightOf].modulePath + "'";
    for (const QuantizableLayer& other : model.layers)
        if (other.sharesWeightOf == index)
            return "its weight is shared with '" + other.modulePath + "'";
    if (readerCount(readers, layer.weightName) > 1)
        return "its weight '" + layer.weightName + "' is read by another node too";
    const Node& node = model.nodes[*layer.node];
    if (node.opType == "Gemm" && node.intAttribute("transA", 0) != 0)
        return "it is a Gemm with transA = 1 (its input channels are not X's last axis)";
    if (node.inputs.size() < 2 || node.inputs[1] != layer.weightName || node.inputs[0].empty())
        return "its weight is not the op's second input";
    return {};
}

// A constant float32 parameter `name` the producer alone reads, with K values along its last
// axis: "" when it can take 1/s, else why not.
std::string parameterProblem(const Model& model, const ValueReaders& readers, const std::string& name, int64_t channels,
                             bool vector)
{
    const Tensor* t = model.initializer(name);
    if (!t)
        return "'" + name + "' is computed, not a constant";
    if (t->dtype() != DType::F32)
        return "'" + name + "' is not float32";
    if (readerCount(readers, name) > 1)
        return "'" + name + "' is read by another node too";
    if (vector && (t->numel() != channels || t->rank() < 1 || t->shape().back() != channels))
        return "'" + name + "' has " + std::to_string(t->numel()) + " values, not one per channel of X (" +
               std::to_string(channels) + ")";
    return {};
}

// The tensors of the producer of X that take 1/s, or why it cannot.
// The node whose first output is `value`, or null.
const Node* producerOf(const Model& model, const std::string& value)
{
    for (const Node& n : model.nodes)
        if (!n.outputs.empty() && n.outputs[0] == value)
            return &n;
    return nullptr;
}

std::string findProducer(const Model& model, const ValueReaders& readers, SmoothedInput& in)
{
    const std::string& x = in.value;
    const Node* producer = producerOf(model, x);
    if (!producer) {
        const bool input =
            std::any_of(model.inputs.begin(), model.inputs.end(), [&](const ValueInfo& v) { return v.name == x; });
        return input ? "'" + x + "' is a graph input: no op produces it to take 1/s"
                     : "no node's first output is '" + x + "'";
    }
    in.producer = producer->name.empty() ? producer->opType + " producing '" + x + "'" : producer->name;
    in.producerOp = producer->opType;
    const int64_t k = in.channels;
    auto vectorParam = [&](const std::string& name) -> std::string {
        if (std::string why = parameterProblem(model, readers, name, k, true); !why.empty())
            return why;
        in.divided.push_back({name, int(model.initializer(name)->rank()) - 1});
        return {};
    };
    // A weight whose output channels are X's channels: its axis `axis` has K entries.
    auto weightParam = [&](const std::string& name, int axis) -> std::string {
        if (std::string why = parameterProblem(model, readers, name, k, false); !why.empty())
            return why;
        const Tensor& w = *model.initializer(name);
        if (w.rank() != 2 || w.shape()[size_t(axis)] != k)
            return "weight '" + name + "' is not a matrix with " + std::to_string(k) + " output channels";
        in.divided.push_back({name, axis});
        return {};
    };
    // A linear layer's output channels (and bias) take 1/s: `p` is a MatMul/Gemm with a constant
    // weight, or an Add of one's output and a constant bias (PyTorch's export of Linear). Sets `label`.
    auto linearFold = [&](const Node& p, std::string& label) -> std::string {
        const Node* linear = &p;
        label = p.opType;
        if (p.opType == "Add") {
            if (p.inputs.size() != 2)
                return "it is an Add without two inputs";
            const bool firstConstant = model.isInitializer(p.inputs[0]);
            const std::string& bias = firstConstant ? p.inputs[0] : p.inputs[1];
            const std::string& other = firstConstant ? p.inputs[1] : p.inputs[0];
            linear = producerOf(model, other);
            if (!model.isInitializer(bias) || !linear ||
                (linear->opType != "MatMul" && linear->opType != "Gemm") || !isDefaultDomain(*linear))
                return "it is not a MatMul/Gemm plus a constant bias";
            if (readerCount(readers, other) != 1 || isGraphOutput(model, other))
                return "the output of " + nodeLabel(*linear) + " before the bias Add is read elsewhere too";
            if (std::string w = vectorParam(bias); !w.empty())
                return "its bias " + w;
            label = linear->opType + " + Add";
        }
        const Node& l = *linear;
        if (l.inputs.size() < 2 || !model.isInitializer(l.inputs[1]))
            return "its weight is not a constant";
        std::string why = weightParam(l.inputs[1], l.opType == "MatMul" || l.intAttribute("transB", 0) == 0 ? 1 : 0);
        if (why.empty() && l.opType == "Gemm" && l.inputs.size() > 2 && !l.inputs[2].empty())
            why = vectorParam(l.inputs[2]);
        return why;
    };
    const Node& p = *producer;
    std::string why;
    if (!isDefaultDomain(p) && p.domain != "com.microsoft") {
        why = "it is of domain '" + p.domain + "'";
    } else if (p.opType == "LayerNormalization" || p.opType == "SimplifiedLayerNormalization" ||
               p.opType == "RMSNormalization") {
        // Normalized over the last axis only: the scale (and bias) run over X's channels.
        if (p.intAttribute("axis", -1) != -1)
            why = "its axis is " + std::to_string(p.intAttribute("axis", -1)) + ", not -1";
        else if (p.inputs.size() < 2 || p.inputs[1].empty())
            why = "it has no scale";
        else
            why = vectorParam(p.inputs[1]);
        if (why.empty() && p.opType == "LayerNormalization" && p.inputs.size() > 2 && !p.inputs[2].empty())
            why = vectorParam(p.inputs[2]);
        for (size_t o = 1; why.empty() && o < p.outputs.size(); ++o)
            if (!p.outputs[o].empty() && readerCount(readers, p.outputs[o]) > 0)
                why = "its output '" + p.outputs[o] + "' is read too";
    } else if (p.opType == "Mul" && p.inputs.size() == 2 &&
               (model.isInitializer(p.inputs[0]) != model.isInitializer(p.inputs[1]))) {
        // A per-channel scale: the weight of an RMSNorm written out as ops (the Llama graph of a
        // checkpoint folder multiplies the normalized x by its [K] weight last).
        why = vectorParam(model.isInitializer(p.inputs[0]) ? p.inputs[0] : p.inputs[1]);
    } else if (p.opType == "Mul" && p.inputs.size() == 2) {
        // An elementwise product a·b (Llama's MLP: SiLU(gate)·up): (a·b)/s = a·(b/s), so the linear
        // layer producing one operand, read by this Mul alone, takes 1/s.
        why = "neither of its operands comes from a MatMul/Gemm (with a constant weight, read by this Mul alone) "
              "that could take 1/s";
        for (const std::string& operand : p.inputs) {
            const Node* q = producerOf(model, operand);
            if (!q || readerCount(readers, operand) != 1 || isGraphOutput(model, operand) ||
                (q->opType != "MatMul" && q->opType != "Gemm" && q->opType != "Add") || !isDefaultDomain(*q))
                continue;
            const size_t kept = in.divided.size();
            std::string label;
            if (linearFold(*q, label).empty()) {
                in.producer = q->name.empty() ? label + " producing '" + operand + "'" : q->name;
                in.producerOp = "Mul of " + label;
                why.clear();
                break;
            }
            in.divided.resize(kept);
        }
    } else if (p.opType == "MatMul" || p.opType == "Gemm" || p.opType == "Add") {
        why = linearFold(p, in.producerOp);
    } else {
        return "'" + x + "' is produced by a " + nodeLabel(p) +
               ", which cannot absorb 1/s per channel (SmoothQuant folds into LayerNormalization, RMSNorm, "
               "a Mul by a per-channel constant or of a linear layer's output, or a Gemm/MatMul's output channels)";
    }
    if (!why.empty())
        return "its producer " + nodeLabel(p) + " cannot take 1/s: " + why;
    return {};
}

int64_t inputChannelOf(const Shape& shape, int axis, int64_t element)
{
    int64_t stride = 1;
    for (size_t a = shape.size(); a-- > size_t(axis) + 1;)
        stride *= shape[a];
    return (element / stride) % shape[size_t(axis)];
}

struct Working {
    Shape shape;
    std::vector<double> values;
};

Working& working(std::map<std::string, Working>& work, const Model& model, const std::string& name)
{
    auto [it, inserted] = work.try_emplace(name);
    if (inserted) {
        const Tensor& t = *model.initializer(name);
        it->second.shape = t.shape();
        it->second.values = finiteDoubles(t, "smooth_alpha: tensor '" + name + "'");
    }
    return it->second;
}

} // namespace

bool SmoothQuant::sameTargets(const SmoothQuant& o) const
{
    if (inputs.size() != o.inputs.size())
        return false;
    for (size_t i = 0; i < inputs.size(); ++i) {
        const SmoothedInput &a = inputs[i], &b = o.inputs[i];
        if (a.value != b.value || a.layers != b.layers || a.producer != b.producer || a.alpha != b.alpha ||
            a.channels != b.channels)
            return false;
    }
    return true;
}

std::vector<double> smoothingScales(const std::vector<double>& activationMax, const std::vector<double>& weightMax,
                                    double alpha)
{
    std::vector<double> s(activationMax.size(), 1.0);
    for (size_t j = 0; j < s.size() && j < weightMax.size(); ++j)
        if (activationMax[j] > 0 && weightMax[j] > 0)
            s[j] = std::pow(activationMax[j], alpha) / std::pow(weightMax[j], 1.0 - alpha);
    return s;
}

SmoothQuant smoothingTargets(const Model& model, const QuantizationPlan& plan)
{
    SmoothQuant result;
    std::vector<size_t> wanted;
    for (const LayerQuantization& lq : plan.layers())
        if (lq.smoothAlpha > 0)
            wanted.push_back(lq.layer);
    if (wanted.empty())
        return result;
    const ValueReaders readers = valueReaders(model);
    std::map<size_t, size_t> layerAtNode; // main-graph node -> model layer
    for (size_t i = 0; i < model.layers.size(); ++i)
        if (model.layers[i].scope == 0 && model.layers[i].node)
            layerAtNode[*model.layers[i].node] = i;

    // Layers by the activation they read, in model order of the first.
    std::vector<std::string> order;
    std::map<std::string, std::vector<size_t>> byValue;
    for (size_t index : wanted) {
        if (std::string why = layerProblem(model, plan, index, readers); !why.empty()) {
            result.skipped.push_back({index, std::move(why)});
            continue;
        }
        const std::string& x = model.nodes[*model.layers[index].node].inputs[0];
        if (!byValue.contains(x))
            order.push_back(x);
        byValue[x].push_back(index);
    }
    for (const std::string& x : order) {
        const std::vector<size_t>& layers = byValue[x];
        auto skipAll = [&](const std::string& why) {
            for (size_t l : layers)
                result.skipped.push_back({l, why});
        };
        SmoothedInput in;
        in.value = x;
        in.layers = layers;
        in.alpha = plan.forLayer(layers.front())->smoothAlpha;
        const QuantizableLayer& first = model.layers[layers.front()];
        in.channels = first.weightShape[size_t(first.contractionAxes.front())];
        std::string why;
        for (size_t l : layers) {
            const QuantizableLayer& layer = model.layers[l];
            if (plan.forLayer(l)->smoothAlpha != in.alpha)
                why = "the layers reading '" + x + "' share one s, and '" + first.modulePath + "' and '" +
                      layer.modulePath + "' set different smooth_alpha";
            else if (layer.weightShape[size_t(layer.contractionAxes.front())] != in.channels)
                why = "the layers reading '" + x + "' contract different channel counts";
        }
        if (why.empty() && isGraphOutput(model, x))
            why = "'" + x + "' is also a graph output, which X/s would change";
        if (why.empty())
            for (const auto& [node, input] : readers.at(x)) {
                const auto at = layerAtNode.find(node);
                if (at == layerAtNode.end() || input != 0 ||
                    std::find(layers.begin(), layers.end(), at->second) == layers.end()) {
                    why = "'" + x + "' is also read by " + nodeLabel(model.nodes[node]) +
                          ", which is not smoothed with it and would see X/s";
                    break;
                }
            }
        if (why.empty())
            why = findProducer(model, readers, in);
        if (!why.empty()) {
            skipAll(why);
            continue;
        }
        result.inputs.push_back(std::move(in));
    }
    std::sort(result.skipped.begin(), result.skipped.end(),
              [](const SkippedSmoothing& a, const SkippedSmoothing& b) { return a.layer < b.layer; });
    return result;
}

SmoothQuant smoothLayers(const Model& model, SmoothQuant targets,
                         const std::map<std::string, std::vector<double>>& activationMax)
{
    std::map<std::string, Working> work;
    for (SmoothedInput& in : targets.inputs) {
        const auto found = activationMax.find(in.value);
        if (found == activationMax.end())
            throw Error("smooth_alpha: no calibration maxima for activation '" + in.value + "'");
        if (int64_t(found->second.size()) != in.channels)
            throw Error("smooth_alpha: activation '" + in.value + "' has " + std::to_string(found->second.size()) +
                        " channels on its last axis, and the layers reading it take " + std::to_string(in.channels));
        in.activationMax = found->second;
        // max|W_j| over every layer reading X (the weights as earlier inputs left them).
        in.weightMax.assign(size_t(in.channels), 0.0);
        for (size_t l : in.layers) {
            const QuantizableLayer& layer = model.layers[l];
            const Working& w = working(work, model, layer.weightName);
            const int axis = layer.contractionAxes.front();
            for (size_t e = 0; e < w.values.size(); ++e) {
                double& m = in.weightMax[size_t(inputChannelOf(w.shape, axis, int64_t(e)))];
                m = std::max(m, std::abs(w.values[e]));
            }
        }
        in.scales = smoothingScales(in.activationMax, in.weightMax, in.alpha);
        for (size_t l : in.layers) {
            const QuantizableLayer& layer = model.layers[l];
            Working& w = working(work, model, layer.weightName);
            const int axis = layer.contractionAxes.front();
            for (size_t e = 0; e < w.values.size(); ++e)
                w.values[e] *= in.scales[size_t(inputChannelOf(w.shape, axis, int64_t(e)))];
        }
        for (const SmoothedInput::DividedTensor& d : in.divided) {
            Working& w = working(work, model, d.name);
            for (size_t e = 0; e < w.values.size(); ++e)
                w.values[e] /= in.scales[size_t(inputChannelOf(w.shape, d.axis, int64_t(e)))];
        }
    }
    targets.tensors.clear();
    for (const auto& [name, w] : work)
        targets.tensors.push_back({name, floatTensor(w.values, w.shape)});
    return targets;
}

Model smoothedModel(const Model& model, const SmoothQuant& smoothing)
{
    Model m = model;
    for (const NamedTensor& t : smoothing.tensors)
        m.replaceInitializer(t.name, t.tensor);
    return m;
}

} // namespace qs
