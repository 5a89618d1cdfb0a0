#pragma once
// Bit-exact encoders and decoders of the small float formats. Encoders
// saturate to the largest finite value (also for ±Inf input), round to nearest
// even, keep the sign of zero, and map NaN to the format's NaN (e4m3fn: 0x7f |
// sign; e5m2: 0x7e | sign; e2m1 has no NaN: NaN encodes as +0 — callers reject
// NaN before encoding). Subnormals of every format are supported.

#include <cstdint>

namespace qs {

uint8_t encodeFp8E4M3(float x);
float decodeFp8E4M3(uint8_t code);

uint8_t encodeFp8E5M2(float x);
float decodeFp8E5M2(uint8_t code);

// 4-bit code in the low nibble: sign bit 3, exponent bits 2..1, mantissa bit 0.
uint8_t encodeFp4E2M1(float x);
float decodeFp4E2M1(uint8_t code);

// E8M0 (OCP MX shared scale): 2^(code − 127); code 0xff is NaN.
// encodeE8M0 takes an exponent and clamps it to [−127, 127].
uint8_t encodeE8M0(int exponent);
float decodeE8M0(uint8_t code);

} // namespace qs
