#include "export/passes/fold_dequantize_through_layout.h"

#include <algorithm>
#include <numeric>

namespace qs {

namespace {

// Where the layout op sends the input: output dims, and for every output
// element the input element it copies (row-major). None when the op's
// parameters are not constants or do not fit the input.
struct LayoutResult {
    Shape dims;
    std::vector<int64_t> source; // empty: elements keep their order (Reshape, Squeeze, Unsqueeze)
    std::optional<int> axis;     // where the quantization axis went; none when it cannot be followed
};

std::optional<std::vector<int64_t>> constantInts(QdqGraph& graph, const onnx::NodeProto& node, const char* attribute,
                                                 int input)
{
    if (const auto* a = findAttribute(node, attribute))
        return std::vector<int64_t>(a->ints().begin(), a->ints().end());
    if (node.input_size() > input && !node.input(input).empty())
        if (const onnx::TensorProto* t = graph.initializer(node.input(input)))
            return readInt64Tensor(*t);
    return std::nullopt;
}

std::optional<LayoutResult> transpose(const onnx::NodeProto& node, const Shape& in, std::optional<int> axis)
{
    const int rank = int(in.size());
    std::vector<int64_t> perm(static_cast<size_t>(rank));
    if (const auto* a = findAttribute(node, "perm"))
        perm.assign(a->ints().begin(), a->ints().end());
    else
        for (int i = 0; i < rank; ++i)
            perm[size_t(i)] = rank - 1 - i;
    std::vector<int64_t> sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int64_t> identity(static_cast<size_t>(rank));
    std::iota(identity.begin(), identity.end(), 0);
    if (sorted != identity)
        return std::nullopt;
    LayoutResult r;
    for (int i = 0; i < rank; ++i)
        r.dims.push_back(in[size_t(perm[size_t(i)])]);
    const Shape inStrides = rowMajorStrides(in);
    const int64_t n = shapeElementCount(in);
    r.source.resize(static_cast<size_t>(n));
    std::vector<int64_t> index(size_t(rank), 0);
    for (int64_t flat = 0; flat < n; ++flat) {
        int64_t src = 0;
        for (int i = 0; i < rank; ++i)
            src += index[size_t(i)] * inStrides[size_t(perm[size_t(i)])];
        r.source[size_t(flat)] = src;
        for (int i = rank - 1; i >= 0; --i) {
            if (++index[size_t(i)] < r.dims[size_t(i)])
                break;
            index[size_t(i)] = 0;
        }
    }
    if (axis)
        for (int i = 0; i < rank; ++i)
            if (perm[size_t(i)] == *axis)
                r.axis = i;
    return r;
}

// The output axis holding the input axis `axis` after a reshape: same length and
// the same number of elements before it.
std::optional<int> followReshape(const Shape& in, const Shape& out, int axis)
{
    const int64_t before = std::accumulate(in.begin(), in.begin() + axis, int64_t(1), std::multiplies<>());
    int64_t prefix = 1;
    for (size_t j = 0; j < out.size(); ++j) {
        if (prefix == before && out[j] == in[size_t(axis)])
            return int(j);
        prefix *= out[j];
    }
    return std::nullopt;
}

std::optional<LayoutResult> reshapeLike(QdqGraph& graph, const onnx::NodeProto& node, const Shape& in,
                                        std::optional<int> axis)
{
    const int64_t n = shapeElementCount(in);
    LayoutResult r;
    const int rank = int(in.size());
    if (node.op_type() == "Reshape") {
        const auto shape = constantInts(graph, node, "", 1);
        if (!shape)
            return std::nullopt;
        const bool allowZero = intAttribute(node, "allowzero", 0) != 0;
        int64_t known = 1;
        int inferred = -1;
        for (size_t i = 0; i < shape->size(); ++i) {
            int64_t d = (*shape)[i];
            if (d == 0 && !allowZero) {
                if (int(i) >= rank)
                    return std::nullopt;
                d = in[i];
            }
            if (d == -1) {
                if (inferred >= 0)
                    return std::nullopt;
                inferred = int(i);
            } else if (d < 0)
                return std::nullopt;
            else
                known *= d;
            r.dims.push_back(d);
        }
        if (inferred >= 0) {
            if (known == 0 || n % known != 0)
                return std::nullopt;
            r.dims[size_t(inferred)] = n / known;
        }
    } else {
        const bool squeeze = node.op_type() == "Squeeze";
        auto axes = constantInts(graph, node, "axes", 1);
        if (!axes && !squeeze)
            return std::nullopt;
        const int outRank = squeeze ? rank : rank + int(axes->size());
        std::vector<bool> marked(size_t(outRank), false);
        if (axes)
            for (int64_t a : *axes) {
                const int64_t normal = a < 0 ? a + (squeeze ? rank : outRank) : a;
                if (normal < 0 || normal >= (squeeze ? rank : outRank))
                    return std::nullopt;
                marked[size_t(normal)] = true;
            }
        if (squeeze) {
            for (int i = 0; i < rank; ++i) {
                const bool drop = axes ? bool(marked[size_t(i)]) : in[size_t(i)] == 1;
                if (drop && in[size_t(i)] != 1)
                    return std::nullopt;
                if (!drop)
                    r.dims.push_back(in[size_t(i)]);
            }
        } else {
            size_t next = 0;
            for (int i = 0; i < outRank; ++i)
                r.dims.push_back(marked[size_t(i)] ? 1 : in[next++]);
        }
    }
    if (shapeElementCount(r.dims) != n)
        return std::nullopt;
    if (axis)
        r.axis = followReshape(in, r.dims, *axis);
    return r;
}

bool isLayoutOp(const onnx::NodeProto& node)
{
    const std::string& op = node.op_type();
    return node.domain().empty() && (op == "Transpose" || op == "Reshape" || op == "Squeeze" || op == "Unsqueeze");
}

} // namespace

PassReport foldDequantizeThroughLayout(QdqGraph& graph)
{
    PassReport report{"fold_dequantize_through_layout", 0, {}};
    for (int i = 0; i < graph.proto().node_size(); ++i) {
        const onnx::NodeProto dq = graph.proto().node(i);
        if (dq.op_type() != "DequantizeLinear" || !dq.domain().empty() || graph.isGraphOutput(dq.output(0)))
            continue;
        const onnx::TensorProto* codesProto = graph.initializer(dq.input(0));
        const auto& readers = graph.consumers(dq.output(0));
        if (!codesProto || readers.size() != 1)
            continue;
        const onnx::NodeProto layout = graph.proto().node(readers[0]);
        if (!isLayoutOp(layout) || layout.input(0) != dq.output(0))
            continue;
        const auto params = constantQdqParams(graph, dq);
        auto codes = readIntegerTensor(*codesProto);
        if (!params || params->blockSize != 0 || !codes)
            continue;
        std::optional<int> axis;
        const int rank = int(codes->dims.size());
        if (!params->perTensor()) {
            const int64_t a = params->axis < 0 ? params->axis + rank : params->axis;
            if (a < 0 || a >= rank)
                continue;
            axis = int(a);
        }
        const auto result = layout.op_type() == "Transpose" ? transpose(layout, codes->dims, axis)
                                                            : reshapeLike(graph, layout, codes->dims, axis);
        if (!result || (axis && !result->axis))
            continue;

        IntegerTensor moved{codes->elementType, result->dims, {}};
        if (result->source.empty())
            moved.values = std::move(codes->values);
        else {
            moved.values.resize(result->source.size());
            for (size_t k = 0; k < result->source.size(); ++k)
                moved.values[k] = codes->values[size_t(result->source[k])];
        }
        const std::string codesName = graph.uniqueName(dq.input(0) + "_" + layout.op_type());
        graph.addInitializer(integerTensorProto(codesName, moved));
        onnx::NodeProto folded = dq;
        folded.set_name(graph.uniqueName(dq.name() + "_" + layout.op_type()));
        folded.set_input(0, codesName);
        folded.set_output(0, layout.output(0));
        if (axis)
            setIntAttribute(folded, "axis", *result->axis);
        *graph.proto().add_node() = std::move(folded);
        report.nodes.push_back(layout.name());
        ++report.changes;
        graph.removeNodes({i, readers[0]});
        graph.sortTopologically();
        i = -1; // the nodes were reordered: look again from the start
    }
    return report;
}

} // namespace qs
