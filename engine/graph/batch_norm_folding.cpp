#include "graph/batch_norm_folding.h"

#include <cmath>
#include <map>
#include <optional>
#include <unordered_set>

#include "core/error.h"
#include "graph/weight_layout.h"

namespace qs {
namespace {

std::string labelOf(const Node& node, size_t index)
{
    return node.name.empty() ? "#" + std::to_string(index) : node.name;
}

float floatAttribute(const Node& node, std::string_view name, float fallback)
{
    const Attribute* a = node.attribute(name);
    return a && a->kind == Attribute::Kind::Float ? a->f : fallback;
}

// The per-channel affine form of an inference batch norm: y = x·factor + offset.
struct ChannelAffine {
    std::vector<float> factor; // γ/√(var+ε)
    std::vector<float> offset; // β − mean·factor
    std::vector<float> mean, beta;
};

// A fresh initializer name based on `base`, unused by the model and by `taken`.
std::string freshName(const Model& model, const std::unordered_set<std::string>& taken, const std::string& base)
{
    std::string name = base;
    for (int n = 1; model.isInitializer(name) || taken.contains(name); ++n)
        name = base + "_" + std::to_string(n);
    return name;
}

std::optional<int64_t> rankOf(const Model& model, const std::string& value)
{
    for (const std::vector<ValueInfo>* list : {&model.inputs, &model.valueInfos, &model.outputs})
        for (const ValueInfo& v : *list)
            if (v.name == value && v.shape)
                return int64_t(v.shape->size());
    return std::nullopt;
}

class Folder {
public:
    explicit Folder(Model& model) : model_(model)
    {
        for (size_t i = 0; i < model.nodes.size(); ++i) {
            const Node& node = model.nodes[i];
            for (const std::string& in : node.inputs)
                if (!in.empty())
                    ++readers_[in];
            for (const std::string& out : node.outputs)
                if (!out.empty())
                    producer_[out] = i;
            for (const Attribute& a : node.attributes)
                hasSubgraphs_ = hasSubgraphs_ || a.kind == Attribute::Kind::Graph;
        }
        for (const ValueInfo& v : model.outputs)
            graphOutputs_.insert(v.name);
    }

    BatchNormFolding run()
    {
        BatchNormFolding result;
        std::vector<std::vector<Node>> replacement(model_.nodes.size()); // decomposed BNs: their Mul and Add
        std::vector<bool> removed(model_.nodes.size(), false);
        for (size_t i = 0; i < model_.nodes.size(); ++i) {
            const Node& bn = model_.nodes[i];
            if (bn.opType != "BatchNormalization" || !bn.domain.empty())
                continue;
            const std::string label = labelOf(bn, i);
            std::string why;
            const std::optional<ChannelAffine> affine = affineOf(bn, label, why);
            if (!affine) {
                result.kept.push_back({label, why});
                continue;
            }
            if (const std::optional<std::string> into = foldIntoProducer(bn, label, *affine)) {
                removed[i] = true;
                result.folded.push_back({label, *into});
            } else if (std::optional<std::vector<Node>> nodes = decompose(bn, label, *affine, why)) {
                replacement[i] = std::move(*nodes);
                removed[i] = true;
                result.decomposed.push_back({label, {}});
            } else {
                result.kept.push_back({label, why});
            }
        }
        if (result.folded.empty() && result.decomposed.empty())
            return result;

        std::vector<Node> nodes;
        for (size_t i = 0; i < model_.nodes.size(); ++i) {
            if (!removed[i])
                nodes.push_back(std::move(model_.nodes[i]));
            for (Node& n : replacement[i])
                nodes.push_back(std::move(n));
        }
        model_.nodes = std::move(nodes);
        applyInitializers();
        std::erase_if(model_.valueInfos, [&](const ValueInfo& v) { return vanished_.contains(v.name); });
        try {
            model_.layers = findGraphLayers(model_);
        } catch (const Error& e) {
            throw Error(model_.sourcePath.string() + ": after folding batch norms: " + e.what());
        }
        return result;
    }

private:
    Model& model_;
    std::map<std::string, size_t> readers_;  // value -> how many node inputs read it
    std::map<std::string, size_t> producer_; // value -> node index
    std::unordered_set<std::string> graphOutputs_;
    bool hasSubgraphs_ = false;
    std::map<std::string, Tensor> replaced_; // initializer name -> its folded values (same name)
    std::vector<NamedTensor> added_;         // new initializers
    std::unordered_set<std::string> newNames_;
    std::unordered_set<std::string> vanished_; // values no node writes any more

