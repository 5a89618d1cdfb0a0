#include "export/passes/canonicalize_zero_points.h"

#include <algorithm>

namespace qs {

namespace {

bool allEqual(const IntegerTensor& t, int32_t v)
{
    return std::all_of(t.values.begin(), t.values.end(), [v](int32_t x) { return x == v; });
}

bool isQdq(const onnx::NodeProto& node, const char* op)
{
    return node.op_type() == op && node.domain().empty();
}

IntegerTensor shiftedToUInt8(IntegerTensor t)
{
    t.elementType = onnx::TensorProto::UINT8;
    for (int32_t& v : t.values)
        v += 128;
    return t;
}

// An int8 quantization → uint8 with codes and zero point + 128 (the same
// values): every one (`anyZeroPoint`), or those whose zero points are all −128.
// Returns whether anything changed.
bool shiftSigned(QdqGraph& graph, int i, bool anyZeroPoint, PassReport& report)
{
    const onnx::NodeProto& node = graph.proto().node(i);
    const auto params = constantQdqParams(graph, node);
    if (!params || !params->zeroPoint || params->zeroPoint->elementType != onnx::TensorProto::INT8 ||
        (!anyZeroPoint && !allEqual(*params->zeroPoint, -128)))
        return false;
    IntegerTensor zero = shiftedToUInt8(*params->zeroPoint);
    if (isQdq(node, "DequantizeLinear")) {
        const std::string x = node.input(0);
        const onnx::TensorProto* codes = graph.initializer(x);
        if (!codes || graph.consumers(x).size() != 1 || graph.isGraphOutput(x))
            return false;
        const auto values = readIntegerTensor(*codes);
        if (!values)
            return false;
        const std::string codesName = graph.uniqueName(x + "_uint8"), zpName = graph.uniqueName(x + "_zero_point");
        graph.addInitializer(integerTensorProto(codesName, shiftedToUInt8(*values)));
        graph.addInitializer(integerTensorProto(zpName, zero));
        onnx::NodeProto& dq = *graph.proto().mutable_node(i);
        dq.set_input(0, codesName);
        dq.set_input(2, zpName);
    } else {
        const std::string y = node.output(0);
        if (graph.isGraphOutput(y))
            return false;
        for (int c : graph.consumers(y)) {
            const onnx::NodeProto& reader = graph.proto().node(c);
            if (!isQdq(reader, "DequantizeLinear") || reader.input(0) != y || reader.input_size() < 3)
                return false;
            const auto readerParams = constantQdqParams(graph, reader);
            if (!readerParams || !readerParams->zeroPoint ||
                readerParams->zeroPoint->elementType != onnx::TensorProto::INT8 ||
                readerParams->zeroPoint->values != params->zeroPoint->values)
                return false;
        }
        const std::string zpName = graph.uniqueName(params->zeroPointName + "_uint8");
        graph.addInitializer(integerTensorProto(zpName, zero));
        const std::vector<int> readers = graph.consumers(y);
        graph.proto().mutable_node(i)->set_input(2, zpName);
        for (int c : readers) {
            graph.proto().mutable_node(c)->set_input(2, zpName);
            report.nodes.push_back(graph.proto().node(c).name());
        }
    }
    report.nodes.push_back(graph.proto().node(i).name());
    return true;
}

// Drops an all-zero zero point where the type stays the same.
bool dropZero(QdqGraph& graph, int i, PassReport& report)
{
    const onnx::NodeProto& node = graph.proto().node(i);
    if (node.input_size() < 3 || node.input(2).empty())
        return false;
    const auto params = constantQdqParams(graph, node);
    if (!params || !params->zeroPoint || !allEqual(*params->zeroPoint, 0))
        return false;
    // QuantizeLinear keeps its zero point: ONNX would allow dropping a uint8 0, but
    // ONNX Runtime 1.30's QDQ optimizer then duplicates node names and refuses the model.
    if (isQdq(node, "QuantizeLinear"))
        return false;
    // A DequantizeLinear without a zero point takes its type from the input, which a 0 cannot change.
    graph.proto().mutable_node(i)->mutable_input()->RemoveLast();
    report.nodes.push_back(node.name());
    return true;
}

} // namespace

PassReport useUnsignedEightBit(QdqGraph& graph)
{
    PassReport report{"use_unsigned_eight_bit", 0, {}};
    for (int i = 0; i < graph.proto().node_size(); ++i) {
        const onnx::NodeProto& node = graph.proto().node(i);
        if ((isQdq(node, "QuantizeLinear") || isQdq(node, "DequantizeLinear")) && shiftSigned(graph, i, true, report)) {
            ++report.changes;
            graph.reindex();
        }
    }
    return report;
}

PassReport canonicalizeZeroPoints(QdqGraph& graph)
{
    PassReport report{"canonicalize_zero_points", 0, {}};
    for (int i = 0; i < graph.proto().node_size(); ++i) {
        const onnx::NodeProto& node = graph.proto().node(i);
        if (!isQdq(node, "QuantizeLinear") && !isQdq(node, "DequantizeLinear"))
            continue;
        if (shiftSigned(graph, i, false, report)) {
            ++report.changes;
            graph.reindex();
        }
    }
    for (int i = 0; i < graph.proto().node_size(); ++i) {
        const onnx::NodeProto& node = graph.proto().node(i);
        if ((isQdq(node, "QuantizeLinear") || isQdq(node, "DequantizeLinear")) && dropZero(graph, i, report))
            ++report.changes;
    }
    graph.reindex();
    return report;
}

} // namespace qs
