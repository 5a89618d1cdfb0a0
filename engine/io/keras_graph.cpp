#include "io/keras_graph.h"

#include <functional>
#include <set>

#include "core/error.h"

namespace qs {

namespace {

using Json = nlohmann::json;

// Thrown inside the builder when the config needs something with no mapping.
struct Unsupported {
    std::string reason;
};

// A Keras tensor: its shape in Keras (channels-last) order and the graph
// values holding it channels-last and/or channels-first (NCHW).
struct KerasTensor {
    std::string last;
    std::string first;
    std::vector<Dim> shape;
    size_t rank() const { return shape.size(); }
};

Attribute ints(std::string name, std::vector<int64_t> values)
{
    Attribute a;
    a.name = std::move(name);
    a.kind = Attribute::Kind::Ints;
    a.ints = std::move(values);
    return a;
}
Attribute integer(std::string name, int64_t value)
{
    Attribute a;
    a.name = std::move(name);
    a.kind = Attribute::Kind::Int;
    a.i = value;
    return a;
}
Attribute real(std::string name, float value)
{
    Attribute a;
    a.name = std::move(name);
    a.kind = Attribute::Kind::Float;
    a.f = value;
    return a;
}
Attribute text(std::string name, std::string value)
{
    Attribute a;
    a.name = std::move(name);
    a.kind = Attribute::Kind::String;
    a.s = std::move(value);
    return a;
}

std::vector<int64_t> intList(const Json& c, const char* key, size_t rank, int64_t fallback)
{
    std::vector<int64_t> out;
    if (c.contains(key) && c[key].is_number_integer())
        out.assign(rank, c[key].get<int64_t>());
    else if (c.contains(key) && c[key].is_array())
        for (const Json& x : c[key])
            out.push_back(x.is_number_integer() ? x.get<int64_t>() : fallback);
    if (out.size() != rank)
        out.assign(rank, fallback);
    return out;
}

std::string stringField(const Json& c, const char* key, const std::string& fallback)
{
    return c.contains(key) && c[key].is_string() ? c[key].get<std::string>() : fallback;
}

class Builder {
public:
    Builder(const std::map<std::string, KerasLayerWeights>& weights, const std::string& file)
        : weights_(weights), file_(file)
    {
    }

    void sequential(const Json& config);
    void functional(const Json& config);
    void commit(Model& model);
    std::map<std::string, KerasWeightUse> uses;

private:
    const std::map<std::string, KerasLayerWeights>& weights_;
    const std::string& file_;
    std::vector<Node> nodes_;
    std::vector<NamedTensor> constants_;
    std::vector<ValueInfo> inputs_, outputs_;
    int64_t opset_ = 17;