    std::string where(const std::string& label) const
    {
        return model_.sourcePath.string() + ": BatchNormalization '" + label + "'";
    }

    const Tensor* current(const std::string& name) const
    {
        const auto r = replaced_.find(name);
        return r != replaced_.end() ? &r->second : model_.initializer(name);
    }

    std::optional<ChannelAffine> affineOf(const Node& bn, const std::string& label, std::string& why) const
    {
        if (bn.intAttribute("training_mode", 0) != 0) {
            why = "training_mode is set";
            return std::nullopt;
        }
        for (size_t k = 1; k < bn.outputs.size(); ++k)
            if (!bn.outputs[k].empty()) {
                why = "it writes its running mean or variance (training form)";
                return std::nullopt;
            }
        if (bn.inputs.size() != 5 || bn.outputs.empty() || bn.outputs[0].empty()) {
            why = "it does not have the five inputs and one output of the inference form";
            return std::nullopt;
        }
        static const char* kNames[] = {"scale", "B", "mean", "var"};
        std::vector<Tensor> params;
        for (size_t k = 1; k < 5; ++k) {
            const Tensor* t = model_.initializer(bn.inputs[k]);
            if (!t || !isFloatingDType(t->dtype())) {
                why = std::string("its ") + kNames[k - 1] + " '" + bn.inputs[k] + "' is not a constant float tensor";
                return std::nullopt;
            }
            params.push_back(t->toFloat32());
        }
        const int64_t channels = params[0].numel();
        for (size_t k = 0; k < 4; ++k)
            if (params[k].rank() != 1 || params[k].numel() != channels) {
                why = std::string("its ") + kNames[k] + " is not 1-D with one value per channel (" +
                      std::to_string(channels) + ")";
                return std::nullopt;
            }
        const float epsilon = floatAttribute(bn, "epsilon", 1e-5f);
        ChannelAffine a;
        a.factor.resize(size_t(channels));
        a.offset.resize(size_t(channels));
        a.mean.assign(params[2].values<float>().begin(), params[2].values<float>().end());
        a.beta.assign(params[1].values<float>().begin(), params[1].values<float>().end());
        for (size_t c = 0; c < size_t(channels); ++c) {
            const double gamma = params[0].values<float>()[c], var = params[3].values<float>()[c];
            const double denominator = var + double(epsilon);
            if (!std::isfinite(gamma) || !std::isfinite(a.beta[c]) || !std::isfinite(a.mean[c]) || !(denominator > 0))
                throw Error(where(label) + ": channel " + std::to_string(c) +
                            " has a non-finite parameter or var + epsilon <= 0; it cannot be folded");
            const double f = gamma / std::sqrt(denominator);
            a.factor[c] = float(f);
            a.offset[c] = float(double(a.beta[c]) - double(a.mean[c]) * f);
        }
        return a;
    }

    bool onlyThisReads(const std::string& value) const
    {
        const auto r = readers_.find(value);
        return r != readers_.end() && r->second == 1 && !graphOutputs_.contains(value);
    }

