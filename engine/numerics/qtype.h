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
};

enum class QKind : uint8_t {
    Integer,      // uniform integer grid [qmin, qmax]
    Binary,       // {−1, +1}
    Ternary,      // {−1, 0, +1}
    Float,        // a small float format, cast with saturation and RNE
    Codebook,     // a fixed table of values (nf4)
    Microscaling, // element format + per-block shared scale computed by the type itself
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
    int blockSize;          // Microscaling: elements sharing one scale; otherwise 0
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

} // namespace qs
