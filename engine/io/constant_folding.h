#pragma once
// Constant folding at load: a layer's weight is found whether the file stores
// it as an initializer, as a Constant node, or behind layout ops applied to
// constants (the forms exporters other than torch.onnx write: paddle2onnx and
// older tf2onnx emit Constant nodes, fp16 exports Cast their weights to float,
// torch.onnx reaches a tied weight through Identity or Transpose).
//
// foldConstants() turns, in node order,
// - every Constant node of the default domain (value, value_float(s),
//   value_int(s)) into an initializer of its output; string Constants stay
//   nodes (the engine has no string tensors) and sparse_value is an Error;
// - every Identity, Cast, Reshape, Transpose, Unsqueeze, Squeeze and Flatten
//   whose inputs are all initializers (the file's or folded ones) into an
//   initializer holding its result, computed here (engine/io cannot use the
//   runtime's ops: the runtime depends on io).
// Cast is folded to float32, float16, bfloat16 and float64 and to its source
// type; other targets stay nodes for the runtime. A node whose output is a graph
// output stays a node. Nothing is folded inside subgraphs.
//
// Each folded result has exactly the element count of its input, so no fold
// makes a tensor larger than the file already holds; the storage a Cast or a
// Transpose allocates is counted in the file's LoadBudget before it is made
// (Identity, Reshape, Squeeze, Unsqueeze and Flatten share their input's
// storage). Expand, Tile and other ops that grow a tensor are never folded.
//
// The nodes folded are removed; an initializer they read that nothing else
// reads any more (the Constant feeding a Transpose, the fp16 weight under a
// Cast, a Reshape's shape) is removed too, unless the model has subgraphs
// (they may read it by name). A node whose result cannot exist (a Reshape to
// another element count, a Transpose with a bad perm) is an Error naming the
// file, the node and the problem.
//
// The QDQ export (export/onnx_qdq.cpp) writes the loaded model's initializers
// back into the graph it rewrites, so the simulation and the export quantize
// the same tensors.

#include <cstddef>
#include <string>

#include "graph/model.h"
#include "io/load_budget.h"

namespace qs {

struct ConstantFolding {
    size_t constantNodes = 0;       // Constant nodes made initializers
    size_t layoutNodes = 0;         // Identity/Cast/Reshape/... nodes evaluated
    size_t removedInitializers = 0; // initializers nothing reads any more
};

// Folds `model`'s constant subgraphs as described above. `sourceName` prefixes
// errors; allocations are reserved in `budget` first.
ConstantFolding foldConstants(Model& model, const std::string& sourceName, LoadBudget& budget);

// A warning for a graph model in which no quantizable layer was found, naming
// the Conv, ConvTranspose, Gemm and MatMul nodes whose weight input is not a
// constant and what produces that input; empty when the model has layers or no
// such node.
std::string missingWeightsWarning(const Model& model);

} // namespace qs
