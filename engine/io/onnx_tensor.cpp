#include "io/onnx_tensor.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "io/load_budget.h"

namespace qs {
namespace {

using onnx::TensorProto;

// Parses a non-negative decimal integer that is the whole string.
std::optional<uint64_t> parseUnsigned(const std::string& text)
{
    uint64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size())
        return std::nullopt;
    return value;
}

// Narrows int32_data values into `dtype` (whose values the field stores one per int32).
template <class T> bool narrowInto(const google::protobuf::RepeatedField<int32_t>& field, Tensor& out, bool bitPattern)
{
    auto values = out.mutableValues<T>();
    for (int i = 0; i < field.size(); ++i) {
        const int32_t v = field.Get(i);
        if (bitPattern ? (v < 0 || v > 0xffff)
                       : (v < int32_t(std::numeric_limits<T>::min()) || v > int32_t(std::numeric_limits<T>::max())))
            return false;
        values[size_t(i)] = T(v);
    }
    return true;
}

// ONNX element types the engine has no DType for, and what the loader widens them to.
struct WidenedType {
    DType dtype;       // int4 -> int8, uint4 -> uint8, float8 -> float32
    bool fourBit;      // two codes per byte, the first in the low nibble
    int exponentBits;  // float8 only
    int bias;          // float8 only
    bool unsignedZero; // float8 "fnuz": 0x80 is the only NaN, no -0 and no infinities
};

std::optional<WidenedType> widenedType(int32_t code)
{
    switch (code) {
    case 17: // FLOAT8E4M3FN: no infinities, S.1111.111 is NaN
        return WidenedType{DType::F32, false, 4, 7, false};
    case 18: // FLOAT8E4M3FNUZ
        return WidenedType{DType::F32, false, 4, 8, true};
    case 19: // FLOAT8E5M2: IEEE-like, with infinities
        return WidenedType{DType::F32, false, 5, 15, false};
    case 20: // FLOAT8E5M2FNUZ
        return WidenedType{DType::F32, false, 5, 16, true};
    case 21: // UINT4
        return WidenedType{DType::U8, true, 0, 0, false};
    case 22: // INT4
        return WidenedType{DType::I8, true, 0, 0, false};
    default:
        return std::nullopt;
    }
}

// The exact value of a float8 code (the four ONNX float8 types; numerics/float_formats.h
// has the two "fn" formats the quantizer produces, this also reads the "fnuz" ones).
float float8Value(uint8_t code, const WidenedType& t)
{
    const int mantissaBits = 7 - t.exponentBits;
    const int exponentMax = (1 << t.exponentBits) - 1;
    const int exponent = (code >> mantissaBits) & exponentMax;
    const int mantissa = code & ((1 << mantissaBits) - 1);
    const bool negative = (code & 0x80) != 0;
    if (t.unsignedZero && code == 0x80)
        return NAN;
    if (!t.unsignedZero && t.exponentBits == 4 && (code & 0x7f) == 0x7f)
        return NAN;
    if (!t.unsignedZero && t.exponentBits == 5 && exponent == exponentMax)
        return mantissa == 0 ? (negative ? -INFINITY : INFINITY) : NAN;
    const float magnitude = exponent == 0
                                ? std::ldexp(float(mantissa), 1 - t.bias - mantissaBits)
                                : std::ldexp(float(mantissa + (1 << mantissaBits)), exponent - t.bias - mantissaBits);
    return negative ? -magnitude : magnitude;
}

// Widens `count` codes held in `bytes` into `out` (of the widened dtype).
void widen(const uint8_t* bytes, int64_t count, const WidenedType& t, int32_t code, Tensor& out)
{
    if (t.fourBit) {
        const bool isSigned = code == 22;
        auto put = [&](auto values) {
            for (int64_t i = 0; i < count; ++i) {
                const int nibble = (bytes[i / 2] >> (4 * (i % 2))) & 0xf;
                values[size_t(i)] =
                    typename decltype(values)::value_type(isSigned && nibble >= 8 ? nibble - 16 : nibble);
            }
        };
        if (isSigned)
            put(out.mutableValues<int8_t>());
        else
            put(out.mutableValues<uint8_t>());
        return;
    }
    auto values = out.mutableValues<float>();
    for (int64_t i = 0; i < count; ++i)
        values[size_t(i)] = float8Value(bytes[i], t);
}

// The typed field that holds a tensor's values when it has no raw_data, and
// how many values it holds.
std::pair<const char*, int> typedField(const TensorProto& proto, std::optional<DType> dtype)
{
    switch (dtype.value_or(DType::U8)) { // the widened types store one byte per int32
    case DType::F32:
        return {"float_data", proto.float_data_size()};
    case DType::F64:
        return {"double_data", proto.double_data_size()};
    case DType::I64:
        return {"int64_data", proto.int64_data_size()};
    case DType::U64:
    case DType::U32:
        return {"uint64_data", proto.uint64_data_size()};
    default:
        return {"int32_data", proto.int32_data_size()};
    }
}

// Types whose typed field is the tensor's own storage (borrowed like raw_data).
bool typedFieldIsStorage(DType dtype)
{
    return dtype == DType::F32 || dtype == DType::F64 || dtype == DType::I64 || dtype == DType::I32 ||
           dtype == DType::U64;
}

} // namespace

