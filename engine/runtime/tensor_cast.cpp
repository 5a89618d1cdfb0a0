#include "runtime/tensor_cast.h"

#include <cmath>
#include <limits>
#include <type_traits>

#include "core/half.h"
#include "runtime/dtype_dispatch.h"

namespace qs {

namespace {

[[noreturn]] void castFailure(const std::string& problem)
{
    throw Error("Cast: " + problem);
}

template <class To, class From> To convertValue(From v)
{
    if constexpr (std::is_same_v<To, bool>) {
        return v != From(0);
    } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
        if (std::isnan(v))
            return To(0);
        constexpr double lo = double(std::numeric_limits<To>::lowest());
        constexpr double hi = double(std::numeric_limits<To>::max());
        const double d = std::trunc(double(v));
        if (d <= lo)
            return std::numeric_limits<To>::lowest();
        if (d >= hi)
            return std::numeric_limits<To>::max();
        return To(d);
    } else {
        return To(v);
    }
}

template <class From> void castFrom(const From* src, Tensor& out, int64_t n)
{
    const DType to = out.dtype();
    if (to == DType::F16 || to == DType::BF16) {
        auto* dst = static_cast<uint16_t*>(out.mutableRawData());
        for (int64_t i = 0; i < n; ++i) {
            const float f = float(src[i]);
            dst[i] = to == DType::F16 ? floatToFp16(f) : floatToBf16(f);
        }
        return;
    }
    visitDType(
        to,
        [&]<class To>() {
            To* dst = static_cast<To*>(out.mutableRawData());
            for (int64_t i = 0; i < n; ++i)
                dst[i] = convertValue<To>(src[i]);
        },
        castFailure);
}

} // namespace

Tensor castTensor(const Tensor& t, DType to)
{
    if (t.dtype() == to)
        return t;
    Tensor out(to, t.shape());
    const int64_t n = t.numel();
    if (t.dtype() == DType::F16 || t.dtype() == DType::BF16) {
        if (to == DType::F32)
            return t.toFloat32();
        const Tensor f = t.toFloat32();
        castFrom(f.values<float>().data(), out, n);
        return out;
    }
    visitDType(
        t.dtype(), [&]<class From>() { castFrom(static_cast<const From*>(t.rawData()), out, n); }, castFailure);
    return out;
}

} // namespace qs
