#pragma once
// What the per-layer error view plots: per quantized layer, in model order,
// the SQNR of its weight, of its output with only it quantized (isolated) and
// with everything quantized (accumulated); the sensitivity ranking; and which
// layers fall below a threshold (the layers to propose keeping in float).
// In session, not analysis: it reads the evaluation and sensitivity results
// that session computes.

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "quant/metrics.h"

namespace qs {

class Model;
struct EvaluationResult;
struct SensitivityResult;

struct LayerErrorRow {
    size_t layer = 0; // index into Model::layers
    std::string modulePath;
    std::optional<double> weightSqnr, isolatedSqnr, accumulatedSqnr; // dB; +inf when exact
    // What the threshold is compared with: the isolated SQNR (the layer's own
    // contribution), else the weight SQNR; none when neither is known.
    std::optional<double> markedSqnr() const { return isolatedSqnr ? isolatedSqnr : weightSqnr; }
};

struct SensitivityRow {
    size_t layer = 0;
    std::string modulePath;
    double outputSqnr = 0;      // dB at the graph output
    std::optional<double> top1; // quantized top-1 when the data had labels
};

struct LayerErrorData {
    std::vector<LayerErrorRow> rows;         // model order
    std::vector<SensitivityRow> sensitivity; // most sensitive first
    bool allButOne = false;                  // the sensitivity kind (else one layer at a time)
    std::string sensitivityAlgorithm;        // the algorithm every layer was rounded by ("": the rules' own)

    // Rows whose markedSqnr() is below `thresholdDb`, in model order.
    std::vector<const LayerErrorRow*> below(double thresholdDb) const;
};

// Rows from an evaluation (its layer metrics) and, for layers it lacks a weight
// metric for, `weightMetrics` (layer → the weight quantizer's metrics); either may be absent.
LayerErrorData layerErrors(const Model& model, const EvaluationResult* evaluation,
                           const std::map<size_t, ErrorMetrics>& weightMetrics, const SensitivityResult* sensitivity);

} // namespace qs