std::string onnxElementTypeName(int32_t elemType)
{
    switch (elemType) {
    case TensorProto::FLOAT:
        return "float32";
    case TensorProto::UINT8:
        return "uint8";
    case TensorProto::INT8:
        return "int8";
    case TensorProto::UINT16:
        return "uint16";
    case TensorProto::INT16:
        return "int16";
    case TensorProto::INT32:
        return "int32";
    case TensorProto::INT64:
        return "int64";
    case TensorProto::STRING:
        return "string";
    case TensorProto::BOOL:
        return "bool";
    case TensorProto::FLOAT16:
        return "float16";
    case TensorProto::DOUBLE:
        return "float64";
    case TensorProto::UINT32:
        return "uint32";
    case TensorProto::UINT64:
        return "uint64";
    case TensorProto::COMPLEX64:
        return "complex64";
    case TensorProto::COMPLEX128:
        return "complex128";
    case TensorProto::BFLOAT16:
        return "bfloat16";
    // Newer than this libonnx's enum; numbers from onnx.proto (IR 9 and 10).
    case 17:
        return "float8e4m3fn";
    case 18:
        return "float8e4m3fnuz";
    case 19:
        return "float8e5m2";
    case 20:
        return "float8e5m2fnuz";
    case 21:
        return "uint4";
    case 22:
        return "int4";
    case TensorProto::UNDEFINED:
        return "undefined";
    default:
        return std::string(1, '#').append(std::to_string(elemType)); // an unnamed code: "element type #99"
    }
}

OnnxTensorReader::OnnxTensorReader(std::string sourceName, std::filesystem::path folder,
                                   std::shared_ptr<const void> owner)
    : sourceName_(std::move(sourceName)), folder_(std::move(folder)), owner_(std::move(owner))
{
}

void OnnxTensorReader::fail(const std::string& what, const std::string& problem) const
{
    throw Error(sourceName_ + ": " + what + ": " + problem);
}

OnnxTensorReader::Plan OnnxTensorReader::plan(const TensorProto& proto, const std::string& what, bool borrow)
{
    const std::optional<DType> dtype = dtypeOfOnnxElementType(proto.data_type());
    const std::optional<WidenedType> widened = widenedType(proto.data_type());
    if (!dtype && !widened) {
        if (proto.data_type() == TensorProto::STRING)
            fail(what, "string tensors cannot be loaded as weights (only numeric tensors are supported)");
        fail(what, "element type " + onnxElementTypeName(proto.data_type()) + " is not supported");
    }
    if (proto.has_segment())
        fail(what, "segmented tensors are not supported");
    Plan p;
    p.numel = 1;
    for (int64_t d : proto.dims()) {
        if (d < 0)
            fail(what, "dimension " + std::to_string(d) + " is negative");
        if (d != 0 && p.numel > std::numeric_limits<int64_t>::max() / d)
            fail(what, "the element count of its dims overflows 64 bits");
        p.numel *= d;
        p.shape.push_back(d);
    }

    // The bytes the dims need in the file, for this element type.
    const std::string typeName = dtype ? std::string(dtypeName(*dtype)) : onnxElementTypeName(proto.data_type());
    const uint64_t numel = uint64_t(p.numel);
    const size_t elementSize = dtype ? dtypeSize(*dtype) : 1;
    if (numel > std::numeric_limits<uint64_t>::max() / elementSize)
        fail(what, "dims " + shapeToString(p.shape) + " describe more bytes than any file holds");
    const uint64_t bytes = widened && widened->fourBit ? (numel + 1) / 2 : numel * elementSize;
    const std::string need =
        std::to_string(numel) + " " + typeName + " elements" +
        (!widened ? std::string()
                  : " (" + std::to_string(bytes) + (widened->fourBit ? " bytes, two per byte)" : " bytes)"));
    const auto mismatch = [&](const std::string& source, uint64_t count, const char* unit) {
        fail(what, source + " holds " + std::to_string(count) + unit + " but dims " + shapeToString(p.shape) +
                       " need " + need);
    };

    bool borrows = false;
    if (proto.data_location() == TensorProto::EXTERNAL) {
        const ExternalBytes external =
            externalData(proto, what, bytes, "dims " + shapeToString(p.shape) + " of " + typeName);
        borrows = !widened && bytes > 0 && reinterpret_cast<uintptr_t>(external.data) % elementSize == 0;
    } else if (proto.has_raw_data()) {
        if (proto.raw_data().size() != bytes)
            mismatch("raw_data", proto.raw_data().size(), " bytes");
        borrows = !widened;
    } else {
        // A typed field holds one value per element, or for the widened types
        // one byte (a float8 code or two 4-bit codes) per int32.
        const auto [field, count] = typedField(proto, dtype);
        if (uint64_t(count) != (widened ? bytes : numel))
            mismatch(field, uint64_t(count), " values");
        borrows = dtype && typedFieldIsStorage(*dtype);
    }
    checkTensorElements(p.numel, p.shape, sourceName_, what);
    const size_t storedSize = widened ? dtypeSize(widened->dtype) : elementSize;
    p.allocatedBytes = borrows && borrow ? 0 : numel * storedSize;
    return p;
}

