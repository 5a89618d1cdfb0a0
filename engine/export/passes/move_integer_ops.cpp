#include "export/passes/move_integer_ops.h"

#include <set>

namespace qs {

PassReport moveIntegerOps(QdqGraph& graph)
{
    static const std::set<std::string> kMovable = {"Reshape", "Transpose", "Flatten",
                                                   "Squeeze", "Unsqueeze", "Identity"};
    PassReport report{"move_integer_ops", 0, {}};
    for (int i = 0; i < graph.proto().node_size(); ++i) {
        const onnx::NodeProto op = graph.proto().node(i);
        if (!op.domain().empty() || !kMovable.contains(op.op_type()) || op.input_size() < 1 || op.output_size() != 1 ||
            graph.isGraphOutput(op.output(0)))
            continue;
        const auto p = graph.producer(op.input(0));
        if (!p)
            continue;
        const onnx::NodeProto dq = graph.proto().node(*p);
        if (dq.op_type() != "DequantizeLinear" || !dq.domain().empty() || graph.initializer(dq.input(0)))
            continue;
        const auto params = constantQdqParams(graph, dq);
        if (!params || !params->perTensor())
            continue;
        const auto& readers = graph.consumers(op.output(0));
        bool allQuantize = !readers.empty();
        for (int r : readers) {
            const onnx::NodeProto& reader = graph.proto().node(r);
            // A reader that is itself movable lets chains (Reshape → Flatten → Q) move one op at a time.
            allQuantize &= reader.domain().empty() && reader.input(0) == op.output(0) &&
                           (reader.op_type() == "QuantizeLinear" || kMovable.contains(reader.op_type()));
        }
        if (!allQuantize)
            continue;
        onnx::NodeProto moved = op;
        const std::string integers = graph.uniqueName(op.output(0) + "_quantized");
        moved.set_input(0, dq.input(0));
        moved.set_output(0, integers);
        onnx::NodeProto dequantize = dq;
        dequantize.set_name(graph.uniqueName(dq.name() + "_after_" + op.op_type()));
        dequantize.set_input(0, integers);
        dequantize.set_output(0, op.output(0));
        *graph.proto().mutable_node(i) = std::move(moved);
        *graph.proto().add_node() = std::move(dequantize);
        report.nodes.push_back(op.name());
        ++report.changes;
        graph.sortTopologically();
        i = -1; // the nodes were reordered: look again from the start
    }
    return report;
}

} // namespace qs
