#pragma once
// GGUF's block formats (llama.cpp / ggml): the exact block bytes of a row of
// floats, as ggml's reference quantizers (quantize_row_<type>_ref) write them,
// and their decoding back to float (dequantize_row_<type>).
//
// A row is cut into blocks of 32 (q8_0, q4_0, q4_1, q5_0, q5_1) or super-blocks
// of 256 (q4_k, q5_k, q6_k); the row length must be a multiple of it. Scales are
// IEEE fp16, little-endian. The layouts (sizes asserted in gguf_blocks.cpp):
//   q8_0  34 B: d, int8 q[32]                            x = q·d
//   q4_0  18 B: d, qs[16]                                x = (q − 8)·d
//   q4_1  20 B: d, m, qs[16]                             x = q·d + m
//   q5_0  22 B: d, qh[4], qs[16]                         x = (q − 16)·d
//   q5_1  24 B: d, m, qh[4], qs[16]                      x = q·d + m
//   q4_k 144 B: d, dmin, scales[12], qs[128]             x = d·sc_j·q − dmin·m_j  (8 sub-blocks of 32)
//   q5_k 176 B: d, dmin, scales[12], qh[32], qs[128]     x = d·sc_j·q − dmin·m_j  (8 sub-blocks of 32)
//   q6_k 210 B: ql[128], qh[64], int8 scales[16], d      x = d·sc_j·(q − 32)      (16 sub-blocks of 16)
// Nibble order (32-blocks): byte j holds element j in its low nibble and element
// j + 16 in its high nibble; the fifth bit of element i is bit i of qh. The k
// types pack 64 elements per 32 bytes the same way (low nibble l, high nibble
// l + 32) and 6-bit sub-block scale/min pairs into 12 bytes (get_scale_min_k4).
//
// Everything here is computed in float, in the order of ggml's reference code,
// and this file is compiled with -ffp-contract=off, so that the bytes and the
// decoded floats equal ggml's bit for bit (tests/tst_gguf_blocks.cpp checks it
// against llama.cpp's own libggml-base). Inputs must be finite: the callers
// (quant/gguf_quantization.h) check for NaN/Inf and name the tensor.

#include <cstddef>
#include <cstdint>
#include <span>

#include "numerics/qtype.h"

namespace qs {

struct GgufBlockFormat {
    int blockSize;  // elements per (super-)block: 32 or 256
    int blockBytes; // bytes per (super-)block
};
// Throws Error for a type that is not a GGUF block format.
GgufBlockFormat ggufBlockFormat(QType t);

// Bytes of a row of n elements; throws Error when n is not a multiple of the block size.
size_t ggufRowBytes(QType t, int64_t n);

// Encodes x (x.size() a multiple of the block size) into out (ggufRowBytes bytes).
void ggufEncodeRow(QType t, std::span<const float> x, std::span<uint8_t> out);
// Decodes ggufRowBytes(t, out.size()) bytes into out.
void ggufDecodeRow(QType t, std::span<const uint8_t> in, std::span<float> out);

} // namespace qs
