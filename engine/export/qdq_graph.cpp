#include "export/qdq_graph.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>

#include "core/error.h"

namespace qs {

namespace {

// Every value `node` reads: its inputs, and those of the nodes of its
// subgraphs, nested ones included (outer-scope reads).
template <typename F> void forEachRead(const onnx::NodeProto& node, F&& read)
{
    for (const auto& in : node.input())
        read(in);
    for (const auto& a : node.attribute()) {
        if (a.has_g())
            for (const auto& inner : a.g().node())
                forEachRead(inner, read);
        for (const auto& g : a.graphs())
            for (const auto& inner : g.node())
                forEachRead(inner, read);
    }
}

} // namespace

QdqGraph::QdqGraph(onnx::GraphProto& graph) : graph_(graph)
{
    reindex();
}

void QdqGraph::reindex()
{
    producer_.clear();
    consumers_.clear();
    initializers_.clear();
    inputs_.clear();
    outputs_.clear();
    names_.clear();
    for (int i = 0; i < graph_.node_size(); ++i) {
        const onnx::NodeProto& node = graph_.node(i);
        names_.insert(node.name());
        for (const auto& out : node.output())
            if (!out.empty()) {
                producer_[out] = i;
                names_.insert(out);
            }
        auto read = [&](const std::string& in) {
            if (in.empty())
                return;
            auto& list = consumers_[in];
            if (list.empty() || list.back() != i)
                list.push_back(i);
        };
        // A subgraph (If, Loop, Scan) may read outer values directly: they count as read by its node.
        forEachRead(node, read);
    }
    for (int i = 0; i < graph_.initializer_size(); ++i) {
        initializers_[graph_.initializer(i).name()] = i;
        names_.insert(graph_.initializer(i).name());
    }
    for (const auto& v : graph_.input()) {
        inputs_.insert(v.name());
        names_.insert(v.name());
    }
    for (const auto& v : graph_.output()) {
        outputs_.insert(v.name());
        names_.insert(v.name());
    }
    for (const auto& v : graph_.value_info())
        names_.insert(v.name());
}

void QdqGraph::sortTopologically()
{
    reindex();
    const int n = graph_.node_size();
    std::vector<int> pending(size_t(n), 0);
    std::vector<std::vector<int>> readers(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
        auto read = [&](const std::string& in) {
            if (const auto p = producer(in); p && *p != i) {
                ++pending[size_t(i)];
                readers[size_t(*p)].push_back(i);
            }
        };
        // A subgraph's outer-scope reads (a weight dequantized outside a Loop body) order its node too.
        forEachRead(graph_.node(i), read);
    }
    // Always take the lowest ready index, so an already ordered graph keeps its order.
    std::vector<int> ready;
    for (int i = 0; i < n; ++i)
        if (pending[size_t(i)] == 0)
            ready.push_back(i);
    std::vector<int> order;
    while (!ready.empty()) {
        std::pop_heap(ready.begin(), ready.end(), std::greater<>());
        const int i = ready.back();
        ready.pop_back();
        order.push_back(i);
        for (int r : readers[size_t(i)])
            if (--pending[size_t(r)] == 0) {
                ready.push_back(r);
                std::push_heap(ready.begin(), ready.end(), std::greater<>());
            }
    }
    if (int(order.size()) != n)
        throw Error("ONNX export: the rewritten graph has a cycle");
    google::protobuf::RepeatedPtrField<onnx::NodeProto> sorted;
    for (int i : order)
        *sorted.Add() = std::move(*graph_.mutable_node(i));
    graph_.mutable_node()->Swap(&sorted);
    reindex();
}

std::optional<int> QdqGraph::producer(const std::string& value) const
{
    const auto it = producer_.find(value);
    return it == producer_.end() ? std::nullopt : std::optional<int>(it->second);
}

const std::vector<int>& QdqGraph::consumers(const std::string& value) const
{
    static const std::vector<int> kNone;
    const auto it = consumers_.find(value);
    return it == consumers_.end() ? kNone : it->second;
}

onnx::TensorProto* QdqGraph::initializer(const std::string& name)
{
    const auto it = initializers_.find(name);
    return it == initializers_.end() ? nullptr : graph_.mutable_initializer(it->second);
}

void QdqGraph::addInitializer(onnx::TensorProto tensor)
{
    if (initializers_.contains(tensor.name()))
        throw Error("ONNX export: initializer '" + tensor.name() + "' is defined twice");
    initializers_[tensor.name()] = graph_.initializer_size();
    names_.insert(tensor.name());
    *graph_.add_initializer() = std::move(tensor);
}

std::vector<std::string> QdqGraph::removeUnusedInitializers()
{
    std::vector<std::string> removed;
    google::protobuf::RepeatedPtrField<onnx::TensorProto> kept;
    for (auto& t : *graph_.mutable_initializer()) {
        if (consumers(t.name()).empty() && !isGraphOutput(t.name()))
            removed.push_back(t.name());
        else
            *kept.Add() = std::move(t);
    }
    graph_.mutable_initializer()->Swap(&kept);
    if (!removed.empty()) {
        // An initializer listed as a graph input (IR < 4 style) goes with it.
        const std::unordered_set<std::string> gone(removed.begin(), removed.end());
        google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> inputs;
        for (auto& v : *graph_.mutable_input())
            if (!gone.contains(v.name()))
                *inputs.Add() = std::move(v);
        graph_.mutable_input()->Swap(&inputs);
    }
    reindex();
    return removed;
}

std::string QdqGraph::uniqueName(const std::string& base)
{
    std::string name = base;
    for (int i = 1; names_.contains(name); ++i)
        name = base + "_" + std::to_string(i);
    names_.insert(name);
    return name;
}

void QdqGraph::removeNodes(std::vector<int> indices)
{
    std::sort(indices.begin(), indices.end());
    indices.erase(std::unique(indices.begin(), indices.end()), indices.end());
    google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
    size_t next = 0;
    for (int i = 0; i < graph_.node_size(); ++i) {
        if (next < indices.size() && indices[next] == i) {
            ++next;
            continue;
        }
        *kept.Add() = std::move(*graph_.mutable_node(i));
    }
    graph_.mutable_node()->Swap(&kept);
    reindex();
}

const onnx::AttributeProto* findAttribute(const onnx::NodeProto& node, std::string_view name)
{
    for (const auto& a : node.attribute())
        if (a.name() == name)
            return &a;
    return nullptr;
}

int64_t intAttribute(const onnx::NodeProto& node, std::string_view name, int64_t fallback)
{
    const auto* a = findAttribute(node, name);
    return a ? a->i() : fallback;
}

void setIntAttribute(onnx::NodeProto& node, const std::string& name, int64_t value)
{
    for (auto& a : *node.mutable_attribute())
        if (a.name() == name) {
            a.set_i(value);
            return;
        }
    auto* a = node.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(value);
}

void removeAttribute(onnx::NodeProto& node, std::string_view name)
{
    auto* attrs = node.mutable_attribute();
    for (int i = 0; i < attrs->size(); ++i)
        if (attrs->Get(i).name() == name) {
            attrs->DeleteSubrange(i, 1);
            return;
        }
}

std::optional<std::pair<int32_t, int32_t>> integerElementRange(int32_t elementType)
{
    switch (elementType) {
    case onnx::TensorProto::INT8:
        return std::pair{-128, 127};
    case onnx::TensorProto::UINT8:
        return std::pair{0, 255};
    case onnx::TensorProto::INT16:
        return std::pair{-32768, 32767};
    case onnx::TensorProto::UINT16:
        return std::pair{0, 65535};
    case onnx::TensorProto::INT32:
        return std::pair{std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    case kOnnxInt4:
        return std::pair{-8, 7};
    case kOnnxUInt4:
        return std::pair{0, 15};
    default:
        return std::nullopt;
    }
}

Shape tensorDims(const onnx::TensorProto& proto)
{
    return Shape(proto.dims().begin(), proto.dims().end());
}

namespace {

size_t elementBits(int32_t elementType)
{
    switch (elementType) {
    case onnx::TensorProto::INT8:
    case onnx::TensorProto::UINT8:
        return 8;
    case onnx::TensorProto::INT16:
    case onnx::TensorProto::UINT16:
        return 16;
    case kOnnxInt4:
    case kOnnxUInt4:
        return 4;
    default:
        return 32;
    }
}

bool hasExternalData(const onnx::TensorProto& proto)
{
    return proto.data_location() == onnx::TensorProto::EXTERNAL;
}

} // namespace

std::optional<IntegerTensor> readIntegerTensor(const onnx::TensorProto& proto)
{
    if (!integerElementRange(proto.data_type()) || hasExternalData(proto))
        return std::nullopt;
    IntegerTensor t;
    t.elementType = proto.data_type();
    t.dims = tensorDims(proto);
    const int64_t n = shapeElementCount(t.dims);
    if (n < 0)
        return std::nullopt;
    t.values.resize(static_cast<size_t>(n));
    const size_t bits = elementBits(t.elementType);
    if (proto.has_raw_data()) {
        const std::string& raw = proto.raw_data();
        if (raw.size() != (size_t(n) * bits + 7) / 8)
            return std::nullopt;
        const auto* bytes = reinterpret_cast<const uint8_t*>(raw.data());
        for (size_t i = 0; i < size_t(n); ++i) {
            int32_t v = 0;
            switch (t.elementType) {
            case onnx::TensorProto::INT8:
                v = int8_t(bytes[i]);
                break;
            case onnx::TensorProto::UINT8:
                v = bytes[i];
                break;
            case onnx::TensorProto::INT16:
            case onnx::TensorProto::UINT16: {
                uint16_t u;
                std::memcpy(&u, bytes + 2 * i, 2);
                v = t.elementType == onnx::TensorProto::INT16 ? int32_t(int16_t(u)) : int32_t(u);
                break;
            }
            case onnx::TensorProto::INT32:
                std::memcpy(&v, bytes + 4 * i, 4);
                break;
            default: { // 4-bit, low nibble first
                const int nibble = (bytes[i / 2] >> (4 * (i % 2))) & 0xf;
                v = t.elementType == kOnnxInt4 && nibble >= 8 ? nibble - 16 : nibble;
            }
            }
            t.values[i] = v;
        }
        return t;
    }
    // Typed storage: int32_data holds every narrow integer type, 4-bit types two per entry.
    const auto& data = proto.int32_data();
    if (bits == 4) {
        if (size_t(data.size()) != (size_t(n) + 1) / 2)
            return std::nullopt;
        for (size_t i = 0; i < size_t(n); ++i) {
            const int nibble = (data.Get(int(i / 2)) >> (4 * (i % 2))) & 0xf;
            t.values[i] = t.elementType == kOnnxInt4 && nibble >= 8 ? nibble - 16 : nibble;
        }
        return t;
    }
    if (data.size() != n)
        return std::nullopt;
    std::copy(data.begin(), data.end(), t.values.begin());
    return t;
}

namespace {

// The values of an inline tensor of element type `type`, from raw_data or from
// its typed field; none for another type, external data or a size mismatch.
template <typename T, typename Repeated>
std::optional<std::vector<T>> readInlineTensor(const onnx::TensorProto& proto, int type, const Repeated& typed)
{
    if (proto.data_type() != type || hasExternalData(proto))
        return std::nullopt;
    const int64_t n = shapeElementCount(tensorDims(proto));
    std::vector<T> values(size_t(std::max<int64_t>(n, 0)));
    if (proto.has_raw_data()) {
        if (proto.raw_data().size() != values.size() * sizeof(T))
            return std::nullopt;
        std::memcpy(values.data(), proto.raw_data().data(), proto.raw_data().size());
    } else {
        if (size_t(typed.size()) != values.size())
            return std::nullopt;
        std::copy(typed.begin(), typed.end(), values.begin());
    }
    return values;
}

} // namespace

std::optional<std::vector<float>> readFloatTensor(const onnx::TensorProto& proto)
{
    return readInlineTensor<float>(proto, onnx::TensorProto::FLOAT, proto.float_data());
}

std::optional<std::vector<int64_t>> readInt64Tensor(const onnx::TensorProto& proto)
{
    return readInlineTensor<int64_t>(proto, onnx::TensorProto::INT64, proto.int64_data());
}

onnx::TensorProto integerTensorProto(const std::string& name, const IntegerTensor& tensor)
{
    const auto range = integerElementRange(tensor.elementType);
    if (!range)
        throw Error("ONNX export: tensor '" + name + "': element type " + std::to_string(tensor.elementType) +
                    " is not an integer type");
    onnx::TensorProto proto;
    proto.set_name(name);
    proto.set_data_type(tensor.elementType);
    for (int64_t d : tensor.dims)
        proto.add_dims(d);
    const size_t bits = elementBits(tensor.elementType);
    std::string raw((tensor.values.size() * bits + 7) / 8, '\0');
    auto* bytes = reinterpret_cast<uint8_t*>(raw.data());
    for (size_t i = 0; i < tensor.values.size(); ++i) {
        const int32_t v = tensor.values[i];
        if (v < range->first || v > range->second)
            throw Error("ONNX export: tensor '" + name + "': value " + std::to_string(v) + " at index " +
                        std::to_string(i) + " is outside the range of its element type");
        if (bits == 4)
            bytes[i / 2] = uint8_t(bytes[i / 2] | ((uint32_t(v) & 0xf) << (4 * (i % 2))));
        else if (bits == 8)
            bytes[i] = uint8_t(v);
        else if (bits == 16) {
            const uint16_t u = uint16_t(v);
            std::memcpy(bytes + 2 * i, &u, 2);
        } else
            std::memcpy(bytes + 4 * i, &v, 4);
    }
    proto.set_raw_data(std::move(raw));
    return proto;
}

namespace {

// An initializer of `dims` holding `values` as raw little-endian data.
template <typename T>
onnx::TensorProto plainTensorProto(const std::string& name, int type, const Shape& dims, const std::vector<T>& values)
{
    onnx::TensorProto proto;
    proto.set_name(name);
    proto.set_data_type(type);
    for (int64_t d : dims)
        proto.add_dims(d);
    proto.set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T)));
    return proto;
}

} // namespace

