#include "numerics/qtype.h"

#include <array>

#include "core/error.h"
#include "numerics/gguf_blocks.h"

namespace qs {
namespace {

constexpr QuantTypeInfo intType(QType t, std::string_view name, int bits, std::string_view summary)
{
    return {t, name, QKind::Integer, bits, true, -(1 << (bits - 1)), (1 << (bits - 1)) - 1,
            float((1 << (bits - 1)) - 1), 0, t, summary};
}
constexpr QuantTypeInfo uintType(QType t, std::string_view name, int bits, std::string_view summary)
{
    return {t, name, QKind::Integer, bits, false, 0, (1 << bits) - 1, float((1 << bits) - 1), 0, t,
            summary};
}

constexpr QuantTypeInfo ggufType(QType t, std::string_view name, int bits, int blockSize, std::string_view summary)
{
    return {t, name, QKind::GgufBlock, bits, true, 0, 0, 0.f, blockSize, t, summary};
}

constexpr QuantTypeInfo lutType(QType t, std::string_view name, int bits, std::string_view summary)
{
    return {t, name, QKind::Lut, bits, true, 0, 0, 0.f, 0, t, summary};
}

constexpr std::array<QuantTypeInfo, 42> kQTypes{{
    intType(QType::Int1, "int1", 1, "signed 1-bit integer, codes -1..0"),
    intType(QType::Int2, "int2", 2, "signed 2-bit integer, codes -2..1"),
    intType(QType::Int3, "int3", 3, "signed 3-bit integer, codes -4..3"),
    intType(QType::Int4, "int4", 4, "signed 4-bit integer, codes -8..7"),
    intType(QType::Int5, "int5", 5, "signed 5-bit integer, codes -16..15"),
    intType(QType::Int6, "int6", 6, "signed 6-bit integer, codes -32..31"),
    intType(QType::Int7, "int7", 7, "signed 7-bit integer, codes -64..63"),
    intType(QType::Int8, "int8", 8, "signed 8-bit integer, codes -128..127"),
    uintType(QType::UInt1, "uint1", 1, "unsigned 1-bit integer, codes 0..1"),
    uintType(QType::UInt2, "uint2", 2, "unsigned 2-bit integer, codes 0..3"),
    uintType(QType::UInt3, "uint3", 3, "unsigned 3-bit integer, codes 0..7"),
    uintType(QType::UInt4, "uint4", 4, "unsigned 4-bit integer, codes 0..15"),
    uintType(QType::UInt5, "uint5", 5, "unsigned 5-bit integer, codes 0..31"),
    uintType(QType::UInt6, "uint6", 6, "unsigned 6-bit integer, codes 0..63"),
    uintType(QType::UInt7, "uint7", 7, "unsigned 7-bit integer, codes 0..127"),
    uintType(QType::UInt8, "uint8", 8, "unsigned 8-bit integer, codes 0..255"),
    {QType::Int16, "int16", QKind::Integer, 16, true, -32768, 32767, 32767.f, 0, QType::Int16,
     "signed 16-bit integer, codes -32768..32767"},
    {QType::Binary, "binary", QKind::Binary, 1, true, -1, 1, 1.f, 0, QType::Binary, "values ±scale"},
    {QType::Ternary, "ternary", QKind::Ternary, 2, true, -1, 1, 1.f, 0, QType::Ternary, "values −scale, 0, +scale"},
    {QType::Fp8E4M3, "fp8_e4m3", QKind::Float, 8, true, 0, 0, 448.f, 0, QType::Fp8E4M3,
     "float8 e4m3fn: max 448, no infinities"},
    {QType::Fp8E5M2, "fp8_e5m2", QKind::Float, 8, true, 0, 0, 57344.f, 0, QType::Fp8E5M2, "float8 e5m2: max 57344"},
    {QType::Fp4E2M1, "fp4_e2m1", QKind::Float, 4, true, 0, 0, 6.f, 0, QType::Fp4E2M1,
     "float4 e2m1: 0, ±0.5, ±1, ±1.5, ±2, ±3, ±4, ±6"},
    {QType::Nf4, "nf4", QKind::Codebook, 4, true, 0, 0, 1.f, 0, QType::Nf4, "QLoRA 4-bit NormalFloat codebook"},
    {QType::MxFp8, "mxfp8", QKind::Microscaling, 8, true, 0, 0, 448.f, 32, QType::Fp8E4M3,
     "OCP MX: 32 e4m3 values sharing an E8M0 scale"},
    {QType::MxFp4, "mxfp4", QKind::Microscaling, 4, true, 0, 0, 6.f, 32, QType::Fp4E2M1,
     "OCP MX: 32 e2m1 values sharing an E8M0 scale"},
    {QType::NvFp4, "nvfp4", QKind::Microscaling, 4, true, 0, 0, 6.f, 16, QType::Fp4E2M1,
     "16 e2m1 values sharing an e4m3 scale"},
    ggufType(QType::Q8_0, "q8_0", 8, 32,
             "GGUF q8_0 (weights only): blocks of 32 int8 codes, fp16 scale; 8.5 bits/weight"),
    ggufType(QType::Q4_0, "q4_0", 4, 32,
             "GGUF q4_0 (weights only): blocks of 32 4-bit codes, fp16 scale; 4.5 bits/weight"),
    ggufType(QType::Q4_1, "q4_1", 4, 32,
             "GGUF q4_1 (weights only): blocks of 32 4-bit codes, fp16 scale and min; 5 bits/weight"),
    ggufType(QType::Q5_0, "q5_0", 5, 32,
             "GGUF q5_0 (weights only): blocks of 32 5-bit codes, fp16 scale; 5.5 bits/weight"),
    ggufType(QType::Q5_1, "q5_1", 5, 32,
             "GGUF q5_1 (weights only): blocks of 32 5-bit codes, fp16 scale and min; 6 bits/weight"),
    ggufType(QType::Q4K, "q4_k", 4, 256,
             "GGUF q4_K (weights only): super-blocks of 256, 6-bit sub-block scales and mins; 4.5 bits/weight"),
    ggufType(QType::Q5K, "q5_k", 5, 256,
             "GGUF q5_K (weights only): super-blocks of 256, 6-bit sub-block scales and mins; 5.5 bits/weight"),
    ggufType(QType::Q6K, "q6_k", 6, 256,
             "GGUF q6_K (weights only): super-blocks of 256, int8 sub-block scales; 6.5625 bits/weight"),
    lutType(QType::Lut1, "lut1", 1,
            "palettized (weights only): 1-bit codes into a k-means table of 2 float entries per group"),
    lutType(QType::Lut2, "lut2", 2,
            "palettized (weights only): 2-bit codes into a k-means table of 4 float entries per group"),
    lutType(QType::Lut3, "lut3", 3,
            "palettized (weights only): 3-bit codes into a k-means table of 8 float entries per group"),
    lutType(QType::Lut4, "lut4", 4,
            "palettized (weights only): 4-bit codes into a k-means table of 16 float entries per group"),
    lutType(QType::Lut5, "lut5", 5,
            "palettized (weights only): 5-bit codes into a k-means table of 32 float entries per group"),
    lutType(QType::Lut6, "lut6", 6,
            "palettized (weights only): 6-bit codes into a k-means table of 64 float entries per group"),
    lutType(QType::Lut7, "lut7", 7,
            "palettized (weights only): 7-bit codes into a k-means table of 128 float entries per group"),
    lutType(QType::Lut8, "lut8", 8,
            "palettized (weights only): 8-bit codes into a k-means table of 256 float entries per group"),
}};

constexpr bool tableFollowsEnum()
{
    for (size_t i = 0; i < kQTypes.size(); ++i)
        if (static_cast<size_t>(kQTypes[i].type) != i)
            return false;
    return kQTypes.size() == static_cast<size_t>(QType::Lut8) + 1;
}
static_assert(tableFollowsEnum(), "kQTypes must list every QType in enum order");

struct Alias {
    std::string_view alias;
    QType type;
};
// Common spellings, and ggml's for the k types (q4_K ...).
constexpr std::array<Alias, 15> kAliases{{
    {"float8_e4m3fn", QType::Fp8E4M3}, {"float8_e4m3", QType::Fp8E4M3}, {"e4m3", QType::Fp8E4M3},
    {"fp8", QType::Fp8E4M3},           {"float8_e5m2", QType::Fp8E5M2}, {"e5m2", QType::Fp8E5M2},
    {"float4_e2m1fn", QType::Fp4E2M1}, {"float4_e2m1", QType::Fp4E2M1}, {"fp4", QType::Fp4E2M1},
    {"e2m1", QType::Fp4E2M1},          {"mxfp8_e4m3", QType::MxFp8},    {"mxfp4_e2m1", QType::MxFp4},
    {"q4_K", QType::Q4K},              {"q5_K", QType::Q5K},            {"q6_K", QType::Q6K},
}};

} // namespace

std::span<const QuantTypeInfo> allQTypes() { return kQTypes; }

const QuantTypeInfo& qtypeInfo(QType t) { return kQTypes[static_cast<size_t>(t)]; }

std::string_view qtypeName(QType t) { return qtypeInfo(t).name; }

std::optional<QType> parseQType(std::string_view name)
{
    for (const auto& q : kQTypes)
        if (q.name == name)
            return q.type;
    for (const auto& a : kAliases)
        if (a.alias == name)
            return a.type;
    return std::nullopt;
}

std::string qtypeNameList()
{
    std::string s;
    for (const auto& q : kQTypes)
        s += (s.empty() ? "" : ", ") + std::string(q.name);
    return s;
}

IntegerGrid integerGrid(QType t, bool narrowRange)
{
    const QuantTypeInfo& q = qtypeInfo(t);
    if (!isIntegerLike(t))
        throw Error(std::string(q.name) + " has no integer grid");
    IntegerGrid g{q.qmin, q.qmax};
    if (narrowRange && q.kind == QKind::Integer && q.isSigned && q.bits > 1)
        g.qmin = -q.qmax;
    return g;
}

bool isIntegerLike(QType t)
{
    const QKind k = qtypeInfo(t).kind;
    return k == QKind::Integer || k == QKind::Binary || k == QKind::Ternary;
}

bool isMicroscaling(QType t) { return qtypeInfo(t).kind == QKind::Microscaling; }

bool isGgufBlock(QType t) { return qtypeInfo(t).kind == QKind::GgufBlock; }

bool isLut(QType t)
{
    return qtypeInfo(t).kind == QKind::Lut;
}

bool hasOwnBlockScales(QType t) { return isMicroscaling(t) || isGgufBlock(t); }

double bitsPerWeight(QType t)
{
    const QuantTypeInfo& q = qtypeInfo(t);
    if (q.kind == QKind::GgufBlock) {
        const GgufBlockFormat f = ggufBlockFormat(t);
        return f.blockBytes * 8.0 / f.blockSize;
    }
    switch (t) {
    case QType::MxFp8:
    case QType::MxFp4:
    case QType::NvFp4:
        return q.bits + 8.0 / q.blockSize; // an E8M0 or e4m3 scale per block
    default:
        return q.bits;
    }
}

} // namespace qs
