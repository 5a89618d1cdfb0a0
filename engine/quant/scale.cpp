#include "quant/scale.h"

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>

#include "core/error.h"
#include "core/half.h"

namespace qs {
namespace {

struct RestrictionName {
    ScaleRestriction restriction;
    std::string_view name;
};
constexpr std::array<RestrictionName, 3> kRestrictions{{
    {ScaleRestriction::Float, "float"},
    {ScaleRestriction::Pow2, "pow2"},
    {ScaleRestriction::Fp16, "fp16"},
}};

// fp16's finite, non-zero magnitudes: the smallest subnormal 2^-24 up to 65504.
constexpr float kFp16Smallest = 0x1p-24f;
constexpr float kFp16Largest = 65504.f;

// Brings a positive scale computed in double into float's normal range, so that
// neither a tiny range (1e-45) nor a huge one (±FLT_MAX) yields 0, a subnormal or Inf.
float clampToNormalFloat(double s)
{
    return float(std::clamp(s, double(FLT_MIN), double(FLT_MAX)));
}

std::string groupName(std::string_view tensorName, size_t group)
{
    return "tensor '" + std::string(tensorName) + "', group " + std::to_string(group);
}

} // namespace

std::string_view scaleRestrictionName(ScaleRestriction r)
{
    for (const auto& e : kRestrictions)
        if (e.restriction == r)
            return e.name;
    return "float";
}

std::span<const ScaleRestriction> allScaleRestrictions()
{
    static constexpr std::array<ScaleRestriction, kRestrictions.size()> all = [] {
        std::array<ScaleRestriction, kRestrictions.size()> a{};
        for (size_t i = 0; i < a.size(); ++i)
            a[i] = kRestrictions[i].restriction;
        return a;
    }();
    return all;
}

std::optional<ScaleRestriction> parseScaleRestriction(std::string_view name)
{
    for (const auto& e : kRestrictions)
        if (e.name == name)
            return e.restriction;
    return std::nullopt;
}

float symmetricBound(QType t, bool narrowRange)
{
    const QuantTypeInfo& q = qtypeInfo(t);
    switch (q.kind) {
    case QKind::Integer: {
        // int1's grid {-1, 0} has qmax 0: its only non-zero code, -1, sets the bound instead.
        const float top = float(q.qmax > 0 ? q.qmax : -q.qmin);
        return narrowRange ? top : top + 0.5f;
    }
    case QKind::Binary:
        return 1.0f;
    case QKind::Ternary:
        return narrowRange ? 1.0f : 1.5f;
    case QKind::Float:
    case QKind::Microscaling:
        return q.maxFinite;
    case QKind::Codebook:
        return 1.0f;
    case QKind::GgufBlock:
    case QKind::Lut:
        break;
    }
    throw Error(std::string(q.name) +
                (q.kind == QKind::Lut ? " palettizes with a k-means table"
                                      : " computes its own block scales (GGUF block format)") +
                "; it has no symmetric bound");
}

float restrictScale(float scale, ScaleRestriction r)
{
    if (!(scale > 0) || !std::isfinite(scale))
        throw Error("a scale must be finite and positive, got " + std::to_string(scale));
    switch (r) {
    case ScaleRestriction::Float:
        return std::max(scale, FLT_MIN);
    case ScaleRestriction::Pow2: {
        // Rounded in double: log2 of a float is exact enough there that the
        // halfway point 2^(k+0.5) is decided correctly.
        const int e = int(std::clamp(std::round(std::log2(double(scale))), -126.0, 127.0));
        return std::ldexp(1.0f, e);
    }
    case ScaleRestriction::Fp16:
        return fp16ToFloat(floatToFp16(std::clamp(scale, kFp16Smallest, kFp16Largest)));
    }
    return scale;
}

QuantParams quantParamsFromRanges(QType t, const BlockLayout& layout, std::span<const Range> ranges, bool symmetric,
                                  const ScaleOptions& options, std::string_view tensorName)
{
    const QuantTypeInfo& q = qtypeInfo(t);
    if (q.kind == QKind::Microscaling || q.kind == QKind::GgufBlock || q.kind == QKind::Lut)
        throw Error("tensor '" + std::string(tensorName) + "': " + std::string(q.name) +
                    " computes its own block scales (or tables) from the data; ranges do not apply");
    if (!symmetric && q.kind != QKind::Integer)
        throw Error("tensor '" + std::string(tensorName) + "': " + std::string(q.name) +
                    " has no zero point; use a symmetric calibration method");
    const int64_t groups = layout.groupCount();
    if (int64_t(ranges.size()) != groups)
        throw Error("tensor '" + std::string(tensorName) + "': " + std::to_string(ranges.size()) +
                    " calibrated ranges for " + std::to_string(groups) + " groups (" + layout.describe() + ")");

    QuantParams p;
    p.qtype = t;
    p.layout = layout;
    p.symmetric = symmetric;
    p.options = options;
    p.scales.resize(ranges.size());
    if (!symmetric)
        p.zeroPoints.resize(ranges.size());

    const float bound = symmetricBound(t, options.narrowRange);
    for (size_t g = 0; g < ranges.size(); ++g) {
        const Range r = ranges[g];
        if (!std::isfinite(r.min) || !std::isfinite(r.max))
            throw Error(groupName(tensorName, g) + ": calibrated range [" + std::to_string(r.min) + ", " +
                        std::to_string(r.max) + "] is not finite (the data holds a NaN or Inf)");
        if (r.min > r.max)
            throw Error(groupName(tensorName, g) + ": calibrated range [" + std::to_string(r.min) + ", " +
                        std::to_string(r.max) + "] has min > max");
        if (symmetric) {
            const double absmax = std::max(std::abs(double(r.min)), std::abs(double(r.max)));
            const float s = absmax == 0 ? kDegenerateScale : clampToNormalFloat(absmax / bound);
            p.scales[g] = restrictScale(s, options.restriction);
            continue;
        }
        const IntegerGrid grid = integerGrid(t, options.narrowRange);
        const double lo = std::min(double(r.min), 0.0);
        const double hi = std::max(double(r.max), 0.0);
        const float s = hi == lo ? kDegenerateScale : clampToNormalFloat((hi - lo) / double(grid.qmax - grid.qmin));
        const float scale = restrictScale(s, options.restriction);
        // The zero point is computed after the restriction so that 0 stays exact
        // under the scale actually used. float arithmetic, as the kernels use.
        const float zp = std::nearbyint(float(grid.qmin) - float(lo) / scale);
        p.scales[g] = scale;
        p.zeroPoints[g] = int32_t(std::clamp(zp, float(grid.qmin), float(grid.qmax)));
    }
    return p;
}

std::vector<Range> saturationRanges(const QuantParams& p)
{
    const QuantTypeInfo& q = qtypeInfo(p.qtype);
    if (q.kind == QKind::Microscaling || q.kind == QKind::GgufBlock || q.kind == QKind::Lut)
        throw Error(std::string(q.name) +
                    ": saturation ranges come from its block scales or tables, not from QuantParams");
    double lo = 0, hi = 0; // the grid's ends in code units, beyond which a value saturates
    switch (q.kind) {
    case QKind::Integer:
    case QKind::Ternary: {
        const IntegerGrid grid = integerGrid(p.qtype, p.options.narrowRange);
        lo = double(grid.qmin) - 0.5;
        hi = double(grid.qmax) + 0.5;
        break;
    }
    case QKind::Binary:
        lo = -1;
        hi = 1;
        break;
    case QKind::Float:
    case QKind::Microscaling:
        lo = -double(q.maxFinite);
        hi = double(q.maxFinite);
        break;
    case QKind::Codebook:
        lo = -1;
        hi = 1;
        break;
    case QKind::GgufBlock:
    case QKind::Lut:
        break; // refused above
    }
    std::vector<Range> out(p.scales.size());
    for (size_t g = 0; g < out.size(); ++g) {
        const double s = double(p.scales[g]);
        const double zp = p.symmetric || p.zeroPoints.empty() ? 0.0 : double(p.zeroPoints[g]);
        out[g] = {float((lo - zp) * s), float((hi - zp) * s)};
    }
    return out;
}

} // namespace qs
