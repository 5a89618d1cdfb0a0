#pragma once
// The quantized types: one table, the single source of truth for names, bit
// widths, grids and limits. GUI combo boxes, CLI help, rule validation and
// docs are generated from or checked against allQTypes().

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace qs {

enum class QType : uint8_t {
    Int1, Int2, Int3, Int4, Int5, Int6, Int7, Int8,
    UInt1, UInt2, UInt3, UInt4, UInt5, UInt6, UInt7, UInt8,
    Int16,
    Binary,  // values ±scale
    Ternary, // values −scale, 0, +scale
    Fp8E4M3, // OCP float8 e4m3fn: max 448, no infinities, NaN at 0x7f/0xff
    Fp8E5M2, // OCP float8 e5m2: max 57344, IEEE-like infinities and NaNs
    Fp4E2M1, // OCP float4 e2m1: 0, ±0.5, ±1, ±1.5, ±2, ±3, ±4, ±6
    Nf4,     // QLoRA 4-bit NormalFloat codebook, values in [−1, 1]
    MxFp8,   // OCP MX: blocks of 32 e4m3 elements sharing an E8M0 scale
    MxFp4,   // OCP MX: blocks of 32 e2m1 elements sharing an E8M0 scale
    NvFp4,   // blocks of 16 e2m1 elements sharing an e4m3 scale
    // GGUF (llama.cpp) block formats, weight-only, encoded as ggml's reference
    // quantizers do (numerics/gguf_blocks.h):
    Q8_0, // blocks of 32: int8 codes, fp16 scale
    Q4_0, // blocks of 32: 4-bit codes − 8, fp16 scale
    Q4_1, // blocks of 32: 4-bit codes, fp16 scale and min
    Q5_0, // blocks of 32: 5-bit codes − 16, fp16 scale
    Q5_1, // blocks of 32: 5-bit codes, fp16 scale and min
    Q4K,  // super-blocks of 256: 8 × 32 4-bit codes, 6-bit scales and mins, fp16 d and dmin
    Q5K,  // super-blocks of 256: 8 × 32 5-bit codes, 6-bit scales and mins, fp16 d and dmin
    Q6K,  // super-blocks of 256: 16 × 16 6-bit codes, int8 scales, fp16 d
    // Palettized (look-up table) weights, weight-only: per group (tensor, channel
    // or tile) a table of 2^n float32 entries found by k-means, n-bit codes
    // indexing it (quant/palettization.h).
    Lut1, Lut2, Lut3, Lut4, Lut5, Lut6, Lut7, Lut8,
};

enum class QKind : uint8_t {
    Integer,      // uniform integer grid [qmin, qmax]
    Binary,       // {−1, +1}
    Ternary,      // {−1, 0, +1}
    Float,        // a small float format, cast with saturation and RNE
    Codebook,     // a fixed table of values (nf4)
    Microscaling, // element format + per-block shared scale computed by the type itself
    GgufBlock,    // a GGUF block format: block bytes as llama.cpp's reference quantizer writes them
    Lut,          // k-means palettization: per group a float table of 2^bits entries (QuantParams::lut)
};

struct QuantTypeInfo {
    QType type;
    std::string_view name;  // canonical name used in rule files and the CLI
    QKind kind;
    int bits;               // bits per element (storage width of one code)
    bool isSigned;
    int32_t qmin, qmax;     // Integer/Binary/Ternary: the full code grid; others: 0
    float maxFinite;        // largest representable magnitude in code units (the symmetric bound for
                            // Float/Codebook/Microscaling elements; qmax for Integer)
    int blockSize;          // Microscaling: elements sharing one scale; GgufBlock: elements per
                            // (super-)block (32, or 256 for the k types); otherwise 0
    QType element;          // Microscaling: element format; otherwise the type itself
    std::string_view summary; // one line for tooltips and docs
};

std::span<const QuantTypeInfo> allQTypes();
const QuantTypeInfo& qtypeInfo(QType t);
std::string_view qtypeName(QType t);
// Accepts canonical names and common aliases ("float8_e4m3fn", "e4m3", "fp8" ...).
std::optional<QType> parseQType(std::string_view name);
// Comma-separated canonical names, for error messages and help texts.
std::string qtypeNameList();

// Integer-like grid of a type for a given range option. narrowRange drops the
// most negative code of signed types (int8: [−127, 127]), as ONNX/TFLite weights use.
struct IntegerGrid {
    int32_t qmin;
    int32_t qmax;
};
IntegerGrid integerGrid(QType t, bool narrowRange);

bool isIntegerLike(QType t); // Integer, Binary, Ternary
bool isMicroscaling(QType t);
bool isGgufBlock(QType t);
// lut1 … lut8: weight-only, per-group tables found by k-means (quant/palettization.h).
bool isLut(QType t);
// Whether the type computes its own scales from the data (microscaling and GGUF
// block formats): no calibration method but absmax, no tile size.
bool hasOwnBlockScales(QType t);

// Storage bits per weight, scales included: the type's bits for per-tensor and
// per-channel types (their scales are negligible); mxfp8/mxfp4 add 8/32, nvfp4
// 8/16; a GGUF block format is its block bytes · 8 / block size (q4_0 4.5,
// q4_k 4.5, q6_k 6.5625). A lut type is its code bits (its tables, 2^bits
// float32 entries per group, depend on the granularity: quantizedWeightBytes).
double bitsPerWeight(QType t);

} // namespace qs
