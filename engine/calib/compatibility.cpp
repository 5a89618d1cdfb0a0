#include "calib/compatibility.h"

#include "core/error.h"

namespace qs {

MethodCompatibility methodCompatibility(QType qtype, const CalibrationMethod& method, std::optional<bool> symmetric,
                                        std::string_view methodField, std::string_view qtypeField)
{
    const std::string typeText =
        (qtypeField.empty() ? "" : std::string(qtypeField) + " ") + std::string(qtypeName(qtype));
    MethodCompatibility c;
    const QuantTypeInfo& info = qtypeInfo(qtype);
    if (info.kind == QKind::GgufBlock) {
        // Its reference quantizer picks every scale (and min) itself: an explicit
        // `symmetric` does not apply (the plan notes it), any method but absmax is refused.
        if (method.kind != CalibrationKind::AbsMax || method.factor != 1.0) {
            c.problem = MethodCompatibility::Problem::BlockScalesNeedAbsmax;
            c.reason = typeText + " computes its own block scales as llama.cpp's reference quantizer does; " +
                       (methodField.empty() ? std::string("the method") : std::string(methodField)) +
                       " must be absmax (or left unset), not '" + method.toString() + "'";
        }
        return c;
    }
    if (info.kind == QKind::Lut) {
        // k-means finds the table from the values themselves: there is no range to
        // calibrate (an explicit `symmetric` does not apply; the plan notes it).
        if (method.kind != CalibrationKind::AbsMax || method.factor != 1.0) {
            c.problem = MethodCompatibility::Problem::BlockScalesNeedAbsmax;
            c.reason = typeText + " finds its table by k-means on the values, with no range to calibrate; " +
                       (methodField.empty() ? std::string("the method") : std::string(methodField)) +
                       " must be absmax (or left unset), not '" + method.toString() + "'";
        }
        return c;
    }
    try {
        c.symmetric = method.resolveSymmetric(symmetric);
    } catch (const Error& e) {
        c.problem = MethodCompatibility::Problem::Symmetry;
        c.reason = methodField.empty() ? std::string(e.what()) : "for " + std::string(methodField) + ", " + e.what();
        return c;
    }
    if (!c.symmetric && info.kind != QKind::Integer) {
        c.problem = MethodCompatibility::Problem::NoZeroPoint;
        c.reason = "calibration method '" + method.toString() + "' is asymmetric, but " + typeText +
                   " has no zero point; use a symmetric method (absmax, rms, percentile ...) or an integer type";
        return c;
    }
    if (info.kind == QKind::Microscaling && (method.kind != CalibrationKind::AbsMax || method.factor != 1.0)) {
        c.problem = MethodCompatibility::Problem::BlockScalesNeedAbsmax;
        c.reason = typeText + " computes its block scales from each block's absmax; " +
                   (methodField.empty() ? std::string("the method") : std::string(methodField)) +
                   " must be absmax, not '" + method.toString() + "'";
    }
    return c;
}

} // namespace qs