    // Stores the folded tensor for `name`: in place when only the folded node reads
    // it, else as a new initializer; returns the name the node reads now.
    std::string store(const std::string& name, Tensor folded)
    {
        if (!name.empty() && onlyThisReads(name) && !newNames_.contains(name)) {
            replaced_[name] = std::move(folded);
            return name;
        }
        const std::string fresh = freshName(model_, newNames_, (name.empty() ? "bias" : name) + "_bn_folded");
        newNames_.insert(fresh);
        added_.push_back({fresh, std::move(folded)});
        return fresh;
    }

    std::optional<std::string> foldIntoProducer(const Node& bn, const std::string& label, const ChannelAffine& a)
    {
        const std::string& x = bn.inputs[0];
        const auto p = producer_.find(x);
        if (p == producer_.end() || !onlyThisReads(x))
            return std::nullopt;
        Node& layer = model_.nodes[p->second];
        const bool conv = layer.opType == "Conv", transposed = layer.opType == "ConvTranspose",
                   gemm = layer.opType == "Gemm";
        if (!layer.domain.empty() || !(conv || transposed || gemm) || layer.outputs.empty() || layer.outputs[0] != x ||
            layer.inputs.size() < 2)
            return std::nullopt;
        const Tensor* w = current(layer.inputs[1]);
        if (!w || w->dtype() != DType::F32 || w->rank() < 2)
            return std::nullopt;
        const std::string biasName = layer.inputs.size() > 2 ? layer.inputs[2] : std::string();
        const Tensor* bias = biasName.empty() ? nullptr : current(biasName);
        if (!biasName.empty() && (!bias || !isFloatingDType(bias->dtype())))
            return std::nullopt;
        const int64_t channels = int64_t(a.factor.size());

        Tensor weight = w->clone();
        std::span<float> wv = weight.mutableValues<float>();
        float biasScale = 1.0f; // Gemm: C is multiplied by beta
        if (conv) {
            if (weight.dim(0) != channels)
                return std::nullopt;
            const int64_t inner = weight.numel() / channels;
            for (int64_t c = 0; c < channels; ++c)
                for (int64_t k = 0; k < inner; ++k)
                    wv[size_t(c * inner + k)] *= a.factor[size_t(c)];
        } else if (transposed) {
            const int64_t group = layer.intAttribute("group", 1);
            const int64_t in = weight.dim(0), perGroup = weight.dim(1);
            if (group < 1 || in % group != 0 || perGroup * group != channels)
                return std::nullopt;
            const int64_t inner = weight.numel() / (in * perGroup), inPerGroup = in / group;
            for (int64_t i = 0; i < in; ++i)
                for (int64_t j = 0; j < perGroup; ++j) {
                    const float f = a.factor[size_t((i / inPerGroup) * perGroup + j)];
                    for (int64_t k = 0; k < inner; ++k)
                        wv[size_t((i * perGroup + j) * inner + k)] *= f;
                }
        } else {
            if (weight.rank() != 2)
                return std::nullopt;
            const bool transB = layer.intAttribute("transB", 0) != 0;
            const int64_t rows = weight.dim(0), cols = weight.dim(1);
            if ((transB ? rows : cols) != channels)
                return std::nullopt;
            for (int64_t r = 0; r < rows; ++r)
                for (int64_t c = 0; c < cols; ++c)
                    wv[size_t(r * cols + c)] *= a.factor[size_t(transB ? r : c)];
            biasScale = floatAttribute(layer, "beta", 1.0f);
        }

        std::vector<float> b(size_t(channels), 0.0f);
        if (bias) {
            const Tensor bf = bias->toFloat32();
            const bool perChannel =
                bf.numel() == channels && (bf.rank() == 1 || (gemm && bf.rank() == 2 && bf.dim(0) == 1));
            if (!perChannel && !(gemm && bf.numel() == 1))
                return std::nullopt;
            for (int64_t c = 0; c < channels; ++c)
                b[size_t(c)] = biasScale * bf.values<float>()[perChannel ? size_t(c) : 0];
        }
        for (size_t c = 0; c < b.size(); ++c)
            b[c] = float((double(b[c]) - double(a.mean[c])) * double(a.factor[c]) + double(a.beta[c]));

        layer.inputs[1] = store(layer.inputs[1], std::move(weight));
        const Tensor newBias = Tensor::fromVector(DType::F32, {channels}, b);
        if (layer.inputs.size() < 3)
            layer.inputs.resize(3);
        layer.inputs[2] = store(biasName.empty() ? label + ".bias" : biasName, newBias);
        if (gemm) {
            bool set = false;
            for (Attribute& attr : layer.attributes)
                if (attr.name == "beta")
                    attr.kind = Attribute::Kind::Float, attr.f = 1.0f, set = true;
            if (!set) {
                Attribute beta;
                beta.name = "beta";
                beta.kind = Attribute::Kind::Float;
                beta.f = 1.0f;
                layer.attributes.push_back(beta);
            }
        }
        vanished_.insert(x);
        layer.outputs[0] = bn.outputs[0];
        producer_[bn.outputs[0]] = p->second;
        return layer.name;
    }

