#pragma once
// Float tensors in double and back, for the rewrites of a model's weights
// that work in double (equalization, high-bias absorption, smoothing).

#include <string>
#include <vector>

#include "core/tensor.h"

namespace qs {

// The values of `t` (any float dtype) in double; an Error "<what> holds a
// value that is not finite at index i" where one is not finite.
std::vector<double> finiteDoubles(const Tensor& t, const std::string& what);

// A float32 tensor of `shape` holding `values` rounded to float.
Tensor floatTensor(const std::vector<double>& values, const Shape& shape);

} // namespace qs
