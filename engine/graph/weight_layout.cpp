#include "graph/weight_layout.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <tuple>

#include "core/error.h"
#include "graph/module_path.h"

namespace qs {
namespace {

struct Layout {
    size_t weightInput = 0;
    int channelAxis = 0;
    std::vector<int> contractionAxes;
    int64_t groups = 1;
};

// The weight layout of a node, or none when the node is not a quantizable layer.
std::optional<Layout> graphLayout(const Node& node, const Model& model)
{
    if (!node.domain.empty() && node.domain != "ai.onnx")
        return std::nullopt;
    auto constantInput = [&](size_t index) -> const Tensor* {
        if (index >= node.inputs.size() || node.inputs[index].empty())
            return nullptr;
        const Tensor* t = model.initializer(node.inputs[index]);
        return t && isFloatingDType(t->dtype()) ? t : nullptr;
    };
    const std::string& op = node.opType;
    if (op == "Conv" || op == "ConvTranspose") {
        const Tensor* w = constantInput(1);
        if (!w || w->rank() < 3)
            return std::nullopt;
        const int64_t groups = node.intAttribute("group", 1);
        if (op == "Conv")
            return Layout{1, 0, {1}, groups};
        return Layout{1, 1, {0}, groups};
    }
    if (op == "Gemm") {
        const Tensor* b = constantInput(1);
        if (!b || b->rank() != 2)
            return std::nullopt;
        if (node.intAttribute("transB", 0) != 0)
            return Layout{1, 0, {1}, 1};
        return Layout{1, 1, {0}, 1};
    }
    if (op == "MatMul") {
        const Tensor* b = constantInput(1);
        if (!b || b->rank() < 2)
            return std::nullopt;
        return Layout{1, b->rank() - 1, {b->rank() - 2}, 1};
    }
    if (op == "Gather") {
        const Tensor* table = constantInput(0);
        if (!table || table->rank() < 2 || node.intAttribute("axis", 0) != 0)
            return std::nullopt;
        return Layout{0, 0, {table->rank() - 1}, 1};
    }
    return std::nullopt;
}

std::string lowerCase(std::string_view text)
{
    std::string lower(text);
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return lower;
}

std::string lastComponent(std::string_view name)
{
    const size_t cut = name.find_last_of("./");
    std::string_view last = cut == std::string_view::npos ? name : name.substr(cut + 1);
    if (const size_t colon = last.rfind(':'); colon != std::string_view::npos)
        last = last.substr(0, colon);
    return std::string(last);
}

bool isNonWeightParameter(std::string_view name)
{
    static const char* const kNames[] = {"bias",        "running_mean",    "running_var", "num_batches_tracked",
                                         "moving_mean", "moving_variance", "gamma",       "beta"};
    const std::string last = lowerCase(lastComponent(name));
    return std::any_of(std::begin(kNames), std::end(kNames), [&](const char* n) { return last == n; });
}

} // namespace

std::vector<QuantizableLayer> findGraphLayers(const Model& model)
{
    std::vector<QuantizableLayer> layers;
    std::vector<std::string> paths;
    std::map<std::string, size_t> fallbackOrdinal; // per op type, for `<optype>_<n>`
    for (size_t i = 0; i < model.nodes.size(); ++i) {
        const Node& node = model.nodes[i];
        const std::optional<Layout> layout = graphLayout(node, model);
        if (!layout)
            continue;
        const std::string& weightName = node.inputs[layout->weightInput];
        const Tensor& weight = *model.initializer(weightName);
        std::string path = modulePathFromNodeName(node.name, node.opType);
        if (path.empty())
            path = modulePathFromParameterName(weightName);
        if (path.empty())
            path = node.opType + '_' + std::to_string(fallbackOrdinal[node.opType]++);
        paths.push_back(std::move(path));

        QuantizableLayer layer;
        layer.opType = node.opType;
        layer.node = i;
        layer.weightInput = layout->weightInput;
        layer.weightName = weightName;
        layer.weightShape = weight.shape();
        layer.weightDType = weight.dtype();
        layer.parameterCount = weight.numel();
        layer.channelAxis = layout->channelAxis;
        layer.contractionAxes = layout->contractionAxes;
        layer.groups = layout->groups;
        layers.push_back(std::move(layer));
    }
    paths = uniqueModulePaths(std::move(paths));
    for (size_t i = 0; i < layers.size(); ++i)
        layers[i].modulePath = std::move(paths[i]);
    markSharedWeights(model, layers);
    return layers;
}

void markSharedWeights(const Model& model, std::vector<QuantizableLayer>& layers)
{
    // A tensor's identity: its storage, shape and dtype (a borrowed or
    // shallow-copied tensor shares its bytes); its name when it has no bytes.
    using Identity = std::tuple<const void*, Shape, DType, std::string>;
    std::map<Identity, size_t> firstReader;
    for (size_t i = 0; i < layers.size(); ++i) {
        const Tensor* w = model.initializer(layers[i].weightName);
        const Identity id = w && w->rawData() && w->nbytes() > 0
                                ? Identity{w->rawData(), w->shape(), w->dtype(), {}}
                                : Identity{nullptr, {}, DType::F32, layers[i].weightName};
        const auto [it, first] = firstReader.emplace(id, i);
        if (first)
            layers[i].sharesWeightOf.reset();
        else
            layers[i].sharesWeightOf = it->second;
    }
}

std::vector<QuantizableLayer> inferCheckpointLayers(const Model& model)
{
    std::vector<QuantizableLayer> layers;
    std::vector<std::string> paths;
    for (const NamedTensor& t : model.initializers()) {
        const int rank = t.tensor.rank();
        if (!isFloatingDType(t.tensor.dtype()) || rank < 2 || rank > 5 || isNonWeightParameter(t.name))
            continue;
        QuantizableLayer layer;
        if (rank == 2)
            layer.opType = lowerCase(t.name).find("embed") != std::string::npos ? "Embedding" : "Linear";
        else
            layer.opType = "Conv";
        layer.weightName = t.name;
        layer.weightShape = t.tensor.shape();
        layer.weightDType = t.tensor.dtype();
        layer.parameterCount = t.tensor.numel();
        layer.channelAxis = 0;
        layer.contractionAxes = {1};
        paths.push_back(checkpointModulePath(t.name));
        layers.push_back(std::move(layer));
    }
    try {
        paths = uniqueModulePaths(std::move(paths));
    } catch (const Error& e) { // an over-long path: name the file
        throw Error(model.sourcePath.string() + ": " + e.what());
    }
    for (size_t i = 0; i < layers.size(); ++i)
        layers[i].modulePath = std::move(paths[i]);
    return layers;
}

} // namespace qs