    std::string add(const std::string& name, const std::string& op, std::vector<std::string> inputs,
                    std::vector<Attribute> attributes = {})
    {
        Node n;
        n.name = name;
        n.opType = op;
        n.inputs = std::move(inputs);
        n.outputs = {name};
        n.attributes = std::move(attributes);
        nodes_.push_back(std::move(n));
        return name;
    }
    std::string constant(const std::string& name, Tensor value)
    {
        constants_.push_back({name, std::move(value)});
        return name;
    }
    const KerasVariable* variable(const std::string& layer, const std::string& var) const
    {
        const auto it = weights_.find(layer);
        return it == weights_.end() ? nullptr : it->second.find(var);
    }
    const KerasVariable& required(const std::string& layer, const std::string& var) const
    {
        const KerasVariable* v = variable(layer, var);
        if (!v)
            throw Error(file_ + ": layer '" + layer + "' has no variable '" + var + "' in model_weights");
        return *v;
    }
    void checkWidth(const KerasTensor& x, int64_t expected, const KerasVariable& v)
    {
        const Dim& d = x.shape.back();
        if (d.isFixed() && *d.size != expected)
            throw Error(file_ + ": " + v.dataset + ": shape " + shapeToString(v.shape) + " expects " +
                        std::to_string(expected) + " input channels but the layer receives " + std::to_string(*d.size));
    }
    std::string& firstOf(KerasTensor& x, const std::string& layer);
    std::string& lastOf(KerasTensor& x, const std::string& layer);
    KerasTensor activation(KerasTensor y, const std::string& act, const std::string& layer);
    KerasTensor input(const std::string& name, const Json& c);
    KerasTensor layer(const std::string& cls, const std::string& name, const Json& c, std::vector<KerasTensor> in);
    KerasTensor conv(const std::string& name, const Json& c, KerasTensor& x, bool depthwise, bool separable);
    void output(KerasTensor& x, const std::string& layer);
};

std::string& Builder::firstOf(KerasTensor& x, const std::string& layer)
{
    if (x.first.empty()) {
        const int64_t r = int64_t(x.rank());
        std::vector<int64_t> perm{0, r - 1};
        for (int64_t i = 1; i < r - 1; ++i)
            perm.push_back(i);
        x.first = r <= 2 ? x.last : add(layer + "/to_channels_first", "Transpose", {x.last}, {ints("perm", perm)});
    }
    return x.first;
}

std::string& Builder::lastOf(KerasTensor& x, const std::string& layer)
{
    if (x.last.empty()) {
        const int64_t r = int64_t(x.rank());
        std::vector<int64_t> perm{0};
        for (int64_t i = 2; i < r; ++i)
            perm.push_back(i);
        perm.push_back(1);
        x.last = r <= 2 ? x.first : add(layer + "/to_channels_last", "Transpose", {x.first}, {ints("perm", perm)});
    }
    return x.last;
}

KerasTensor Builder::activation(KerasTensor y, const std::string& act, const std::string& layer)
{
    if (act.empty() || act == "linear")
        return y;
    if (act == "softmax") {
        const std::string in = lastOf(y, layer);
        return {add(layer + "/Softmax", "Softmax", {in}, {integer("axis", -1)}), {}, y.shape};
    }
    const bool onFirst = y.last.empty();
    const std::string in = onFirst ? y.first : y.last;
    std::string out;
    if (act == "relu")
        out = add(layer + "/Relu", "Relu", {in});
    else if (act == "sigmoid")
        out = add(layer + "/Sigmoid", "Sigmoid", {in});
    else if (act == "tanh")
        out = add(layer + "/Tanh", "Tanh", {in});
    else if (act == "elu")
        out = add(layer + "/Elu", "Elu", {in});
    else if (act == "selu")
        out = add(layer + "/Selu", "Selu", {in});
    else if (act == "softplus")
        out = add(layer + "/Softplus", "Softplus", {in});
    else if (act == "softsign")
        out = add(layer + "/Softsign", "Softsign", {in});
    else if (act == "exponential")
        out = add(layer + "/Exp", "Exp", {in});
    else if (act == "swish" || act == "silu")
        out = add(layer + "/Mul", "Mul", {in, add(layer + "/Sigmoid", "Sigmoid", {in})});
    else
        throw Unsupported{"activation '" + act + "' of layer '" + layer + "' has no graph mapping"};
    KerasTensor r;
    (onFirst ? r.first : r.last) = out;
    r.shape = y.shape;
    return r;
}

KerasTensor Builder::input(const std::string& name, const Json& c)
{
    const char* key = c.contains("batch_input_shape") ? "batch_input_shape" : "batch_shape";
    if (!c.contains(key) || !c[key].is_array() || c[key].empty())
        throw Unsupported{"the input shape of '" + name + "' is not in the config"};
    ValueInfo info;
    info.name = name;
    info.typeName = stringField(c, "dtype", "float32");
    info.dtype = parseDType(info.typeName);
    std::vector<Dim> shape;
    for (const Json& d : c[key])
        shape.push_back(d.is_number_integer() ? Dim::fixed(d.get<int64_t>())
                        : shape.empty()       ? Dim::named("batch")
                                              : Dim::unknown());
    info.shape = shape;
    inputs_.push_back(info);
    return {name, {}, shape};
}

// Output spatial size of a convolution or pooling window.
Dim windowed(const Dim& in, int64_t k, int64_t s, int64_t d, const std::string& padding)
{
    if (!in.isFixed())
        return Dim::unknown();
    const int64_t n = *in.size;
    if (padding == "same")
        return Dim::fixed((n + s - 1) / s);
    if (padding == "causal")
        return Dim::fixed((n + s - 1) / s);
    return Dim::fixed(std::max<int64_t>(0, (n - (k - 1) * d - 1) / s + 1));
}

KerasTensor Builder::conv(const std::string& name, const Json& c, KerasTensor& x, bool depthwise, bool separable)
{
    if (stringField(c, "data_format", "channels_last") != "channels_last")
        throw Unsupported{"layer '" + name + "' uses channels_first data"};
    const KerasVariable& k = required(name, depthwise || separable ? "depthwise_kernel" : "kernel");
    const size_t spatial = k.shape.size() - 2;
    if (x.rank() != spatial + 2)
        throw Error(file_ + ": " + k.dataset + ": a " + std::to_string(spatial) + "-D kernel cannot apply to a rank-" +
                    std::to_string(x.rank()) + " input of layer '" + name + "'");
    const int64_t groups = depthwise || separable ? k.shape[spatial] : std::max<int64_t>(1, c.value("groups", 1));
    checkWidth(x, depthwise || separable ? k.shape[spatial] : k.shape[spatial] * groups, k);
    const auto strides = intList(c, "strides", spatial, 1);
    const auto dilations = intList(c, "dilation_rate", spatial, 1);
    const std::string padding = stringField(c, "padding", "valid");
    std::vector<int64_t> kernelShape(k.shape.begin(), k.shape.begin() + int64_t(spatial));
    std::vector<Attribute> attrs{ints("kernel_shape", kernelShape), ints("strides", strides),
                                 ints("dilations", dilations), integer("group", groups)};
    if (padding == "same")
        attrs.push_back(text("auto_pad", "SAME_UPPER"));
    else if (padding == "causal" && spatial == 1)
        attrs.push_back(ints("pads", {(kernelShape[0] - 1) * dilations[0], 0}));
    else if (padding == "valid")
        attrs.push_back(ints("pads", std::vector<int64_t>(2 * spatial, 0)));
    else
        throw Unsupported{"padding '" + padding + "' of layer '" + name + "'"};

    // Keras [k..., in, out] -> ONNX [out, in, k...]; depthwise [kh, kw, in, mult] -> [in·mult, 1, kh, kw].
    std::string weight;
    if (depthwise || separable) {
        const std::string perm =
            add(name + "/depthwise_kernel_perm", "Transpose", {k.initializer}, {ints("perm", {2, 3, 0, 1})});
        const std::string shape = constant(
            name + "/depthwise_kernel_shape",
            Tensor::fromVector<int64_t>(DType::I64, {4}, {k.shape[2] * k.shape[3], 1, k.shape[0], k.shape[1]}));
        weight = add(name + "/depthwise_kernel_oihw", "Reshape", {perm, shape});
    } else {
        std::vector<int64_t> perm{int64_t(spatial) + 1, int64_t(spatial)};
        for (size_t i = 0; i < spatial; ++i)
            perm.push_back(int64_t(i));
        weight = add(name + "/kernel_oihw", "Transpose", {k.initializer}, {ints("perm", perm)});
    }
    const KerasVariable* bias = variable(name, "bias");
    std::vector<std::string> inputs{firstOf(x, name), weight};
    if (bias && !separable)
        inputs.push_back(bias->initializer);
    const std::string suffix = separable ? "/depthwise/Conv" : "/Conv";
    std::string out = add(name + suffix, "Conv", inputs, attrs);
    uses[k.initializer] = {nodes_.size() - 1, 1};
    int64_t channels = depthwise || separable ? k.shape[2] * k.shape[3] : k.shape.back();
    if (separable) {
        const KerasVariable& p = required(name, "pointwise_kernel");
        if (p.shape[2] != channels)
            throw Error(file_ + ": " + p.dataset + ": shape " + shapeToString(p.shape) + " expects " +
                        std::to_string(p.shape[2]) + " input channels but the depthwise part gives " +
                        std::to_string(channels));
        const std::string pw =
            add(name + "/pointwise_kernel_oihw", "Transpose", {p.initializer}, {ints("perm", {3, 2, 0, 1})});
        std::vector<std::string> pin{out, pw};
        if (bias)
            pin.push_back(bias->initializer);
        out = add(name + "/pointwise/Conv", "Conv", pin,
                  {ints("kernel_shape", {1, 1}), ints("strides", {1, 1}), ints("pads", {0, 0, 0, 0})});
        uses[p.initializer] = {nodes_.size() - 1, 1};
        channels = p.shape[3];
    }
    KerasTensor y{{}, out, {x.shape[0]}};
    for (size_t i = 0; i < spatial; ++i)
        y.shape.push_back(windowed(x.shape[i + 1], kernelShape[i], strides[i], dilations[i], padding));
    y.shape.push_back(Dim::fixed(channels));
    return activation(y, stringField(c, "activation", "linear"), name);
}

KerasTensor Builder::layer(const std::string& cls, const std::string& name, const Json& c, std::vector<KerasTensor> in)
{
    if (in.empty())
        throw Unsupported{"layer '" + name + "' has no input"};
    if (cls != "Add" && in.size() != 1)
        throw Unsupported{"layer '" + name + "' (" + cls + ") takes " + std::to_string(in.size()) + " inputs"};
    KerasTensor& x = in[0];
    if (cls == "Dense") {
        const KerasVariable& k = required(name, "kernel");
        checkWidth(x, k.shape[0], k);
        std::string y = add(name + "/MatMul", "MatMul", {lastOf(x, name), k.initializer});
        uses[k.initializer] = {nodes_.size() - 1, 1};
        if (const KerasVariable* b = variable(name, "bias"))
            y = add(name + "/BiasAdd", "Add", {y, b->initializer});
        std::vector<Dim> shape = x.shape;
        shape.back() = Dim::fixed(k.shape[1]);
        return activation({y, {}, shape}, stringField(c, "activation", "linear"), name);
    }
    if (cls == "Conv1D" || cls == "Conv2D" || cls == "Conv3D")
        return conv(name, c, x, false, false);
    if (cls == "DepthwiseConv2D" || cls == "SeparableConv2D")
        return conv(name, c, x, cls == "DepthwiseConv2D", cls == "SeparableConv2D");
    if (cls == "BatchNormalization" || cls == "LayerNormalization") {
        const int64_t r = int64_t(x.rank());
        const Json axis = c.contains("axis") ? c["axis"] : Json(-1);
        const bool lastAxis = (axis.is_number_integer() && (axis == -1 || axis == r - 1)) ||
                              (axis.is_array() && axis.size() == 1 && (axis[0] == -1 || axis[0] == r - 1));
        if (!lastAxis || !x.shape.back().isFixed())
            throw Unsupported{"layer '" + name + "' normalizes axes other than a known last axis"};
        const int64_t channels = *x.shape.back().size;
        auto param = [&](const char* var, float fill) {
            if (const KerasVariable* v = variable(name, var)) {
                checkWidth(x, v->shape[0], *v);
                return v->initializer;
            }
            return constant(
                name + "/" + var + "_default",
                Tensor::fromVector<float>(DType::F32, {channels}, std::vector<float>(size_t(channels), fill)));
        };
        const float epsilon = c.contains("epsilon") && c["epsilon"].is_number() ? c["epsilon"].get<float>() : 1e-3f;
        if (cls == "LayerNormalization")
            return {add(name + "/LayerNormalization", "LayerNormalization",
                        {lastOf(x, name), param("gamma", 1.0f), param("beta", 0.0f)},
                        {integer("axis", -1), real("epsilon", epsilon)}),
                    {},
                    x.shape};
        const std::string y =
            add(name + "/BatchNormalization", "BatchNormalization",
                {firstOf(x, name), param("gamma", 1.0f), param("beta", 0.0f), required(name, "moving_mean").initializer,
                 required(name, "moving_variance").initializer},
                {real("epsilon", epsilon)});
        return r <= 2 ? KerasTensor{y, y, x.shape} : KerasTensor{{}, y, x.shape};
    }
    if (cls == "Embedding") {
        const KerasVariable& table = required(name, "embeddings");
        const std::string y =
            add(name + "/Gather", "Gather", {table.initializer, lastOf(x, name)}, {integer("axis", 0)});
        uses[table.initializer] = {nodes_.size() - 1, 0};
        std::vector<Dim> shape = x.shape;
        shape.push_back(Dim::fixed(table.shape[1]));
        return {y, {}, shape};
    }
    if (cls == "Activation")
        return activation(x, stringField(c, "activation", "linear"), name);
    if (cls == "ReLU") {
        const double slope =
            c.contains("negative_slope") && c["negative_slope"].is_number() ? c["negative_slope"].get<double>() : 0;
        const double threshold =
            c.contains("threshold") && c["threshold"].is_number() ? c["threshold"].get<double>() : 0;
        const bool capped = c.contains("max_value") && c["max_value"].is_number();
        if (threshold != 0 || (slope != 0 && capped))
            throw Unsupported{"layer '" + name + "' (ReLU with threshold or slope and cap)"};
        const bool onFirst = x.last.empty();
        const std::string in = onFirst ? x.first : x.last;
        std::string y;
        if (slope != 0)
            y = add(name + "/LeakyRelu", "LeakyRelu", {in}, {real("alpha", float(slope))});
        else if (capped)
            y = add(
                name + "/Clip", "Clip",
                {in, constant(name + "/min", Tensor::fromVector<float>(DType::F32, {}, {0.0f})),
                 constant(name + "/max", Tensor::fromVector<float>(DType::F32, {}, {c["max_value"].get<float>()}))});
        else
            y = add(name + "/Relu", "Relu", {in});
        return onFirst ? KerasTensor{{}, y, x.shape} : KerasTensor{y, {}, x.shape};
    }
    if (cls == "Dropout")
        return x;
    if (cls == "Flatten") {
        Dim flat = Dim::fixed(1);
        for (size_t i = 1; i < x.rank(); ++i)
            flat = flat.isFixed() && x.shape[i].isFixed() ? Dim::fixed(*flat.size * *x.shape[i].size) : Dim::unknown();
        return {add(name + "/Flatten", "Flatten", {lastOf(x, name)}, {integer("axis", 1)}), {}, {x.shape[0], flat}};
    }
    if (cls == "Reshape") {
        std::vector<int64_t> target{0};
        std::vector<Dim> shape{x.shape[0]};
        for (const Json& d : c.value("target_shape", Json::array())) {
            if (!d.is_number_integer())
                throw Unsupported{"layer '" + name + "' has a non-integer target_shape"};
            target.push_back(d.get<int64_t>());
            shape.push_back(d.get<int64_t>() < 0 ? Dim::unknown() : Dim::fixed(d.get<int64_t>()));
        }
        const std::string s =
            constant(name + "/shape", Tensor::fromVector<int64_t>(DType::I64, {int64_t(target.size())}, target));
        return {add(name + "/Reshape", "Reshape", {lastOf(x, name), s}), {}, shape};
    }
    if (cls == "Add") {
        bool allFirst = x.rank() > 2;
        for (const KerasTensor& t : in)
            allFirst = allFirst && !t.first.empty();
        std::string sum = allFirst ? in[0].first : lastOf(in[0], name);
        for (size_t i = 1; i < in.size(); ++i)
            sum = add(name + (i == 1 ? "/Add" : "/Add_" + std::to_string(i - 1)), "Add",
                      {sum, allFirst ? in[i].first : lastOf(in[i], name)});
        return allFirst ? KerasTensor{{}, sum, x.shape} : KerasTensor{sum, {}, x.shape};
    }
    if (cls == "MaxPooling2D" || cls == "AveragePooling2D") {
        if (stringField(c, "data_format", "channels_last") != "channels_last" || x.rank() != 4)
            throw Unsupported{"layer '" + name + "' pools other than NHWC 2-D data"};
        const auto pool = intList(c, "pool_size", 2, 2);
        const auto strides = c.contains("strides") && !c["strides"].is_null() ? intList(c, "strides", 2, 1) : pool;
        const std::string padding = stringField(c, "padding", "valid");
        const std::string op = cls == "MaxPooling2D" ? "MaxPool" : "AveragePool";
        std::vector<Attribute> attrs{ints("kernel_shape", pool), ints("strides", strides)};
        attrs.push_back(padding == "same" ? text("auto_pad", "SAME_UPPER") : ints("pads", {0, 0, 0, 0}));
        const std::string y = add(name + "/" + op, op, {firstOf(x, name)}, attrs);
        return {{},
                y,
                {x.shape[0], windowed(x.shape[1], pool[0], strides[0], 1, padding),
                 windowed(x.shape[2], pool[1], strides[1], 1, padding), x.shape[3]}};
    }
    if (cls == "GlobalAveragePooling2D" || cls == "GlobalMaxPooling2D") {
        if (x.rank() != 4)
            throw Unsupported{"layer '" + name + "' needs a rank-4 input"};
        const std::string op = cls == "GlobalAveragePooling2D" ? "GlobalAveragePool" : "GlobalMaxPool";
        const std::string pooled = add(name + "/" + op, op, {firstOf(x, name)});
        if (c.value("keepdims", false))
            return {{}, pooled, {x.shape[0], Dim::fixed(1), Dim::fixed(1), x.shape[3]}};
        return {add(name + "/Flatten", "Flatten", {pooled}, {integer("axis", 1)}), {}, {x.shape[0], x.shape[3]}};
    }
    throw Unsupported{"layer '" + name + "' (" + cls + ") has no graph mapping"};
}

void Builder::output(KerasTensor& x, const std::string& layer)
{
    ValueInfo info;
    info.name = lastOf(x, layer);
    info.dtype = DType::F32;
    info.typeName = "float32";
    info.shape = x.shape;
    outputs_.push_back(info);
}

void Builder::sequential(const Json& config)
{
    const Json& layers = config.value("layers", Json::array());
    KerasTensor x;
    bool haveInput = false;
    std::string lastName;
    for (const Json& l : layers) {
        const std::string cls = l.value("class_name", std::string());
        const Json c = l.value("config", Json::object());
        const std::string name = stringField(c, "name", cls);
        if (cls == "InputLayer") {
            x = input(name, c);
            haveInput = true;
            continue;
        }
        if (!haveInput) {
            Json shape = c;
            if (!c.contains("batch_input_shape") && config.contains("build_input_shape"))
                shape["batch_input_shape"] = config["build_input_shape"];
            x = input(name + "_input", shape);
            haveInput = true;
        }
        x = layer(cls, name, c, {x});
        lastName = name;
    }
    if (!haveInput)
        throw Unsupported{"the Sequential model has no layers"};
    output(x, lastName.empty() ? "output" : lastName);
}

// The layer names a Functional layer's (single) call reads, in order.
// The layer classes layer() maps.
const std::set<std::string> kMappedClasses{"InputLayer",
                                           "Dense",
                                           "Conv1D",
                                           "Conv2D",
                                           "Conv3D",
                                           "DepthwiseConv2D",
                                           "SeparableConv2D",
                                           "BatchNormalization",
                                           "LayerNormalization",
                                           "Embedding",
                                           "Activation",
                                           "ReLU",
                                           "Dropout",
                                           "Flatten",
                                           "Reshape",
                                           "Add",
                                           "MaxPooling2D",
                                           "AveragePooling2D",
                                           "GlobalAveragePooling2D",
                                           "GlobalMaxPooling2D"};

std::vector<std::string> inboundLayers(const std::string& name, const Json& inbound)
{
    std::vector<std::string> sources;
    if (!inbound.is_array() || inbound.empty())
        return sources;
    if (inbound.size() > 1)
        throw Unsupported{"layer '" + name + "' is called more than once (a shared layer)"};
    const Json& call = inbound[0];
    auto reference = [&](const Json& ref) {
        if (!ref.is_array() || ref.size() < 3 || !ref[0].is_string() || ref[1] != 0 || ref[2] != 0)
            throw Unsupported{"layer '" + name + "' reads a tensor other than a layer's single output"};
        sources.push_back(ref[0].get<std::string>());
    };
    if (call.is_array()) { // Keras 2: [[layer, node, tensor, kwargs], ...]
        for (const Json& ref : call) {
            if (ref.size() > 3 && !ref[3].empty())
                throw Unsupported{"layer '" + name + "' is called with keyword arguments"};
            reference(ref);
        }
        return sources;
    }
    // Keras 3: {"args": [...], "kwargs": {...}} with keras_history entries.
    if (call.contains("kwargs") && !call["kwargs"].empty())
        throw Unsupported{"layer '" + name + "' is called with keyword arguments"};
    std::function<void(const Json&)> walk = [&](const Json& j) {
        if (j.is_object() && j.contains("config") && j["config"].is_object() && j["config"].contains("keras_history"))
            reference(j["config"]["keras_history"]);
        else if (j.is_array())
            for (const Json& e : j)
                walk(e);
    };
    walk(call.value("args", Json::array()));
    return sources;
}

void Builder::functional(const Json& config)
{
    std::map<std::string, KerasTensor> tensors;
    for (const Json& l : config.value("layers", Json::array())) {
        const std::string cls = l.value("class_name", std::string());
        const Json c = l.value("config", Json::object());
        const std::string name =
            l.contains("name") && l["name"].is_string() ? l["name"].get<std::string>() : stringField(c, "name", cls);
        if (!kMappedClasses.count(cls))
            throw Unsupported{"layer '" + name + "' (" + cls + ") has no graph mapping"};
        if (cls == "InputLayer") {
            tensors[name] = input(name, c);
            continue;
        }
        std::vector<KerasTensor> in;
        for (const std::string& source : inboundLayers(name, l.value("inbound_nodes", Json::array()))) {
            const auto it = tensors.find(source);
            if (it == tensors.end())
                throw Unsupported{"layer '" + name + "' reads '" + source + "', which comes later or does not exist"};
            in.push_back(it->second);
        }
        tensors[name] = layer(cls, name, c, std::move(in));
        // Transposes made for this layer's inputs are kept for later readers.
    }
    Json outs = config.value("output_layers", Json::array());
    if (!outs.empty() && outs[0].is_string())
        outs = Json::array({outs});
    for (const Json& ref : outs) {
        if (!ref.is_array() || ref.empty() || !ref[0].is_string() || !tensors.count(ref[0].get<std::string>()))
            throw Unsupported{"an output of the model is not a layer of its config"};
        output(tensors[ref[0].get<std::string>()], ref[0].get<std::string>());
    }
    if (outputs_.empty())
        throw Unsupported{"the Functional model lists no outputs"};
}

void Builder::commit(Model& model)
{
    for (NamedTensor& t : constants_)
        model.addInitializer(t.name, std::move(t.tensor));
    const size_t offset = model.nodes.size();
    for (auto& [name, use] : uses)
        use.node += offset;
    model.nodes.insert(model.nodes.end(), nodes_.begin(), nodes_.end());
    model.inputs.insert(model.inputs.end(), inputs_.begin(), inputs_.end());
    model.outputs.insert(model.outputs.end(), outputs_.begin(), outputs_.end());
    model.opsetImports[""] = opset_;
}

} // namespace

std::optional<std::map<std::string, KerasWeightUse>>
buildKerasGraph(const Json& config, const std::map<std::string, KerasLayerWeights>& weights, const std::string& file,
                Model& model, std::string& whyNot)
{
    const std::string cls = config.value("class_name", std::string());
    Builder builder(weights, file);
    try {
        if (cls == "Sequential")
            builder.sequential(config["config"]);
        else if (cls == "Functional" || cls == "Model")
            builder.functional(config["config"]);
        else
            throw Unsupported{"the model class '" + cls + "' has no graph mapping"};
    } catch (const Unsupported& u) {
        whyNot = u.reason;
        return std::nullopt;
    } catch (const Json::exception& e) {
        throw Error(file + ": / attribute 'model_config': unexpected structure: " + e.what());
    }
    builder.commit(model);
    return builder.uses;
}

} // namespace qs
