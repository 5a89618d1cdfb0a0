#pragma once
// The Conv, Gemm and MatMul nodes of a model as the interpreter runs them: each
// with the input shapes it saw and the nodes the interpreter folded into it (a
// residual Add, an activation), identical ones counted once. Each case is a
// small model of its own (the op and its folded nodes, the weights shared with
// the source model), which the interpreter runs the way a model run runs that
// node, and which bench_onednn hands to oneDNN.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "graph/model.h"

namespace qs::bench {

struct OpCase {
    // The op node first, then the nodes folded into it, in model order; the
    // graph inputs are the activations (X, a residual addend, MatMul's
    // computed B), with batch-scaled shapes; the weights are initializers.
    Model model;
    // Seeded normal values, one per graph input of `model`, in order.
    std::vector<Tensor> activations;
    // "Conv", "Gemm" or "MatMul" (the op node's type).
    std::string opType;
    // "Conv 3x3 s2 g32 [1,32,48,48]->[1,32,24,24] +Relu": what a table row shows.
    std::string summary;
    // Nodes of the source model with this op, these shapes and these folded nodes.
    int count = 1;
};

// Runs `path` once on seeded normal inputs (the model's fixed input shapes)
// and returns its Conv, Gemm and MatMul nodes as cases, identical ones merged
// (count), in first-seen order. At `batch` > 1 axis 0 of every activation of a
// case is `batch` times what the run saw: the product a batch of that many
// rows costs, also where axis 0 holds sequence rows rather than images.
std::vector<OpCase> zooOpCases(const std::filesystem::path& path, int64_t batch);

} // namespace qs::bench
