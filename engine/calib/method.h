#pragma once
// Calibration method strings (DESIGN.md, "Calibration method strings"):
//   absmax[,s]      symmetric, range ±s·max|x|           (s defaults to 1)
//   minmax[,s]      asymmetric, [s·min, s·max]           (s defaults to 1)
//   rms,s           symmetric, ±s·sqrt(mean(x²))         (s required)
//   fixed,min,max   [min, max]; symmetric when min == −max
//   percentile,p    symmetric |x| percentile p in (0, 100]; two-sided when asymmetric
//   mse             clipping range that minimises the quantization MSE
//   entropy         clipping range that minimises the KL divergence (TensorRT style)
// The method decides symmetry; for percentile, mse and entropy a rule's
// `symmetric: false` asks for the two-sided variant.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace qs {

enum class CalibrationKind : uint8_t { AbsMax, MinMax, Rms, Fixed, Percentile, Mse, Entropy };

struct CalibrationKindInfo {
    CalibrationKind kind;
    std::string_view name;    // "absmax"
    std::string_view syntax;  // "absmax[,s]"
    std::string_view summary; // one line for tooltips and docs
};
// The single table of methods, in the order the GUI and docs list them.
std::span<const CalibrationKindInfo> allCalibrationKinds();
const CalibrationKindInfo& calibrationKindInfo(CalibrationKind k);

struct CalibrationMethod {
    CalibrationKind kind = CalibrationKind::AbsMax;
    double factor = 1.0;       // absmax/minmax/rms multiplier s
    double fixedMin = 0.0;     // fixed: lower bound
    double fixedMax = 0.0;     // fixed: upper bound
    double percentile = 99.99; // percentile: p in (0, 100]

    // Parses a method string; throws Error quoting the string and saying what is
    // wrong ("unknown method 'foo'", "rms needs a factor: rms,s", ...).
    static CalibrationMethod parse(std::string_view text);
    // Canonical text that parse() reads back to the same method.
    std::string toString() const;

    // Symmetry when the rule says nothing.
    bool symmetricByDefault() const;
    // Whether a rule's `symmetric` field may change this method's symmetry.
    bool acceptsSymmetricOverride() const;
    // The symmetry used for a rule whose `symmetric` field is `requested`.
    // Throws Error when the method cannot honour the request (absmax asked to be
    // asymmetric, minmax asked to be symmetric, ...).
    bool resolveSymmetric(std::optional<bool> requested) const;
    // Whether the method needs a histogram of the data (percentile, mse, entropy).
    bool needsHistogram() const;

    bool operator==(const CalibrationMethod&) const = default;
};

} // namespace qs
