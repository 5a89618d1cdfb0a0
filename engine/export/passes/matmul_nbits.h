#pragma once
// ONNX Runtime's int4 matrix product for LLM-style weights: each MatMul (or
// Gemm) whose weight is a DequantizeLinear of constant int4/uint4 codes
// blocked along the contraction axis K becomes one com.microsoft.MatMulNBits
// node (contrib opset 1):
//   Y = A · dequant(B)ᵀ (+ bias), B stored [N, K] as
//   B            uint8 [N, ceil(K / block), block / 2], two codes a byte, the
//                lower k in the low nibble; codes past K are the zero point;
//   scales       float [N · ceil(K / block)], row n's blocks in order;
//   zero_points  uint8 [N · ceil(ceil(K / block) / 2)], packed the same way
//                per row; left out when every zero point is 8, the op's default;
//   bias         float [N] (input 5), a Gemm's C.
// int4 codes q (−8..7) are written as the uint4 code q + 8 with zero point
// z + 8: the same value (q − z)·scale. Attributes K, N, bits = 4, block_size
// and accuracy_level = 0: the activation stays float (ONNX Runtime's level 4
// would quantize it to int8 per block as it multiplies, which the simulation
// does not model).
//
// What the op cannot take keeps its DequantizeLinear and is listed in the
// result: per-tensor or per-channel int4 (no blocks), blocks along N, a block
// size that is not a power of two ≥ 16, a weight read by something other than
// such a MatMul or Gemm (Conv, a graph output), a Gemm with transA, alpha ≠ 1,
// or a C that is not a float [N] bias with beta = 1.

#include <string>
#include <vector>

#include "export/qdq_graph.h"

namespace qs {

struct MatMulNBitsFallback {
    std::string weight; // the dequantized weight value (the source initializer's name)
    std::string reason; // why it keeps its DequantizeLinear
};

struct MatMulNBitsResult {
    PassReport report; // changes = nodes rewritten to MatMulNBits; nodes = their names
    std::vector<MatMulNBitsFallback> fallbacks;
    int64_t bytesBefore = 0; // the rewritten weights' codes, scales and zero points as DequantizeLinear read them
    int64_t bytesAfter = 0;  // as MatMulNBits reads them
};

inline constexpr const char* kMicrosoftDomain = "com.microsoft";

// Rewrites `graph` (a main graph after the QDQ passes) and reindexes it. The
// caller imports the com.microsoft domain when report.changes > 0.
MatMulNBitsResult useMatMulNBits(QdqGraph& graph);

} // namespace qs
