#include "quantization/high_bias_absorption.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "graph/value_readers.h"
#include "quantization/double_tensors.h"

namespace qs {
namespace {

// The bias initializer of a Conv (B) or Gemm (C), or "".
std::string biasOf(const Node& node)
{
    if ((node.opType == "Conv" || node.opType == "Gemm") && node.inputs.size() > 2)
        return node.inputs[2];
    return {};
}

float floatAttribute(const Node& node, const char* name, float fallback)
{
    const Attribute* a = node.attribute(name);
    return a ? a->f : fallback;
}

// Why the pair cannot absorb, or "".
std::string absorptionProblem(const Model& model, const EqualizedPair& pair, const ValueReaders& readers)
{
    const QuantizableLayer& l1 = model.layers[pair.first];
    const QuantizableLayer& l2 = model.layers[pair.second];
    const Node& n1 = model.nodes[*l1.node];
    const Node& n2 = model.nodes[*l2.node];
    if (pair.through != "Relu")
        return "only a Relu may lie between the layers (here: " +
               (pair.through.empty() ? std::string("nothing") : pair.through) +
               "): absorption relies on relu(z) = relu(z − c) + c for z ≥ c";
    const std::string b1 = biasOf(n1);
    if (b1.empty() || !model.initializer(b1))
        return "it has no bias to take the absorbed part from";
    if (n1.opType == "Gemm" && floatAttribute(n1, "beta", 1.0f) != 1.0f)
        return "it is a Gemm with beta ≠ 1";
    const std::string b2 = biasOf(n2);
    if (b2.empty())
        return "'" + l2.modulePath + "' has no bias to take the absorbed part (" + n2.opType +
               (n2.opType == "MatMul" ? " has no bias input)" : " without a bias input)");
    const Tensor* bias2 = model.initializer(b2);
    if (!bias2 || bias2->dtype() != DType::F32)
        return "the bias '" + b2 + "' of '" + l2.modulePath + "' is not a float32 constant";
    if (const auto r = readers.find(b2); r != readers.end() && r->second.size() > 1)
        return "the bias '" + b2 + "' of '" + l2.modulePath + "' is read by another node too";
    const int64_t outputs = l2.weightShape[size_t(l2.channelAxis)];
    if (bias2->numel() != outputs || bias2->rank() > 2)
        return "the bias '" + b2 + "' of '" + l2.modulePath + "' is " + shapeToString(bias2->shape()) +
               ", not one value per output channel";
    if (n2.opType == "Gemm" && (floatAttribute(n2, "alpha", 1.0f) != 1.0f || floatAttribute(n2, "beta", 1.0f) != 1.0f))
        return "'" + l2.modulePath + "' is a Gemm with alpha or beta ≠ 1";
    if (n2.opType == "Conv") {
        if (const Attribute* pad = n2.attribute("auto_pad"); pad && pad->s != "NOTSET" && pad->s != "VALID")
            return "'" + l2.modulePath + "' pads its input (auto_pad " + pad->s +
                   "), and its zero padding would meet −c where it met 0";
        if (const Attribute* pads = n2.attribute("pads");
            pads && std::any_of(pads->ints.begin(), pads->ints.end(), [](int64_t p) { return p != 0; }))
            return "'" + l2.modulePath +
                   "' pads its input with zeros, which would meet −c where they met 0 (the "
                   "border outputs would change)";
    }
    return {};
}

std::vector<double> doubles(const Tensor& t)
{
    const Tensor f = t.toFloat32();
    const auto v = f.values<float>();
    return std::vector<double>(v.begin(), v.end());
}

// W2·c per output channel of the second layer: c indexed by its input channels.
std::vector<double> weightTimes(const QuantizableLayer& l, const Node& node, const Tensor& weight,
                                const std::vector<double>& c)
{
    const std::vector<double> w = doubles(weight);
    const Shape& s = l.weightShape;
    const int64_t outputs = s[size_t(l.channelAxis)];
    std::vector<double> out(size_t(outputs), 0.0);
    if (l.opType == "Conv") {
        const int64_t perGroupIn = s[1], perGroupOut = outputs / l.groups;
        const int64_t kernel = shapeElementCount(Shape(s.begin() + 2, s.end()));
        for (int64_t o = 0; o < outputs; ++o)
            for (int64_t j = 0; j < perGroupIn; ++j) {
                const double cj = c[size_t((o / perGroupOut) * perGroupIn + j)];
                for (int64_t k = 0; k < kernel; ++k)
                    out[size_t(o)] += w[size_t((o * perGroupIn + j) * kernel + k)] * cj;
            }
        return out;
    }
    // Gemm/MatMul, rank 2: [K, N], or Gemm transB [N, K].
    const bool transposed = node.opType == "Gemm" && node.intAttribute("transB", 0) != 0;
    const int64_t rows = s[0], cols = s[1];
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t col = 0; col < cols; ++col) {
            const double v = w[size_t(r * cols + col)];
            if (transposed)
                out[size_t(r)] += v * c[size_t(col)];
            else
                out[size_t(col)] += v * c[size_t(r)];
        }
    return out;
}

} // namespace

