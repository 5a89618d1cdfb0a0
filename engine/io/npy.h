#pragma once
// NumPy .npy files (format versions 1.0, 2.0 and 3.0).
// Read: dtypes b1, i1, u1, i2, u2, i4, u4, i8, u8, f2, f4, f8 in either byte
// order, C or Fortran order; the result is always a native, row-major Tensor.
// Everything read from the file is checked before it is trusted: magic, version,
// header length (at most kNpyMaxHeaderBytes and inside the file), the header
// dict (exactly 'descr', 'fortran_order', 'shape'), and that the shape's byte
// count equals the bytes that follow the header. Nothing is allocated from the
// header before that check. Object arrays ('O') are refused: loading them would
// run pickle. Errors are qs::Error naming the file and the field.
// Write: C order, little-endian, version 1.0 (2.0 when the header needs it),
// to a temporary file in the target folder renamed into place.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string_view>
#include <vector>

#include "core/tensor.h"

namespace qs {

// The longest header accepted, in bytes (numpy itself writes a few hundred).
inline constexpr uint32_t kNpyMaxHeaderBytes = 1u << 20;

// Reads a whole .npy file.
Tensor readNpy(const std::filesystem::path& path);
// Reads an .npy image held in memory (an .npz member, a network buffer);
// `name` stands for the file in error messages.
Tensor parseNpy(std::span<const std::byte> bytes, std::string_view name);

// The complete .npy image of a tensor. bfloat16 has no .npy dtype: Error.
std::vector<std::byte> encodeNpy(const Tensor& tensor);
// Writes `tensor` to `path` atomically: either the complete new file is in
// place or, on an Error, the previous state of `path` is unchanged.
void writeNpy(const std::filesystem::path& path, const Tensor& tensor);

} // namespace qs
