#pragma once
// Dead-node elimination: removes nodes none of whose outputs is read by a node
// (or a subgraph) or is a graph output, repeatedly, then the initializers
// nothing reads any more. The clean-up after every other pass.

#include "export/qdq_graph.h"

namespace qs {

// Report: changes = nodes removed plus initializers removed; nodes = the removed nodes' names.
PassReport eliminateDeadNodes(QdqGraph& graph);

} // namespace qs
