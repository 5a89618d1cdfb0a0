#pragma once
// BatchNormalization folded away before quantization, as the LiteRT converter
// does before it quantizes a model to full integer (ODML mode).
//
// A BatchNormalization node in inference form (one output, training_mode 0,
// scale/B/mean/var constant 1-D float tensors of C elements) whose input X is
// the output 0 of a Conv, ConvTranspose or Gemm that nothing else reads (and
// that is not a graph output), with a constant float32 weight and a constant
// (or absent) bias, is folded into that layer. With f[c] = γ[c]/√(var[c]+ε):
//   W'[c, ...] = W[c, ...]·f[c]    along the weight's output-channel axis
//   b'[c]      = (b[c] − mean[c])·f[c] + β[c]     (b = 0 when absent)
// Conv W [O, I/g, k…] scales row c; ConvTranspose W [I, O/g, k…] scales
// W[i, j, …] by f[group(i)·O/g + j]; Gemm (2-D output [M, N], BN channel axis 1)
// scales B's column n ([K, N]) or row n ([N, K] with transB), and its C (a
// scalar or N values) becomes b' from β·C (beta becomes 1). The layer's node
// then writes the BN's output name; the BN node is removed.
//
// A BatchNormalization in inference form with constant parameters that cannot
// be folded (it follows a Concat, a pool, an Add, or a layer whose output is
// read elsewhere) is decomposed into Mul(X, f) and Add(·, β − mean·f) with
// constants shaped [C, 1, …] (1s for X's spatial axes), which is how the
// converter lowers a standalone batch norm. A BatchNormalization with a
// non-constant parameter, in training form, or whose X rank is unknown stays as
// it is and is named in `kept` with the reason.
//
// The folded weights and biases are new float32 initializers: under the
// original name when only the folded node read it, else under a fresh name
// ("<name>_bn_folded"). Initializers nothing reads any more are removed (unless
// the model has subgraphs, which may read them by name). The layers are found
// again (graph/weight_layout.h), so rules, the weight quantizer and every export
// see the folded weights. Only ONNX graph models are transformed; others are
// returned unchanged.

#include <string>
#include <vector>

#include "graph/model.h"

namespace qs {

struct FoldedBatchNorm {
    std::string batchNorm; // the BatchNormalization node's name (or "#index" when unnamed)
    std::string into;      // the layer node it was folded into, or "" when it was decomposed into Mul/Add
};

struct KeptBatchNorm {
    std::string batchNorm;
    std::string reason; // why it is neither folded nor decomposed
};

struct BatchNormFolding {
    Model model;
    std::vector<FoldedBatchNorm> folded;     // folded into a layer
    std::vector<FoldedBatchNorm> decomposed; // into Mul and Add (`into` empty)
    std::vector<KeptBatchNorm> kept;
};

// Folds `model`'s BatchNormalization nodes as described above. Errors (a
// parameter holding a NaN, a negative var+ε) name the model and the node.
BatchNormFolding foldBatchNorms(Model model);

} // namespace qs
