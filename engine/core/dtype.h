#pragma once
// Storage element types of tensors (what a file or a buffer holds), as opposed
// to quantized types (numerics/qtype.h), which describe a value grid.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace qs {

enum class DType : uint8_t { F32, F16, BF16, F64, I8, U8, I16, U16, I32, U32, I64, U64, Bool };

// Bytes per element.
size_t dtypeSize(DType t);
// Lower-case name: "float32", "float16", "bfloat16", "int8", ...
std::string_view dtypeName(DType t);
std::optional<DType> parseDType(std::string_view name);
bool isFloatingDType(DType t);

} // namespace qs