onnx::TensorProto floatTensorProto(const std::string& name, const Shape& dims, const std::vector<float>& values)
{
    return plainTensorProto(name, onnx::TensorProto::FLOAT, dims, values);
}

onnx::TensorProto int64TensorProto(const std::string& name, const Shape& dims, const std::vector<int64_t>& values)
{
    return plainTensorProto(name, onnx::TensorProto::INT64, dims, values);
}

std::optional<QdqParams> constantQdqParams(QdqGraph& graph, const onnx::NodeProto& node)
{
    if (node.input_size() < 2)
        return std::nullopt;
    QdqParams p;
    p.scaleName = node.input(1);
    const onnx::TensorProto* scale = graph.initializer(p.scaleName);
    if (!scale)
        return std::nullopt;
    auto scales = readFloatTensor(*scale);
    if (!scales)
        return std::nullopt;
    p.scales = std::move(*scales);
    p.scaleDims = tensorDims(*scale);
    if (node.input_size() > 2 && !node.input(2).empty()) {
        p.zeroPointName = node.input(2);
        const onnx::TensorProto* zp = graph.initializer(p.zeroPointName);
        if (!zp || !(p.zeroPoint = readIntegerTensor(*zp)))
            return std::nullopt;
    }
    p.axis = intAttribute(node, "axis", 1);
    p.blockSize = intAttribute(node, "block_size", 0);
    return p;
}

