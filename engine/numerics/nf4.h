#pragma once
// The 16-value NormalFloat (nf4) codebook of QLoRA: quantiles of a standard
// normal scaled to [−1, 1], with an exact zero. Codes 0..15 index the table in
// ascending order.

#include <array>
#include <cstdint>

namespace qs {

const std::array<float, 16>& nf4Codebook();
// Nearest codebook entry (ties go to the entry of smaller magnitude); saturates.
// NaN encodes as 7, the exact zero (callers reject NaN before encoding).
uint8_t encodeNf4(float x);
float decodeNf4(uint8_t code);

} // namespace qs
