#pragma once
// Canonical zero points, so equal quantizations look equal to later passes
// and to runtimes that pattern-match QDQ groups:
// - int8 with every zero point −128 becomes uint8 with zero point 0, exactly
//   (each code + 128): for a DequantizeLinear of a constant initializer only
//   it reads, and for a QuantizeLinear whose every reader is a
//   DequantizeLinear with the same zero point;
// - a zero point that is all 0 is dropped from DequantizeLinear (the integer
//   type is the input's). QuantizeLinear keeps it even where ONNX would allow
//   dropping it (uint8): ONNX Runtime 1.30 refuses such models after its QDQ
//   optimizations ("two nodes with same node name").

#include "export/qdq_graph.h"

namespace qs {

// Report: changes = zero points rewritten or dropped; nodes = the nodes changed.
PassReport canonicalizeZeroPoints(QdqGraph& graph);

} // namespace qs
