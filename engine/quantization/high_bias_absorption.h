#pragma once
// High-bias absorption (Nagel, van Baalen, Blankevoort, Welling 2019, "Data-Free
// Quantization Through Weight Equalization and Bias Correction", section 4.1,
// "Absorbing high biases"),
// after cross-layer equalization (quantization/equalization.h). For a pair
// y = W2·relu(W1·x + b1) + b2 where channel i of the pre-activation
// z = W1·x + b1 is never below c_i ≥ 0, relu(z_i) = relu(z_i − c_i) + c_i, so
//     b1 ← b1 − c,   b2 ← b2 + W2·c
// computes the same y while the activation between the layers loses c_i of its
// range. The paper takes c = max(0, β − 3γ) from the BatchNorm that follows
// layer 1; a model whose BatchNorms are folded has none, so here c is
// data-driven: c_i = max(0, min z_i) over the calibration data (every sample
// and, for a Conv, every output position). Where the bound holds — on every
// calibration sample — the function is unchanged; an input that drives z_i
// below its calibration minimum is clipped at 0 one step earlier.
//
// Absorption is a rewrite of the float model (new values for the two biases),
// on top of the equalized one: the session (session/exploration.h) computes
// it in the calibration job, before the activations are calibrated.

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "graph/model.h"
#include "quantization/equalization.h"

namespace qs {

// One equalized pair whose first layer's bias can move into the second's.
struct AbsorptionPair {
    size_t first = 0, second = 0; // model layers
    std::string preActivation;    // the first layer's output value, whose per-channel minima are needed
    int64_t channels = 0;
    int channelAxis = 1;          // of the pre-activation: 1 for Conv (NCHW), the last for Gemm/MatMul
    std::vector<double> absorbed; // c_i, once computed (empty before)
};

struct HighBiasAbsorption {
    std::vector<AbsorptionPair> pairs; // model order of `first`
    std::vector<SkippedPair> skipped;  // equalized pairs that cannot absorb, with why
    // The new values of the two biases of every pair (float32), once computed.
    std::vector<NamedTensor> tensors;
    // The same pairs (layers and values), computed or not.
    bool sameTargets(const HighBiasAbsorption& other) const;
};

// The pairs of `equalization` (computed on `model`, the loaded model) that can
// absorb: only a Relu between the layers; the first has a float32 bias
// initializer (read by it alone, as equalize requires); the second has one too
// (Conv B, Gemm C with alpha = beta = 1), read by it alone; a second Conv pads
// nothing (its zero padding would see −c where the original saw 0, so the
// border outputs would change). The other pairs are listed in `skipped`. Only
// pairs whose first layer's rule sets high_bias_absorption (`plan`) are taken.
HighBiasAbsorption absorptionTargets(const Model& model, const QuantizationPlan& plan,
                                     const CrossLayerEqualization& equalization);

// The absorption with c_i = max(0, minima[pre-activation][i]) for every pair,
// computed on `equalized` (the model the pairs' weights and biases are read
// from: the equalized model). Sums in double, the biases rounded to float32
// once. Throws Error naming the value when its minima are missing, of the
// wrong count, or not finite.
HighBiasAbsorption absorbHighBiases(const Model& equalized, const HighBiasAbsorption& targets,
                                    const std::map<std::string, std::vector<double>>& minima);

// `model` with the absorbed biases in place of its own.
Model absorbedModel(const Model& model, const HighBiasAbsorption& absorption);

} // namespace qs
