#include "numerics/nf4.h"

#include <cmath>

namespace qs {
namespace {

// QLoRA's NormalFloat4 levels (bitsandbytes' table), ascending; index 7 is the exact zero.
constexpr std::array<float, 16> kNf4{
    -1.0f,
    -0.6961928009986877f,
    -0.5250730514526367f,
    -0.39491748809814453f,
    -0.28444138169288635f,
    -0.18477343022823334f,
    -0.09105003625154495f,
    0.0f,
    0.07958029955625534f,
    0.16093020141124725f,
    0.24611230194568634f,
    0.33791524171829224f,
    0.44070982933044434f,
    0.5626170039176941f,
    0.7229568362236023f,
    1.0f,
};

// Midpoints between neighbours, exact in double (a float sum halved never rounds in double).
constexpr std::array<double, 15> midpoints()
{
    std::array<double, 15> m{};
    for (size_t i = 0; i < m.size(); ++i)
        m[i] = (double(kNf4[i]) + double(kNf4[i + 1])) / 2;
    return m;
}
constexpr std::array<double, 15> kMidpoints = midpoints();

} // namespace

const std::array<float, 16>& nf4Codebook()
{
    return kNf4;
}

uint8_t encodeNf4(float x)
{
    if (std::isnan(x))
        return 7; // callers reject NaN first; the zero code is the harmless answer
    // The code is the number of midpoints below x. At an exact midpoint the tie
    // goes to the smaller magnitude: below zero that is the upper entry.
    uint8_t code = 0;
    for (size_t i = 0; i < kMidpoints.size(); ++i) {
        const double m = kMidpoints[i];
        if (double(x) > m || (double(x) == m && m < 0))
            code = uint8_t(i + 1);
        else
            break;
    }
    return code;
}

float decodeNf4(uint8_t code)
{
    return kNf4[code & 0xf];
}

} // namespace qs
