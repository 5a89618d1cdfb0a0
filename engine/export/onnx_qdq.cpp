#include "export/onnx_qdq.h"

#include <google/protobuf/io/coded_stream.h>
#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <tuple>
#include <unordered_set>

#include "core/atomic_file.h"
#include "core/error.h"
#include "export/passes/canonicalize_zero_points.h"
#include "export/passes/matmul_nbits.h"
#include "export/passes/pipeline.h"
#include "export/passes/raise_opset.h"
#include "numerics/float_formats.h"

namespace qs {

namespace {

constexpr int64_t kPerAxisOpset = 13;  // DequantizeLinear/QuantizeLinear `axis`
constexpr int64_t kFloat8Opset = 19;   // float8 element types
constexpr int64_t kNewTypesOpset = 21; // int16, int4, uint4 and block_size
// TensorProto element types of ONNX 1.14 (libonnx 1.12's enum predates them).
constexpr int32_t kOnnxFloat8E4M3FN = 17;
constexpr int32_t kOnnxFloat8E5M2 = 19;

bool isFloat8(int32_t elementType)
{
    return elementType == kOnnxFloat8E4M3FN || elementType == kOnnxFloat8E5M2;
}

// A float8 tensor of raw bytes (codes already encoded).
onnx::TensorProto float8TensorProto(const std::string& name, int32_t elementType, const Shape& dims,
                                    const std::vector<uint8_t>& codes)
{
    onnx::TensorProto proto;
    proto.set_name(name);
    proto.set_data_type(elementType);
    for (int64_t d : dims)
        proto.add_dims(d);
    proto.set_raw_data(std::string(codes.begin(), codes.end()));
    return proto;
}
constexpr size_t kMaxProtobufBytes = size_t(2147483647);

std::string layerLabel(const Model& model, size_t layer)
{
    return "layer '" + model.layers.at(layer).modulePath + "'";
}

// The ONNX element type of a qtype's codes and the opset it needs; Error for a qtype ONNX cannot hold.
std::pair<int32_t, int64_t> onnxCodeType(QType t, const std::string& who)
{
    switch (t) {
    case QType::Int8:
        return {onnx::TensorProto::INT8, kPerAxisOpset};
    case QType::UInt8:
        return {onnx::TensorProto::UINT8, kPerAxisOpset};
    case QType::Int16:
        return {onnx::TensorProto::INT16, kNewTypesOpset};
    case QType::Int4:
        return {kOnnxInt4, kNewTypesOpset};
    case QType::UInt4:
        return {kOnnxUInt4, kNewTypesOpset};
    case QType::Fp8E4M3:
        return {kOnnxFloat8E4M3FN, kFloat8Opset};
    case QType::Fp8E5M2:
        return {kOnnxFloat8E5M2, kFloat8Opset};
    default:
        if (isLut(t))
            throw Error("ONNX export: " + who + " is palettized to " + std::string(qtypeName(t)) +
                        " (codes into a k-means table per group), which ONNX's QuantizeLinear/DequantizeLinear "
                        "cannot hold; export a checkpoint (--export-checkpoint: codes and tables) or use int4/int8 "
                        "for this layer");
        throw Error("ONNX export: " + who + " is quantized to " + std::string(qtypeName(t)) +
                    ", which ONNX's QuantizeLinear/DequantizeLinear cannot hold (int8, uint8, int16, int4, uint4, "
                    "fp8_e4m3 and fp8_e5m2 can be exported)");
    }
}

// How a weight's groups are written: per tensor, per axis, or blocked along one axis.
struct WeightGrouping {
    Shape scaleDims;            // {} per tensor, {C} per axis, the grid per block
    std::optional<int> axis;    // per axis and blocked
    int64_t blockSize = 0;      // blocked only
    Shape block;                // elements per group along each of the weight's own axes
    std::vector<float> scales;  // row-major over the weight's own grid
    std::vector<int32_t> zeros; // same
};

WeightGrouping groupingOf(const Model& model, const QdqWeight& w)
{
    const QuantizableLayer& layer = model.layers.at(w.layer);
    const std::string who = layerLabel(model, w.layer);
    const Shape& own = w.fakeQuant.shape();
    const int rank = int(own.size());
    std::vector<int> perm = w.transposedAxes;
    if (perm.empty()) {
        perm.resize(static_cast<size_t>(rank));
        std::iota(perm.begin(), perm.end(), 0);
    }
    const BlockLayout& layout = w.params.layout;
    if (int(perm.size()) != rank || layout.shape.size() != size_t(rank) || layout.block.size() != size_t(rank))
        throw Error("ONNX export: " + who + ": the quantization layout does not fit the weight " + shapeToString(own));
    for (int i = 0; i < rank; ++i)
        if (perm[size_t(i)] < 0 || perm[size_t(i)] >= rank || layout.shape[size_t(i)] != own[size_t(perm[size_t(i)])])
            throw Error("ONNX export: " + who + ": the quantization layout does not fit the weight " +
                        shapeToString(own));
    const Shape grid = layout.gridShape();
    Shape ownGrid(static_cast<size_t>(rank)), ownBlock(static_cast<size_t>(rank));
    for (int i = 0; i < rank; ++i) {
        ownGrid[size_t(perm[size_t(i)])] = grid[size_t(i)];
        ownBlock[size_t(perm[size_t(i)])] = layout.block[size_t(i)];
    }
    WeightGrouping g;
    g.block = ownBlock;
    // Scales and zero points in the weight's own grid order.
    const int64_t groups = shapeElementCount(ownGrid);
    if (int64_t(w.params.scales.size()) != groups ||
        (!w.params.zeroPoints.empty() && int64_t(w.params.zeroPoints.size()) != groups))
        throw Error("ONNX export: " + who + ": " + std::to_string(w.params.scales.size()) + " scales for " +
                    std::to_string(groups) + " groups");
    const Shape gridStrides = rowMajorStrides(grid);
    std::vector<int64_t> c(size_t(rank), 0);
    for (int64_t k = 0; k < groups; ++k) {
        int64_t src = 0;
        for (int i = 0; i < rank; ++i)
            src += c[size_t(perm[size_t(i)])] * gridStrides[size_t(i)];
        g.scales.push_back(w.params.scales[size_t(src)]);
        g.zeros.push_back(w.params.zeroPoints.empty() ? 0 : w.params.zeroPoints[size_t(src)]);
        for (int d = rank - 1; d >= 0; --d) {
            if (++c[size_t(d)] < ownGrid[size_t(d)])
                break;
            c[size_t(d)] = 0;
        }
    }
    if (groups == 1)
        return g;
    std::vector<int> split; // axes with more than one group
    for (int d = 0; d < rank; ++d)
        if (ownGrid[size_t(d)] > 1)
            split.push_back(d);
    if (split.size() == 1 && ownBlock[size_t(split[0])] == 1) {
        g.axis = split[0];
        g.scaleDims = {own[size_t(split[0])]};
        return g;
    }
    // Blocked: one axis in blocks, every other axis one group per index.
    std::optional<int> blocked;
    for (int d = 0; d < rank; ++d)
        if (ownBlock[size_t(d)] > 1 && own[size_t(d)] > 1) {
            if (blocked)
                blocked.reset(), d = rank; // two axes in blocks: not expressible
            else
                blocked = d;
        }
    bool expressible = blocked.has_value();
    for (int d = 0; d < rank && expressible; ++d)
        expressible = d == *blocked || ownBlock[size_t(d)] == 1 || own[size_t(d)] == 1;
    if (!expressible)
        throw Error("ONNX export: " + who + " (" + layer.opType + ", weight " + shapeToString(own) + "): its groups (" +
                    layout.describe() +
                    ") are not expressible in ONNX: blocked quantization needs every axis but the tiled one to have "
                    "one scale per index");
    g.axis = *blocked;
    g.blockSize = ownBlock[size_t(*blocked)];
    g.scaleDims = ownGrid;
    return g;
}

// The codes of a fake-quantized weight: exactly the grid points it holds. For
// float8 the values are the encoded bytes.
IntegerTensor weightCodes(const Model& model, const QdqWeight& w, const WeightGrouping& g, int32_t elementType)
{
    const std::string who = layerLabel(model, w.layer);
    if (w.fakeQuant.dtype() != DType::F32)
        throw Error("ONNX export: " + who + ": the fake-quantized weight is not float32");
    const bool float8 = isFloat8(elementType);
    const bool e4m3 = elementType == kOnnxFloat8E4M3FN;
    const IntegerGrid grid = float8 ? IntegerGrid{0, 255} : integerGrid(w.params.qtype, w.params.options.narrowRange);
    const Shape& own = w.fakeQuant.shape();
    const int rank = int(own.size());
    Shape ownGrid(static_cast<size_t>(rank));
    for (int d = 0; d < rank; ++d)
        ownGrid[size_t(d)] = (own[size_t(d)] + g.block[size_t(d)] - 1) / g.block[size_t(d)];
    const Shape gridStrides = rowMajorStrides(ownGrid);
    const auto fq = w.fakeQuant.values<float>();
    IntegerTensor codes{elementType, own, std::vector<int32_t>(fq.size())};
    std::vector<int64_t> index(size_t(rank), 0);
    for (size_t k = 0; k < fq.size(); ++k) {
        int64_t group = 0;
        for (int d = 0; d < rank; ++d)
            group += index[size_t(d)] / g.block[size_t(d)] * gridStrides[size_t(d)];
        const float scale = g.scales[size_t(group)];
        const int32_t zero = g.zeros[size_t(group)];
        int32_t q = 0;
        float back = 0;
        if (float8) {
            q = e4m3 ? encodeFp8E4M3(fq[k] / scale) : encodeFp8E5M2(fq[k] / scale);
            back = (e4m3 ? decodeFp8E4M3(uint8_t(q)) : decodeFp8E5M2(uint8_t(q))) * scale;
        } else {
            q = std::clamp(int32_t(std::nearbyint(fq[k] / scale)) + zero, grid.qmin, grid.qmax);
            back = float(q - zero) * scale; // the simulation dequantizes as (q − zp)·scale, as DequantizeLinear does
        }
        if (std::abs(back - fq[k]) > 1e-6f * std::abs(fq[k]) + 1e-30f)
            throw Error("ONNX export: " + who + ": weight element " + std::to_string(k) + " (" + std::to_string(fq[k]) +
                        ") is not on its quantization grid (scale " + std::to_string(scale) + ")");
        codes.values[k] = q;
        for (int d = rank - 1; d >= 0; --d) {
            if (++index[size_t(d)] < own[size_t(d)])
                break;
            index[size_t(d)] = 0;
        }
    }
    return codes;
}

// The ONNX element type of a DType (the inverse of graph/onnx_element_type.h).
int32_t onnxElementTypeOf(DType t)
{
    switch (t) {
    case DType::F32:
        return onnx::TensorProto::FLOAT;
    case DType::F16:
        return onnx::TensorProto::FLOAT16;
    case DType::BF16:
        return onnx::TensorProto::BFLOAT16;
    case DType::F64:
        return onnx::TensorProto::DOUBLE;
    case DType::I8:
        return onnx::TensorProto::INT8;
    case DType::U8:
        return onnx::TensorProto::UINT8;
    case DType::I16:
        return onnx::TensorProto::INT16;
    case DType::U16:
        return onnx::TensorProto::UINT16;
    case DType::I32:
        return onnx::TensorProto::INT32;
    case DType::U32:
        return onnx::TensorProto::UINT32;
    case DType::I64:
        return onnx::TensorProto::INT64;
    case DType::U64:
        return onnx::TensorProto::UINT64;
    case DType::Bool:
        return onnx::TensorProto::BOOL;
    }
    return onnx::TensorProto::UNDEFINED;
}

// The graph of scope `scope` (Model::subgraphs) inside the main graph `top`:
// the subgraph attribute of the node holding it, found by that node's outputs.
onnx::GraphProto& scopeProto(onnx::GraphProto& top, const Model& model, size_t scope)
{
    if (scope == 0)
        return top;
    const SubgraphScope& s = model.subgraphs.at(scope - 1);
    onnx::GraphProto& parent = scopeProto(top, model, s.parent);
    const Node& node = model.scopeGraph(s.parent).nodes.at(s.node);
    for (onnx::NodeProto& candidate : *parent.mutable_node()) {
        if (candidate.op_type() != node.opType || size_t(candidate.output_size()) != node.outputs.size() ||
            !std::equal(node.outputs.begin(), node.outputs.end(), candidate.output().begin()))
            continue;
        for (onnx::AttributeProto& a : *candidate.mutable_attribute())
            if (a.name() == s.attribute && a.has_g())
                return *a.mutable_g();
    }
    throw Error("ONNX export: subgraph '" + s.modulePath + "' is not in the ONNX graph");
}

// The loader folds Constant nodes and layout ops on constants into
// initializers (io/constant_folding.h). The graph the export rewrites is made
// to hold the same constants: the folded nodes go, the initializers the folding
// consumed go, and the folded results are written as initializers with the
// loaded values, so the export quantizes exactly the tensors the simulation did.
// A subgraph's folded constants are written back into it the same way
// (`model` is then the subgraph's, SubgraphScope::graph); the subgraph weights
// the main model holds under other names (Model::addSubgraphWeight) are not
// tensors of the main graph.
void writeBackFoldedConstants(onnx::GraphProto& graph, const Model& model, int64_t irVersion)
{
    std::unordered_set<std::string> sourceInitializers;
    for (const auto& t : graph.initializer())
        sourceInitializers.insert(t.name());
    auto foldedAway = [&](const std::string& name) { return !model.isInitializer(name); };
    auto foldedResult = [&](const std::string& name) {
        return !name.empty() && model.isInitializer(name) && !sourceInitializers.contains(name);
    };
    google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
    for (auto& node : *graph.mutable_node())
        if (node.output_size() == 0 || !std::all_of(node.output().begin(), node.output().end(), foldedResult))
            *nodes.Add() = std::move(node);
    graph.mutable_node()->Swap(&nodes);
    std::unordered_set<std::string> removed;
    google::protobuf::RepeatedPtrField<onnx::TensorProto> initializers;
    for (auto& t : *graph.mutable_initializer())
        if (foldedAway(t.name()))
            removed.insert(t.name());
        else
            *initializers.Add() = std::move(t);
    graph.mutable_initializer()->Swap(&initializers);
    google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> inputs;
    for (auto& v : *graph.mutable_input())
        if (!removed.contains(v.name()))
            *inputs.Add() = std::move(v);
    graph.mutable_input()->Swap(&inputs);
    for (const NamedTensor& t : model.initializers()) {
        if (sourceInitializers.contains(t.name) || model.isSubgraphWeight(t.name))
            continue;
        onnx::TensorProto& added = *graph.add_initializer();
        added.set_name(t.name);
        added.set_data_type(onnxElementTypeOf(t.tensor.dtype()));
        for (int64_t d : t.tensor.shape())
            added.add_dims(d);
        added.set_raw_data(std::string(static_cast<const char*>(t.tensor.rawData()), t.tensor.nbytes()));
        if (irVersion < 4) { // before IR 4 every initializer is also a graph input
            onnx::ValueInfoProto& input = *graph.add_input();
            input.set_name(t.name);
            auto& type = *input.mutable_type()->mutable_tensor_type();
            type.set_elem_type(added.data_type());
            for (int64_t d : t.tensor.shape())
                type.mutable_shape()->add_dim()->set_dim_value(d);
        }
    }
}

onnx::ModelProto readSource(const Model& model)
{
    if (model.format != "onnx")
        throw Error("ONNX export: the model was loaded from " + model.format +
                    ", not ONNX; the QDQ export rewrites an ONNX graph");
    std::ifstream in(model.sourcePath, std::ios::binary);
    if (!in)
        throw Error(model.sourcePath.string() + ": cannot be read again for the ONNX export");
    const std::string bytes{std::istreambuf_iterator<char>(in), {}};
    onnx::ModelProto proto;
    google::protobuf::io::CodedInputStream stream(reinterpret_cast<const uint8_t*>(bytes.data()), int(bytes.size()));
    stream.SetTotalBytesLimit(int(kMaxProtobufBytes));
    if (bytes.size() > kMaxProtobufBytes || !proto.ParseFromCodedStream(&stream) || !proto.has_graph())
        throw Error(model.sourcePath.string() + ": not a valid ONNX file any more (it changed since it was loaded?)");
    writeBackFoldedConstants(*proto.mutable_graph(), model, proto.ir_version());
    for (size_t scope = 1; scope <= model.subgraphs.size(); ++scope)
        writeBackFoldedConstants(scopeProto(*proto.mutable_graph(), model, scope), *model.subgraphs[scope - 1].graph,
                                 4);
    // Tensors the session rewrote (cross-layer equalization) are written with their new values.
    for (auto& t : *proto.mutable_graph()->mutable_initializer()) {
        if (!model.isReplacedInitializer(t.name()))
            continue;
        const Tensor& values = *model.initializer(t.name());
        const std::string name = t.name();
        t.Clear();
        t.set_name(name);
        t.set_data_type(onnxElementTypeOf(values.dtype()));
        for (int64_t d : values.shape())
            t.add_dims(d);
        t.set_raw_data(std::string(static_cast<const char*>(values.rawData()), values.nbytes()));
    }
    // External data is copied in from the tensors the loader mapped (and checked).
    for (auto& t : *proto.mutable_graph()->mutable_initializer()) {
        if (t.data_location() != onnx::TensorProto::EXTERNAL)
            continue;
        const Tensor* loaded = model.initializer(t.name());
        if (!loaded)
            throw Error(model.sourcePath.string() + ": initializer '" + t.name() + "' was not loaded");
        t.clear_external_data();
        t.clear_data_location();
        t.set_raw_data(std::string(static_cast<const char*>(loaded->rawData()), loaded->nbytes()));
    }
    return proto;
}

int64_t defaultOpsetOf(const onnx::ModelProto& proto)
{
    for (const auto& o : proto.opset_import())
        if (o.domain().empty() || o.domain() == "ai.onnx")
            return o.version();
    return 1;
}

onnx::NodeProto qdqNode(const std::string& op, const std::string& name, std::vector<std::string> inputs,
                        const std::string& output)
{
    onnx::NodeProto node;
    node.set_op_type(op);
    node.set_name(name);
    for (auto& in : inputs)
        node.add_input(std::move(in));
    node.add_output(output);
    return node;
}

// The subgraphs being rewritten, each indexed once (QdqGraph). They point into
// the nodes of the main graph, which its sort moves: they must be gone before
// the main graph is sorted.
struct ScopeGraphs {
    ScopeGraphs(onnx::GraphProto& top, const Model& model) : top_(top), model_(model) {}
    QdqGraph& graph(size_t scope)
    {
        auto& g = graphs_[scope];
        if (!g)
            g = std::make_unique<QdqGraph>(scopeProto(top_, model_, scope));
        return *g;
    }
    std::map<size_t, std::unique_ptr<QdqGraph>>& all() { return graphs_; }
    std::map<size_t, std::set<std::string>> replaced; // per scope: its float weights dequantized in place

private:
    onnx::GraphProto& top_;
    const Model& model_;
    std::map<size_t, std::unique_ptr<QdqGraph>> graphs_;
};

// Where a layer's weight is a tensor of the ONNX model: the scope whose graph
// holds it as an initializer and its name there. A subgraph layer reading an
// enclosing graph's constant finds it there (outer scope).
std::pair<size_t, std::string> weightHome(const Model& model, const QuantizableLayer& layer)
{
    if (layer.scope == 0 || !layer.node || !layer.weightInput)
        return {0, layer.weightName};
    const std::string& local = model.scopeGraph(layer.scope).nodes.at(*layer.node).inputs.at(*layer.weightInput);
    for (size_t s = layer.scope; s != 0; s = model.subgraphs.at(s - 1).parent)
        if (model.scopeGraph(s).initializer(local))
            return {s, local};
    return {0, local};
}

void quantizeWeights(const Model& model, const QdqExportRequest& request, QdqGraph& graph, ScopeGraphs& scopes,
                     OnnxExportSummary& summary)
{
    PassReport report{"quantize_weights", 0, {}};
    std::set<std::string> done;            // float weights replaced by their quantized form
    std::map<size_t, std::string> written; // shared-weight group (its first reader) -> the weight name written
    for (const QdqWeight& w : request.weights) {
        const QuantizableLayer& layer = model.layers.at(w.layer);
        const std::string who = layerLabel(model, w.layer);
        // A shared weight is one quantizer: the DequantizeLinear written for the
        // first reader exported feeds every reader. A reader that reads it under
        // another name (an Identity folded at load) is rewired to it, and the copy goes.
        const size_t group = layer.sharesWeightOf.value_or(w.layer);
        if (const auto it = written.find(group); it != written.end()) {
            if (it->second != layer.weightName) {
                for (auto& node : *graph.proto().mutable_node())
                    for (std::string& input : *node.mutable_input())
                        if (input == layer.weightName)
                            input = it->second;
                done.insert(layer.weightName);
                graph.reindex();
            }
            continue;
        }
        written.emplace(group, layer.weightName);
        if (!done.insert(layer.weightName).second)
            throw Error("ONNX export: " + who + ": weight '" + layer.weightName + "' is listed twice");
        // A weight of a subgraph's own is dequantized inside it, under its name there.
        const auto [home, homeName] = weightHome(model, layer);
        QdqGraph& target = home ? scopes.graph(home) : graph;
        if (home)
            scopes.replaced[home].insert(homeName);
        const onnx::TensorProto* source = target.initializer(homeName);
        if (!source)
            throw Error("ONNX export: " + who + ": weight '" + layer.weightName + "' is not an initializer");
        if (source->data_type() != onnx::TensorProto::FLOAT)
            throw Error("ONNX export: " + who + ": weight '" + layer.weightName +
                        "' is not float32; only float32 weights are exported as QDQ");
        if (tensorDims(*source) != w.fakeQuant.shape())
            throw Error("ONNX export: " + who + ": the quantized weight's shape " + shapeToString(w.fakeQuant.shape()) +
                        " is not the initializer's");
        const auto [elementType, opset] = onnxCodeType(w.params.qtype, who);
        (void)opset;
        const WeightGrouping g = groupingOf(model, w);
        const IntegerTensor codes = weightCodes(model, w, g, elementType);

        const std::string codesName = target.uniqueName(layer.weightName + "_quantized");
        const std::string scaleName = target.uniqueName(layer.weightName + "_scale");
        const std::string zeroName = target.uniqueName(layer.weightName + "_zero_point");
        target.addInitializer(floatTensorProto(scaleName, g.scaleDims, g.scales));
        std::vector<std::string> inputs{codesName, scaleName};
        if (isFloat8(elementType)) {
            // Float8 codes are stored as bytes; their zero point is 0 and left out (the type is the input's).
            target.addInitializer(float8TensorProto(codesName, elementType, codes.dims,
                                                    std::vector<uint8_t>(codes.values.begin(), codes.values.end())));
        } else {
            target.addInitializer(integerTensorProto(codesName, codes));
            target.addInitializer(integerTensorProto(zeroName, IntegerTensor{elementType, g.scaleDims, g.zeros}));
            inputs.push_back(zeroName);
        }
        // awq: the dequantized grid values, divided by the input scales after (float32, as simulated).
        const bool divided = w.inputScale.rawData() != nullptr;
        const std::string dqOutput = divided ? target.uniqueName(layer.weightName + "_awq_grid") : homeName;
        onnx::NodeProto dq = qdqNode("DequantizeLinear", target.uniqueName(layer.weightName + "_DequantizeLinear"),
                                     std::move(inputs), dqOutput);
        if (g.axis)
            setIntAttribute(dq, "axis", *g.axis);
        if (g.blockSize > 0)
            setIntAttribute(dq, "block_size", g.blockSize);
        report.nodes.push_back(dq.name());
        *target.proto().add_node() = std::move(dq);
        ++report.changes;
        if (divided) {
            if (w.inputScale.rank() != int(w.fakeQuant.shape().size()))
                throw Error("ONNX export: " + who + ": the awq input scales " + shapeToString(w.inputScale.shape()) +
                            " do not broadcast over the weight " + shapeToString(w.fakeQuant.shape()));
            const std::string scalesName = target.uniqueName(layer.weightName + "_awq_input_scale");
            const auto sv = w.inputScale.values<float>();
            target.addInitializer(
                floatTensorProto(scalesName, w.inputScale.shape(), std::vector<float>(sv.begin(), sv.end())));
            onnx::NodeProto div;
            div.set_op_type("Div");
            div.set_name(target.uniqueName(layer.weightName + "_awq_Div"));
            div.add_input(dqOutput);
            div.add_input(scalesName);
            div.add_output(homeName);
            report.nodes.push_back(div.name());
            *target.proto().add_node() = std::move(div);
            summary.quantizedBytes += w.inputScale.numel() * 4;
        }
        if (w.correctedBias.rawData()) {
            // bias_correction: the node reads the corrected bias as its input 2 (B of Conv, C of Gemm).
            const Model& scopeModel = model.scopeGraph(layer.scope);
            const auto nodeIndex = layer.node && !scopeModel.nodes.at(*layer.node).outputs.empty()
                                       ? target.producer(scopeModel.nodes[*layer.node].outputs[0])
                                       : std::nullopt;
            if (!nodeIndex)
                throw Error("ONNX export: " + who +
                            ": its node is not in the ONNX graph, so its corrected bias "
                            "has nowhere to go");
            const std::string biasName = target.uniqueName(layer.weightName + "_corrected_bias");
            const auto bv = w.correctedBias.values<float>();
            target.addInitializer(
                floatTensorProto(biasName, w.correctedBias.shape(), std::vector<float>(bv.begin(), bv.end())));
            onnx::NodeProto& node = *target.proto().mutable_node(*nodeIndex);
            while (node.input_size() < 2)
                node.add_input("");
            if (node.input_size() > 2)
                node.set_input(2, biasName);
            else
                node.add_input(biasName);
            ++report.changes;
        }

        const bool noZeroPoint = isFloat8(elementType);
        const int64_t bits = elementType == kOnnxInt4 || elementType == kOnnxUInt4 ? 4
                             : elementType == onnx::TensorProto::INT16             ? 16
                                                                                   : 8;
        summary.floatBytes += w.fakeQuant.numel() * 4;
        summary.quantizedBytes += (w.fakeQuant.numel() * bits + 7) / 8 + int64_t(g.scales.size()) * 4 +
                                  (noZeroPoint ? 0 : (int64_t(g.zeros.size()) * bits + 7) / 8);
    }
    // The float weights go (and with them any graph input listing them, IR < 4 style).
    google::protobuf::RepeatedPtrField<onnx::TensorProto> kept;
    for (auto& t : *graph.proto().mutable_initializer())
        if (!done.contains(t.name()))
            *kept.Add() = std::move(t);
    graph.proto().mutable_initializer()->Swap(&kept);
    google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> inputs;
    for (auto& v : *graph.proto().mutable_input())
        if (!done.contains(v.name()))
            *inputs.Add() = std::move(v);
    graph.proto().mutable_input()->Swap(&inputs);
    graph.reindex();
    for (const auto& [scope, names] : scopes.replaced) {
        QdqGraph& body = scopes.graph(scope);
        google::protobuf::RepeatedPtrField<onnx::TensorProto> left;
        for (auto& t : *body.proto().mutable_initializer())
            if (!names.contains(t.name()))
                *left.Add() = std::move(t);
        body.proto().mutable_initializer()->Swap(&left);
        body.reindex();
    }
    summary.passes.push_back(std::move(report));
}

void quantizeActivations(const Model& model, const QdqExportRequest& request, QdqGraph& mainGraph, ScopeGraphs& scopes,
                         OnnxExportSummary& summary)
{
    PassReport report{"quantize_activations", 0, {}};
    // One Q → DQ pair per value and quantization, shared by the layers that ask for the same.
    std::map<std::tuple<std::string, int32_t, float, int32_t>, std::string> pairs;
    for (const QdqActivation& a : request.activations) {
        const QuantizableLayer& layer = model.layers.at(a.layer);
        const std::string who = layerLabel(model, a.layer);
        // A layer inside a subgraph gets its pair inside it, on the value as named there.
        const Model& scopeModel = model.scopeGraph(layer.scope);
        QdqGraph& graph = layer.scope ? scopes.graph(layer.scope) : mainGraph;
        const std::string prefix = layer.scope ? model.scopePath(layer.scope) + "/" : "";
        if (a.value.compare(0, prefix.size(), prefix) != 0)
            throw Error("ONNX export: " + who + ": activation '" + a.value + "' is not a value of its subgraph");
        const std::string value = a.value.substr(prefix.size());
        if (!layer.node || *layer.node >= scopeModel.nodes.size() || scopeModel.nodes[*layer.node].outputs.empty())
            throw Error("ONNX export: " + who + " has no node to quantize the input of");
        const auto [elementType, opset] = onnxCodeType(a.qtype, who + "'s input activation");
        (void)opset;
        if (isFloat8(elementType))
            throw Error("ONNX export: " + who + "'s input activation is quantized to " +
                        std::string(qtypeName(a.qtype)) +
                        ": ONNX Runtime (1.30) fuses float8 QuantizeLinear/DequantizeLinear around a Conv or "
                        "MatMul into integer kernels that have no float8 type and refuses the model; fp8 is "
                        "exported for weights only");
        if (!std::isfinite(a.scale) || a.scale <= 0)
            throw Error("ONNX export: " + who + ": activation scale " + std::to_string(a.scale) +
                        " is not finite and positive");
        const auto range = isFloat8(elementType) ? std::optional<std::pair<int32_t, int32_t>>(std::pair{0, 0})
                                                 : integerElementRange(elementType);
        if (a.zeroPoint < range->first || a.zeroPoint > range->second)
            throw Error("ONNX export: " + who + ": activation zero point " + std::to_string(a.zeroPoint) +
                        " is outside its type");
        const auto nodeIndex = graph.producer(scopeModel.nodes[*layer.node].outputs[0]);
        if (!nodeIndex)
            throw Error("ONNX export: " + who + ": its node is not in the ONNX graph");
        const auto key = std::make_tuple(a.value, elementType, a.scale, a.zeroPoint);
        auto it = pairs.find(key);
        if (it == pairs.end()) {
            const std::string scaleName = graph.uniqueName(a.value + "_scale");
            const std::string zeroName = graph.uniqueName(a.value + "_zero_point");
            const std::string quantized = graph.uniqueName(a.value + "_quantized");
            const std::string dequantized = graph.uniqueName(a.value + "_dequantized");
            graph.addInitializer(floatTensorProto(scaleName, {}, {a.scale}));
            // The zero point sets QuantizeLinear's output type (float8: the byte 0, +0.0).
            graph.addInitializer(isFloat8(elementType)
                                     ? float8TensorProto(zeroName, elementType, {}, {uint8_t(0)})
                                     : integerTensorProto(zeroName, IntegerTensor{elementType, {}, {a.zeroPoint}}));
            onnx::NodeProto q = qdqNode("QuantizeLinear", graph.uniqueName(a.value + "_QuantizeLinear"),
                                        {value, scaleName, zeroName}, quantized);
            onnx::NodeProto dq = qdqNode("DequantizeLinear", graph.uniqueName(a.value + "_DequantizeLinear"),
                                         {quantized, scaleName, zeroName}, dequantized);
            report.nodes.push_back(q.name());
            report.nodes.push_back(dq.name());
            *graph.proto().add_node() = std::move(q);
            *graph.proto().add_node() = std::move(dq);
            it = pairs.emplace(key, dequantized).first;
            ++report.changes;
        }
        onnx::NodeProto& node = *graph.proto().mutable_node(*nodeIndex);
        bool replaced = false;
        for (int i = 0; i < node.input_size(); ++i)
            if (node.input(i) == value && (!layer.weightInput || size_t(i) != *layer.weightInput)) {
                node.set_input(i, it->second);
                replaced = true;
            }
        if (!replaced)
            throw Error("ONNX export: " + who + ": its node does not read '" + a.value + "'");
    }
    mainGraph.reindex();
    for (auto& [scope, graph] : scopes.all())
        graph->reindex();
    summary.passes.push_back(std::move(report));
}

void check(onnx::ModelProto& proto, OnnxExportSummary& summary)
{
    try {
        onnx::checker::check_model(proto);
        onnx::ModelProto inferred = proto;
        onnx::shape_inference::InferShapes(inferred, onnx::OpSchemaRegistry::Instance(),
                                           onnx::ShapeInferenceOptions(true, 1, false));
    } catch (const std::exception& e) {
        throw Error(std::string("ONNX export: the written model fails the ONNX checker: ") + e.what());
    }
    summary.checked = true;
}

// QuantizeLinear and DequantizeLinear nodes of the default domain that read or write int8.
int64_t countSignedEightBit(QdqGraph& graph)
{
    int64_t count = 0;
    for (const onnx::NodeProto& node : graph.proto().node())
        if (node.domain().empty() && (node.op_type() == "QuantizeLinear" || node.op_type() == "DequantizeLinear") &&
            quantizedElementType(graph, node) == onnx::TensorProto::INT8)
            ++count;
    return count;
}

} // namespace

QdqExportRequest qdqRequestFromPlan(const Model& model, const QuantizationPlan& plan, const WeightQuantizer& weights,
                                    const std::map<size_t, StaticActivation>& staticActivations)
{
    QdqExportRequest request;
    std::set<std::string> dynamic;
    for (const LayerQuantization& lq : plan.layers()) {
        if (!lq.problem.empty())
            continue;
        const std::string who = layerLabel(model, lq.layer);
        if (lq.weight) {
            const auto it = weights.weights().find(lq.layer);
            if (it == weights.weights().end() || !it->second)
                throw Error("ONNX export: " + who +
                            " has no quantized weight (weight quantization failed or did not run)");
            const QuantizedWeight& qw = *it->second;
            if (qw.inputScale.rawData())
                request.weights.push_back(
                    {lq.layer, qw.quantization.params, qw.transposedAxes, qw.grid, qw.inputScale, {}});
            else
                request.weights.push_back({lq.layer,
                                           qw.quantization.params,
                                           qw.transposedAxes,
                                           WeightQuantizer::fakeQuantOf(model, qw),
                                           {},
                                           {}});
            if (lq.biasCorrection && qw.layer == lq.layer)
                request.weights.back().correctedBias = qw.correctedBias;
        }
        if (!lq.activation)
            continue;
        if (!lq.activation->staticScale) {
            if (dynamic.insert(lq.activation->value).second)
                request.dynamicActivations.push_back(lq.activation->value);
            continue;
        }
        const auto it = staticActivations.find(lq.layer);
        if (it == staticActivations.end())
            throw Error("ONNX export: " + who + ": activation '" + lq.activation->value +
                        "' needs calibration (act_static_scale is set)");
        const QuantParams& p = it->second.params;
        if (p.scales.size() != 1)
            throw Error("ONNX export: " + who + ": activation '" + lq.activation->value + "' has " +
                        std::to_string(p.scales.size()) + " scales; one is expected");
        request.activations.push_back(
            {lq.layer, lq.activation->value, p.qtype, p.scales[0], p.zeroPoints.empty() ? 0 : p.zeroPoints[0]});
    }
    return request;
}

std::optional<EightBitForm> parseEightBitForm(std::string_view name)
{
    if (name == "unsigned")
        return EightBitForm::Unsigned;
    if (name == "as-rules")
        return EightBitForm::AsRules;
    return std::nullopt;
}

const char* eightBitFormName(EightBitForm form)
{
    return form == EightBitForm::Unsigned ? "unsigned" : "as-rules";
}

std::string eightBitFormReason(EightBitForm form)
{
    if (form == EightBitForm::Unsigned)
        return "8-bit integers written as uint8 (int8 codes + 128, the same values): ONNX Runtime runs its u8u8 "
               "kernels, which compute exactly what the simulation does on every x86 CPU";
    return "8-bit integers written as the rules name them: ONNX Runtime's fastest kernels on CPUs with VNNI; on "
           "AVX2 CPUs without VNNI its u8s8/s8s8 kernels saturate and the deployed model can be worse than the "
           "simulation";
}

std::optional<Int4Form> parseInt4Form(std::string_view name)
{
    if (name == "dequantize")
        return Int4Form::Dequantize;
    if (name == "matmulnbits")
        return Int4Form::MatMulNBits;
    return std::nullopt;
}

const char* int4FormName(Int4Form form)
{
    return form == Int4Form::Dequantize ? "dequantize" : "matmulnbits";
}

namespace {

// Blocked int4 MatMul/Gemm weights of the main graph as com.microsoft.MatMulNBits;
// every int4/uint4 weight left as DequantizeLinear gets a warning naming its layer.
void writeMatMulNBits(const Model& model, const QdqExportRequest& request, onnx::ModelProto& proto, QdqGraph& graph,
                      OnnxExportSummary& summary)
{
    MatMulNBitsResult r = useMatMulNBits(graph);
    std::map<std::string, std::string> layerOfWeight;
    for (const QdqWeight& w : request.weights) {
        const QuantizableLayer& layer = model.layers.at(w.layer);
        if (w.params.qtype != QType::Int4 && w.params.qtype != QType::UInt4)
            continue;
        if (layer.scope != 0)
            summary.warnings.push_back("MatMulNBits: " + layerLabel(model, w.layer) +
                                       " is inside a subgraph and keeps its DequantizeLinear");
        else
            layerOfWeight.emplace(layer.weightName, layerLabel(model, w.layer));
    }
    for (const MatMulNBitsFallback& f : r.fallbacks) {
        const auto it = layerOfWeight.find(f.weight);
        summary.warnings.push_back(
            "MatMulNBits: " + (it != layerOfWeight.end() ? it->second : "weight '" + f.weight + "'") +
            " keeps its DequantizeLinear: " + f.reason);
    }
    summary.matMulNBits = r.report.changes;
    summary.quantizedBytes += r.bytesAfter - r.bytesBefore;
    if (r.report.changes > 0) {
        bool imported = false;
        for (const auto& o : proto.opset_import())
            imported |= o.domain() == kMicrosoftDomain;
        if (!imported) {
            onnx::OperatorSetIdProto& o = *proto.add_opset_import();
            o.set_domain(kMicrosoftDomain);
            o.set_version(1);
        }
    }
    summary.passes.push_back(std::move(r.report));
}

} // namespace

namespace {

// Thrown when a build that expected every blocked int4 MatMul/Gemm weight to
// become MatMulNBits (and so kept an opset below 21) left one as DequantizeLinear.
struct NewTypesOpsetNeeded {};

bool takesMatMulNBits(const Model& model, const QdqWeight& w, const WeightGrouping& g)
{
    const QuantizableLayer& layer = model.layers.at(w.layer);
    return layer.scope == 0 && (w.params.qtype == QType::Int4 || w.params.qtype == QType::UInt4) && g.blockSize >= 16 &&
           (g.blockSize & (g.blockSize - 1)) == 0 && (layer.opType == "MatMul" || layer.opType == "Gemm");
}

// DequantizeLinear nodes of the default domain that need opset 21 (int4, uint4, int16 or block_size).
bool needsNewTypesOpset(QdqGraph& graph)
{
    for (const onnx::NodeProto& node : graph.proto().node()) {
        if (!node.domain().empty() || node.op_type() != "DequantizeLinear")
            continue;
        const auto type = quantizedElementType(graph, node);
        if (intAttribute(node, "block_size", 0) > 0 || type == kOnnxInt4 || type == kOnnxUInt4 ||
            type == onnx::TensorProto::INT16)
            return true;
    }
    return false;
}

// expectMatMulNBits: the opset is chosen as if the weights takesMatMulNBits()
// accepts were not DequantizeLinear (so an LLM's file keeps the source's opset);
// throws NewTypesOpsetNeeded when one of them stays one.
std::string buildQdqModel(const Model& model, const QdqExportRequest& request, const OnnxExportOptions& options,
                          OnnxExportSummary& summary, bool expectMatMulNBits)
{
    summary = {};
    if (request.weights.empty() && request.activations.empty())
        throw Error("ONNX export: no layer of " + model.sourcePath.filename().string() + " is quantized (" +
                    (model.layers.empty() ? std::string("the model has no quantizable layer; see the load warnings")
                                          : "no rule quantizes a weight or a static activation of its " +
                                                std::to_string(model.layers.size()) + " layers") +
                    "); a QDQ model would be a float copy, so nothing was written");
    onnx::ModelProto proto = readSource(model);
    summary.sourceOpset = defaultOpsetOf(proto);

    int64_t needed = 0;
    for (const QdqWeight& w : request.weights) {
        const auto opset = onnxCodeType(w.params.qtype, layerLabel(model, w.layer)).second;
        const WeightGrouping g = groupingOf(model, w);
        if (expectMatMulNBits && takesMatMulNBits(model, w, g))
            continue;
        needed = std::max(needed, opset);
        if (g.blockSize > 0)
            needed = std::max(needed, kNewTypesOpset);
    }
    for (const QdqActivation& a : request.activations)
        needed = std::max(needed, onnxCodeType(a.qtype, layerLabel(model, a.layer) + "'s input activation").second);
    const int64_t target = options.opset.value_or(std::max(summary.sourceOpset, needed));
    if (target < needed)
        throw Error("ONNX export: opset " + std::to_string(target) + " was asked for, but the quantized types need " +
                    std::to_string(needed));
    raiseOpset(proto, target);
    summary.opset = target;
    if (!request.dynamicActivations.empty())
        summary.warnings.push_back(std::to_string(request.dynamicActivations.size()) +
                                   " dynamically quantized activation(s) are left float in the QDQ model; the "
                                   "runtime's dynamic quantization quantizes them");
    summary.dynamicActivations = request.dynamicActivations;

    QdqGraph graph(*proto.mutable_graph());
    {
        ScopeGraphs scopes(*proto.mutable_graph(), model);
        quantizeWeights(model, request, graph, scopes, summary);
        quantizeActivations(model, request, graph, scopes, summary);
        // Subgraphs get the 8-bit form too, before the main graph's sort moves them.
        for (auto& [scope, body] : scopes.all()) {
            body->sortTopologically();
            if (options.eightBitForm == EightBitForm::Unsigned) {
                PassReport r = useUnsignedEightBit(*body);
                r.pass += " (" + model.scopePath(scope) + ")";
                summary.passes.push_back(std::move(r));
            }
        }
    }
    graph.sortTopologically();
    // Before the passes, while every quantization still has its zero point (they drop zeros).
    summary.eightBitForm = options.eightBitForm;
    if (options.eightBitForm == EightBitForm::Unsigned)
        summary.passes.push_back(useUnsignedEightBit(graph));
    if (options.runPasses)
        for (PassReport& r : runQdqPasses(graph))
            summary.passes.push_back(std::move(r));
    summary.int4Form = options.int4Form;
    if (options.int4Form == Int4Form::MatMulNBits) {
        writeMatMulNBits(model, request, proto, graph, summary);
        if (expectMatMulNBits && target < kNewTypesOpset && needsNewTypesOpset(graph))
            throw NewTypesOpsetNeeded{};
    }
    graph.sortTopologically();
    summary.signedEightBit = countSignedEightBit(graph);
    if (summary.signedEightBit > 0)
        summary.warnings.push_back(
            std::to_string(summary.signedEightBit) +
            " int8 quantization(s) are written as int8: ONNX Runtime's u8s8/s8s8 integer kernels saturate on x86 "
            "CPUs with AVX2 but without VNNI, where the deployed model can be far worse than the simulation" +
            std::string(options.eightBitForm == EightBitForm::Unsigned
                            ? " (these could not be rewritten as uint8: a weight read by several nodes, or a "
                              "quantized graph output)"
                            : "; the 'unsigned' form avoids it"));
    summary.irVersion = proto.ir_version();

    if (options.runChecker && target <= libonnxNewestOpset())
        check(proto, summary);
    else if (options.runChecker)
        summary.warnings.push_back("libonnx knows opsets up to " + std::to_string(libonnxNewestOpset()) +
                                   "; the opset-" + std::to_string(target) + " model was not checked by onnx::checker");
    std::string bytes;
    if (proto.ByteSizeLong() > kMaxProtobufBytes || !proto.SerializeToString(&bytes))
        throw Error("ONNX export: the QDQ model is larger than protobuf's 2 GiB; it cannot be written as one file");
    return bytes;
}

} // namespace

std::string buildOnnxQdq(const Model& model, const QdqExportRequest& request, const OnnxExportOptions& options,
                         OnnxExportSummary& summary)
{
    if (options.int4Form == Int4Form::MatMulNBits) {
        try {
            return buildQdqModel(model, request, options, summary, true);
        } catch (const NewTypesOpsetNeeded&) {
            // a layer kept its int4 DequantizeLinear: build again at the opset the types need
        }
    }
    return buildQdqModel(model, request, options, summary, false);
}

OnnxExportSummary exportOnnxQdq(const Model& model, const QdqExportRequest& request, const std::filesystem::path& out,
                                const OnnxExportOptions& options)
{
    OnnxExportSummary summary;
    const std::string bytes = buildOnnxQdq(model, request, options, summary);
    writeFileAtomically(out, bytes.data(), bytes.size());
    return summary;
}

OnnxExportSummary exportOnnxQdq(const Model& model, const QuantizationPlan& plan, const WeightQuantizer& weights,
                                const std::map<size_t, StaticActivation>& staticActivations,
                                const std::filesystem::path& out, const OnnxExportOptions& options)
{
    return exportOnnxQdq(model, qdqRequestFromPlan(model, plan, weights, staticActivations), out, options);
}

} // namespace qs
