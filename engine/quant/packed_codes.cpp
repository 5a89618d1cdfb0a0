// The packed variants of quantize/dequantize: the codes of kernels.cpp laid out
// as numerics/packing.h writes them down (int16 as two little-endian bytes).
#include "quant/kernels.h"

#include <cstdint>

#include "numerics/packing.h"

namespace qs {

Tensor quantizePacked(const Tensor& input, const QuantParams& params, Rounding rounding, uint64_t seed,
                      std::string_view tensorName)
{
    const Tensor codes = quantize(input, params, rounding, seed, tensorName);
    const size_t n = size_t(codes.numel());
    if (codes.dtype() == DType::I16) {
        Tensor out(DType::U8, {int64_t(2 * n)});
        uint8_t* b = out.mutableValues<uint8_t>().data();
        const auto c = codes.values<int16_t>();
        for (size_t i = 0; i < n; ++i) {
            b[2 * i] = uint8_t(uint16_t(c[i]) & 0xff);
            b[2 * i + 1] = uint8_t(uint16_t(c[i]) >> 8);
        }
        return out;
    }
    const int bits = qtypeInfo(params.qtype).bits;
    Tensor out(DType::U8, {int64_t(packedByteCount(n, bits))});
    packCodes({static_cast<const uint8_t*>(codes.rawData()), n}, bits, out.mutableValues<uint8_t>());
    return out;
}

Tensor dequantizePacked(const Tensor& packed, const QuantParams& params)
{
    const int64_t n = shapeElementCount(params.layout.shape);
    const int bits = qtypeInfo(params.qtype).bits;
    const size_t expected = codeDType(params.qtype) == DType::I16 ? size_t(2 * n) : packedByteCount(size_t(n), bits);
    if (packed.dtype() != DType::U8 || size_t(packed.numel()) != expected)
        throw Error("packed " + std::string(qtypeName(params.qtype)) + " codes of shape " +
                    shapeToString(params.layout.shape) + " must be " + std::to_string(expected) + " uint8 bytes, got " +
                    std::to_string(packed.numel()) + " " + std::string(dtypeName(packed.dtype())));
    Tensor codes(codeDType(params.qtype), params.layout.shape);
    const uint8_t* b = packed.values<uint8_t>().data();
    if (codes.dtype() == DType::I16) {
        auto c = codes.mutableValues<int16_t>();
        for (size_t i = 0; i < size_t(n); ++i)
            c[i] = int16_t(uint16_t(b[2 * i] | (b[2 * i + 1] << 8)));
    } else {
        unpackCodes(packed.values<uint8_t>(), bits, {static_cast<uint8_t*>(codes.mutableRawData()), size_t(n)});
    }
    return dequantize(codes, params);
}

} // namespace qs
