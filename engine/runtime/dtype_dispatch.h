#pragma once
// Calls a kernel body templated on the C++ element type of a DType, so one
// body serves every numeric dtype: visitDType(t, [&]<class T>() { ... }).
// float16 and bfloat16 are not arithmetic C++ types: bodies that compute
// convert them to float first (castTensor); visitDType reports them as an
// Error through `unsupported`.

#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "core/error.h"

namespace qs {

template <class F, class Fail> decltype(auto) visitDType(DType t, F&& body, Fail&& unsupported)
{
    switch (t) {
    case DType::F32:
        return body.template operator()<float>();
    case DType::F64:
        return body.template operator()<double>();
    case DType::I8:
        return body.template operator()<int8_t>();
    case DType::U8:
        return body.template operator()<uint8_t>();
    case DType::I16:
        return body.template operator()<int16_t>();
    case DType::U16:
        return body.template operator()<uint16_t>();
    case DType::I32:
        return body.template operator()<int32_t>();
    case DType::U32:
        return body.template operator()<uint32_t>();
    case DType::I64:
        return body.template operator()<int64_t>();
    case DType::U64:
        return body.template operator()<uint64_t>();
    case DType::Bool:
        return body.template operator()<bool>();
    case DType::F16:
    case DType::BF16:
        break;
    }
    unsupported(std::string("element type ") + std::string(dtypeName(t)) + " is not supported here");
    return body.template operator()<float>(); // not reached: `unsupported` throws
}

} // namespace qs
