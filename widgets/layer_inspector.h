#pragma once
// Everything about one layer as an HTML page for the Inspector dock: the
// weight tensor and its axes, the rule that applies and why the others do not,
// the quantization (qtype, calibration, granularity, scales summary), the
// weight error and, after an evaluation, the activation errors.

#include <cstddef>

#include <QString>

namespace qs {

class Model;
class QuantizationPlan;
class RuleSet;
struct QuantizedWeight;
struct LayerEvaluation;

struct LayerInspection {
    const Model* model = nullptr;
    size_t layer = 0;
    const RuleSet* rules = nullptr;
    const QuantizationPlan* plan = nullptr;       // null before the first plan
    const QuantizedWeight* weight = nullptr;      // null: float, or not computed yet
    bool weightStale = false;                     // the weight is from older rules
    const LayerEvaluation* evaluation = nullptr;  // null before an evaluation
    bool evaluationStale = false;
};

QString layerInspectionHtml(const LayerInspection& in);

} // namespace qs
