#pragma once
// How many bytes a layer's weight takes, float and as its rule quantizes it:
// the size figure of the reports, of compare-rules and of the rule search.
// An estimate of storage independent of any export format, written down once:
//   float:     elements x the item size of the weight as the model stores it
//              (4 for float32, 2 for float16/bfloat16);
//   quantized: codes packed at the qtype's bits (ceil(elements x bits / 8)),
//              one float32 per scale and one byte per zero point; the
//              microscaling and GGUF block types are their block bytes
//              (bitsPerWeight: scales included), nvfp4 adds its float32
//              global scale; a lut type is its packed codes plus its
//              tables (2^bits float32 entries per group). A layer the plan leaves float (or whose weight
//              could not be quantized) takes its float bytes.

#include <cstddef>
#include <cstdint>

#include "graph/model.h"
#include "quantization/quantization_plan.h"
#include "quantization/weight_quantizer.h"

namespace qs {

struct WeightBytes {
    int64_t floatBytes = 0;
    int64_t quantizedBytes = 0;
};

// The bytes of `w` as quantized (see the header comment).
int64_t quantizedWeightBytes(const QuantizedWeight& w, int64_t elements);

// One layer's weight. A layer that shares an earlier layer's weight
// (QuantizableLayer::sharesWeightOf) reports the weight's bytes too.
WeightBytes layerWeightBytes(const Model& model, const QuantizationPlan& plan, const WeightQuantizer& weights,
                             size_t layer);

// Every layer of the model, a shared weight counted once.
WeightBytes totalWeightBytes(const Model& model, const QuantizationPlan& plan, const WeightQuantizer& weights);

} // namespace qs
