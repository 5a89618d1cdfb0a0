#pragma once
// SmoothQuant (Xiao, Lin, Seznec, Wu, Demouth, Han 2023, "SmoothQuant: Accurate
// and Efficient Post-Training Quantization for Large Language Models", section 4):
// a MatMul/Gemm Y = X·W whose input X has a few channels of large magnitude is
// rewritten as Y = (X·diag(s)⁻¹)·(diag(s)·W) with, per input channel j,
//     s_j = max|X_j|^α / max|W_j|^(1−α),
// which moves part of the activation's range into the weight's rows (α = 0.5
// balances them). max|X_j| is the channel's absolute maximum over calibration
// data of the float model; max|W_j| the absolute maximum of the weight's input
// channel j, over every layer that reads X (q, k and v after one LayerNorm share
// one s, as in the paper). 1/s is folded into the op producing X — the scale
// and bias of a LayerNormalization, the scale of an RMSNorm (the constant
// [K] operand of the Mul that ends an RMSNorm written out as ops, as the Llama
// graph of a checkpoint folder does; SimplifiedLayerNormalization and
// RMSNormalization nodes too, though the interpreter runs neither yet), the
// output channels (and bias) of a Gemm/MatMul with a constant weight, through
// an Add of a constant bias, or such a layer producing one operand of a
// product a·b (SwiGLU's SiLU(gate)·up: (a·b)/s = a·(b/s)) — so the graph stays
// as it is and computes the same function.
//
// An X that cannot take 1/s (another reader that is not a smoothed layer, a
// graph input, an op such as Gelu or Reshape in between) leaves its layers as
// they are, each listed in `skipped` with the reason (not an error): inserting
// an explicit Mul would add a float op every export must carry, which the
// integer exports (QDQ, LiteRT) could not run in int8.
//
// Like equalization, smoothing rewrites a copy of the float model; the session
// (session/exploration.h) then calibrates, quantizes, evaluates and exports that
// copy. Its inputs are the float model's activation statistics, so it is the
// first phase of a calibration (runtime/input_channel_maxima.h).

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "graph/model.h"
#include "quantization/quantization_plan.h"

namespace qs {

// One activation X whose readers are smoothed together.
struct SmoothedInput {
    std::string value;          // X, as the model names it
    std::vector<size_t> layers; // the model layers reading X (model order); all are smoothed
    std::string producer;       // the node that takes 1/s (its name, else "<op> producing X")
    std::string producerOp;     // LayerNormalization, Mul, MatMul, Gemm, "MatMul + Add", "Mul of Gemm" ...
    double alpha = 0;           // the layers' smooth_alpha
    int64_t channels = 0;       // K: X's last axis, the weights' input channels
    // The producer's tensors that are divided by s, each with the axis that runs over X's channels.
    struct DividedTensor {
        std::string name;
        int axis = 0;
    };
    std::vector<DividedTensor> divided;
    // Filled by smoothLayers: max|X_j|, max|W_j| (over every layer) and s_j.
    std::vector<double> activationMax, weightMax, scales;
};

// A layer whose rule sets smooth_alpha but which is not smoothed.
struct SkippedSmoothing {
    size_t layer = 0;
    std::string reason; // one line: why not
};

struct SmoothQuant {
    std::vector<SmoothedInput> inputs; // model order of their first layer
    std::vector<SkippedSmoothing> skipped;
    // The new values of every tensor smoothing changes (float32, their shapes).
    std::vector<NamedTensor> tensors;
    // The same targets (values, layers, producers, alphas): the same statistics pass serves.
    bool sameTargets(const SmoothQuant& o) const;
};

// s_j = max|X_j|^α / max|W_j|^(1−α), computed in double; 1 where either maximum is 0
// (a channel that is never active, or a zero weight row, is left alone).
std::vector<double> smoothingScales(const std::vector<double>& activationMax, const std::vector<double>& weightMax,
                                    double alpha);

// Finds the activations whose readers `plan` smooths (smooth_alpha > 0 and a
// quantized input activation) and the producer that absorbs 1/s; no data is
// read, the scales stay empty. Layers that cannot be smoothed go to `skipped`.
SmoothQuant smoothingTargets(const Model& model, const QuantizationPlan& plan);

// Computes the scales of `targets` from `activationMax` (value -> max|X_j| per
// channel of X's last axis) and rewrites the weights and producers, input
// after input in model order. Throws Error naming a value whose maxima are
// missing or of the wrong length, or a tensor that is not finite.
SmoothQuant smoothLayers(const Model& model, SmoothQuant targets,
                         const std::map<std::string, std::vector<double>>& activationMax);

// `model` with the smoothed tensors in place of its own.
Model smoothedModel(const Model& model, const SmoothQuant& smoothing);

} // namespace qs
