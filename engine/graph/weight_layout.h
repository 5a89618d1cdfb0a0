#pragma once
// Which ops are quantizable layers, which input is their weight and how the
// weight is laid out, and the module path each layer gets.
//
// Graph models (ONNX op semantics). A weight is an initializer of a floating
// dtype (float32/16, bfloat16, float64):
//   Conv           input 1, [O, I/g, k...]: channel 0, contraction 1, groups = `group`
//   ConvTranspose  input 1, [I, O/g, k...]: channel 1, contraction 0, groups = `group`
//   Gemm           input 1 (B), 2-D: transB=1 [N, K] channel 0 contraction 1;
//                  transB=0 [K, N] channel 1 contraction 0. A constant A is never the
//                  weight, with or without transA.
//   MatMul         input 1 of rank >= 2 ([..., K, N], batched constants too): channel
//                  = last axis (N), contraction = second-to-last (K). A constant LEFT
//                  operand (W·x) is not treated as a weight: exporters put weights on
//                  the right, and a left weight's output channels are its rows, which
//                  the quantizer would have to be told separately.
//   Gather         input 0 (the table) of rank >= 2 with axis = 0: an embedding,
//                  channel 0 (rows), contraction = last axis.
// Nodes inside subgraphs (If/Loop/Scan bodies) are not searched.
//
// Weights-only checkpoints (PyTorch layouts assumed). A tensor is a layer when it
// has a floating dtype, rank 2 to 5 and its last name component is not a bias or
// a normalization statistic (bias, running_mean, running_var, num_batches_tracked,
// moving_mean, moving_variance, gamma, beta):
//   name contains "embed" (any case), rank 2   Embedding [rows, dim]: channel 0, contraction 1
//   rank 2                                     Linear [out, in]: channel 0, contraction 1
//   rank 3..5                                  Conv [O, I/g, k...]: channel 0, contraction 1
// Keras kernels ([in, out], [kh, kw, in, out]) are not PyTorch layouts: the Keras
// loader builds its layers itself.

#include <string>
#include <string_view>
#include <vector>

#include "graph/model.h"

namespace qs {

// The quantizable layers of a graph model, in node order, with unique module
// paths (graph/module_path.h). Does not modify the model.
std::vector<QuantizableLayer> findGraphLayers(const Model& model);

// Sets QuantizableLayer::sharesWeightOf on every layer of `model` whose weight
// an earlier layer reads: the same initializer name, or another name for the
// same values (same storage, shape and dtype, as an Identity folded at load).
// Two initializers that merely hold equal values are not shared.
void markSharedWeights(const Model& model, std::vector<QuantizableLayer>& layers);

// The quantizable layers of a weights-only model, in initializer order, with
// checkpoint module paths made unique.
std::vector<QuantizableLayer> inferCheckpointLayers(const Model& model);

} // namespace qs
