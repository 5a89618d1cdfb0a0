#pragma once
// From data and a calibration method to one range per group: the entry point
// the session, the CLI and the analysis views call for weights (observers in
// calib/observer.h do the same for activations seen batch by batch).
//
//   absmax,s      ±s·absmax                minmax,s   [s·min, s·max]
//   rms,s         ±s·sqrt(mean(x²))        fixed,a,b  [a, b] for every group
//   percentile,p  symmetric: ±P_p(|x|); two-sided: [P_(100−p)(x), P_p(x)], P exact as np.percentile
//   mse           the clipping search of calib/clipping.h, all groups at once: on the groups'
//                 values when the largest group has at most kMseExactLimit elements, else on
//                 each group's histogram of x over [−absmax, absmax] (two-sided: [min, max])
//                 with histogramBins bins — bin centres stand for their elements, so the
//                 result is exact at the histogram's resolution
//   entropy       TensorRT's KL search (calib/clipping.h) on a histogram of |x| over [0, absmax]
//                 (two-sided: x over [min(min, 0), max(max, 0)]) with entropyBins(n, levels,
//                 histogramBins) bins, cut on the target type's grid; a group too small for it
//                 keeps its whole range (±absmax, two-sided [min, max]), counted in the report
// Ranges are computed in double and rounded to float. An empty group gets [0, 0].
// Microscaling qtypes compute their own block scales: calibrating them is an Error.

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "calib/method.h"
#include "core/block_layout.h"
#include "quant/scale.h"

namespace qs {

inline constexpr int64_t kMseExactLimit = 2048;

struct CalibrationTarget {
    QType qtype = QType::Int8;     // the type the ranges are for (mse and entropy depend on it)
    ScaleOptions options;          // narrow range and scale restriction, as the quantizer will use them
    std::optional<bool> symmetric; // a rule's `symmetric` field; unset = the method decides
    int histogramBins = 2048;      // bins of the mse and entropy histograms
};

// What a calibration did that its caller should show the user.
struct CalibrationReport {
    int64_t groups = 0;            // groups calibrated
    int64_t entropyWholeRange = 0; // entropy: groups too small for its histogram, kept whole
    std::string note;              // one sentence saying so; empty when there is nothing to say
};

// One range per group of `layout` (row-major over its grid) for the values x
// (row-major, layout.shape). Throws Error naming `tensorName` for NaN/Inf data,
// a microscaling qtype, a symmetry the method cannot honour, or an unsigned
// qtype under a symmetric method on data with negative values (checkUnsignedSymmetric).
// Fills `report` when given.
std::vector<Range> calibrateRanges(std::span<const float> x, const BlockLayout& layout, const CalibrationMethod& m,
                                   const CalibrationTarget& target, std::string_view tensorName,
                                   CalibrationReport* report = nullptr);

// Whether a method's per-tensor range follows from the tensor's extremes alone
// (absmax, minmax): calibrateRangeOfExtremes gives it without reading the data.
bool calibratesFromExtremes(const CalibrationMethod& m);

// The range calibrateRanges gives a per-tensor layout over data whose smallest
// and largest values are `min` and `max` (finite; the data not empty), for a
// method calibratesFromExtremes accepts, with the same checks: what a run uses
// when the kernel that wrote the tensor gathered its extremes.
Range calibrateRangeOfExtremes(float min, float max, const CalibrationMethod& m, const CalibrationTarget& target,
                               std::string_view tensorName);

// An unsigned integer type under a symmetric method quantizes [0, absmax]: every
// negative value would become 0. Throws Error naming the tensor, the qtype, the
// method and the most negative value, and saying what to set, when `symmetric`,
// the qtype is unsigned and `min` < 0; does nothing otherwise.
void checkUnsignedSymmetric(QType t, bool symmetric, const CalibrationMethod& m, float min,
                            std::string_view tensorName);

// The symmetry calibrateRanges used (what quantParamsFromRanges needs next).
bool calibrationSymmetric(const CalibrationMethod& m, const CalibrationTarget& target);

} // namespace qs
