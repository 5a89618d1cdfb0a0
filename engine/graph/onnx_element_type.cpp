#include "graph/onnx_element_type.h"

namespace qs {

std::optional<DType> dtypeOfOnnxElementType(int64_t code)
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

} // namespace qs