    std::optional<std::vector<Node>> decompose(const Node& bn, const std::string& label, const ChannelAffine& a,
                                               std::string& why)
    {
        const std::optional<int64_t> rank = rankOf(model_, bn.inputs[0]);
        if (!rank || *rank < 2) {
            why = "it follows no Conv, ConvTranspose or Gemm it can fold into, and the rank of its input '" +
                  bn.inputs[0] + "' is unknown, so it cannot be written as Mul and Add";
            return std::nullopt;
        }
        Shape shape{int64_t(a.factor.size())};
        for (int64_t k = 2; k < *rank; ++k)
            shape.push_back(1);
        const std::string factorName = freshName(model_, newNames_, label + ".multiplier");
        newNames_.insert(factorName);
        added_.push_back({factorName, Tensor::fromVector(DType::F32, shape, a.factor)});
        const std::string offsetName = freshName(model_, newNames_, label + ".offset");
        newNames_.insert(offsetName);
        added_.push_back({offsetName, Tensor::fromVector(DType::F32, shape, a.offset)});
        std::string scaled = bn.outputs[0] + "_scaled";
        while (producer_.contains(scaled) || readers_.contains(scaled) || model_.isInitializer(scaled) ||
               newNames_.contains(scaled))
            scaled += "_";
        newNames_.insert(scaled);
        Node mul;
        mul.name = label + "/Mul";
        mul.opType = "Mul";
        mul.inputs = {bn.inputs[0], factorName};
        mul.outputs = {scaled};
        Node add;
        add.name = label + "/Add";
        add.opType = "Add";
        add.inputs = {scaled, offsetName};
        add.outputs = {bn.outputs[0]};
        return std::vector<Node>{std::move(mul), std::move(add)};
    }

    void applyInitializers()
    {
        std::unordered_set<std::string> read;
        for (const Node& n : model_.nodes)
            for (const std::string& in : n.inputs)
                read.insert(in);
        for (const ValueInfo& v : model_.outputs)
            read.insert(v.name);
        std::unordered_set<std::string> drop;
        for (const auto& [name, tensor] : replaced_)
            drop.insert(name);
        if (!hasSubgraphs_)
            for (const NamedTensor& t : model_.initializers())
                if (!read.contains(t.name))
                    drop.insert(t.name);
        model_.removeInitializers(drop);
        for (auto& [name, tensor] : replaced_)
            model_.addInitializer(name, std::move(tensor));
        for (NamedTensor& t : added_)
            model_.addInitializer(std::move(t.name), std::move(t.tensor));
    }
};

} // namespace

BatchNormFolding foldBatchNorms(Model model)
{
    BatchNormFolding result;
    if (model.format == "onnx" && !model.weightsOnly) {
        Folder folder(model);
        BatchNormFolding r = folder.run();
        result.folded = std::move(r.folded);
        result.decomposed = std::move(r.decomposed);
        result.kept = std::move(r.kept);
    }
    result.model = std::move(model);
    return result;
}

} // namespace qs
