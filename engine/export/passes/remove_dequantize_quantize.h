#pragma once
// Removes DequantizeLinear → QuantizeLinear pairs whose scale, zero point (values
// and type) and axis are identical: the QuantizeLinear would give back exactly
// the integers the DequantizeLinear read, so its readers read those integers
// directly. The DequantizeLinear stays for any other reader of its float output
// (a branch), and goes with dead-node elimination when it has none. A
// QuantizeLinear whose output is a graph output is kept (the graph's interface
// does not change).

#include "export/qdq_graph.h"

namespace qs {

// Report: changes = QuantizeLinear nodes removed; nodes = their names.
PassReport removeDequantizeQuantizePairs(QdqGraph& graph);

} // namespace qs
