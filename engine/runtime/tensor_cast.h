#pragma once
// Element type conversion of whole tensors, as ONNX Cast defines it: floats to
// integers truncate toward zero (out-of-range values saturate rather than being
// undefined), anything to bool is "!= 0", float16/bfloat16 round to nearest even.

#include <optional>

#include "core/tensor.h"

namespace qs {

// The DType of an ONNX TensorProto element type code (Cast's `to`, EyeLike's
// `dtype`, the windows' `output_datatype`); none for types the engine has no
// DType for (string, complex, float8, int4).
std::optional<DType> dtypeOfOnnxElementCode(int64_t code);

// A tensor of `to` with the values of `t` (returns `t` itself when already `to`).
Tensor castTensor(const Tensor& t, DType to);

} // namespace qs
