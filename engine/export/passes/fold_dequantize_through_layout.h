#pragma once
// Folds the DequantizeLinear of a constant weight through the layout ops that
// follow it (Transpose, Reshape, Squeeze, Unsqueeze with constant parameters):
// the integer initializer is laid out as the op would lay out the float tensor,
// the quantization axis moves with it, and one DequantizeLinear produces what
// the layout op produced. A per-axis weight folds through a Reshape only when the
// axis survives as a dimension of its own (same length, same elements before it).
// Blocked (block_size) weights are not folded.

#include "export/qdq_graph.h"

namespace qs {

// Report: changes = layout ops folded; nodes = their names.
PassReport foldDequantizeThroughLayout(QdqGraph& graph);

} // namespace qs
