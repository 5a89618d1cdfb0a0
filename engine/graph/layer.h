#pragma once
// A quantizable layer: an op with a weight tensor, as rules see it and as the
// quantizer needs it (which tensor, which axis holds the output channels, which
// axes are contracted).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace qs {

struct QuantizableLayer {
    std::string modulePath; // unique, `/`-separated, what rule regexes match (DESIGN.md "Module paths")
    std::string
        opType; // "Conv", "ConvTranspose", "Gemm", "MatMul", "Gather"; checkpoints: "Linear", "Embedding", "Conv"
    // The graph holding the node: 0 = the main graph, else Model::subgraphs[scope - 1] (an If/Loop/Scan body).
    size_t scope = 0;
    std::optional<size_t> node;        // index into the nodes of that graph; none for weights-only models
    std::optional<size_t> weightInput; // which node input is the weight; none for weights-only models
    std::string weightName;            // the initializer of the main model holding the weight (Model::addSubgraphWeight)
    Shape weightShape;
    DType weightDType = DType::F32;
    int64_t parameterCount = 0;       // elements of the weight
    int channelAxis = 0;              // the output-channel axis of the weight (per-channel scales run along it)
    std::vector<int> contractionAxes; // axes summed over by the op (sub-channel tiles run along the first)
    int64_t groups = 1;               // Conv/ConvTranspose `group`; 1 otherwise
    // Set when an earlier layer (model order) reads the same weight tensor, as
    // when a model applies one module twice: that layer's index. The same
    // tensor is the same initializer, or the same values under another name
    // (an Identity of it, folded at load: same storage, shape and dtype). A shared
    // weight is one quantizer: rules must quantize it the same way in every
    // layer that reads it, it is computed once and every export writes it once.
    std::optional<size_t> sharesWeightOf;
};

} // namespace qs
