#pragma once
// The header of an .npy file: magic, version, length, and the Python-literal
// dict that describes the array. Parsed strictly, from bytes that are not
// trusted; used by npy.cpp and by the .npz reader.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "core/tensor.h"

namespace qs {

struct NpyHeader {
    DType dtype = DType::F32;
    bool bigEndian = false;    // the data's byte order ('>'), only for multi-byte types
    bool fortranOrder = false; // data stored column-major
    Shape shape;
    size_t dataOffset = 0; // bytes from the start of the file to the first element
    int64_t dataBytes = 0; // element count × item size, overflow-checked
};

// Bytes a reader must have to learn the header length (magic, version, length field).
inline constexpr size_t kNpyPreambleBytes = 12;

// From the first bytes of a file (at least kNpyPreambleBytes, or the whole file
// when shorter): the total length of magic, version, length field and header
// dict, i.e. the offset of the data. Checks magic, version and the length bound.
size_t npyDataOffset(std::span<const std::byte> preamble, std::string_view fileName);

// Parses the complete header (`bytes` holds at least npyDataOffset() bytes).
NpyHeader parseNpyHeader(std::span<const std::byte> bytes, std::string_view fileName);

// The header dict text numpy would write for a C-order, little-endian tensor,
// padded with spaces and ended by '\n' so that the data starts 64-byte aligned.
// `preambleBytes` is 10 for version 1.0 and 12 for 2.0.
std::string npyHeaderText(DType dtype, const Shape& shape, size_t preambleBytes);

} // namespace qs
