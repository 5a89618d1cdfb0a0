#pragma once
// Packing codes narrower than a byte. Codes of `bits` bits are laid out
// little-endian within each byte: for 4-bit types element 2k sits in bits 0..3
// and element 2k+1 in bits 4..7 of byte k (ONNX int4/uint4 order); 2-bit types
// pack four per byte and 1-bit types eight per byte, lowest bits first. 3-, 5-,
// 6- and 7-bit codes are stored one per byte (unpacked) so that every element
// starts on a byte boundary. docs/formats.md documents the same.

#include <cstddef>
#include <cstdint>
#include <span>

namespace qs {

// Codes per byte for a width: 8 for 1, 4 for 2, 2 for 4, 1 otherwise.
int codesPerByte(int bits);
size_t packedByteCount(size_t count, int bits);
// codes: one code per element, only the low `bits` bits used. out: packedByteCount bytes.
void packCodes(std::span<const uint8_t> codes, int bits, std::span<uint8_t> out);
// Inverse of packCodes; out.size() is the element count.
void unpackCodes(std::span<const uint8_t> packed, int bits, std::span<uint8_t> out);

} // namespace qs
