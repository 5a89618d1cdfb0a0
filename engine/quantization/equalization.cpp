#include "quantization/equalization.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "core/error.h"
#include "graph/value_readers.h"
#include "quantization/double_tensors.h"

namespace qs {
namespace {

bool isLinearFamily(const std::string& op)
{
    return op == "Gemm" || op == "MatMul";
}

// The ops between two layers that commute with a positive per-channel scale
// (f(x/s) = f(x)/s channel by channel): ReLU and LeakyReLU elementwise, and the
// pools, which take a maximum or a mean within each channel.
bool isPositivelyHomogeneous(const Node& node)
{
    static const char* const kOps[] = {"Relu",        "LeakyRelu",         "MaxPool",
                                       "AveragePool", "GlobalAveragePool", "GlobalMaxPool"};
    return std::any_of(std::begin(kOps), std::end(kOps), [&](const char* op) { return node.opType == op; }) &&
           (node.domain.empty() || node.domain == "ai.onnx") && !node.inputs.empty() && !node.outputs.empty();
}

bool isPool(const Node& node)
{
    return node.opType.find("Pool") != std::string::npos;
}

// The bias initializer of a Conv (input 2) or Gemm (input C), or "" when the layer has none.
std::string biasName(const Node& node)
{
    if ((node.opType == "Conv" || node.opType == "Gemm") && node.inputs.size() > 2)
        return node.inputs[2];
    return {};
}

// Why a layer cannot take part in a pair at all, or "".
std::string layerProblem(const Model& model, const std::vector<QuantizableLayer>& layers, size_t index,
                         const ValueReaders& readers)
{
    const QuantizableLayer& layer = layers[index];
    if (layer.scope != 0 || !layer.node)
        return "it is inside a subgraph";
    if (layer.opType != "Conv" && !isLinearFamily(layer.opType))
        return "equalize takes Conv, Gemm and MatMul, and this is a " + layer.opType;
    if (layer.weightDType != DType::F32)
        return "its weight is " + std::string(dtypeName(layer.weightDType)) + ", and equalize rewrites float32 weights";
    if (isLinearFamily(layer.opType) && layer.weightShape.size() != 2)
        return "its weight has rank " + std::to_string(layer.weightShape.size()) + " (equalize takes rank 2)";
    if (layer.sharesWeightOf)
        return "it shares its weight with '" + layers[*layer.sharesWeightOf].modulePath + "'";
    for (size_t j = 0; j < layers.size(); ++j)
        if (layers[j].sharesWeightOf == index)
            return "its weight is shared with '" + layers[j].modulePath + "'";
    const auto r = readers.find(layer.weightName);
    if (r != readers.end() && r->second.size() > 1)
        return "its weight '" + layer.weightName + "' is read by another node too";
    const Node& node = model.nodes[*layer.node];
    if (node.opType == "Gemm" && node.intAttribute("transA", 0) != 0)
        return "it is a Gemm with transA = 1";
    if (const std::string bias = biasName(node); !bias.empty()) {
        const Tensor* b = model.initializer(bias);
        if (!b)
            return "its bias '" + bias + "' is computed, not a constant";
        if (b->dtype() != DType::F32)
            return "its bias '" + bias + "' is not float32";
        if (const auto br = readers.find(bias); br != readers.end() && br->second.size() > 1)
            return "its bias '" + bias + "' is read by another node too";
    }
    return {};
}

// The weight's output channels (the layer's channel axis) and input channels
// (Conv: axis 1 through the groups; Gemm/MatMul: the contraction axis).
int64_t outputChannels(const QuantizableLayer& l)
{
    return l.weightShape[size_t(l.channelAxis)];
}
int64_t inputChannels(const QuantizableLayer& l)
{
    if (l.opType == "Conv")
        return l.weightShape[1] * l.groups;
    return l.weightShape[size_t(l.contractionAxes.front())];
}

// For every element of the weight (row-major), its output channel or input channel.
std::vector<int64_t> channelOfElements(const QuantizableLayer& l, bool input)
{
    const Shape& shape = l.weightShape;
    int64_t n = 1;
    for (int64_t d : shape)
        n *= d;
    std::vector<int64_t> strides(shape.size(), 1);
    for (size_t a = shape.size(); a-- > 1;)
        strides[a - 1] = strides[a] * shape[a];
    std::vector<int64_t> channel(static_cast<size_t>(n));
    for (int64_t e = 0; e < n; ++e) {
        if (!input) {
            channel[size_t(e)] = (e / strides[size_t(l.channelAxis)]) % shape[size_t(l.channelAxis)];
        } else if (l.opType == "Conv") {
            const int64_t o = e / strides[0], j = (e / strides[1]) % shape[1];
            const int64_t outPerGroup = shape[0] / l.groups;
            channel[size_t(e)] = (o / outPerGroup) * shape[1] + j;
        } else {
            const auto axis = size_t(l.contractionAxes.front());
            channel[size_t(e)] = (e / strides[axis]) % shape[axis];
        }
    }
    return channel;
}

std::vector<double> channelRanges(const std::vector<double>& w, const std::vector<int64_t>& channelOf, int64_t count)
{
    std::vector<double> r(size_t(count), 0.0);
    for (size_t e = 0; e < w.size(); ++e)
        r[size_t(channelOf[e])] = std::max(r[size_t(channelOf[e])], std::abs(w[e]));
    return r;
}

// A layer's weight (and bias) in double while the sweeps rescale it.
struct Working {
    std::vector<double> weight, bias;
    std::vector<int64_t> outChannel, inChannel;
    std::string biasName;
    bool changed = false;
};

} // namespace

bool CrossLayerEqualization::operator==(const CrossLayerEqualization& o) const
{
    if (pairs.size() != o.pairs.size() || skipped.size() != o.skipped.size() || sweeps != o.sweeps)
        return false;
    for (size_t i = 0; i < pairs.size(); ++i)
        if (pairs[i].first != o.pairs[i].first || pairs[i].second != o.pairs[i].second ||
            pairs[i].scales != o.pairs[i].scales)
            return false;
    for (size_t i = 0; i < skipped.size(); ++i)
        if (skipped[i].first != o.skipped[i].first || skipped[i].reason != o.skipped[i].reason)
            return false;
    return true;
}

std::vector<double> equalizationScales(const std::vector<double>& firstRanges, const std::vector<double>& secondRanges)
{
    std::vector<double> s(firstRanges.size(), 1.0);
    for (size_t i = 0; i < s.size(); ++i)
        if (firstRanges[i] > 0 && secondRanges[i] > 0)
            s[i] = std::sqrt(firstRanges[i] / secondRanges[i]);
    return s;
}

CrossLayerEqualization equalizeLayers(const Model& model, const QuantizationPlan& plan)
{
    CrossLayerEqualization result;
    const std::vector<QuantizableLayer>& layers = model.layers;
    std::set<size_t> wanted;
    // A layer whose quantization has a problem (it stays float) is still
    // equalized: equalization rewrites the float model, whatever is quantized after.
    for (const LayerQuantization& lq : plan.layers())
        if (lq.equalize)
            wanted.insert(lq.layer);
    if (wanted.empty())
        return result;
    const ValueReaders readers = valueReaders(model);
    std::map<size_t, size_t> layerAtNode; // main-graph node -> model layer
    for (size_t i = 0; i < layers.size(); ++i)
        if (layers[i].scope == 0 && layers[i].node)
            layerAtNode[*layers[i].node] = i;

    // ---- the pairs
    for (size_t first : wanted) {
        auto skip = [&](std::optional<size_t> second, std::string why) {
            result.skipped.push_back({first, second, std::move(why)});
        };
        const QuantizableLayer& l1 = layers[first];
        if (std::string why = layerProblem(model, layers, first, readers); !why.empty()) {
            skip(std::nullopt, std::move(why));
            continue;
        }
        const Node& n1 = model.nodes[*l1.node];
        // Follow the output through at most one positively homogeneous op.
        std::string value = n1.outputs.empty() ? std::string() : n1.outputs[0];
        std::string through;
        bool pooled = false, severalReaders = false;
        std::optional<std::pair<size_t, size_t>> reader;
        for (int step = 0; step < 8; ++step) {
            reader.reset();
            if (value.empty() || isGraphOutput(model, value))
                break;
            const auto r = readers.find(value);
            if (r == readers.end() || r->second.size() != 1) {
                severalReaders = r != readers.end();
                break;
            }
            reader = r->second[0];
            const Node& next = model.nodes[reader->first];
            if (reader->second == 0 && isPositivelyHomogeneous(next)) {
                through += (through.empty() ? "" : ", ") + next.opType;
                pooled = pooled || isPool(next);
                value = next.outputs[0];
                continue;
            }
            break;
        }
        if (!reader) {
            if (severalReaders)
                skip(std::nullopt, "its output is read by several nodes");
            else
                skip(std::nullopt, "its output is a graph output or is read by no layer");
            continue;
        }
        const Node& n2 = model.nodes[reader->first];
        const auto at = layerAtNode.find(reader->first);
        if (at == layerAtNode.end()) {
            skip(std::nullopt, "its output reaches a " + n2.opType + " node ('" + n2.name + "')" +
                                   (through.empty() ? "" : " through " + through) +
                                   ", not a Conv/Gemm/MatMul layer (equalize goes through Relu, LeakyRelu, pools or "
                                   "nothing; Clip/ReLU6 is not scale-equivariant)");
            continue;
        }
        const size_t second = at->second;
        const QuantizableLayer& l2 = layers[second];
        if (reader->second != 0) {
            skip(second, "its output is not the data input of '" + l2.modulePath + "'");
            continue;
        }
        if (!wanted.contains(second)) {
            skip(second, "the rule of '" + l2.modulePath + "' does not set equalize");
            continue;
        }
        if (std::string why = layerProblem(model, layers, second, readers); !why.empty()) {
            skip(second, "'" + l2.modulePath + "': " + why);
            continue;
        }
        if ((l1.opType == "Conv") != (l2.opType == "Conv") || (pooled && l1.opType != "Conv")) {
            skip(second, "a " + l1.opType + " followed by a " + l2.opType +
                             " (their channels are on different axes; equalize pairs Conv with Conv and "
                             "Gemm/MatMul with Gemm/MatMul)");
            continue;
        }
        if (outputChannels(l1) != inputChannels(l2)) {
            skip(second, std::to_string(outputChannels(l1)) + " output channels feed " +
                             std::to_string(inputChannels(l2)) + " input channels of '" + l2.modulePath + "'");
            continue;
        }
        result.pairs.push_back({first, second, through, std::vector<double>(size_t(outputChannels(l1)), 1.0)});
    }
    if (result.pairs.empty())
        return result;

    // ---- the sweeps, in double
    std::map<size_t, Working> work;
    auto working = [&](size_t index) -> Working& {
        auto [it, inserted] = work.try_emplace(index);
        if (inserted) {
            const QuantizableLayer& l = layers[index];
            Working& w = it->second;
            w.weight = finiteDoubles(*model.initializer(l.weightName), "equalize: tensor '" + l.weightName + "'");
            w.outChannel = channelOfElements(l, false);
            w.inChannel = channelOfElements(l, true);
            w.biasName = biasName(model.nodes[*l.node]);
            if (!w.biasName.empty()) {
                const Tensor& b = *model.initializer(w.biasName);
                if (b.numel() != outputChannels(l))
                    throw Error("equalize: bias '" + w.biasName + "' of '" + l.modulePath + "' has " +
                                std::to_string(b.numel()) + " values for " + std::to_string(outputChannels(l)) +
                                " output channels");
                w.bias = finiteDoubles(b, "equalize: tensor '" + w.biasName + "'");
            }
        }
        return it->second;
    };
    for (const EqualizedPair& p : result.pairs) {
        working(p.first);
        working(p.second);
    }
    for (result.sweeps = 1; result.sweeps <= kMaxEqualizationSweeps; ++result.sweeps) {
        double moved = 0;
        for (EqualizedPair& p : result.pairs) {
            Working &a = work.at(p.first), &b = work.at(p.second);
            const int64_t channels = int64_t(p.scales.size());
            const std::vector<double> s = equalizationScales(channelRanges(a.weight, a.outChannel, channels),
                                                             channelRanges(b.weight, b.inChannel, channels));
            for (size_t e = 0; e < a.weight.size(); ++e)
                a.weight[e] /= s[size_t(a.outChannel[e])];
            for (size_t i = 0; i < a.bias.size(); ++i)
                a.bias[i] /= s[i];
            for (size_t e = 0; e < b.weight.size(); ++e)
                b.weight[e] *= s[size_t(b.inChannel[e])];
            for (size_t i = 0; i < s.size(); ++i) {
                p.scales[i] *= s[i];
                moved = std::max(moved, std::abs(s[i] - 1.0));
            }
            a.changed = b.changed = true;
        }
        if (moved < kEqualizationTolerance)
            break;
    }
    result.sweeps = std::min(result.sweeps, kMaxEqualizationSweeps);
    for (const auto& [index, w] : work) {
        const QuantizableLayer& l = layers[index];
        result.tensors.push_back({l.weightName, floatTensor(w.weight, l.weightShape)});
        if (!w.biasName.empty() && std::find_if(result.pairs.begin(), result.pairs.end(), [&](const EqualizedPair& p) {
                                       return p.first == index;
                                   }) != result.pairs.end())
            result.tensors.push_back({w.biasName, floatTensor(w.bias, model.initializer(w.biasName)->shape())});
    }
    return result;
}

Model equalizedModel(const Model& model, const CrossLayerEqualization& equalization)
{
    Model m = model;
    for (const NamedTensor& t : equalization.tensors)
        m.replaceInitializer(t.name, t.tensor);
    return m;
}

} // namespace qs
