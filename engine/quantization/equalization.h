#pragma once
// Cross-layer equalization (Nagel, van Baalen, Blankevoort, Welling 2019,
// "Data-Free Quantization Through Weight Equalization and Bias Correction",
// section 4.1): two consecutive layers y = W2·f(W1·x + b1) with f positively
// homogeneous per channel (ReLU, LeakyReLU, max and average pools, or nothing
// between them) compute the same
// function after W1's output channel i and b1_i are divided by s_i > 0 and
// W2's input channel i is multiplied by s_i. With r1_i the range of W1's output
// channel i and r2_i the range of W2's input channel i (max |w| over the
// channel), s_i = (1/r2_i)·sqrt(r1_i·r2_i) = sqrt(r1_i/r2_i) makes both ranges
// sqrt(r1_i·r2_i), which the paper shows maximises the sum of the channels'
// precisions relative to their layer's range. Chains of more than two layers
// are swept pair after pair, in model order, until no scale moves (the
// paper's iteration).
//
// Equalization is a rewrite of the float model: the layers' weights and the
// first layer's bias get new values, the graph stays as it is. The session
// (session/exploration.h) runs everything — calibration, quantization,
// evaluation and every export — on the rewritten model.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "graph/model.h"
#include "quantization/quantization_plan.h"

namespace qs {

// One pair of layers that was equalized.
struct EqualizedPair {
    size_t first = 0;   // model layer whose output channels are divided by the scales
    size_t second = 0;  // model layer whose input channels are multiplied by them
    std::string through; // the ops between them ("Relu", "Relu, MaxPool"), empty when none
    // s_i per channel: the product of every sweep's scales (double).
    std::vector<double> scales;
};

// A layer whose rule sets equalize but whose output could not be paired.
struct SkippedPair {
    size_t first = 0;
    std::optional<size_t> second; // the layer its output reaches, when one does
    std::string reason;           // one line: why not
};

struct CrossLayerEqualization {
    std::vector<EqualizedPair> pairs;  // model order of `first`
    std::vector<SkippedPair> skipped;  // model order of `first`
    int sweeps = 0;                    // sweeps over the pairs until the scales settled
    // The new values of the weights and biases the pairs change (float32, their
    // initializers' shapes), one per initializer.
    std::vector<NamedTensor> tensors;
    bool operator==(const CrossLayerEqualization& o) const;
};

// Sweeps are repeated until every scale of a sweep is within this of 1, at most kMaxSweeps times.
inline constexpr double kEqualizationTolerance = 1e-8;
inline constexpr int kMaxEqualizationSweeps = 1000;

// The scales of one pair from its ranges: sqrt(r1_i / r2_i); 1 where either range is 0.
std::vector<double> equalizationScales(const std::vector<double>& firstRanges,
                                       const std::vector<double>& secondRanges);

// Finds the pairs among the layers `plan` sets equalize on (both layers of a
// pair must; a layer whose quantization has a problem is equalized all the
// same) and equalizes them. Pairs
// that cannot be equalized are listed in `skipped`, not errors. Throws Error
// naming a weight that is not finite.
CrossLayerEqualization equalizeLayers(const Model& model, const QuantizationPlan& plan);

// `model` with the equalized tensors in place of its own.
Model equalizedModel(const Model& model, const CrossLayerEqualization& equalization);

} // namespace qs