bool HighBiasAbsorption::sameTargets(const HighBiasAbsorption& o) const
{
    if (pairs.size() != o.pairs.size())
        return false;
    for (size_t i = 0; i < pairs.size(); ++i)
        if (pairs[i].first != o.pairs[i].first || pairs[i].second != o.pairs[i].second ||
            pairs[i].preActivation != o.pairs[i].preActivation)
            return false;
    return true;
}

HighBiasAbsorption absorptionTargets(const Model& model, const QuantizationPlan& plan,
                                     const CrossLayerEqualization& equalization)
{
    HighBiasAbsorption result;
    const ValueReaders readers = valueReaders(model);
    for (const EqualizedPair& p : equalization.pairs) {
        const LayerQuantization* lq = plan.forLayer(p.first);
        if (!lq || !lq->highBiasAbsorption)
            continue;
        if (std::string why = absorptionProblem(model, p, readers); !why.empty()) {
            result.skipped.push_back({p.first, p.second, "no high-bias absorption: " + why});
            continue;
        }
        const QuantizableLayer& l1 = model.layers[p.first];
        AbsorptionPair a;
        a.first = p.first;
        a.second = p.second;
        a.preActivation = model.nodes[*l1.node].outputs.at(0);
        a.channels = int64_t(p.scales.size());
        a.channelAxis = l1.opType == "Conv" ? 1 : -1;
        result.pairs.push_back(std::move(a));
    }
    return result;
}

HighBiasAbsorption absorbHighBiases(const Model& equalized, const HighBiasAbsorption& targets,
                                    const std::map<std::string, std::vector<double>>& minima)
{
    HighBiasAbsorption result = targets;
    result.tensors.clear();
    // Biases in double while the pairs update them (a layer can be the second of
    // one pair and the first of the next).
    std::map<std::string, std::vector<double>> biases;
    auto bias = [&](const std::string& name) -> std::vector<double>& {
        auto [it, inserted] = biases.try_emplace(name);
        if (inserted) {
            const Tensor* t = equalized.initializer(name);
            if (!t)
                throw Error("high_bias_absorption: bias '" + name + "' is not in the model");
            it->second = finiteDoubles(*t, "high_bias_absorption: bias '" + name + "'");
        }
        return it->second;
    };
    for (AbsorptionPair& p : result.pairs) {
        const auto m = minima.find(p.preActivation);
        if (m == minima.end())
            throw Error("high_bias_absorption: no calibration minima of '" + p.preActivation + "'");
        if (int64_t(m->second.size()) != p.channels)
            throw Error("high_bias_absorption: '" + p.preActivation + "' has " + std::to_string(m->second.size()) +
                        " channels, its layer " + std::to_string(p.channels));
        p.absorbed.assign(size_t(p.channels), 0.0);
        for (size_t i = 0; i < p.absorbed.size(); ++i) {
            if (!std::isfinite(m->second[i]))
                throw Error("high_bias_absorption: the minimum of '" + p.preActivation + "' channel " +
                            std::to_string(i) + " is not finite");
            p.absorbed[i] = std::max(0.0, m->second[i]);
        }
        const QuantizableLayer& l1 = equalized.layers[p.first];
        const QuantizableLayer& l2 = equalized.layers[p.second];
        const Node& n2 = equalized.nodes[*l2.node];
        std::vector<double>& b1 = bias(biasOf(equalized.nodes[*l1.node]));
        for (size_t i = 0; i < b1.size(); ++i)
            b1[i] -= p.absorbed[i];
        const std::vector<double> shift = weightTimes(l2, n2, *equalized.initializer(l2.weightName), p.absorbed);
        std::vector<double>& b2 = bias(biasOf(n2));
        for (size_t i = 0; i < b2.size(); ++i)
            b2[i] += shift[i];
    }
    for (const auto& [name, values] : biases)
        result.tensors.push_back({name, floatTensor(values, equalized.initializer(name)->shape())});
    return result;
}

Model absorbedModel(const Model& model, const HighBiasAbsorption& absorption)
{
    Model m = model;
    for (const NamedTensor& t : absorption.tensors)
        m.replaceInitializer(t.name, t.tensor);
    return m;
}

} // namespace qs
