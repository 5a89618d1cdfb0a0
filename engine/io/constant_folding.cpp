#include "io/constant_folding.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <optional>
#include <span>
#include <unordered_map>
#include <unordered_set>

#include "core/half.h"
#include "graph/onnx_element_type.h"

namespace qs {
namespace {

std::string nodeLabel(const Node& node, size_t index)
{
    std::string label = "node ";
    if (!node.name.empty())
        label += "'" + node.name + "' ";
    return label + "(" + node.opType + ", #" + std::to_string(index) + ")";
}

// What one fold needs to report an error or to allocate.
struct FoldContext {
    const std::string& source;
    std::string label;
    LoadBudget& budget;

    [[noreturn]] void fail(const std::string& problem) const { throw Error(source + ": " + label + ": " + problem); }

    Tensor allocate(DType dtype, const Shape& shape) const
    {
        const uint64_t bytes = uint64_t(shapeElementCount(shape)) * dtypeSize(dtype);
        budget.reserve(bytes, label + " (folded)");
        return allocateTensor(dtype, shape, source, label + " (folded)");
    }
};

// The integer values of a constant int64 (or int32) tensor such as a shape or axes input.
std::vector<int64_t> integerValues(const Tensor& t, const FoldContext& ctx, const std::string& what)
{
    if (t.rank() > 1)
        ctx.fail(what + " has rank " + std::to_string(t.rank()) + "; a 1-D list is expected");
    if (t.dtype() == DType::I64) {
        const auto v = t.values<int64_t>();
        return {v.begin(), v.end()};
    }
    if (t.dtype() == DType::I32) {
        const auto v = t.values<int32_t>();
        return {v.begin(), v.end()};
    }
    ctx.fail(what + " is " + std::string(dtypeName(t.dtype())) + "; int64 is expected");
}

// An axis in [-rank, rank) made non-negative.
int64_t normalizedAxis(int64_t axis, int64_t rank, const FoldContext& ctx, const std::string& what)
{
    if (axis < -rank || axis >= rank)
        ctx.fail(what + " " + std::to_string(axis) + " is outside [" + std::to_string(-rank) + ", " +
                 std::to_string(rank) + ")");
    return axis < 0 ? axis + rank : axis;
}

// The axes of Squeeze/Unsqueeze: the `axes` attribute (before opset 13) or input 1.
std::optional<std::vector<int64_t>> axesOf(const Node& node, const Model& model, const FoldContext& ctx)
{
    if (const Attribute* a = node.attribute("axes")) {
        if (a->kind != Attribute::Kind::Ints)
            ctx.fail("attribute 'axes' should be a list of integers");
        return a->ints;
    }
    if (node.inputs.size() > 1 && !node.inputs[1].empty())
        return integerValues(*model.initializer(node.inputs[1]), ctx, "input 'axes'");
    return std::nullopt;
}

Tensor foldReshape(const Node& node, const Model& model, const Tensor& in, const FoldContext& ctx)
{
    std::vector<int64_t> requested;
    if (const Attribute* a = node.attribute("shape"); a && a->kind == Attribute::Kind::Ints)
        requested = a->ints; // Reshape-1
    else if (node.inputs.size() > 1 && !node.inputs[1].empty())
        requested = integerValues(*model.initializer(node.inputs[1]), ctx, "input 'shape'");
    else
        ctx.fail("has no shape to reshape to");
    const bool allowZero = node.intAttribute("allowzero", 0) != 0;
    Shape out(requested.size());
    std::optional<size_t> inferred;
    int64_t known = 1;
    for (size_t i = 0; i < requested.size(); ++i) {
        int64_t d = requested[i];
        if (d == 0 && !allowZero) {
            if (i >= in.shape().size())
                ctx.fail("shape entry " + std::to_string(i) + " copies a dimension the input " +
                         shapeToString(in.shape()) + " does not have");
            d = in.shape()[i];
        }
        if (d == -1) {
            if (inferred)
                ctx.fail("its shape has more than one -1");
            inferred = i;
            continue;
        }
        if (d < 0)
            ctx.fail("its shape has the negative entry " + std::to_string(d));
        out[i] = d;
        if (d > 0 && known > kMaxTensorElements / d)
            ctx.fail("its shape " + shapeToString(Shape(requested.begin(), requested.end())) + " is too large");
        known *= d;
    }
    if (inferred) {
        if (known == 0 || in.numel() % known != 0)
            ctx.fail("cannot reshape " + shapeToString(in.shape()) + " to " +
                     shapeToString(Shape(requested.begin(), requested.end())));
        out[*inferred] = in.numel() / known;
    }
    if (shapeElementCount(out) != in.numel())
        ctx.fail("cannot reshape " + shapeToString(in.shape()) + " (" + std::to_string(in.numel()) + " elements) to " +
                 shapeToString(out));
    return in.reshaped(std::move(out));
}

Tensor foldTranspose(const Node& node, const Tensor& in, const FoldContext& ctx)
{
    const int rank = in.rank();
    std::vector<int64_t> perm;
    if (const Attribute* a = node.attribute("perm")) {
        if (a->kind != Attribute::Kind::Ints)
            ctx.fail("attribute 'perm' should be a list of integers");
        perm = a->ints;
    } else {
        for (int i = rank - 1; i >= 0; --i)
            perm.push_back(i);
    }
    if (int(perm.size()) != rank)
        ctx.fail("perm has " + std::to_string(perm.size()) + " entries for a rank-" + std::to_string(rank) + " input");
    std::vector<bool> seen(size_t(rank), false);
    for (int64_t p : perm) {
        if (p < 0 || p >= rank || seen[size_t(p)])
            ctx.fail("perm is not a permutation of the input's " + std::to_string(rank) + " axes");
        seen[size_t(p)] = true;
    }
    Shape out(static_cast<size_t>(rank));
    for (int i = 0; i < rank; ++i)
        out[size_t(i)] = in.shape()[size_t(perm[size_t(i)])];
    Tensor result = ctx.allocate(in.dtype(), out);
    const size_t element = dtypeSize(in.dtype());
    const Shape inStrides = rowMajorStrides(in.shape());
    // The input stride of each output axis; walk the output in row-major order.
    Shape strides(static_cast<size_t>(rank));
    for (int i = 0; i < rank; ++i)
        strides[size_t(i)] = inStrides[size_t(perm[size_t(i)])];
    const auto* src = static_cast<const std::byte*>(in.rawData());
    auto* dst = static_cast<std::byte*>(result.mutableRawData());
    std::vector<int64_t> index(size_t(rank), 0);
    int64_t offset = 0;
    for (int64_t k = 0; k < in.numel(); ++k) {
        std::memcpy(dst + size_t(k) * element, src + size_t(offset) * element, element);
        for (int d = rank - 1; d >= 0; --d) {
            offset += strides[size_t(d)];
            if (++index[size_t(d)] < out[size_t(d)])
                break;
            offset -= strides[size_t(d)] * out[size_t(d)];
            index[size_t(d)] = 0;
        }
    }
    return result;
}

Tensor foldSqueeze(const Node& node, const Model& model, const Tensor& in, const FoldContext& ctx)
{
    const int64_t rank = in.rank();
    std::vector<bool> drop(size_t(rank), false);
    if (const auto axes = axesOf(node, model, ctx)) {
        for (int64_t a : *axes) {
            const int64_t axis = normalizedAxis(a, rank, ctx, "axis");
            if (in.shape()[size_t(axis)] != 1)
                ctx.fail("squeezes axis " + std::to_string(axis) + " of " + shapeToString(in.shape()) +
                         ", which is not 1");
            drop[size_t(axis)] = true;
        }
    } else {
        for (int64_t d = 0; d < rank; ++d)
            drop[size_t(d)] = in.shape()[size_t(d)] == 1;
    }
    Shape out;
    for (int64_t d = 0; d < rank; ++d)
        if (!drop[size_t(d)])
            out.push_back(in.shape()[size_t(d)]);
    return in.reshaped(std::move(out));
}

Tensor foldUnsqueeze(const Node& node, const Model& model, const Tensor& in, const FoldContext& ctx)
{
    const auto axes = axesOf(node, model, ctx);
    if (!axes || axes->empty())
        ctx.fail("has no axes to insert");
    const int64_t rank = in.rank() + int64_t(axes->size());
    if (rank > 64)
        ctx.fail("makes a rank-" + std::to_string(rank) + " tensor");
    std::vector<bool> inserted(size_t(rank), false);
    for (int64_t a : *axes) {
        const int64_t axis = normalizedAxis(a, rank, ctx, "axis");
        if (inserted[size_t(axis)])
            ctx.fail("lists axis " + std::to_string(axis) + " twice");
        inserted[size_t(axis)] = true;
    }
    Shape out;
    size_t next = 0;
    for (int64_t d = 0; d < rank; ++d)
        out.push_back(inserted[size_t(d)] ? 1 : in.shape()[next++]);
    return in.reshaped(std::move(out));
}

Tensor foldFlatten(const Node& node, const Tensor& in, const FoldContext& ctx)
{
    const int64_t rank = in.rank();
    int64_t axis = node.intAttribute("axis", 1);
    if (axis < -rank || axis > rank)
        ctx.fail("axis " + std::to_string(axis) + " is outside [" + std::to_string(-rank) + ", " +
                 std::to_string(rank) + "]");
    if (axis < 0)
        axis += rank;
    int64_t outer = 1;
    for (int64_t d = 0; d < axis; ++d)
        outer *= in.shape()[size_t(d)];
    return in.reshaped({outer, outer == 0 ? 0 : in.numel() / outer});
}

// Cast to a floating type, or to the source's own type; none for other targets (left to the runtime).
std::optional<Tensor> foldCast(const Node& node, const Tensor& in, const FoldContext& ctx)
{
    const Attribute* to = node.attribute("to");
    if (!to || to->kind != Attribute::Kind::Int)
        ctx.fail("has no integer attribute 'to'");
    const std::optional<DType> target = dtypeOfOnnxElementType(to->i);
    if (!target)
        return std::nullopt;
    if (*target == in.dtype())
        return in;
    if (!isFloatingDType(*target) || in.dtype() == DType::Bool)
        return std::nullopt;
    if (*target == DType::F64) {
        if (!isFloatingDType(in.dtype()))
            return std::nullopt; // wide integers would lose digits through float32
        const Tensor wide = in.toFloat32();
        Tensor out = ctx.allocate(DType::F64, in.shape());
        std::ranges::copy(wide.values<float>(), out.mutableValues<double>().begin());
        return out;
    }
    if (in.dtype() != DType::F32) // toFloat32 allocates: count it
        ctx.budget.reserve(uint64_t(in.numel()) * 4, ctx.label + " (folded)");
    Tensor wide;
    try {
        wide = in.toFloat32();
    } catch (const std::bad_alloc&) {
        ctx.fail("cannot allocate " + std::to_string(in.numel() * 4) + " bytes for its float32 result (out of memory)");
    }
    if (*target == DType::F32)
        return wide;
    Tensor out = ctx.allocate(*target, in.shape());
    const auto values = wide.values<float>();
    auto bits = out.mutableValues<uint16_t>();
    for (size_t i = 0; i < values.size(); ++i)
        bits[i] = *target == DType::F16 ? floatToFp16(values[i]) : floatToBf16(values[i]);
    return out;
}

// The tensor a Constant node holds; none for a string Constant (left as a node).
std::optional<Tensor> constantValue(const Node& node, const FoldContext& ctx)
{
    if (node.attributes.size() != 1)
        ctx.fail("has " + std::to_string(node.attributes.size()) + " attributes; a Constant has exactly one");
    const Attribute& a = node.attributes.front();
    if (a.name == "sparse_value")
        ctx.fail("sparse_value constants are not supported; store the value densely ('value')");
    if (a.name == "value") {
        if (a.kind == Attribute::Kind::Tensor)
            return a.tensor;
        return std::nullopt; // a string tensor
    }
    if (a.name == "value_float" && a.kind == Attribute::Kind::Float)
        return Tensor::fromVector<float>(DType::F32, {}, {a.f});
    if (a.name == "value_floats" && a.kind == Attribute::Kind::Floats)
        return Tensor::fromVector<float>(DType::F32, {int64_t(a.floats.size())}, a.floats);
    if (a.name == "value_int" && a.kind == Attribute::Kind::Int)
        return Tensor::fromVector<int64_t>(DType::I64, {}, {a.i});
    if (a.name == "value_ints" && a.kind == Attribute::Kind::Ints)
        return Tensor::fromVector<int64_t>(DType::I64, {int64_t(a.ints.size())}, a.ints);
    if (a.name == "value_string" || a.name == "value_strings")
        return std::nullopt;
    ctx.fail("attribute '" + a.name + "' is not one a Constant can hold");
}

bool hasSubgraphs(const Model& model)
{
    for (const Node& node : model.nodes)
        for (const Attribute& a : node.attributes)
            if (a.kind == Attribute::Kind::Graph || (a.kind == Attribute::Kind::Other && a.s == "GRAPHS"))
                return true;
    return false;
}

} // namespace

ConstantFolding foldConstants(Model& model, const std::string& sourceName, LoadBudget& budget)
{
    static const std::unordered_set<std::string> kLayoutOps = {"Identity",  "Cast",    "Reshape", "Transpose",
                                                               "Unsqueeze", "Squeeze", "Flatten"};
    ConstantFolding result;
    std::unordered_set<std::string> graphOutputs;
    for (const ValueInfo& v : model.outputs)
        graphOutputs.insert(v.name);
    std::vector<bool> folded(model.nodes.size(), false);
    std::unordered_set<std::string> consumed; // initializers read by folded nodes
    for (size_t i = 0; i < model.nodes.size(); ++i) {
        const Node& node = model.nodes[i];
        if (!node.domain.empty())
            continue;
        const bool constant = node.opType == "Constant";
        if (!constant && !kLayoutOps.contains(node.opType))
            continue;
        if (node.outputs.size() != 1 || node.outputs[0].empty() || graphOutputs.contains(node.outputs[0]))
            continue;
        const FoldContext ctx{sourceName, nodeLabel(node, i), budget};
        std::optional<Tensor> value;
        if (constant) {
            value = constantValue(node, ctx);
        } else {
            if (node.inputs.empty() || node.inputs[0].empty())
                continue;
            const bool allConstant = std::ranges::all_of(
                node.inputs, [&](const std::string& in) { return in.empty() || model.isInitializer(in); });
            if (!allConstant)
                continue;
            const Tensor& in = *model.initializer(node.inputs[0]);
            if (node.opType == "Identity")
                value = in;
            else if (node.opType == "Cast")
                value = foldCast(node, in, ctx);
            else if (node.opType == "Reshape")
                value = foldReshape(node, model, in, ctx);
            else if (node.opType == "Transpose")
                value = foldTranspose(node, in, ctx);
            else if (node.opType == "Squeeze")
                value = foldSqueeze(node, model, in, ctx);
            else if (node.opType == "Unsqueeze")
                value = foldUnsqueeze(node, model, in, ctx);
            else if (node.opType == "Flatten")
                value = foldFlatten(node, in, ctx);
        }
        if (!value)
            continue;
        if (model.isInitializer(node.outputs[0]))
            ctx.fail("writes '" + node.outputs[0] + "', which is also an initializer");
        model.addInitializer(node.outputs[0], std::move(*value));
        folded[i] = true;
        ++(constant ? result.constantNodes : result.layoutNodes);
        for (const std::string& in : node.inputs)
            if (!in.empty())
                consumed.insert(in);
    }
    if (result.constantNodes + result.layoutNodes == 0)
        return result;

    std::vector<Node> kept;
    kept.reserve(model.nodes.size());
    for (size_t i = 0; i < model.nodes.size(); ++i)
        if (!folded[i])
            kept.push_back(std::move(model.nodes[i]));
    model.nodes = std::move(kept);

    if (hasSubgraphs(model))
        return result;
    // Initializers only folded nodes read, and folded results that every reader folded in turn.
    std::unordered_set<std::string> read = graphOutputs;
    for (const Node& node : model.nodes)
        for (const std::string& in : node.inputs)
            read.insert(in);
    std::unordered_set<std::string> unused;
    for (const std::string& name : consumed)
        if (!read.contains(name))
            unused.insert(name);
    result.removedInitializers = model.removeInitializers(unused);
    return result;
}

std::string missingWeightsWarning(const Model& model)
{
    if (!model.layers.empty() || model.weightsOnly)
        return {};
    std::unordered_map<std::string, size_t> producer;
    for (size_t i = 0; i < model.nodes.size(); ++i)
        for (const std::string& out : model.nodes[i].outputs)
            producer.emplace(out, i);
    std::unordered_set<std::string> graphInputs;
    for (const ValueInfo& v : model.inputs)
        graphInputs.insert(v.name);
    std::vector<std::string> problems;
    for (size_t i = 0; i < model.nodes.size(); ++i) {
        const Node& node = model.nodes[i];
        const bool layerOp =
            node.opType == "Conv" || node.opType == "ConvTranspose" || node.opType == "Gemm" || node.opType == "MatMul";
        if (!node.domain.empty() || !layerOp || node.inputs.size() < 2)
            continue;
        const std::string& weight = node.inputs[1];
        std::string from;
        if (const Tensor* t = model.initializer(weight))
            from = "a " + std::string(dtypeName(t->dtype())) + " initializer of shape " + shapeToString(t->shape()) +
                   ", not a floating weight of the rank the op needs";
        else if (const auto p = producer.find(weight); p != producer.end())
            from = "computed by " + nodeLabel(model.nodes[p->second], p->second) + ", which is not constant";
        else if (graphInputs.contains(weight))
            from = "a graph input";
        else
            from = "not defined in the graph";
        problems.push_back(nodeLabel(node, i) + " reads its weight '" + weight + "', " + from);
    }
    if (problems.empty())
        return {};
    constexpr size_t kListed = 8;
    std::string text = "no quantizable layer found: the weight of " + std::to_string(problems.size()) +
                       " Conv/ConvTranspose/Gemm/MatMul node(s) is not a constant the loader could place (an "
                       "initializer, a Constant node, or Identity/Cast/Reshape/Transpose/Unsqueeze/Squeeze/Flatten "
                       "of constants): ";
    for (size_t k = 0; k < std::min(problems.size(), kListed); ++k)
        text += (k ? "; " : "") + problems[k];
    if (problems.size() > kListed)
        text += "; and " + std::to_string(problems.size() - kListed) + " more";
    return text;
}

} // namespace qs
