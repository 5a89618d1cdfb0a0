#include "rules/rule.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <unordered_set>

#include <re2/re2.h>

#include "calib/compatibility.h"
#include "core/error.h"
#include "rules/regex_syntax.h"

namespace qs {

namespace {

struct GranularityName {
    Granularity granularity;
    std::string_view name;
};
constexpr std::array<GranularityName, 2> kGranularities{{
    {Granularity::PerTensor, "per_tensor"},
    {Granularity::PerChannel, "per_channel"},
}};
constexpr std::array<Granularity, 2> kGranularityValues{Granularity::PerTensor, Granularity::PerChannel};

// The method/type compatibility a rule can be checked for on its own (the
// plan checks the microscaling types' absmax per layer, where it names the layer).
void checkMethod(size_t index, std::string_view methodField, const CalibrationMethod& method,
                 std::optional<bool> symmetric, QType type, std::string_view typeField)
{
    const MethodCompatibility c = methodCompatibility(type, method, symmetric, methodField, typeField);
    if (c.problem == MethodCompatibility::Problem::Symmetry)
        throwRuleError(index, "symmetric", c.reason);
    if (c.problem == MethodCompatibility::Problem::NoZeroPoint)
        throwRuleError(index, methodField, c.reason);
}

} // namespace

RuleError::RuleError(size_t index, std::string_view field, const std::string& what)
    : Error("rule " + std::to_string(index) + ", field \"" + std::string(field) + "\": " + what), index_(index),
      field_(field)
{
}

void throwRuleError(size_t index, std::string_view field, const std::string& what)
{
    throw RuleError(index, field, what);
}

std::string_view granularityName(Granularity g)
{
    for (const auto& e : kGranularities)
        if (e.granularity == g)
            return e.name;
    return "per_tensor";
}

std::optional<Granularity> parseGranularity(std::string_view name)
{
    for (const auto& e : kGranularities)
        if (e.name == name)
            return e.granularity;
    return std::nullopt;
}

std::span<const Granularity> allGranularities()
{
    return kGranularityValues;
}

ModulePathPattern::ModulePathPattern() : text_(".*")
{
    // Rule files may hold many rules left at the default; they share one program.
    static const std::shared_ptr<const re2::RE2> everything = compileModulePathRegex(".*");
    regex_ = everything;
}

ModulePathPattern::ModulePathPattern(std::string text) : text_(std::move(text))
{
    regex_ = compileModulePathRegex(text_);
}

bool ModulePathPattern::matches(std::string_view modulePath) const
{
    return re2::RE2::FullMatch(re2::StringPiece(modulePath.data(), modulePath.size()), *regex_);
}

bool QuantizationRule::listsOpType(std::string_view opType) const
{
    return opTypes.empty() || std::find(opTypes.begin(), opTypes.end(), opType) != opTypes.end();
}

void QuantizationRule::validate(size_t index) const
{
    for (const auto& op : opTypes)
        if (op.empty())
            throwRuleError(index, "op_types",
                           "an op type is an empty string; list names such as \"Conv\" or \"MatMul\"");

    if (tileSize) {
        const double t = *tileSize;
        if (!std::isfinite(t) || t <= 0)
            throwRuleError(index, "tile_size",
                           "must be greater than 0, got " + std::to_string(t) +
                               "; use a tile length such as 128, or 0.25 for 4 tiles");
        if (t >= 1 && (t != std::floor(t) || t > 0x1p31))
            throwRuleError(index, "tile_size",
                           std::to_string(t) + " must be a whole tile length (1 to 2^31) when it is 1 or more");
        if (t < 1) {
            const double count = 1.0 / t;
            if (std::abs(count - std::round(count)) > 1e-6 * count)
                throwRuleError(index, "tile_size",
                               std::to_string(t) + " below 1 must be 1/n for a whole tile count n (0.5, 0.25, ...)");
        }
    }

    if (!std::isfinite(smoothAlpha) || smoothAlpha < 0 || smoothAlpha > 1)
        throwRuleError(index, "smooth_alpha",
                       "must be between 0 and 1 (0 = off; the paper's default is 0.5), got " +
                           std::to_string(smoothAlpha));

    std::unordered_set<int> axes; // a set, not a pairwise check: the list may be long in a hostile file
    for (const int axis : actBatchAxes)
        if (!axes.insert(axis).second)
            throwRuleError(index, "act_batch_axes", "axis " + std::to_string(axis) + " is listed twice");

    if (roundingSeed != 0 && rounding != Rounding::Stochastic)
        throwRuleError(index, "rounding_seed",
                       "only stochastic rounding uses a seed; set \"rounding\": \"stochastic\" "
                       "or remove rounding_seed");

    if (algorithm.kind != WeightAlgorithmKind::Rtn) {
        const std::string name(algorithm.name());
        if (!weightQType)
            throwRuleError(index, "algorithm",
                           name + " rounds the weights, but weight_qtype is not set; set an integer weight_qtype such "
                                  "as int4, or remove algorithm");
        const QuantTypeInfo& info = qtypeInfo(*weightQType);
        if (info.kind != QKind::Integer)
            throwRuleError(index, "algorithm",
                           name + " rounds onto an integer grid; weight_qtype " + std::string(qtypeName(*weightQType)) +
                               " is not an integer type (use int2 ... int8, uint2 ... uint8, or algorithm rtn)");
        if (rounding != Rounding::Nearest)
            throwRuleError(index, "algorithm",
                           name +
                               (algorithm.kind == WeightAlgorithmKind::Gptq
                                    ? " rounds to nearest and compensates the error"
                                : algorithm.kind == WeightAlgorithmKind::Adaround
                                    ? " learns each weight's rounding itself"
                                    : " rounds to nearest and searches its scales on that rounding") +
                               "; set \"rounding\": \"nearest\" or use algorithm rtn");
        if (algorithm.kind == WeightAlgorithmKind::Awq && algorithm.awqClip &&
            weightCalibration.kind != CalibrationKind::AbsMax && weightCalibration.kind != CalibrationKind::MinMax)
            throwRuleError(index, "algorithm",
                           "awq's clipping search shrinks the range absmax and minmax take from the weight, and "
                           "weight_calibration " +
                               weightCalibration.toString() +
                               " chooses its own range; use absmax or minmax, or turn clipping off (awq," +
                               std::to_string(algorithm.awqGrid) + ",0)");
    }
    if (highBiasAbsorption && !equalize)
        throwRuleError(index, "high_bias_absorption",
                       "high_bias_absorption moves biases between the layers cross-layer equalization pairs; set "
                       "\"equalize\": true too or remove high_bias_absorption");
    if (biasCorrection && !weightQType)
        throwRuleError(index, "bias_correction",
                       "bias_correction corrects the output of quantized weights, but weight_qtype is not set; set "
                       "weight_qtype or remove bias_correction");
    if (weightQType)
        checkMethod(index, "weight_calibration", weightCalibration, symmetric, *weightQType, "weight_qtype");
    if (actQType && isGgufBlock(*actQType))
        throwRuleError(index, "act_qtype",
                       std::string(qtypeName(*actQType)) +
                           " is a GGUF block format for weights only (llama.cpp quantizes activations itself); "
                           "use it as weight_qtype, and int8 or fp8_e4m3 (or none) as act_qtype");
    if (actQType && isLut(*actQType))
        throwRuleError(index, "act_qtype",
                       std::string(qtypeName(*actQType)) +
                           " palettizes weights (a k-means table per group, found once from the weight's values); "
                           "activations change with every input, so use it as weight_qtype, and int8 or fp8_e4m3 "
                           "(or none) as act_qtype");
    if (actQType) {
        if (actCalibration) {
            checkMethod(index, "act_calibration", *actCalibration, symmetric, *actQType, "act_qtype");
        } else if (symmetric) {
            // The mode picks the method (absmax in PTQ, minmax in ODML); one of them
            // always refuses an explicit symmetry, so the rule must name the method.
            throwRuleError(index, "symmetric",
                           "act_calibration is not set, so the mode picks it (absmax in PTQ, minmax in ODML) and "
                           "one of them cannot be made " +
                               std::string(*symmetric ? "symmetric" : "asymmetric") +
                               "; set act_calibration to the method you want");
        }
    }
}

} // namespace qs
