#pragma once
// Two rule sets side by side (A against B): per layer, matched by module path,
// what each side quantizes it to and the differences B − A of its weight,
// isolated and accumulated SQNR and of its weight bytes; per graph output the
// difference of SQNR; top-1, top-1 agreement with float and perplexity of both;
// the total weight bytes. What `quantscope-cli compare-rules` prints and what
// the app's A/B view shows. Computed from two explorations that have run (the
// figures are exactly those each side's `quantize` report holds).
//
// A difference is a number only when both sides have a finite figure: a layer
// present in one side only, float in one side, exact (+inf dB) in one side or
// not evaluated has no difference, and LayerComparison::note says why.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "quantization/weight_bytes.h"

namespace qs {

class Exploration;

struct ComparedLayerSide {
    bool present = false;       // the layer is in this side's model
    std::optional<size_t> rule; // the rule that applies; none: no rule matches (float)
    std::string weightQType;    // empty: the weight stays float
    std::string actQType;       // empty: the input activation stays float; "int8 (dynamic)" for dynamic scales
    std::string problem;        // why the rule cannot apply (the layer then stays float)
    std::optional<double> weightSqnr, isolatedSqnr, accumulatedSqnr; // dB, +inf when exact; none when not measured
    int64_t weightBytes = 0;                                         // as quantized (its float bytes when float)
    bool quantized() const { return !weightQType.empty() || !actQType.empty(); }
    // "int4 / float" (weight / activation), "float", or "-" when absent.
    std::string summary() const;
};

struct LayerComparison {
    std::string modulePath;
    std::string opType;
    size_t order = 0; // A's model order, then B's layers A lacks
    ComparedLayerSide a, b;
    // B − A when both sides have a finite value.
    std::optional<double> deltaWeightSqnr, deltaIsolatedSqnr, deltaAccumulatedSqnr;
    std::optional<int64_t> deltaWeightBytes; // when the layer is in both
    // Empty when both sides quantize the layer; else "only in A", "only in B",
    // "float in A", "float in B", "float in both".
    std::string note;
};

// A model-level figure of both sides.
struct ComparedFigure {
    std::optional<double> a, b;
    std::optional<double> delta() const; // b − a when both are finite
};

struct OutputComparison {
    std::string name;
    ComparedFigure sqnrDb; // quantized against float
};

struct RuleComparison {
    std::vector<LayerComparison> layers;
    std::vector<OutputComparison> outputs;               // A's outputs; an output only B has is left out
    ComparedFigure floatTop1, quantizedTop1;             // with labels
    ComparedFigure top1Agreement;                        // quantized top-1 = float top-1, fraction
    ComparedFigure floatPerplexity, quantizedPerplexity; // causal language models
    WeightBytes totalA, totalB;
    bool evaluatedA = false, evaluatedB = false;

    // {"layers": [...], "outputs": [...], "top1": ..., "weight_bytes": ...} as docs/cli.md describes.
    nlohmann::json toJson() const;
};

// The comparison of two explorations whose weights are current; their
// evaluations (when any) are used as they are.
RuleComparison compareRules(const Exploration& a, const Exploration& b);

// How the layer rows can be ordered (CLI --sort, the app's header clicks).
enum class ComparisonColumn : uint8_t {
    Order,           // model order (the default)
    Path,            // module path
    WeightSqnr,      // Δ weight SQNR, most negative first
    IsolatedSqnr,    // Δ isolated SQNR, most negative first
    AccumulatedSqnr, // Δ accumulated SQNR, most negative first
    WeightBytes,     // Δ weight bytes, largest saving (most negative) first
};
// "order", "path", "weight", "isolated", "accumulated", "bytes"; none for another name.
std::optional<ComparisonColumn> parseComparisonColumn(std::string_view name);
std::string comparisonColumnNames(); // "order, path, ..."
// Stable; rows without the figure go last, in model order.
void sortLayers(std::vector<LayerComparison>& layers, ComparisonColumn column);

} // namespace qs
