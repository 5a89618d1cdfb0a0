#include "rules/schema.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace qs {

using Json = nlohmann::ordered_json;

namespace {

// --- reading values --------------------------------------------------------

// "number 3", "string \"abc\"": what the file holds, shortened for a one-line message.
std::string shown(const Json& v)
{
    if (v.is_null())
        return "null";
    std::string text = v.dump();
    if (text.size() > 40)
        text = text.substr(0, 37) + "...";
    return std::string(v.type_name()) + " " + text;
}

[[noreturn]] void wrongType(const Json& v, std::string_view expected)
{
    throw Error("expected " + std::string(expected) + ", got " + shown(v));
}

const std::string& stringValue(const Json& v)
{
    if (!v.is_string())
        wrongType(v, "a string");
    return v.get_ref<const std::string&>();
}

bool boolValue(const Json& v)
{
    if (!v.is_boolean())
        wrongType(v, "true or false");
    return v.get<bool>();
}

std::string joined(const std::vector<std::string>& names)
{
    std::string list;
    for (const auto& n : names)
        list += (list.empty() ? "" : ", ") + n;
    return list;
}

// --- allowed values, from the engine's tables --------------------------------

std::vector<std::string> qtypeNames()
{
    std::vector<std::string> names;
    for (const auto& q : allQTypes())
        names.emplace_back(q.name);
    return names;
}

// The GGUF block formats and the lut types are weight-only (rule validation refuses them as act_qtype).
std::vector<std::string> activationQTypeNames()
{
    std::vector<std::string> names;
    for (const auto& q : allQTypes())
        if (q.kind != QKind::GgufBlock && q.kind != QKind::Lut)
            names.emplace_back(q.name);
    return names;
}

std::vector<std::string> calibrationSyntaxes()
{
    std::vector<std::string> names;
    for (const auto& k : allCalibrationKinds())
        names.emplace_back(k.syntax);
    return names;
}

std::vector<std::string> granularityNames()
{
    std::vector<std::string> names;
    for (const Granularity g : allGranularities())
        names.emplace_back(granularityName(g));
    return names;
}

std::vector<std::string> restrictionNames()
{
    std::vector<std::string> names;
    for (const ScaleRestriction r : allScaleRestrictions())
        names.emplace_back(scaleRestrictionName(r));
    return names;
}

std::vector<std::string> roundingNames()
{
    std::vector<std::string> names;
    for (const Rounding r : allRoundings())
        names.emplace_back(roundingName(r));
    return names;
}

// --- one reader and writer per field ----------------------------------------

std::optional<QType> qtypeValue(const Json& v)
{
    if (v.is_null())
        return std::nullopt;
    const std::string& name = stringValue(v);
    if (const auto t = parseQType(name))
        return t;
    throw Error("unknown qtype \"" + name + "\"; expected one of " + qtypeNameList() + ", or null to leave it float");
}

void writeQType(Json& o, const char* key, const std::optional<QType>& t)
{
    if (t)
        o[key] = std::string(qtypeName(*t));
}

CalibrationMethod methodValue(const Json& v)
{
    return CalibrationMethod::parse(stringValue(v));
}

template <typename Enum>
Enum enumValue(const Json& v, std::optional<Enum> (*parse)(std::string_view), std::vector<std::string> (*names)())
{
    const std::string& name = stringValue(v);
    if (const auto e = parse(name))
        return *e;
    throw Error("unknown value \"" + name + "\"; expected one of " + joined(names()));
}

void readModulePath(QuantizationRule& r, const Json& v)
{
    r.modulePath = ModulePathPattern(stringValue(v));
}
void writeModulePath(const QuantizationRule& r, Json& o)
{
    if (!(r.modulePath == ModulePathPattern()))
        o["module_path"] = r.modulePath.text();
}

void readOpTypes(QuantizationRule& r, const Json& v)
{
    if (!v.is_array())
        wrongType(v, "a list of op type names such as [\"Conv\", \"MatMul\"]");
    r.opTypes.clear();
    for (const auto& e : v) {
        if (!e.is_string())
            throw Error("element " + std::to_string(r.opTypes.size()) + ": expected a string, got " + shown(e));
        r.opTypes.push_back(e.get<std::string>());
    }
}
void writeOpTypes(const QuantizationRule& r, Json& o)
{
    if (!r.opTypes.empty())
        o["op_types"] = r.opTypes;
}

void readWeightQType(QuantizationRule& r, const Json& v)
{
    r.weightQType = qtypeValue(v);
}
void writeWeightQType(const QuantizationRule& r, Json& o)
{
    writeQType(o, "weight_qtype", r.weightQType);
}
void readActQType(QuantizationRule& r, const Json& v)
{
    r.actQType = qtypeValue(v);
}
void writeActQType(const QuantizationRule& r, Json& o)
{
    writeQType(o, "act_qtype", r.actQType);
}

void readWeightCalibration(QuantizationRule& r, const Json& v)
{
    r.weightCalibration = methodValue(v);
}
void writeWeightCalibration(const QuantizationRule& r, Json& o)
{
    if (!(r.weightCalibration == CalibrationMethod{}))
        o["weight_calibration"] = r.weightCalibration.toString();
}

void readActCalibration(QuantizationRule& r, const Json& v)
{
    r.actCalibration = v.is_null() ? std::nullopt : std::optional(methodValue(v));
}
void writeActCalibration(const QuantizationRule& r, Json& o)
{
    if (r.actCalibration)
        o["act_calibration"] = r.actCalibration->toString();
}

void readGranularity(QuantizationRule& r, const Json& v)
{
    r.granularity = enumValue(v, parseGranularity, granularityNames);
}
void writeGranularity(const QuantizationRule& r, Json& o)
{
    if (r.granularity != QuantizationRule{}.granularity)
        o["granularity"] = std::string(granularityName(r.granularity));
}

void readTileSize(QuantizationRule& r, const Json& v)
{
    if (v.is_null()) {
        r.tileSize.reset();
        return;
    }
    if (!v.is_number())
        wrongType(v, "a number (a tile length such as 128, or 1/n such as 0.25) or null");
    r.tileSize = v.get<double>();
}
void writeTileSize(const QuantizationRule& r, Json& o)
{
    if (!r.tileSize)
        return;
    const double t = *r.tileSize;
    if (t >= 1 && t <= 0x1p53 && t == std::floor(t))
        o["tile_size"] = int64_t(t); // whole lengths stay integers in the file
    else
        o["tile_size"] = t;
}

void readActStaticScale(QuantizationRule& r, const Json& v)
{
    r.actStaticScale = boolValue(v);
}
void writeActStaticScale(const QuantizationRule& r, Json& o)
{
    if (r.actStaticScale)
        o["act_static_scale"] = true;
}

void readActBatchAxes(QuantizationRule& r, const Json& v)
{
    if (!v.is_array())
        wrongType(v, "a list of axes such as [0]");
    r.actBatchAxes.clear();
    for (const auto& e : v) {
        const std::string where = "element " + std::to_string(r.actBatchAxes.size());
        if (!e.is_number_integer())
            throw Error(where + ": expected an integer axis, got " + shown(e));
        if (e.is_number_unsigned() ? e.get<uint64_t>() > uint64_t(INT_MAX)
                                   : (e.get<int64_t>() < INT_MIN || e.get<int64_t>() > INT_MAX))
            throw Error(where + ": axis " + e.dump() + " is out of range");
        r.actBatchAxes.push_back(int(e.get<int64_t>()));
    }
}
void writeActBatchAxes(const QuantizationRule& r, Json& o)
{
    if (r.actBatchAxes != QuantizationRule{}.actBatchAxes)
        o["act_batch_axes"] = r.actBatchAxes;
}

void readNarrowRange(QuantizationRule& r, const Json& v)
{
    r.narrowRange = boolValue(v);
}
void writeNarrowRange(const QuantizationRule& r, Json& o)
{
    if (r.narrowRange)
        o["narrow_range"] = true;
}

void readSymmetric(QuantizationRule& r, const Json& v)
{
    r.symmetric = v.is_null() ? std::nullopt : std::optional(boolValue(v));
}
void writeSymmetric(const QuantizationRule& r, Json& o)
{
    if (r.symmetric)
        o["symmetric"] = *r.symmetric;
}

void readScaleRestriction(QuantizationRule& r, const Json& v)
{
    r.scaleRestriction = enumValue(v, parseScaleRestriction, restrictionNames);
}
void writeScaleRestriction(const QuantizationRule& r, Json& o)
{
    if (r.scaleRestriction != ScaleRestriction::Float)
        o["scale_restriction"] = std::string(scaleRestrictionName(r.scaleRestriction));
}

void readRounding(QuantizationRule& r, const Json& v)
{
    r.rounding = enumValue(v, parseRounding, roundingNames);
}
void writeRounding(const QuantizationRule& r, Json& o)
{
    if (r.rounding != Rounding::Nearest)
        o["rounding"] = std::string(roundingName(r.rounding));
}

void readRoundingSeed(QuantizationRule& r, const Json& v)
{
    if (!v.is_number_integer())
        wrongType(v, "a non-negative integer");
    if (!v.is_number_unsigned() && v.get<int64_t>() < 0)
        throw Error("expected a non-negative integer, got " + v.dump());
    r.roundingSeed = v.get<uint64_t>();
}
void writeRoundingSeed(const QuantizationRule& r, Json& o)
{
    if (r.roundingSeed != 0)
        o["rounding_seed"] = r.roundingSeed;
}

void readAlgorithm(QuantizationRule& r, const Json& v)
{
    r.algorithm = WeightAlgorithm::parse(stringValue(v));
}
void writeAlgorithm(const QuantizationRule& r, Json& o)
{
    if (!(r.algorithm == WeightAlgorithm{}))
        o["algorithm"] = r.algorithm.toString();
}

void readBiasCorrection(QuantizationRule& r, const Json& v)
{
    r.biasCorrection = boolValue(v);
}
void writeBiasCorrection(const QuantizationRule& r, Json& o)
{
    if (r.biasCorrection)
        o["bias_correction"] = true;
}

void readEqualize(QuantizationRule& r, const Json& v)
{
    r.equalize = boolValue(v);
}
void writeEqualize(const QuantizationRule& r, Json& o)
{
    if (r.equalize)
        o["equalize"] = true;
}

void readHighBiasAbsorption(QuantizationRule& r, const Json& v)
{
    r.highBiasAbsorption = boolValue(v);
}
void writeHighBiasAbsorption(const QuantizationRule& r, Json& o)
{
    if (r.highBiasAbsorption)
        o["high_bias_absorption"] = true;
}

void readSmoothAlpha(QuantizationRule& r, const Json& v)
{
    if (v.is_null()) {
        r.smoothAlpha = 0;
        return;
    }
    if (!v.is_number())
        wrongType(v, "a number from 0 to 1 (0.5 is the paper's default) or null");
    r.smoothAlpha = v.get<double>();
}
void writeSmoothAlpha(const QuantizationRule& r, Json& o)
{
    if (r.smoothAlpha != 0)
        o["smooth_alpha"] = r.smoothAlpha;
}

std::vector<std::string> algorithmSyntaxes()
{
    std::vector<std::string> names;
    for (const auto& a : allWeightAlgorithms())
        names.emplace_back(a.syntax);
    return names;
}

std::vector<std::string> none()
{
    return {};
}

const std::array<RuleField, 20> kFields{{
    {"module_path", RuleFieldKind::Regex, false, ".*", 0, "string (regex)", "`.*`",
     "RE2 regex (Python `re` without back-references and lookaround) that must match the whole module path "
     "(`conv1` does not match `layer1/conv1`)",
     none, readModulePath, writeModulePath},
    {"op_types", RuleFieldKind::OpTypeList, false, "all", 0, "list of strings", "`[]` (every op type)",
     "op types the rule applies to, e.g. `[\"Conv\", \"Gemm\"]`", none, readOpTypes, writeOpTypes},
    {"weight_qtype", RuleFieldKind::QType, true, "float", 0, "string or null", "`null` (weights stay float)",
     "quantized type of the layer's weights", qtypeNames, readWeightQType, writeWeightQType},
    {"act_qtype", RuleFieldKind::QType, true, "float", 0, "string or null", "`null` (activations stay float)",
     "quantized type of the layer's input activations (not the weight-only GGUF block formats)", activationQTypeNames,
     readActQType, writeActQType},
    {"weight_calibration", RuleFieldKind::Method, false, "absmax", 0, "string", "`absmax`",
     "calibration method that finds the weight range", calibrationSyntaxes, readWeightCalibration,
     writeWeightCalibration},
    {"act_calibration", RuleFieldKind::Method, true, "", 0, "string or null",
     "`null`: `absmax` in PTQ, `minmax` in ODML", "calibration method that finds the activation range",
     calibrationSyntaxes, readActCalibration, writeActCalibration},
    {"granularity", RuleFieldKind::Choice, false, "per_channel", 0, "string", "`per_channel`",
     "weight scales per output channel or one per tensor (activations always use one per tensor)", granularityNames,
     readGranularity, writeGranularity},
    {"tile_size", RuleFieldKind::Number, true, "", 0, "number or null", "`null` (no tiles)",
     "sub-channel tiles along the contraction axis: an integer is the tile length, a value below 1 is 1/tile_count",
     none, readTileSize, writeTileSize},
    {"act_static_scale", RuleFieldKind::Bool, false, "false", 0, "boolean", "`false`",
     "activations use a scale calibrated ahead of time (static range) instead of one computed per batch", none,
     readActStaticScale, writeActStaticScale},
    {"act_batch_axes", RuleFieldKind::IntegerList, false, "[0]", 0, "list of integers", "`[0]`",
     "activation axes reduced before the statistics are averaged over batches", none, readActBatchAxes,
     writeActBatchAxes},
    {"narrow_range", RuleFieldKind::Bool, false, "false", 0, "boolean", "`false`",
     "integer grid without its most negative code (int8 in [−127, 127])", none, readNarrowRange, writeNarrowRange},
    {"symmetric", RuleFieldKind::OptionalBool, true, "", 0, "boolean or null", "`null` (the method decides)",
     "asks `percentile`, `mse` or `entropy` for the symmetric (`true`) or two-sided (`false`) variant; other methods "
     "accept only their own symmetry",
     none, readSymmetric, writeSymmetric},
    {"scale_restriction", RuleFieldKind::Choice, false, "float", 0, "string", "`float`",
     "how scales are represented: any float, a power of two, or an fp16 value", restrictionNames, readScaleRestriction,
     writeScaleRestriction},
    {"rounding", RuleFieldKind::Choice, false, "nearest", 0, "string", "`nearest`",
     "round half to even, or seeded stochastic rounding", roundingNames, readRounding, writeRounding},
    {"rounding_seed", RuleFieldKind::Integer, false, "0", 0, "non-negative integer", "`0`",
     "seed of stochastic rounding; the same seed gives the same codes (only with `rounding: stochastic`)", none,
     readRoundingSeed, writeRoundingSeed},
    {"algorithm", RuleFieldKind::Method, false, "rtn", 0, "string", "`rtn`",
     "how the weights are rounded onto their grid: `rtn` (round to nearest), `gptq[,damp[,act_order]]` (GPTQ from "
     "the layer's calibration inputs; damp default 0.01, act_order default 1), `awq[,grid[,clip]]` "
     "(activation-aware per-input-channel scaling, exponent searched over `grid` points, default 20; clip 1, the "
     "default, then searches a clipping ratio per weight group, 0 does not) or `adaround[,iters[,lambda]]` "
     "(learned up/down rounding of every weight; iters default 1000 Adam steps, lambda default 0.01); all but rtn "
     "need calibration data; docs/algorithms.md",
     algorithmSyntaxes, readAlgorithm, writeAlgorithm},
    {"bias_correction", RuleFieldKind::Bool, false, "false", 0, "boolean", "`false`",
     "adds the output mean shift the rounded weight causes on the calibration inputs, (W − Ŵ)·E[x] per output "
     "channel, to the layer's bias (a zero bias is created when it has none); Conv and Gemm; needs calibration data; "
     "docs/algorithms.md",
     none, readBiasCorrection, writeBiasCorrection},
    {"equalize", RuleFieldKind::Bool, false, "false", 0, "boolean", "`false`",
     "cross-layer equalization: this layer's output channels and the next layer's input channels (when its rule "
     "sets equalize too and only Relu, LeakyRelu, pools or nothing lies between) are rescaled by s = sqrt(r1/r2) so "
     "that both weight ranges become sqrt(r1·r2); the float model computes the same function; Conv→Conv (depthwise "
     "included) and Gemm/MatMul→Gemm/MatMul; data-free; docs/algorithms.md",
     none, readEqualize, writeEqualize},
    {"high_bias_absorption", RuleFieldKind::Bool, false, "false", 0, "boolean", "`false`",
     "after equalization, for a pair this layer → Relu → next layer (both equalized, both with a bias, the next "
     "padding nothing): c = max(0, the minimum of this layer's output channel on the calibration data) moves from "
     "this layer's bias into the next one's (b1 − c, b2 + W2·c), which shrinks the activation's range and leaves the "
     "function unchanged on the calibration data; needs equalize and calibration data; docs/algorithms.md",
     none, readHighBiasAbsorption, writeHighBiasAbsorption},
    {"smooth_alpha", RuleFieldKind::Number, true, "0", 0, "number or null", "`0` (off)",
     "SmoothQuant: a MatMul/Gemm whose input activation is quantized gets its input channels rescaled by s_j = "
     "max|X_j|^α / max|W_j|^(1−α) (max|X_j| from a float calibration pass; layers reading the same X share s), "
     "W·diag(s) is quantized and 1/s is folded into the op producing X (LayerNormalization, RMSNorm, Gemm/MatMul); "
     "layers whose X no op can take 1/s are skipped with a note; the float model computes the same function; needs "
     "calibration data; docs/algorithms.md",
     none, readSmoothAlpha, writeSmoothAlpha},
}};

size_t editDistance(std::string_view a, std::string_view b)
{
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j)
        row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
        size_t diagonal = row[0];
        row[0] = i;
        for (size_t j = 1; j <= b.size(); ++j) {
            const size_t above = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diagonal = above;
        }
    }
    return row[b.size()];
}