std::optional<int32_t> quantizedElementType(QdqGraph& graph, const onnx::NodeProto& node)
{
    if (node.input_size() > 2 && !node.input(2).empty()) {
        if (const onnx::TensorProto* zp = graph.initializer(node.input(2)))
            return zp->data_type();
        return std::nullopt;
    }
    if (node.op_type() == "QuantizeLinear")
        return int32_t(onnx::TensorProto::UINT8);
    const std::string& x = node.input(0);
    if (const onnx::TensorProto* t = graph.initializer(x))
        return t->data_type();
    if (const auto p = graph.producer(x); p && graph.proto().node(*p).op_type() == "QuantizeLinear")
        return quantizedElementType(graph, graph.proto().node(*p));
    for (const auto& v : graph.proto().value_info())
        if (v.name() == x && v.type().has_tensor_type())
            return v.type().tensor_type().elem_type();
    return std::nullopt;
}

bool sameQuantization(const QdqParams& a, int32_t typeA, const QdqParams& b, int32_t typeB)
{
    if (typeA != typeB || a.scales != b.scales || a.scaleDims.size() != b.scaleDims.size())
        return false;
    auto zeroPoints = [](const QdqParams& p) {
        return p.zeroPoint ? p.zeroPoint->values : std::vector<int32_t>(p.scales.size(), 0);
    };
    if (zeroPoints(a) != zeroPoints(b))
        return false;
    if (a.perTensor() && b.perTensor())
        return true;
    return a.scaleDims == b.scaleDims && a.axis == b.axis && a.blockSize == b.blockSize;
}

} // namespace qs
