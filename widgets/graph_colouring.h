#pragma once
// What the graph view paints on the model's graph: per layer the value of each
// metric a node can be coloured by, the colour a value maps to, the points
// where activations are quantized (qtype and range) and the quantizers layers
// share. Built on the GUI thread from results the app already holds: a pass
// over the layers, no model run.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <QColor>
#include <QString>

#include "quant/scale.h"

namespace qs {

class Model;
class QuantizationPlan;
class WeightQuantizer;
class ActivationStatistics;
struct EvaluationResult;
struct SensitivityResult;

enum class GraphMetric { WeightSqnr, IsolatedSqnr, AccumulatedSqnr, Sensitivity, Algorithm };
inline constexpr GraphMetric kGraphMetrics[] = {GraphMetric::WeightSqnr, GraphMetric::IsolatedSqnr,
                                                GraphMetric::AccumulatedSqnr, GraphMetric::Sensitivity,
                                                GraphMetric::Algorithm};
QString graphMetricName(GraphMetric metric); // "Accumulated SQNR"

// An activation the plan quantizes: the node input `value` of `layer`.
struct QuantizationPoint {
    std::string value;
    size_t layer = 0;
    std::string qtype;              // "int8"
    bool staticScale = false;       // from calibration; else computed per batch
    std::string method;             // act_calibration
    std::optional<Range> range;     // static scale with calibration statistics of a method without histogram search
    std::vector<size_t> sharedWith; // the other layers quantizing the same value (one observer, one scale)
};

struct GraphColouring {
    // Per model layer (Model::layers), none when unknown.
    std::vector<std::optional<double>> weightSqnr, isolatedSqnr, accumulatedSqnr;
    std::vector<std::optional<double>> sensitivity; // output SQNR of the sensitivity run, dB
    bool sensitivityAllButOne = false;
    std::vector<std::string> algorithm;                // "rtn", "gptq", "awq", "adaround"; "" when the weight stays float
    std::vector<std::vector<size_t>> weightSharedWith; // the other layers reading the same weight
    std::vector<QuantizationPoint> points;

    std::optional<double> value(GraphMetric metric, size_t layer) const;
    // The fill of a layer's node under `metric`.
    QColor colour(GraphMetric metric, size_t layer) const;
};

GraphColouring graphColouring(const Model& model, const QuantizationPlan* plan, const WeightQuantizer* weights,
                              const EvaluationResult* evaluation, const SensitivityResult* sensitivity,
                              const ActivationStatistics* statistics);

// The SQNR scale: red at 10 dB and below, through yellow, to green at 40 dB and above.
inline constexpr double kSqnrColourLow = 10, kSqnrColourHigh = 40;
QColor sqnrColour(double db);
QColor algorithmColour(const std::string& algorithm); // "" (float) included
QColor noValueColour();                               // a layer without a value for the metric
QColor nonLayerColour();                              // an op that is not a quantizable layer

} // namespace qs
