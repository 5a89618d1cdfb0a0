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

// Every int8 quantization becomes uint8 with each code and zero point + 128,
// exactly, where the codes can be rewritten (a constant initializer only the
// DequantizeLinear reads; a QuantizeLinear whose every reader is a
// DequantizeLinear with the same zero point). ONNX Runtime then runs its
// u8u8 integer kernels, which are exact on every x86 CPU: its u8s8 and s8s8
// kernels sum pairs of products into 16 bits on AVX2 CPUs without VNNI and
// saturate there (docs/export.md, "Integer kernels").
// Report: changes = quantizations rewritten; nodes = the nodes changed.
PassReport useUnsignedEightBit(QdqGraph& graph);

} // namespace qs
