#include "numerics/rounding.h"

namespace qs {

std::string_view roundingName(Rounding r)
{
    switch (r) {
    case Rounding::Nearest:
        return "nearest";
    case Rounding::Stochastic:
        return "stochastic";
    }
    return "nearest";
}

std::span<const Rounding> allRoundings()
{
    static constexpr Rounding all[] = {Rounding::Nearest, Rounding::Stochastic};
    return all;
}

std::optional<Rounding> parseRounding(std::string_view name)
{
    if (name == "nearest")
        return Rounding::Nearest;
    if (name == "stochastic")
        return Rounding::Stochastic;
    return std::nullopt;
}

float stochasticUniform(uint64_t seed, uint64_t index)
{
    // splitmix64 finaliser over the counter: every (seed, index) pair gets an
    // independent-looking draw, so the result never depends on iteration order.
    uint64_t z = seed ^ (index * 0x9e3779b97f4a7c15ull);
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    // The top 24 bits fill a float mantissa exactly: multiples of 2^-24 in [0, 1).
    return float(z >> 40) * 0x1p-24f;
}

} // namespace qs
