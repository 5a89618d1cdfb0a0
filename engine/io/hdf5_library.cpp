#include "io/hdf5_library.h"

#include <cstring>

#include "core/error.h"

namespace qs::hdf5 {

namespace {

// The innermost description on HDF5's error stack (the most specific one),
// then clears the stack.
std::string takeLibraryError()
{
    std::string innermost;
    auto walk = [](unsigned, const H5E_error2_t* e, void* data) -> herr_t {
        if (e->desc && *e->desc)
            *static_cast<std::string*>(data) = e->desc;
        return 0;
    };
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, walk, &innermost);
    H5Eclear2(H5E_DEFAULT);
    return innermost;
}

// A memory type for a stored float16 or bfloat16, whose bit fields HDF5
// converts any stored layout or byte order into.
hid_t halfMemoryType(DType dtype)
{
    const hid_t t = H5Tcopy(H5T_IEEE_F32LE);
    if (dtype == DType::F16) {
        H5Tset_fields(t, 15, 10, 5, 0, 10);
        H5Tset_size(t, 2);
        H5Tset_ebias(t, 15);
    } else {
        H5Tset_fields(t, 15, 7, 8, 0, 7);
        H5Tset_size(t, 2);
        H5Tset_ebias(t, 127);
    }
    return t;
}

std::string orderName(hid_t type)
{
    return H5Tget_order(type) == H5T_ORDER_BE ? " big-endian" : " little-endian";
}

} // namespace

void fail(const std::filesystem::path& file, std::string_view object, const std::string& what)
{
    std::string message = file.string();
    if (!object.empty())
        message += ": " + std::string(object);
    throw Error(message + ": " + what);
}

void failLibrary(const std::filesystem::path& file, std::string_view object, const std::string& what)
{
    const std::string detail = takeLibraryError();
    fail(file, object, detail.empty() ? what : what + " (HDF5: " + detail + ")");
}

TypeChoice chooseType(hid_t type)
{
    const size_t size = H5Tget_size(type);
    const std::string bits = std::to_string(size * 8);
    switch (H5Tget_class(type)) {
    case H5T_INTEGER: {
        const bool isSigned = H5Tget_sign(type) == H5T_SGN_2;
        const std::string words = (isSigned ? "int" : "uint") + bits + orderName(type);
        switch (size) {
        case 1:
            return {isSigned ? DType::I8 : DType::U8, {}, words};
        case 2:
            return {isSigned ? DType::I16 : DType::U16, {}, words};
        case 4:
            return {isSigned ? DType::I32 : DType::U32, {}, words};
        case 8:
            return {isSigned ? DType::I64 : DType::U64, {}, words};
        default:
            return {std::nullopt, "integers of " + std::to_string(size) + " bytes are not supported", words};
        }
    }
    case H5T_FLOAT: {
        const std::string words = "float" + bits + orderName(type);
        if (size == 4)
            return {DType::F32, {}, words};
        if (size == 8)
            return {DType::F64, {}, words};
        if (size == 2) {
            size_t signPos = 0, expPos = 0, expSize = 0, mantPos = 0, mantSize = 0;
            H5Tget_fields(type, &signPos, &expPos, &expSize, &mantPos, &mantSize);
            if (signPos == 15 && expPos == 10 && expSize == 5 && mantPos == 0 && mantSize == 10)
                return {DType::F16, {}, words};
            if (signPos == 15 && expPos == 7 && expSize == 8 && mantPos == 0 && mantSize == 7)
                return {DType::BF16, {}, "bfloat16" + orderName(type)};
        }
        return {std::nullopt, "a " + bits + "-bit float of this layout is not supported", words};
    }
    case H5T_ENUM: {
        // h5py stores numpy bool as an int8 enumeration {FALSE = 0, TRUE = 1}.
        if (size == 1 && H5Tget_nmembers(type) == 2) {
            char* first = H5Tget_member_name(type, 0);
            char* second = H5Tget_member_name(type, 1);
            const bool isBool = first && second && std::strcmp(first, "FALSE") == 0 && std::strcmp(second, "TRUE") == 0;
            H5free_memory(first);
            H5free_memory(second);
            if (isBool)
                return {DType::Bool, {}, "bool"};
        }
        return {std::nullopt, "enumerations are not numeric tensors", "enum"};
    }
    case H5T_STRING:
        return {std::nullopt, "strings are not numeric tensors", "string"};
    case H5T_COMPOUND:
        return {std::nullopt, "compound (record) types are not supported", "compound"};
    case H5T_REFERENCE:
        return {std::nullopt, "object references are not numeric tensors", "reference"};
    case H5T_VLEN:
        return {std::nullopt, "variable-length sequences are not supported", "variable-length"};
    case H5T_ARRAY:
        return {std::nullopt, "array element types are not supported", "array"};
    case H5T_OPAQUE:
        return {std::nullopt, "opaque data is not a numeric tensor", "opaque"};
    case H5T_BITFIELD:
        return {std::nullopt, "bit fields are not supported", "bitfield"};
    default:
        return {std::nullopt, "the element type is not supported", "unknown"};
    }
}

hid_t memoryType(DType dtype, hid_t fileType)
{
    switch (dtype) {
    case DType::I8:
        return H5Tcopy(H5T_NATIVE_INT8);
    case DType::U8:
        return H5Tcopy(H5T_NATIVE_UINT8);
    case DType::I16:
        return H5Tcopy(H5T_NATIVE_INT16);
    case DType::U16:
        return H5Tcopy(H5T_NATIVE_UINT16);
    case DType::I32:
        return H5Tcopy(H5T_NATIVE_INT32);
    case DType::U32:
        return H5Tcopy(H5T_NATIVE_UINT32);
    case DType::I64:
        return H5Tcopy(H5T_NATIVE_INT64);
    case DType::U64:
        return H5Tcopy(H5T_NATIVE_UINT64);
    case DType::F32:
        return H5Tcopy(H5T_NATIVE_FLOAT);
    case DType::F64:
        return H5Tcopy(H5T_NATIVE_DOUBLE);
    case DType::F16:
    case DType::BF16:
        return halfMemoryType(dtype);
    case DType::Bool:
        return H5Tget_native_type(fileType, H5T_DIR_ASCEND);
    }
    return -1;
}

hid_t openFile(const std::filesystem::path& path)
{
    const Id access(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
    H5Pset_fclose_degree(access.get(), H5F_CLOSE_STRONG);
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, access.get());
    if (file < 0)
        failLibrary(path, {}, "cannot open the HDF5 file (truncated or corrupted?)");
    return file;
}

} // namespace qs::hdf5
