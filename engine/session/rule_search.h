#pragma once
// The smallest rules that meet a target (`quantscope-cli quantize --search`):
// from candidate settings per layer, ordered smallest first (e.g. int4 tiles
// of 128, int8, float), find a per-layer choice with the fewest weight bytes
// whose evaluation meets a target on the output (output SQNR, top-1 agreement
// with float, perplexity increase), and write it as an ordinary rule file.
//
// How (docs/search.md):
//  1. Every layer takes its first candidate that applies to it (a candidate whose
//     rule cannot apply to a layer, e.g. a tile size its contraction axis cannot
//     take, is skipped for that layer). That is evaluated: when it meets the
//     target, it is the answer.
//  2. Layers are ranked by sensitivity: each quantized alone with its first
//     candidate, most damaging to the output first.
//  3. A path from smallest to largest: in rounds, each layer in sensitivity
//     order moves up one candidate, one layer per step. The path's last point
//     (every layer at its last candidate) is evaluated: when it misses the
//     target, the target cannot be met and the search says so.
//  4. Bisection along the path for the first point that meets the target
//     (fewer evaluations than the path has points; every point it keeps has
//     been evaluated and met the target).
//  5. One trimming pass: each raised layer, least sensitive first, is moved
//     back down one candidate when the target is still met.
//  6. The choice is written as rules (one per candidate used, module paths
//     escaped and joined; the commonest choice becomes a final `.*` rule) and
//     evaluated again through those rules, with every per-layer metric.
// Guarantee: the result met the target on the evaluation data, measured twice
// (in the search and through the written rules). Not a guarantee: that no
// smaller choice meets it (the search is greedy along the sensitivity order),
// nor that other data meets it.
//
// A layer that reads another layer's weight follows that layer's choice.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/cancellation.h"
#include "rules/ruleset.h"
#include "session/evaluation.h"

namespace qs {

class Exploration;

// CANDIDATES.json: {"version": 1, "candidates": [ {...}, ... ]}: each entry a
// rule's fields without module_path and op_types, smallest first; {} is float.
struct SearchCandidates {
    std::vector<nlohmann::ordered_json> candidates;
    // Errors name `sourceName` and the candidate ("candidate 2, field ...").
    static SearchCandidates fromJson(std::string_view text, std::string_view sourceName = "<string>");
    static SearchCandidates load(const std::filesystem::path& file);
    // "int4 tile 128", "int8 / int8 act", "float": for tables and the curve.
    std::string label(size_t candidate) const;
};

struct SearchTarget {
    enum class Metric : uint8_t {
        OutputSqnrDb,       // SQNR of the first graph output, dB (>=)
        Top1Agreement,      // fraction of rows whose quantized top-1 is the float top-1 (>=)
        PerplexityIncrease, // quantized / float perplexity - 1, causal language models (<=)
    };
    Metric metric = Metric::OutputSqnrDb;
    double threshold = 0;
    // "output_sqnr_db>=30", "top1_agreement>=0.99", "perplexity_increase<=0.05".
    // Throws Error saying what is accepted.
    static SearchTarget parse(std::string_view text);
    std::string text() const;
    std::string_view metricName() const;
    // The metric of an evaluation; Error when the evaluation lacks it (no
    // agreement for this output, not a language model).
    double value(const EvaluationResult& e) const;
    bool met(double value) const;
};

struct SearchPoint {
    std::string step;               // "smallest", "largest", "bisect", "trim", "final"
    std::vector<int64_t> candidate; // per model layer: the candidate index, -1 = not searched (float)
    int64_t weightBytes = 0;
    double value = 0; // the target's metric
    bool meets = false;
};

struct RuleSearchResult {
    SearchTarget target;
    bool met = false;
    std::string message;                  // one line: what was found, or why the target cannot be met
    std::vector<SearchPoint> points;      // every evaluated choice, in order
    std::optional<SearchPoint> chosen;    // when met: the choice, as re-evaluated through `rules`
    RuleSet rules;                        // when met: the rule file
    std::vector<std::string> unsearched;  // layers no candidate applies to (left float)
    std::vector<size_t> sensitivityOrder; // model layers, most sensitive first
    int64_t floatBytes = 0;
    // The size-vs-error points and the choice, for the chart and for scripts
    // (docs/cli.md, "quantize --search").
    nlohmann::json toJson(const Model& model, const SearchCandidates& candidates) const;
};

// Runs the search on `exploration` (its model, calibration and evaluation data
// set), which ends holding the chosen rules, their weights and their full
// evaluation. In line: a GUI runs it on an Exploration of its own made from
// the same LoadedModel. Progress per evaluation; Cancelled on cancellation.
RuleSearchResult searchRules(Exploration& exploration, const SearchCandidates& candidates, const SearchTarget& target,
                             const CancellationToken& cancel = {}, const ProgressCallback& progress = {});

// A choice (per model layer a candidate index, -1 = float) as the rule file the
// search writes: one rule per candidate used, module paths escaped and joined,
// and with `catchAll` the commonest choice as a final `.*` rule. What applying
// any point of the size-vs-error curve sets (the app). Throws Error when
// `choice` is not one entry per layer of `model` or names no candidate.
RuleSet searchChoiceRules(const Model& model, const SearchCandidates& candidates, const std::vector<int64_t>& choice,
                          bool catchAll = true);

// `path` as a regex matching exactly it (RE2 and ECMAScript alike).
std::string escapedModulePath(std::string_view path);

} // namespace qs
