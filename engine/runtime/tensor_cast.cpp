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

std::optional<DType> dtypeOfOnnxElementCode(int64_t code)
{
    switch (code) {
    case 1:
        return DType::F32;
    case 2:
        return DType::U8;
    case 3:
        return DType::I8;
    case 4:
        return DType::U16;
    case 5:
        return DType::I16;
    case 6:
        return DType::I32;
    case 7:
        return DType::I64;
    case 9:
        return DType::Bool;
    case 10:
        return DType::F16;
    case 11:
        return DType::F64;
    case 12:
        return DType::U32;
    case 13:
        return DType::U64;
    case 16:
        return DType::BF16;
    default:
        return std::nullopt;
    }
}

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
