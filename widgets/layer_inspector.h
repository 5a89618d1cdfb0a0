#pragma once
// Everything about one layer as an HTML page for the Inspector dock: the
// weight tensor and its axes, the rule that applies and why the others do not,
// the quantization (qtype, calibration, granularity, scales summary), the
// weight error and, after an evaluation, the activation errors; for a layer whose
// rule names an algorithm (or bias_correction), its weight and output SQNR under
// RTN next to the algorithm's (session/algorithm_comparison.h, computed by a job).

#include <cstddef>
#include <string>
#include <vector>

#include <QString>

namespace qs {

class Model;
class QuantizationPlan;
class RuleSet;
struct QuantizationRule;
struct QuantizedWeight;
struct LayerEvaluation;
struct AlgorithmComparison;
struct AlgorithmRow;

struct LayerInspection {
    const Model* model = nullptr;
    size_t layer = 0;
    const RuleSet* rules = nullptr;
    const QuantizationPlan* plan = nullptr;       // null before the first plan
    const QuantizedWeight* weight = nullptr;      // null: float, or not computed yet
    bool weightStale = false;                     // the weight is from older rules
    const LayerEvaluation* evaluation = nullptr;  // null before an evaluation
    bool evaluationStale = false;
    const AlgorithmComparison* algorithms = nullptr; // the layer's comparison under its current rule (null: none)
    QString algorithmsNote;                          // without one: why, or that it is being computed
};

// Whether `rule` rounds its weights other than plain RTN (an algorithm, or bias_correction).
bool roundsBeyondRtn(const QuantizationRule& rule);

// The rows of `c` for plain RTN (no bias correction) and for `rule`'s own algorithm
// and bias_correction at its weight_qtype; null where `c` holds none.
struct RtnAgainstRule {
    const AlgorithmRow* rtn = nullptr;
    const AlgorithmRow* rule = nullptr;
};
RtnAgainstRule rtnAgainstRule(const AlgorithmComparison& c, const QuantizationRule& rule);

QString layerInspectionHtml(const LayerInspection& in);

// A rule the rule table cannot use, as the Inspector shows it above the layer.
struct RuleProblem {
    size_t rule = 0;     // 0-based row of the rule table (shown counted from 1, as the messages count)
    std::string field;   // the field the error names ("module_path" ...), empty when none
    std::string pattern; // the module_path text when `field` is module_path
    std::string message; // the engine's error
};

// The problems as HTML: each names the rule and its field and gives the engine's
// message; for a module_path regex it shows the pattern with the character at
// the position RE2 refuses (rules/regex_syntax.h: findRegexSyntaxError) marked
// and a caret under it. Empty when there is none.
QString ruleProblemsHtml(const std::vector<RuleProblem>& problems);

} // namespace qs
