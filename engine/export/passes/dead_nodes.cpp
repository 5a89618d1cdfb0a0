#include "export/passes/dead_nodes.h"

namespace qs {

PassReport eliminateDeadNodes(QdqGraph& graph)
{
    PassReport report{"eliminate_dead_nodes", 0, {}};
    for (;;) {
        std::vector<int> dead;
        for (int i = 0; i < graph.proto().node_size(); ++i) {
            const onnx::NodeProto& node = graph.proto().node(i);
            bool used = false;
            for (const auto& out : node.output())
                used |= !out.empty() && (!graph.consumers(out).empty() || graph.isGraphOutput(out));
            if (!used) {
                dead.push_back(i);
                report.nodes.push_back(node.name());
            }
        }
        if (dead.empty())
            break;
        report.changes += int64_t(dead.size());
        graph.removeNodes(dead);
    }
    report.changes += int64_t(graph.removeUnusedInitializers().size());
    return report;
}

} // namespace qs
