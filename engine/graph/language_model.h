#pragma once
// Causal language models as the engine recognises them, whatever format they
// came from: what perplexity (session/evaluation.h) and text data
// (io/text_data_source.h) need to know.

#include <optional>
#include <string>

#include "graph/model.h"

namespace qs {

// A causal language model: its one graph input is `input_ids`, int64 token
// ids [batch, sequence], and it has a float graph output `logits` [batch,
// sequence, vocab] whose position t predicts token t + 1. A Hugging Face
// folder's graph (io/hf_folder.h) is one; so is an ONNX model exported with
// those names.
struct CausalLanguageModel {
    std::string tokens; // the input holding the ids
    std::string logits; // the output holding the logits
};
std::optional<CausalLanguageModel> causalLanguageModel(const Model& model);

} // namespace qs
