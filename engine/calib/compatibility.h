#pragma once
// The one rule that says whether a quantized type can be calibrated with a
// method under a symmetry request: rule validation, the plan, the one-tensor
// quantizer, the method comparison (CLI and charts) and the GUI all ask this
// function, so a combination is refused everywhere with the same sentence.
//
// The checks, in order:
// - the method must honour an explicit `symmetric` (absmax cannot be made
//   asymmetric, minmax cannot be made symmetric);
// - an asymmetric method needs a zero point, which only integer grids have;
// - the microscaling types (mxfp8, mxfp4, nvfp4) compute each block's scale
//   from its absmax, so their method must be plain absmax.
// The GGUF block formats (q8_0 ... q6_k) pick their own scales and mins as
// llama.cpp's reference quantizers do: only plain absmax (the default) is
// accepted, and an explicit symmetry is not checked (it does not apply to them).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "calib/method.h"
#include "numerics/qtype.h"

namespace qs {

struct MethodCompatibility {
    enum class Problem : uint8_t {
        None,
        Symmetry,              // the method refuses the requested symmetry: the `symmetric` field is at fault
        NoZeroPoint,           // an asymmetric method on a type without zero points: the method is at fault
        BlockScalesNeedAbsmax, // a microscaling or GGUF type with another method than absmax: the method is at fault
    };
    Problem problem = Problem::None;
    bool symmetric = true; // the symmetry the method takes (meaningful when there is no problem)
    std::string reason;    // one sentence saying what to set instead; empty when there is no problem

    explicit operator bool() const { return problem == Problem::None; }
    // Whether the `symmetric` field rather than the method is what to change.
    bool symmetryAtFault() const { return problem == Problem::Symmetry; }
};

// `methodField` and `qtypeField` name where the method and the type come from
// in `reason` ("weight_calibration" and "weight_qtype" for a rule; empty: not said).
MethodCompatibility methodCompatibility(QType qtype, const CalibrationMethod& method, std::optional<bool> symmetric,
                                        std::string_view methodField = {}, std::string_view qtypeField = {});

} // namespace qs