Tensor OnnxTensorReader::read(const TensorProto& proto, const std::string& what, bool borrow)
{
    const Plan p = plan(proto, what, borrow);
    const std::optional<DType> dtype = dtypeOfOnnxElementType(proto.data_type());
    if (!dtype)
        return readWidened(proto, what, p);
    const Shape& shape = p.shape;
    const size_t elementSize = dtypeSize(*dtype);
    const auto finish = [&](const void* data, std::shared_ptr<const void> owner) {
        const Tensor t = Tensor::borrow(*dtype, shape, data, std::move(owner));
        if (borrow && reinterpret_cast<uintptr_t>(data) % elementSize == 0)
            return t;
        // A copy: asked for, or the data is not aligned to its elements (reading
        // it in place would be a misaligned access; the copy copies bytes).
        Tensor copy = allocateTensor(*dtype, shape, sourceName_, what);
        std::memcpy(copy.mutableRawData(), data, t.nbytes());
        return copy;
    };

    if (proto.data_location() == TensorProto::EXTERNAL) {
        const ExternalBytes external =
            externalData(proto, what, uint64_t(p.numel) * elementSize,
                         "dims " + shapeToString(shape) + " of " + std::string(dtypeName(*dtype)));
        if (p.numel == 0)
            return Tensor(*dtype, shape);
        return finish(external.data, external.file);
    }
    if (proto.has_raw_data())
        return finish(proto.raw_data().data(), owner_);
    switch (*dtype) {
    case DType::F32:
        return finish(proto.float_data().data(), owner_);
    case DType::F64:
        return finish(proto.double_data().data(), owner_);
    case DType::I64:
        return finish(proto.int64_data().data(), owner_);
    case DType::I32:
        return finish(proto.int32_data().data(), owner_);
    case DType::U64:
        return finish(proto.uint64_data().data(), owner_);
    case DType::U32: {
        Tensor t = allocateTensor(*dtype, shape, sourceName_, what);
        auto out = t.mutableValues<uint32_t>();
        for (int i = 0; i < proto.uint64_data_size(); ++i) {
            if (proto.uint64_data(i) > std::numeric_limits<uint32_t>::max())
                fail(what, "uint64_data value " + std::to_string(proto.uint64_data(i)) + " does not fit uint32");
            out[size_t(i)] = uint32_t(proto.uint64_data(i));
        }
        return t;
    }
    default:
        break;
    }
    // The narrow types are stored one per int32 (f16/bf16 as their bit patterns).
    Tensor t = allocateTensor(*dtype, shape, sourceName_, what);
    bool ok = true;
    switch (*dtype) {
    case DType::I8:
        ok = narrowInto<int8_t>(proto.int32_data(), t, false);
        break;
    case DType::U8:
        ok = narrowInto<uint8_t>(proto.int32_data(), t, false);
        break;
    case DType::Bool:
        ok = narrowInto<uint8_t>(proto.int32_data(), t, false);
        break;
    case DType::I16:
        ok = narrowInto<int16_t>(proto.int32_data(), t, false);
        break;
    case DType::U16:
        ok = narrowInto<uint16_t>(proto.int32_data(), t, false);
        break;
    case DType::F16:
    case DType::BF16:
        ok = narrowInto<uint16_t>(proto.int32_data(), t, true);
        break;
    default:
        fail(what, "unexpected element type"); // every DType is handled above
    }
    if (!ok)
        fail(what, "an int32_data value does not fit " + std::string(dtypeName(*dtype)));
    return t;
}

