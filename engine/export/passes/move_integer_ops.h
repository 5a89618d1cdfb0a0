#pragma once
// Runs data-movement ops between a DequantizeLinear and a QuantizeLinear on
// the integer tensor: DQ → op → Q becomes op → DQ → Q, so the op moves integers
// (a quarter of the bytes of float32) and the DQ → Q pair it leaves behind can be
// removed when its parameters match. Ops: Reshape, Transpose, Flatten, Squeeze,
// Unsqueeze, Identity — they copy elements without arithmetic, so moving them
// across a per-tensor dequantization changes no value. Only per-tensor
// DequantizeLinear of a value that is not a constant (constants are folded by
// fold_dequantize_through_layout), and only ops whose every reader is a
// QuantizeLinear or another such op (a chain moves one op at a time). The
// DequantizeLinear stays for its other readers.

#include "export/qdq_graph.h"

namespace qs {

// Report: changes = ops moved; nodes = their names.
PassReport moveIntegerOps(QdqGraph& graph);

} // namespace qs
