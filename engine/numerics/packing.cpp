#include "numerics/packing.h"

#include <string>

#include "core/error.h"

namespace qs {
namespace {

void checkWidth(int bits)
{
    if (bits < 1 || bits > 8)
        throw Error("packing: code width " + std::to_string(bits) + " bits is not supported (expected 1 to 8)");
}

} // namespace

int codesPerByte(int bits)
{
    checkWidth(bits);
    switch (bits) {
    case 1:
        return 8;
    case 2:
        return 4;
    case 4:
        return 2;
    default:
        return 1;
    }
}

size_t packedByteCount(size_t count, int bits)
{
    const size_t perByte = size_t(codesPerByte(bits));
    return count / perByte + (count % perByte != 0);
}

void packCodes(std::span<const uint8_t> codes, int bits, std::span<uint8_t> out)
{
    const size_t perByte = size_t(codesPerByte(bits));
    const size_t needed = packedByteCount(codes.size(), bits);
    if (out.size() != needed)
        throw Error("packing " + std::to_string(codes.size()) + " codes of " + std::to_string(bits) + " bits needs " +
                    std::to_string(needed) + " bytes, got " + std::to_string(out.size()));
    const unsigned mask = (1u << bits) - 1u;
    if (perByte == 1) {
        for (size_t i = 0; i < codes.size(); ++i)
            out[i] = uint8_t(codes[i] & mask);
        return;
    }
    // Unused high bits of a final partial byte stay zero.
    for (size_t k = 0; k < needed; ++k) {
        unsigned byte = 0;
        const size_t first = k * perByte;
        for (size_t j = 0; j < perByte && first + j < codes.size(); ++j)
            byte |= (codes[first + j] & mask) << (j * size_t(bits));
        out[k] = uint8_t(byte);
    }
}

void unpackCodes(std::span<const uint8_t> packed, int bits, std::span<uint8_t> out)
{
    const size_t perByte = size_t(codesPerByte(bits));
    const size_t needed = packedByteCount(out.size(), bits);
    if (packed.size() < needed)
        throw Error("unpacking " + std::to_string(out.size()) + " codes of " + std::to_string(bits) + " bits needs " +
                    std::to_string(needed) + " bytes, got " + std::to_string(packed.size()));
    const unsigned mask = (1u << bits) - 1u;
    for (size_t i = 0; i < out.size(); ++i)
        out[i] = uint8_t((packed[i / perByte] >> ((i % perByte) * size_t(bits))) & mask);
}

} // namespace qs
