#pragma once
// Runs of repeated blocks in a model's graph — resnet blocks, transformer
// layers — that the graph view can fold into one node each. Qt-free.
//
// A block is a maximal stretch of consecutive nodes (model order) whose names
// share a numbered path prefix: the node name up to its first component that
// is a number or ends in `.<number>` (`/layer1/layer1.0/conv1/Conv` ->
// `/layer1/layer1.0`, `/model/layers.3/mlp/Add` -> `/model/layers.3`). Its
// family is that prefix with the number replaced (`/layer1/layer1.#`). A run
// is two or more consecutive blocks of one family that are structurally
// identical: the same op types in the same order, each input read from the
// same position inside the block or from outside it.

#include <cstddef>
#include <string>
#include <vector>

namespace qs {

class Model;

struct RepeatedBlock {
    std::string prefix;   // "/blocks/blocks.3"
    size_t firstNode = 0; // index into Model::nodes
    size_t nodeCount = 0; // consecutive nodes from firstNode
};

struct RepeatedRun {
    std::string family;                // "/blocks/blocks.#"
    std::vector<RepeatedBlock> blocks; // two or more, in model order, adjacent
    // "blocks.0–blocks.5 ×6": what a folded node is labelled.
    std::string label() const;
    size_t firstNode() const { return blocks.front().firstNode; }
    size_t endNode() const { return blocks.back().firstNode + blocks.back().nodeCount; }
};

// The runs of the main graph (scope 0), in model order; never overlapping.
std::vector<RepeatedRun> findRepeatedRuns(const Model& model);

} // namespace qs
