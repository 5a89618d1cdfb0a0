#pragma once
// Rounding modes. Nearest is round-half-to-even. Stochastic rounding is seeded
// and counter-based: the random draw for element i depends only on (seed, i),
// so results do not depend on thread count or scheduling.

#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace qs {

enum class Rounding : uint8_t { Nearest, Stochastic };

std::string_view roundingName(Rounding r); // "nearest", "stochastic"
std::optional<Rounding> parseRounding(std::string_view name);
// Every rounding mode, in the order docs and GUI list them.
std::span<const Rounding> allRoundings();

// Uniform draw in [0, 1) for element `index` under `seed` (splitmix64-style hash).
float stochasticUniform(uint64_t seed, uint64_t index);

// Round half to even, equal to std::nearbyint in the default rounding mode
// (including the sign of zero), inline so that kernels can use it in their loops.
// NaN and ±Inf come back unchanged.
inline float roundHalfEven(float v)
{
    if (!(std::fabs(v) < 0x1p23f)) // already an integer, or Inf/NaN
        return v;
    // Adding 2^23 leaves no fraction bits: the FPU rounds to an integer, ties to even.
    const float magic = std::copysign(0x1p23f, v);
    return std::copysign((v + magic) - magic, v);
}

} // namespace qs
