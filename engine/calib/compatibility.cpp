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
