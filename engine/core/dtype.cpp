#include "core/dtype.h"

#include <array>

namespace qs {
namespace {

struct DTypeEntry {
    DType type;
    std::string_view name;
    size_t size;
    bool floating;
};

constexpr std::array<DTypeEntry, 13> kDTypes{{
    {DType::F32, "float32", 4, true},
    {DType::F16, "float16", 2, true},
    {DType::BF16, "bfloat16", 2, true},
    {DType::F64, "float64", 8, true},
    {DType::I8, "int8", 1, false},
    {DType::U8, "uint8", 1, false},
    {DType::I16, "int16", 2, false},
    {DType::U16, "uint16", 2, false},
    {DType::I32, "int32", 4, false},
    {DType::U32, "uint32", 4, false},
    {DType::I64, "int64", 8, false},
    {DType::U64, "uint64", 8, false},
    {DType::Bool, "bool", 1, false},
}};

const DTypeEntry& entry(DType t) { return kDTypes[static_cast<size_t>(t)]; }

} // namespace

size_t dtypeSize(DType t) { return entry(t).size; }
std::string_view dtypeName(DType t) { return entry(t).name; }
bool isFloatingDType(DType t) { return entry(t).floating; }

std::optional<DType> parseDType(std::string_view name)
{
    for (const auto& e : kDTypes)
        if (e.name == name)
            return e.type;
    return std::nullopt;
}

} // namespace qs