std::shared_ptr<const MappedFile> OnnxTensorReader::externalFile(const std::string& location, const std::string& what)
{
    if (folder_.empty())
        fail(what,
             "uses external data ('" + location + "'), which needs the model's folder; load the model from a file");
    if (location.empty() || location.find('\0') != std::string::npos)
        fail(what, "external data location is empty or contains a NUL byte");
    const std::filesystem::path relative(location);
    if (relative.is_absolute() || relative.has_root_name() || relative.has_root_directory())
        fail(what, "external data location '" + location +
                       "' is an absolute path; it must be relative to the model's folder");
    for (const auto& part : relative.lexically_normal())
        if (part == "..")
            fail(what, "external data location '" + location + "' leaves the model's folder");
    const std::filesystem::path path = folder_ / relative.lexically_normal();
    if (auto it = mapped_.find(path); it != mapped_.end())
        return it->second;
    // A symbolic link inside the folder must not lead outside it either.
    std::error_code ec;
    const std::filesystem::path real = std::filesystem::canonical(path, ec);
    if (ec)
        fail(what, "external data file '" + location + "' cannot be opened: " + ec.message());
    const std::filesystem::path realFolder = std::filesystem::canonical(folder_, ec);
    const auto rel = real.lexically_relative(realFolder);
    if (ec || rel.empty() || *rel.begin() == "..")
        fail(what, "external data file '" + location + "' resolves outside the model's folder");
    std::shared_ptr<const MappedFile> file = MappedFile::open(real);
    mapped_.emplace(path, file);
    return file;
}

Tensor OnnxTensorReader::readWidened(const TensorProto& proto, const std::string& what, const Plan& plan)
{
    const WidenedType type = *widenedType(proto.data_type());
    const std::string typeName = onnxElementTypeName(proto.data_type());
    const uint64_t bytes = type.fourBit ? (uint64_t(plan.numel) + 1) / 2 : uint64_t(plan.numel);
    Tensor out = allocateTensor(type.dtype, plan.shape, sourceName_, what);
    if (proto.data_location() == TensorProto::EXTERNAL) {
        const ExternalBytes external =
            externalData(proto, what, bytes, "dims " + shapeToString(plan.shape) + " of " + typeName);
        widen(reinterpret_cast<const uint8_t*>(external.data), plan.numel, type, proto.data_type(), out);
    } else if (proto.has_raw_data()) {
        widen(reinterpret_cast<const uint8_t*>(proto.raw_data().data()), plan.numel, type, proto.data_type(), out);
    } else {
        // int32_data holds one byte per value: one float8 code, or two packed 4-bit codes.
        std::vector<uint8_t> packed(bytes);
        for (int i = 0; i < proto.int32_data_size(); ++i) {
            const int32_t v = proto.int32_data(i);
            if (v < 0 || v > 0xff)
                fail(what, "int32_data value " + std::to_string(v) + " is not a byte of " + typeName + " codes");
            packed[size_t(i)] = uint8_t(v);
        }
        widen(packed.data(), plan.numel, type, proto.data_type(), out);
    }
    return out;
}

OnnxTensorReader::ExternalBytes OnnxTensorReader::externalData(const TensorProto& proto, const std::string& what,
                                                               uint64_t bytes, const std::string& layout)
{
    std::optional<std::string> location;
    std::optional<uint64_t> offset, length;
    for (const auto& entry : proto.external_data()) {
        if (entry.key() == "location")
            location = entry.value();
        else if (entry.key() == "offset" || entry.key() == "length") {
            const std::optional<uint64_t> v = parseUnsigned(entry.value());
            if (!v)
                fail(what, "external data " + entry.key() + " '" + entry.value() + "' is not a non-negative integer");
            (entry.key() == "offset" ? offset : length) = v;
        }
    }
    if (!location)
        fail(what, "external data has no 'location'");
    const std::shared_ptr<const MappedFile> file = externalFile(*location, what);
    const uint64_t fileSize = file->size();
    const uint64_t begin = offset.value_or(0);
    if (length && *length != bytes)
        fail(what, "external data length " + std::to_string(*length) + " does not match " + layout + " (" +
                       std::to_string(bytes) + " bytes)");
    if (begin > fileSize || bytes > fileSize - begin)
        fail(what, "external data [" + std::to_string(begin) + ", +" + std::to_string(bytes) +
                       ") runs past the end of '" + *location + "' (" + std::to_string(fileSize) + " bytes)");
    return {file->data() + begin, file};
}

} // namespace qs
