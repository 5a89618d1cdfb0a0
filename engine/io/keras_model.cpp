#include "io/keras_model.h"

#include <algorithm>

#include "core/error.h"
#include "graph/module_path.h"
#include "io/keras_graph.h"

namespace qs {

namespace {

using Json = nlohmann::json;

[[noreturn]] void fail(const Hdf5File& file, const std::string& object, const std::string& what)
{
    throw Error(file.path().string() + ": " + object + ": " + what);
}

// Where the layer groups are: "/model_weights" for a saved model, "/" for a
// save_weights file; empty when neither lists layers.
std::string weightsRoot(const Hdf5File& file)
{
    if (file.isGroup("/model_weights"))
        return "/model_weights";
    const auto names = file.attributeNames("/");
    const bool listed =
        std::any_of(names.begin(), names.end(), [](const std::string& n) { return n.rfind("layer_names", 0) == 0; });
    return listed ? "/" : "";
}

// A list attribute Keras may have split into `name0`, `name1`, ... because
// HDF5 object headers hold at most 64 KiB of attributes.
std::optional<std::vector<std::string>> listAttribute(const Hdf5File& file, const std::string& object,
                                                      const std::string& name)
{
    if (auto whole = file.stringsAttribute(object, name))
        return whole;
    std::vector<std::string> joined;
    bool any = false;
    for (int chunk = 0;; ++chunk) {
        auto part = file.stringsAttribute(object, name + std::to_string(chunk));
        if (!part)
            break;
        any = true;
        joined.insert(joined.end(), part->begin(), part->end());
    }
    return any ? std::optional(joined) : std::nullopt;
}

std::string childPath(const std::string& group, const std::string& name)
{
    return group == "/" ? "/" + name : group + "/" + name;
}

// Splits a weight name "dense/kernel:0" of layer `layer` into module path and variable.
std::pair<std::string, std::string> moduleAndVariable(const std::string& layer, std::string weightName)
{
    if (weightName.size() > 2 && weightName.compare(weightName.size() - 2, 2, ":0") == 0)
        weightName.resize(weightName.size() - 2);
    const size_t slash = weightName.rfind('/');
    const std::string variable = slash == std::string::npos ? weightName : weightName.substr(slash + 1);
    const std::string prefix = slash == std::string::npos ? "" : weightName.substr(0, slash);
    if (prefix.empty() || prefix == layer)
        return {layer, variable};
    if (prefix.rfind(layer + "/", 0) == 0)
        return {prefix, variable};
    return {layer + "/" + prefix, variable};
}

// The layers of a Sequential or Functional config by name: class and config.
std::map<std::string, std::pair<std::string, Json>> configLayers(const Json& config)
{
    std::map<std::string, std::pair<std::string, Json>> out;
    const Json* layers = nullptr;
    if (config.contains("config") && config["config"].is_object() && config["config"].contains("layers"))
        layers = &config["config"]["layers"];
    if (!layers || !layers->is_array())
        return out;
    for (const Json& layer : *layers) {
        if (!layer.is_object() || !layer.contains("class_name") || !layer.contains("config") ||
            !layer["class_name"].is_string() || !layer["config"].is_object())
            continue;
        const Json& c = layer["config"];
        const std::string name = c.contains("name") && c["name"].is_string() ? c["name"].get<std::string>()
                                                                             : layer.value("name", std::string());
        out[name] = {layer["class_name"].get<std::string>(), c};
    }
    return out;
}

std::vector<int64_t> intList(const Json& c, const char* key, size_t rank)
{
    if (!c.contains(key))
        return {};
    const Json& v = c[key];
    if (v.is_number_integer())
        return std::vector<int64_t>(rank, v.get<int64_t>());
    std::vector<int64_t> out;
    if (v.is_array())
        for (const Json& x : v)
            if (x.is_number_integer())
                out.push_back(x.get<int64_t>());
    return out;
}

int64_t intField(const Json& c, const char* key)
{
    return c.contains(key) && c[key].is_number_integer() ? c[key].get<int64_t>() : -1;
}

// Checks a layer's variables against what its config says they must be.
void checkAgainstConfig(const Hdf5File& file, const KerasLayerWeights& w, const std::string& cls, const Json& c)
{
    auto require = [&](const std::string& var) -> const KerasVariable& {
        const KerasVariable* v = w.find(var);
        if (!v)
            fail(file, w.group, cls + " layer '" + w.name + "' has no variable '" + var + "'");
        return *v;
    };
    auto expect = [&](const KerasVariable& v, const std::vector<int64_t>& expected) {
        bool ok = v.shape.size() == expected.size();
        for (size_t i = 0; ok && i < expected.size(); ++i)
            ok = expected[i] < 0 || expected[i] == v.shape[i];
        if (!ok) {
            std::string text = "[";
            for (size_t i = 0; i < expected.size(); ++i)
                text += (i ? ", " : "") + (expected[i] < 0 ? std::string("?") : std::to_string(expected[i]));
            fail(file, v.dataset,
                 "shape " + shapeToString(v.shape) + " contradicts the config of " + cls + " layer '" + w.name +
                     "': expected " + text + "]");
        }
    };
    const bool useBias = !c.contains("use_bias") || c["use_bias"] == true;
    if (cls == "Dense") {
        expect(require("kernel"), {-1, intField(c, "units")});
        if (useBias)
            expect(require("bias"), {intField(c, "units")});
    } else if (cls == "Conv1D" || cls == "Conv2D" || cls == "Conv3D") {
        const size_t spatial = size_t(cls[4] - '0');
        std::vector<int64_t> shape = intList(c, "kernel_size", spatial);
        shape.resize(spatial, -1);
        shape.push_back(-1);
        shape.push_back(intField(c, "filters"));
        expect(require("kernel"), shape);
        if (useBias)
            expect(require("bias"), {intField(c, "filters")});
    } else if (cls == "DepthwiseConv2D" || cls == "SeparableConv2D") {
        std::vector<int64_t> shape = intList(c, "kernel_size", 2);
        shape.resize(2, -1);
        const KerasVariable& depthwise = require("depthwise_kernel");
        shape.push_back(-1);
        shape.push_back(c.contains("depth_multiplier") ? intField(c, "depth_multiplier") : 1);
        expect(depthwise, shape);
        int64_t channels = depthwise.shape[2] * depthwise.shape[3];
        if (cls == "SeparableConv2D") {
            expect(require("pointwise_kernel"), {1, 1, channels, intField(c, "filters")});
            channels = intField(c, "filters");
        }
        if (useBias)
            expect(require("bias"), {channels});
    } else if (cls == "Embedding") {
        expect(require("embeddings"), {intField(c, "input_dim"), intField(c, "output_dim")});
    } else if (cls == "BatchNormalization" || cls == "LayerNormalization") {
        int64_t channels = -1;
        for (const KerasVariable& v : w.variables) {
            if (v.shape.size() != 1 || (channels >= 0 && v.shape[0] != channels))
                fail(file, v.dataset,
                     "shape " + shapeToString(v.shape) + ": the variables of " + cls + " layer '" + w.name +
                         "' must be vectors of one length");
            channels = v.shape[0];
        }
    }
}

// The quantizable layer a variable is the weight of, or nothing.
std::optional<QuantizableLayer> kernelLayer(const KerasVariable& v, const std::string& cls, bool separable, DType dtype)
{
    const int rank = int(v.shape.size());
    QuantizableLayer layer;
    layer.modulePath = v.module;
    if (v.variable == "embeddings" && rank == 2) {
        layer.opType = "Gather";
        layer.channelAxis = 0;
        layer.contractionAxes = {1};
    } else if (v.variable == "depthwise_kernel" && rank == 4) {
        layer.opType = "Conv";
        layer.channelAxis = 2;
        layer.contractionAxes = {0, 1};
        layer.groups = v.shape[2];
        if (separable)
            layer.modulePath += "/depthwise";
    } else if (v.variable == "pointwise_kernel" && rank == 4) {
        layer.opType = "Conv";
        layer.channelAxis = 3;
        layer.contractionAxes = {2};
        layer.modulePath += "/pointwise";
    } else if (v.variable == "kernel" && rank == 2) {
        layer.opType = "MatMul";
        layer.channelAxis = 1;
        layer.contractionAxes = {0};
    } else if (v.variable == "kernel" && rank == 3 &&
               (cls == "MultiHeadAttention" || (cls.empty() && v.module.find('/') != std::string::npos))) {
        const std::string part = v.module.substr(v.module.rfind('/') + 1);
        if (part != "query" && part != "key" && part != "value" && part != "attention_output")
            return std::nullopt;
        layer.opType = "MatMul";
        layer.channelAxis = 2;
        layer.contractionAxes = part == "attention_output" ? std::vector<int>{0, 1} : std::vector<int>{0};
    } else if (v.variable == "kernel" && rank >= 3 && rank <= 5) {
        layer.opType = "Conv";
        layer.channelAxis = rank - 1;
        layer.contractionAxes = {rank - 2};
    } else {
        return std::nullopt;
    }
    layer.weightName = v.initializer;
    layer.weightShape = v.shape;
    layer.weightDType = dtype;
    layer.parameterCount = shapeElementCount(v.shape);
    return layer;
}

} // namespace

const KerasVariable* KerasLayerWeights::find(const std::string& variable) const
{
    for (const KerasVariable& v : variables)
        if (v.module == name && v.variable == variable)
            return &v;
    return nullptr;
}

bool isKerasFile(const Hdf5File& file)
{
    const std::string root = weightsRoot(file);
    return !root.empty() && listAttribute(file, root, "layer_names").has_value();
}

Model loadKerasModel(const Hdf5File& file)
{
    Model model;
    model.sourcePath = file.path();
    model.format = "keras-h5";
    for (const char* key : {"keras_version", "backend"}) {
        std::optional<std::string> value;
        try {
            value = file.stringAttribute("/", key);
        } catch (const Error&) {
            // Informational only; a malformed version string does not stop loading.
        }
        if (value)
            model.metadata[key] = *value;
    }
    if (model.metadata.count("keras_version"))
        model.producer = "keras " + model.metadata["keras_version"];

    Json config;
    if (const auto text = file.stringAttribute("/", "model_config")) {
        config = Json::parse(*text, nullptr, false);
        if (config.is_discarded())
            fail(file, "/ attribute 'model_config'", "is not valid JSON");
        if (!config.is_object() || !config.contains("class_name") || !config["class_name"].is_string() ||
            !config.contains("config") || !config["config"].is_object())
            fail(file, "/ attribute 'model_config'", "is not a Keras model config (expected class_name and config)");
    }
    const auto layersByName = configLayers(config);

    const std::string root = weightsRoot(file);
    const auto layerNames = root.empty() ? std::nullopt : listAttribute(file, root, "layer_names");
    if (!layerNames)
        fail(file, root.empty() ? "/model_weights" : root, "has no 'layer_names' attribute: not Keras weights");

    std::map<std::string, KerasLayerWeights> weights;
    std::vector<std::string> order;
    for (const std::string& name : *layerNames) {
        KerasLayerWeights w;
        w.name = name;
        w.group = childPath(root, name);
        if (!file.isGroup(w.group))
            fail(file, w.group, "layer '" + name + "' is listed in layer_names but its group is missing");
        const auto weightNames = listAttribute(file, w.group, "weight_names");
        if (!weightNames)
            fail(file, w.group, "has no 'weight_names' attribute");
        for (const std::string& weightName : *weightNames) {
            KerasVariable v;
            std::tie(v.module, v.variable) = moduleAndVariable(name, weightName);
            v.dataset = childPath(w.group, weightName);
            const Hdf5Dataset* d = file.find(v.dataset);
            if (!d)
                fail(file, v.dataset, "variable listed in weight_names but the dataset is missing");
            v.shape = d->shape;
            v.initializer = v.module + "/" + v.variable + ":0";
            model.addInitializer(v.initializer, file.read(*d));
            w.variables.push_back(std::move(v));
        }
        if (!weights.emplace(name, std::move(w)).second)
            fail(file, childPath(root, name), "layer '" + name + "' is listed twice in layer_names");
        order.push_back(name);
    }

    for (const auto& [name, entry] : layersByName) {
        const auto it = weights.find(name);
        if (it != weights.end())
            checkAgainstConfig(file, it->second, entry.first, entry.second);
    }

    for (const std::string& name : order) {
        const KerasLayerWeights& w = weights.at(name);
        const auto cls = layersByName.count(name) ? layersByName.at(name).first : std::string();
        const bool separable = w.find("depthwise_kernel") && w.find("pointwise_kernel");
        for (const KerasVariable& v : w.variables) {
            const DType dtype = model.initializer(v.initializer)->dtype();
            if (!isFloatingDType(dtype))
                continue;
            if (auto layer = kernelLayer(v, v.module == name ? cls : std::string(), separable, dtype))
                model.layers.push_back(std::move(*layer));
        }
    }
    std::vector<std::string> paths;
    for (const QuantizableLayer& layer : model.layers)
        paths.push_back(layer.modulePath);
    try {
        paths = uniqueModulePaths(std::move(paths));
    } catch (const Error& e) { // an over-long path: name the file
        throw Error(file.path().string() + ": " + e.what());
    }
    for (size_t i = 0; i < paths.size(); ++i)
        model.layers[i].modulePath = paths[i];

    std::string whyNot;
    if (config.is_null()) {
        whyNot = "the file has no model_config (a weights file)";
    } else if (auto uses = buildKerasGraph(config, weights, file.path().string(), model, whyNot)) {
        for (QuantizableLayer& layer : model.layers) {
            const auto use = uses->find(layer.weightName);
            if (use != uses->end()) {
                layer.node = use->second.node;
                layer.weightInput = use->second.input;
            }
        }
        return model;
    }
    model.weightsOnly = true;
    model.warnings.push_back("loaded as weights only, without a graph: " + whyNot);
    return model;
}

} // namespace qs
