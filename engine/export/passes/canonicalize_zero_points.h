#pragma once
// Canonical zero points, so equal quantizations look equal to later passes
// and to runtimes that pattern-match QDQ groups:
// - int8 with every zero point −128 becomes uint8 with zero point 0, exactly
//   (each code + 128): for a DequantizeLinear of a constant initializer only
//   it reads, and for a QuantizeLinear whose every reader is a
//   DequantizeLinear with the same zero point;
// - a zero point that is all 0 is dropped where ONNX allows it: on
//   DequantizeLinear always (the integer type is the input's), on
//   QuantizeLinear only for uint8 (the type an absent zero point means).

#include "export/qdq_graph.h"

namespace qs {

// Report: changes = zero points rewritten or dropped; nodes = the nodes changed.
PassReport canonicalizeZeroPoints(QdqGraph& graph);

} // namespace qs
