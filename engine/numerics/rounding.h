#pragma once
// Rounding modes. Nearest is round-half-to-even. Stochastic rounding is seeded
// and counter-based: the random draw for element i depends only on (seed, i),
// so results do not depend on thread count or scheduling.

#include <cstdint>
#include <optional>
#include <string_view>

namespace qs {

enum class Rounding : uint8_t { Nearest, Stochastic };

std::string_view roundingName(Rounding r); // "nearest", "stochastic"
std::optional<Rounding> parseRounding(std::string_view name);

// Uniform draw in [0, 1) for element `index` under `seed` (splitmix64-style hash).
float stochasticUniform(uint64_t seed, uint64_t index);

} // namespace qs
