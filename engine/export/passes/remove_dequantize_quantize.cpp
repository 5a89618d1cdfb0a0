#include "export/passes/remove_dequantize_quantize.h"

#include <map>

namespace qs {

PassReport removeDequantizeQuantizePairs(QdqGraph& graph)
{
    PassReport report{"remove_dequantize_quantize_pairs", 0, {}};
    std::map<std::string, std::string> rename; // removed Q output -> the integer value it equals
    std::vector<int> removed;
    for (int i = 0; i < graph.proto().node_size(); ++i) {
        const onnx::NodeProto& q = graph.proto().node(i);
        if (q.op_type() != "QuantizeLinear" || !q.domain().empty() || q.input_size() < 2 ||
            graph.isGraphOutput(q.output(0)))
            continue;
        // Readers inside a subgraph would need renaming there too: leave such a Q alone.
        bool subgraphReader = false;
        for (int r : graph.consumers(q.output(0)))
            for (const auto& a : graph.proto().node(r).attribute())
                subgraphReader |= a.has_g() || a.graphs_size() > 0;
        const auto p = graph.producer(q.input(0));
        if (!p || subgraphReader)
            continue;
        const onnx::NodeProto& dq = graph.proto().node(*p);
        if (dq.op_type() != "DequantizeLinear" || !dq.domain().empty())
            continue;
        const auto qParams = constantQdqParams(graph, q), dqParams = constantQdqParams(graph, dq);
        const auto qType = quantizedElementType(graph, q), dqType = quantizedElementType(graph, dq);
        if (!qParams || !dqParams || !qType || !dqType || !sameQuantization(*dqParams, *dqType, *qParams, *qType))
            continue;
        rename[q.output(0)] = dq.input(0);
        removed.push_back(i);
        report.nodes.push_back(q.name());
    }
    if (removed.empty())
        return report;
    // The integer value may itself be a removed pair's output (DQ→Q→DQ→Q chains): follow to the end.
    auto target = [&](std::string v) {
        for (auto it = rename.find(v); it != rename.end(); it = rename.find(v))
            v = it->second;
        return v;
    };
    for (auto& node : *graph.proto().mutable_node())
        for (auto& in : *node.mutable_input())
            if (rename.contains(in))
                in = target(in);
    report.changes = int64_t(removed.size());
    graph.removeNodes(removed);
    return report;
}

} // namespace qs
