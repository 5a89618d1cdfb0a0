#pragma once
// ONNX TensorProto element type codes (a fact of the ONNX format: FLOAT = 1,
// UINT8 = 2, ...) and the engine's DType for each. Loaders read them from files,
// kernels from attributes such as Cast's `to`; both use this one mapping.

#include <cstdint>
#include <optional>

#include "core/dtype.h"

namespace qs {

// The DType of an element type code; none for types the engine has no DType
// for (string, complex, float8, int4, undefined).
std::optional<DType> dtypeOfOnnxElementType(int64_t code);

} // namespace qs
