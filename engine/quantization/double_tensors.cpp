#include "quantization/double_tensors.h"

#include <cmath>

#include "core/error.h"

namespace qs {

std::vector<double> finiteDoubles(const Tensor& t, const std::string& what)
{
    const Tensor f = t.toFloat32();
    const auto v = f.values<float>();
    std::vector<double> d(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
        if (!std::isfinite(v[i]))
            throw Error(what + " holds a value that is not finite at index " + std::to_string(i));
        d[i] = v[i];
    }
    return d;
}

Tensor floatTensor(const std::vector<double>& values, const Shape& shape)
{
    Tensor t(DType::F32, shape);
    auto v = t.mutableValues<float>();
    for (size_t i = 0; i < values.size(); ++i)
        v[i] = float(values[i]);
    return t;
}

} // namespace qs