std::string fieldNames()
{
    std::string list;
    for (const auto& f : kFields)
        list += (list.empty() ? "" : ", ") + std::string(f.name);
    return list;
}

} // namespace

std::span<const RuleField> ruleFields()
{
    return kFields;
}

const RuleField* findRuleField(std::string_view name)
{
    for (const auto& f : kFields)
        if (f.name == name)
            return &f;
    return nullptr;
}

QuantizationRule ruleFromJson(const Json& object, size_t index)
{
    if (!object.is_object())
        throw Error("rule " + std::to_string(index) +
                    ": expected an object such as {\"module_path\": \".*\", "
                    "\"weight_qtype\": \"int8\"}, got " +
                    shown(object));
    QuantizationRule rule;
    for (const auto& [key, value] : object.items()) {
        const RuleField* field = findRuleField(key);
        if (!field) {
            const RuleField* closest = &kFields[0];
            for (const auto& f : kFields)
                if (editDistance(key, f.name) < editDistance(key, closest->name))
                    closest = &f;
            const std::string hint = editDistance(key, closest->name) <= 3
                                         ? "did you mean \"" + std::string(closest->name) + "\"? "
                                         : std::string();
            throwRuleError(index, key, "unknown field; " + hint + "fields are " + fieldNames());
        }
        try {
            field->read(rule, value);
        } catch (const Error& e) {
            throwRuleError(index, key, e.what());
        }
    }
    rule.validate(index);
    return rule;
}

Json ruleToJson(const QuantizationRule& rule)
{
    Json object = Json::object();
    for (const auto& f : kFields)
        f.write(rule, object);
    return object;
}

} // namespace qs
