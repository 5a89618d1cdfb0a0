#include "rules/weight_algorithm.h"

#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/error.h"

namespace qs {

namespace {

constexpr std::array<WeightAlgorithmInfo, 4> kAlgorithms{{
    {WeightAlgorithmKind::Rtn, "rtn", "rtn", "round to nearest, each weight on its own (the default)"},
    {WeightAlgorithmKind::Gptq, "gptq", "gptq[,damp[,act_order]]",
     "GPTQ: columns rounded in turn, each rounding error compensated on the columns left through the inverse "
     "Hessian of the layer's calibration inputs; damp = fraction of mean diag(H) added to its diagonal (default "
     "0.01), act_order = 1 rounds columns by descending diag(H) (default), 0 in their own order"},
    {WeightAlgorithmKind::Awq, "awq", "awq[,grid[,clip]]",
     "AWQ: each input channel j of the weight scaled by s_j = mean|x_j|^alpha over the layer's calibration inputs "
     "before rounding and divided by it after, alpha the best of grid points i/grid, i = 0..grid-1 (default 20), "
     "on the layer's output error over its calibration inputs; clip = 1 (default) then clips each weight group "
     "(row or tile) to the best of the ratios 1 - i/40, i = 0..19, of its range on the group's output error, "
     "0 leaves the range whole"},
    {WeightAlgorithmKind::Adaround, "adaround", "adaround[,iters[,lambda]]",
     "AdaRound: each weight learns whether it rounds up or down, by iters Adam steps (default 1000) on the layer's "
     "output error over its calibration inputs plus lambda (default 0.01) times a regulariser annealed to force "
     "each choice to 0 or 1"},
}};

std::vector<std::string_view> split(std::string_view text)
{
    std::vector<std::string_view> parts;
    size_t start = 0;
    while (true) {
        const size_t comma = text.find(',', start);
        parts.push_back(text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
        if (comma == std::string_view::npos)
            return parts;
        start = comma + 1;
    }
}

double number(std::string_view text, std::string_view whole, std::string_view what)
{
    double v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v))
        throw Error("algorithm '" + std::string(whole) + "': " + std::string(what) + " '" + std::string(text) +
                    "' is not a number");
    return v;
}

// The shortest text that reads back to the same double.
std::string shortest(double value)
{
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", value);
    for (int digits = 1; digits <= 17; ++digits) {
        char shorter[32];
        std::snprintf(shorter, sizeof shorter, "%.*g", digits, value);
        if (std::strtod(shorter, nullptr) == value) {
            std::snprintf(text, sizeof text, "%s", shorter);
            break;
        }
    }
    return text;
}

} // namespace

std::span<const WeightAlgorithmInfo> allWeightAlgorithms()
{
    return kAlgorithms;
}

WeightAlgorithm WeightAlgorithm::parse(std::string_view text)
{
    const std::vector<std::string_view> parts = split(text);
    WeightAlgorithm a;
    if (parts[0] == "rtn") {
        if (parts.size() > 1)
            throw Error("algorithm '" + std::string(text) + "': rtn takes no options; write \"rtn\"");
        return a;
    }
    if (parts[0] == "awq") {
        a.kind = WeightAlgorithmKind::Awq;
        if (parts.size() > 3)
            throw Error("algorithm '" + std::string(text) + "': awq takes at most two options, awq,grid,clip");
        if (parts.size() > 1) {
            const double grid = number(parts[1], text, "grid");
            if (!(grid >= 1 && grid <= 1000 && grid == std::floor(grid)))
                throw Error("algorithm '" + std::string(text) +
                            "': the grid is the number of exponents tried, a whole number from 1 to 1000, such as 20");
            a.awqGrid = int(grid);
        }
        if (parts.size() > 2) {
            if (parts[2] != "0" && parts[2] != "1")
                throw Error("algorithm '" + std::string(text) +
                            "': clip is 1 (search a clipping ratio per weight group, the default) or 0 (no clipping)");
            a.awqClip = parts[2] == "1";
        }
        return a;
    }
    if (parts[0] == "adaround") {
        a.kind = WeightAlgorithmKind::Adaround;
        if (parts.size() > 3)
            throw Error("algorithm '" + std::string(text) +
                        "': adaround takes at most two options, adaround,iters,lambda");
        if (parts.size() > 1) {
            const double iters = number(parts[1], text, "iters");
            if (!(iters >= 1 && iters <= 100000 && iters == std::floor(iters)))
                throw Error("algorithm '" + std::string(text) +
                            "': iters is the number of Adam steps, a whole number from 1 to 100000, such as 1000");
            a.adaroundIterations = int(iters);
        }
        if (parts.size() > 2) {
            a.adaroundLambda = number(parts[2], text, "lambda");
            if (!(a.adaroundLambda >= 0 && a.adaroundLambda <= 1000))
                throw Error("algorithm '" + std::string(text) +
                            "': lambda weighs the rounding regulariser, a number from 0 to 1000, such as 0.01");
        }
        return a;
    }
    if (parts[0] != "gptq")
        throw Error("unknown algorithm '" + std::string(text) +
                    "'; expected rtn, gptq[,damp[,act_order]], awq[,grid[,clip]] or adaround[,iters[,lambda]]");
    a.kind = WeightAlgorithmKind::Gptq;
    if (parts.size() > 3)
        throw Error("algorithm '" + std::string(text) + "': gptq takes at most two options, gptq,damp,act_order");
    if (parts.size() > 1) {
        a.dampening = number(parts[1], text, "dampening");
        if (!(a.dampening > 0 && a.dampening <= 1))
            throw Error("algorithm '" + std::string(text) +
                        "': the dampening is a fraction of mean diag(H) in (0, 1], such as 0.01");
    }
    if (parts.size() > 2) {
        if (parts[2] != "0" && parts[2] != "1")
            throw Error("algorithm '" + std::string(text) +
                        "': act_order is 1 (columns by descending Hessian diagonal) or 0 (their own order)");
        a.actOrder = parts[2] == "1";
    }
    return a;
}

std::string_view WeightAlgorithm::name() const
{
    for (const WeightAlgorithmInfo& info : kAlgorithms)
        if (info.kind == kind)
            return info.name;
    return "rtn";
}

std::string WeightAlgorithm::toString() const
{
    if (kind == WeightAlgorithmKind::Rtn)
        return "rtn";
    if (kind == WeightAlgorithmKind::Awq) {
        if (!awqClip)
            return "awq," + std::to_string(awqGrid) + ",0";
        return awqGrid == WeightAlgorithm{}.awqGrid ? "awq" : "awq," + std::to_string(awqGrid);
    }
    if (kind == WeightAlgorithmKind::Adaround) {
        const WeightAlgorithm defaults;
        if (adaroundLambda != defaults.adaroundLambda)
            return "adaround," + std::to_string(adaroundIterations) + "," + shortest(adaroundLambda);
        return adaroundIterations == defaults.adaroundIterations ? "adaround"
                                                                 : "adaround," + std::to_string(adaroundIterations);
    }
    const WeightAlgorithm defaults{WeightAlgorithmKind::Gptq};
    if (dampening == defaults.dampening && actOrder == defaults.actOrder)
        return "gptq";
    return "gptq," + shortest(dampening) + (actOrder ? "" : ",0");
}

} // namespace qs
