#include "io/onnx_tensor.h"

#include <charconv>
#include <cstring>
#include <limits>
#include <optional>

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

Tensor OnnxTensorReader::read(const TensorProto& proto, const std::string& what, bool borrow)
{
    const std::optional<DType> dtype = dtypeOfOnnxElementType(proto.data_type());
    if (!dtype) {
        if (proto.data_type() == TensorProto::STRING)
            fail(what, "string tensors cannot be loaded as weights (only numeric tensors are supported)");
        fail(what, "element type " + onnxElementTypeName(proto.data_type()) + " is not supported");
    }
    if (proto.has_segment())
        fail(what, "segmented tensors are not supported");
    Shape shape;
    int64_t numel = 1;
    for (int64_t d : proto.dims()) {
        if (d < 0)
            fail(what, "dimension " + std::to_string(d) + " is negative");
        if (d != 0 && numel > std::numeric_limits<int64_t>::max() / d)
            fail(what, "the element count of its dims overflows 64 bits");
        numel *= d;
        shape.push_back(d);
    }
    const size_t elementSize = dtypeSize(*dtype);
    const auto fits = [&](uint64_t available) { return uint64_t(numel) <= available / elementSize; };
    const auto mismatch = [&](const std::string& source, uint64_t count) {
        fail(what, source + " holds " + std::to_string(count) + (source == "raw_data" ? " bytes" : " values") +
                       " but dims " + shapeToString(shape) + " need " + std::to_string(numel) + " " +
                       std::string(dtypeName(*dtype)) + " elements");
    };

    if (proto.data_location() == TensorProto::EXTERNAL)
        return readExternal(proto, what, *dtype, shape, numel);

    const auto finish = [&](const void* data) {
        Tensor t = Tensor::borrow(*dtype, shape, data, owner_);
        return borrow ? t : t.clone();
    };
    if (proto.has_raw_data()) {
        const std::string& raw = proto.raw_data();
        if (!fits(raw.size()) || uint64_t(numel) * elementSize != raw.size())
            mismatch("raw_data", raw.size());
        return finish(raw.data());
    }
    // Typed fields: the one the element type uses must hold exactly numel values.
    const auto checkCount = [&](const char* field, int count) {
        if (uint64_t(count) != uint64_t(numel))
            mismatch(field, uint64_t(count));
    };
    switch (*dtype) {
    case DType::F32:
        checkCount("float_data", proto.float_data_size());
        return finish(proto.float_data().data());
    case DType::F64:
        checkCount("double_data", proto.double_data_size());
        return finish(proto.double_data().data());
    case DType::I64:
        checkCount("int64_data", proto.int64_data_size());
        return finish(proto.int64_data().data());
    case DType::I32:
        checkCount("int32_data", proto.int32_data_size());
        return finish(proto.int32_data().data());
    case DType::U64:
        checkCount("uint64_data", proto.uint64_data_size());
        return finish(proto.uint64_data().data());
    case DType::U32: {
        checkCount("uint64_data", proto.uint64_data_size());
        Tensor t(*dtype, shape);
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
    checkCount("int32_data", proto.int32_data_size());
    Tensor t(*dtype, shape);
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

Tensor OnnxTensorReader::readExternal(const TensorProto& proto, const std::string& what, DType dtype,
                                      const Shape& shape, int64_t numel)
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
    const size_t elementSize = dtypeSize(dtype);
    if (uint64_t(numel) > std::numeric_limits<uint64_t>::max() / elementSize)
        fail(what, "dims " + shapeToString(shape) + " describe more bytes than any file holds");
    const uint64_t bytes = uint64_t(numel) * elementSize;
    if (length && *length != bytes)
        fail(what, "external data length " + std::to_string(*length) + " does not match dims " + shapeToString(shape) +
                       " of " + std::string(dtypeName(dtype)) + " (" + std::to_string(bytes) + " bytes)");
    if (begin > fileSize || bytes > fileSize - begin)
        fail(what, "external data [" + std::to_string(begin) + ", +" + std::to_string(bytes) +
                       ") runs past the end of '" + *location + "' (" + std::to_string(fileSize) + " bytes)");
    if (bytes == 0)
        return Tensor(dtype, shape);
    const std::byte* data = file->data() + begin;
    const Tensor mapped = Tensor::borrow(dtype, shape, data, file);
    if (reinterpret_cast<uintptr_t>(data) % elementSize != 0)
        return mapped.clone(); // clone() copies bytes; it does not read elements through the pointer's type
    return mapped;
}

} // namespace qs
