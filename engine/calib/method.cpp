#include "calib/method.h"

#include <array>
#include <charconv>
#include <cmath>
#include <vector>

#include "core/error.h"

namespace qs {

namespace {

constexpr std::array<CalibrationKindInfo, 7> kKinds{{
    {CalibrationKind::AbsMax, "absmax", "absmax[,s]", "symmetric range ±s·max|x| (s defaults to 1)"},
    {CalibrationKind::MinMax, "minmax", "minmax[,s]", "asymmetric range [s·min, s·max] (s defaults to 1)"},
    {CalibrationKind::Rms, "rms", "rms,s", "symmetric range ±s·sqrt(mean(x²))"},
    {CalibrationKind::Fixed, "fixed", "fixed,min,max", "the given range; symmetric when min = −max"},
    {CalibrationKind::Percentile, "percentile", "percentile,p",
     "p-th percentile of |x| (two-sided percentiles p and 100−p when asymmetric)"},
    {CalibrationKind::Mse, "mse", "mse", "clipping range that minimises the quantization MSE"},
    {CalibrationKind::Entropy, "entropy", "entropy",
     "clipping range that minimises the KL divergence of the quantized histogram (TensorRT), on L·m bins for the "
     "target's L levels, 16 values a bin; a group with fewer than 32·L values keeps its whole range, as reported"},
}};

std::string_view trimmed(std::string_view s)
{
    const auto isSpace = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
    while (!s.empty() && isSpace(s.front()))
        s.remove_prefix(1);
    while (!s.empty() && isSpace(s.back()))
        s.remove_suffix(1);
    return s;
}

std::string validNames()
{
    std::string list;
    for (const auto& k : kKinds)
        list += (list.empty() ? "" : ", ") + std::string(k.syntax);
    return list;
}

[[noreturn]] void fail(std::string_view text, const std::string& what)
{
    throw Error("calibration method '" + std::string(text) + "': " + what);
}

double number(std::string_view text, std::string_view field, std::string_view arg)
{
    double v = 0;
    const auto [end, ec] = std::from_chars(arg.data(), arg.data() + arg.size(), v);
    if (arg.empty() || ec != std::errc() || end != arg.data() + arg.size())
        fail(text, std::string(field) + " '" + std::string(arg) + "' is not a number");
    if (!std::isfinite(v))
        fail(text, std::string(field) + " '" + std::string(arg) + "' must be finite");
    return v;
}

// Shortest text that reads back to the same double.
std::string shortest(double v)
{
    std::array<char, 32> buf{};
    const auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);
    return std::string(buf.data(), end);
}

} // namespace

std::span<const CalibrationKindInfo> allCalibrationKinds()
{
    return kKinds;
}

const CalibrationKindInfo& calibrationKindInfo(CalibrationKind k)
{
    for (const auto& info : kKinds)
        if (info.kind == k)
            return info;
    throw Error("unknown calibration kind " + std::to_string(int(k)));
}

CalibrationMethod CalibrationMethod::parse(std::string_view text)
{
    std::vector<std::string_view> parts;
    for (std::string_view rest = text;;) {
        const size_t comma = rest.find(',');
        parts.push_back(trimmed(rest.substr(0, comma)));
        if (comma == std::string_view::npos)
            break;
        rest.remove_prefix(comma + 1);
    }
    const CalibrationKindInfo* info = nullptr;
    for (const auto& k : kKinds)
        if (k.name == parts[0])
            info = &k;
    if (!info)
        fail(text, "unknown method '" + std::string(parts[0]) + "'; expected one of " + validNames());

    const size_t args = parts.size() - 1;
    const auto expectArgs = [&](size_t lo, size_t hi) {
        if (args < lo || args > hi)
            fail(text, std::string(info->name) + " takes " +
                           (lo == hi ? std::to_string(lo) : std::to_string(lo) + " or " + std::to_string(hi)) +
                           " argument" + (hi == 1 ? "" : "s") + ", got " + std::to_string(args) + "; expected " +
                           std::string(info->syntax));
    };

    CalibrationMethod m;
    m.kind = info->kind;
    switch (info->kind) {
    case CalibrationKind::AbsMax:
    case CalibrationKind::MinMax:
    case CalibrationKind::Rms:
        expectArgs(info->kind == CalibrationKind::Rms ? 1 : 0, 1);
        if (args == 1) {
            m.factor = number(text, "factor s", parts[1]);
            if (m.factor <= 0)
                fail(text, "factor s must be greater than 0, got " + std::string(parts[1]));
        }
        break;
    case CalibrationKind::Fixed:
        expectArgs(2, 2);
        m.fixedMin = number(text, "min", parts[1]);
        m.fixedMax = number(text, "max", parts[2]);
        if (m.fixedMin > m.fixedMax)
            fail(text, "min " + std::string(parts[1]) + " is greater than max " + std::string(parts[2]));
        break;
    case CalibrationKind::Percentile:
        expectArgs(1, 1);
        m.percentile = number(text, "percentile p", parts[1]);
        if (!(m.percentile > 0 && m.percentile <= 100))
            fail(text, "percentile p must be in (0, 100], got " + std::string(parts[1]));
        break;
    case CalibrationKind::Mse:
    case CalibrationKind::Entropy:
        expectArgs(0, 0);
        break;
    }
    return m;
}

std::string CalibrationMethod::toString() const
{
    const std::string name(calibrationKindInfo(kind).name);
    switch (kind) {
    case CalibrationKind::AbsMax:
    case CalibrationKind::MinMax:
        return factor == 1.0 ? name : name + "," + shortest(factor);
    case CalibrationKind::Rms:
        return name + "," + shortest(factor);
    case CalibrationKind::Fixed:
        return name + "," + shortest(fixedMin) + "," + shortest(fixedMax);
    case CalibrationKind::Percentile:
        return name + "," + shortest(percentile);
    case CalibrationKind::Mse:
    case CalibrationKind::Entropy:
        break;
    }
    return name;
}

bool CalibrationMethod::symmetricByDefault() const
{
    switch (kind) {
    case CalibrationKind::MinMax:
        return false;
    case CalibrationKind::Fixed:
        return fixedMin == -fixedMax;
    default:
        return true;
    }
}

bool CalibrationMethod::acceptsSymmetricOverride() const
{
    return kind == CalibrationKind::Percentile || kind == CalibrationKind::Mse || kind == CalibrationKind::Entropy;
}

bool CalibrationMethod::resolveSymmetric(std::optional<bool> requested) const
{
    const bool natural = symmetricByDefault();
    if (!requested || *requested == natural || acceptsSymmetricOverride())
        return requested.value_or(natural);
    throw Error("calibration method '" + toString() + "' is " + (natural ? "symmetric" : "asymmetric") +
                " and cannot be made " + (*requested ? "symmetric" : "asymmetric") +
                "; remove `symmetric` or use percentile, mse or entropy, which accept it");
}

bool CalibrationMethod::needsHistogram() const
{
    return kind == CalibrationKind::Percentile || kind == CalibrationKind::Mse || kind == CalibrationKind::Entropy;
}

} // namespace qs
