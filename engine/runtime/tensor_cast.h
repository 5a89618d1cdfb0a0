#pragma once
// Element type conversion of whole tensors, as ONNX Cast defines it: floats to
// integers truncate toward zero (out-of-range values saturate rather than being
// undefined), anything to bool is "!= 0", float16/bfloat16 round to nearest even.

#include <optional>

#include "core/tensor.h"
#include "graph/onnx_element_type.h"

namespace qs {

// A tensor of `to` with the values of `t` (returns `t` itself when already `to`).
Tensor castTensor(const Tensor& t, DType to);

} // namespace qs
