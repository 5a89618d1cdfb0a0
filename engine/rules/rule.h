#pragma once
// One quantization rule (DESIGN.md, "Rules"), after Qwix's QuantizationRule: a
// small value type whose fields say how the layers it matches are quantized.
// Rules come from JSON through ruleFromJson (rules/schema.h), which validates
// every field once; a rule built in code is checked with validate().

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "calib/method.h"
#include "core/error.h"
#include "numerics/qtype.h"
#include "numerics/rounding.h"
#include "quant/scale.h"
#include "rules/weight_algorithm.h"

namespace re2 {
class RE2;
}

namespace qs {

// Which weight elements share a scale. Activations always use one scale per tensor.
enum class Granularity : uint8_t { PerTensor, PerChannel };
std::string_view granularityName(Granularity g); // "per_tensor", "per_channel"
std::optional<Granularity> parseGranularity(std::string_view name);
std::span<const Granularity> allGranularities();

// A rule's module_path: the regex text and its RE2 program, compiled once when
// the pattern is set (rules/regex_syntax.h: syntax, length and memory limits).
// Matching is a full match in time linear in the path: "conv1" matches the path
// "conv1" but not "layer1/conv1"; write ".*conv1" for that.
class ModulePathPattern {
public:
    // ".*": every path (one program shared by every default pattern).
    ModulePathPattern();
    // Compiles `text` as an RE2 pattern; throws Error `invalid regex "<excerpt>": <what> at position N; <what
    // to write instead>` (compileModulePathRegex).
    explicit ModulePathPattern(std::string text);

    const std::string& text() const { return text_; }
    bool matches(std::string_view modulePath) const;

    bool operator==(const ModulePathPattern& other) const { return text_ == other.text_; }

private:
    std::string text_;
    std::shared_ptr<const re2::RE2> regex_; // shared by copies: rules are copied, patterns never change
};

struct QuantizationRule {
    // RE2 regex matched against the whole module path. Default ".*".
    ModulePathPattern modulePath;
    // Op types the rule applies to, e.g. "Conv". Default empty: every op type.
    std::vector<std::string> opTypes;
    // Type of the layer's weights. Default null: weights stay float.
    std::optional<QType> weightQType;
    // Type of the layer's input activations. Default null: activations stay float.
    std::optional<QType> actQType;
    // How the weight range is found. Default absmax.
    CalibrationMethod weightCalibration;
    // How the activation range is found. Default null: the mode decides (absmax in PTQ, minmax in ODML).
    std::optional<CalibrationMethod> actCalibration;
    // Weight scales per output channel or one per tensor. Default per_channel.
    Granularity granularity = Granularity::PerChannel;
    // Sub-channel tiles along the contraction axis: an integer >= 1 is the tile length,
    // a value < 1 is 1/tile_count (resolveTileSize). Default null: no tiles.
    std::optional<double> tileSize;
    // Activations use a range calibrated ahead of time instead of one per batch. Default false.
    bool actStaticScale = false;
    // Activation axes reduced before statistics are averaged over batches. Default [0].
    std::vector<int> actBatchAxes{0};
    // Integer grid without its most negative code (int8 in [-127, 127]). Default false.
    bool narrowRange = false;
    // Symmetric or two-sided variant of percentile, mse, entropy. Default null: the method decides.
    std::optional<bool> symmetric;
    // How scales are represented: float, pow2 or fp16. Default float.
    ScaleRestriction scaleRestriction = ScaleRestriction::Float;
    // Round half to even, or seeded stochastic rounding. Default nearest.
    Rounding rounding = Rounding::Nearest;
    // Seed of stochastic rounding, so a run can be repeated (only with stochastic). Default 0.
    uint64_t roundingSeed = 0;
    // How the weights are rounded onto their grid: rtn, gptq[,damp[,act_order]] or
    // awq[,grid[,clip]], the last two from the layer's calibration inputs (docs/algorithms.md). Default rtn.
    WeightAlgorithm algorithm;
    // Empirical bias correction: the output mean shift the rounded weight causes on
    // the calibration inputs is added to the layer's bias (docs/algorithms.md). Default false.
    bool biasCorrection = false;
    // Cross-layer equalization: this layer and the next matched layer that also
    // sets it (through Relu, LeakyRelu, pools or nothing) get their channel ranges
    // equalized before quantization (docs/algorithms.md). Default false.
    bool equalize = false;
    // High-bias absorption after equalization: the part of this layer's bias its
    // output never goes below on the calibration data (before the Relu) moves into
    // the next layer's bias (docs/algorithms.md). Needs equalize. Default false.
    bool highBiasAbsorption = false;
    // SmoothQuant's migration strength α in [0, 1]: the input channels of this
    // MatMul/Gemm (whose activation is quantized) are rescaled by
    // s_j = max|X_j|^α / max|W_j|^(1−α), folded into the op producing X
    // (docs/algorithms.md). Default 0 (off).
    double smoothAlpha = 0;

    // Checks the combinations the fields cannot check alone (a symmetric override
    // the method refuses, an asymmetric method on a type without zero points, a
    // tile_size that is not n or 1/n, a seed without stochastic rounding ...).
    // Throws Error `rule <index>, field "<name>": <what to set>`.
    void validate(size_t index) const;

    // The activation calibration under a mode whose default is `modeDefault`
    // (absmax for PTQ, minmax for ODML).
    CalibrationMethod actMethod(const CalibrationMethod& modeDefault) const
    {
        return actCalibration.value_or(modeDefault);
    }
    // Whether the rule matches a layer: the module path fully matches and the op
    // type is listed (or the list is empty).
    bool matchesPath(std::string_view path) const { return modulePath.matches(path); }
    bool listsOpType(std::string_view opType) const;
    bool matches(std::string_view path, std::string_view opType) const
    {
        return listsOpType(opType) && matchesPath(path);
    }

    bool operator==(const QuantizationRule&) const = default;
};

// The one shape of a rule error, `rule <index>, field "<field>": <what>`, with
// the rule's index and the field as data (the rule editor marks that cell).
class RuleError : public Error {
public:
    RuleError(size_t index, std::string_view field, const std::string& what);
    size_t index() const { return index_; }
    const std::string& field() const { return field_; }

private:
    size_t index_;
    std::string field_;
};

// Throws RuleError(index, field, what).
[[noreturn]] void throwRuleError(size_t index, std::string_view field, const std::string& what);

} // namespace qs
