#pragma once
// Hugging Face language-model folders: `config.json` beside `model.safetensors`
// or a sharded `model.safetensors.index.json`.
//
// For the Llama family (`LlamaForCausalLM`, `MistralForCausalLM`,
// `Qwen2ForCausalLM`) the loader builds a runnable graph of ONNX ops from the
// config, so a checkpoint is explored like any ONNX model:
//   input  `input_ids`  int64 [batch, seq_len]
//   output `logits`     float32 [batch, seq_len, vocab_size]
// Each decoder layer is RMSNorm -> q/k/v projections (Gemm, transB = 1, the
// checkpoint's [out, in] weights as they are; Qwen2's q/k/v biases) -> rotary
// embeddings (rotate-half convention, the config's rope_theta and rope_scaling
// `linear` or `llama3`) -> grouped-query attention with a causal mask (and
// Mistral's sliding window) -> o_proj -> residual -> RMSNorm -> SwiGLU MLP
// (down(silu(gate(x)) * up(x))) -> residual; then the final RMSNorm and
// lm_head, or the embedding table itself when tie_word_embeddings. The
// hidden state is kept as [batch * seq_len, hidden] so every projection is a
// Gemm over the weight as stored. Layers carry the checkpoint's own names:
// `model/layers/0/self_attn/q_proj`, `model/embed_tokens`, `lm_head` (a tied
// lm_head shares the embedding's quantizer).
//
// Weights stay borrowed from the memory-mapped files in their stored dtype
// (float32, float16 or bfloat16); the graph computes in float32 as the
// reference implementation does: each projection's Gemm widens its weight a
// strip of columns at a time, the runtime the small rest once when it is built
// (Model::widenHalfInitializers).
//
// A folder whose config names another architecture opens as weights only, with
// a warning that says so. config.json is checked field by field: a missing or
// mistyped field, a size out of range, heads that do not divide the hidden
// size, an unsupported rope_scaling or hidden_act, a weight missing from the
// checkpoint or of the wrong shape is one Error naming the file and the field
// or tensor.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "graph/model.h"

namespace qs {

// The largest config.json read (real ones are a few kB).
inline constexpr uint64_t kMaxHfConfigBytes = 1ull << 20;

// What the loader reads from config.json.
struct LlamaConfig {
    std::string architecture; // config "architectures"[0]
    std::string modelType;    // config "model_type"
    int64_t vocabSize = 0;
    int64_t hiddenSize = 0;
    int64_t intermediateSize = 0;
    int64_t layers = 0;
    int64_t heads = 0;
    int64_t kvHeads = 0;
    int64_t headDim = 0;
    double rmsNormEps = 1e-6;
    double ropeTheta = 10000.0;
    // rope_scaling: "" (none), "linear" or "llama3"
    std::string ropeScaling;
    double ropeFactor = 1.0;
    double ropeLowFreqFactor = 1.0;
    double ropeHighFreqFactor = 4.0;
    int64_t ropeOriginalMaxPositions = 0;
    int64_t maxPositions = 0;
    std::optional<int64_t> slidingWindow; // attention limited to this many positions back
    bool tieWordEmbeddings = false;
    bool qkvBias = false;  // Qwen2, or Llama's attention_bias
    bool outputBias = false; // Llama's attention_bias also biases o_proj
    bool mlpBias = false;
    std::optional<int64_t> bosTokenId;
    std::optional<int64_t> eosTokenId;
};

// True when `folder` is a directory holding a config.json.
bool isHuggingFaceFolder(const std::filesystem::path& folder);

// Reads and checks config.json; `runnable` is set false (and the config only
// partly filled) for an architecture the loader does not build.
LlamaConfig readLlamaConfig(const std::filesystem::path& configJson, bool& runnable);

// The folder's model: a runnable graph for the Llama family, else weights only.
Model loadHuggingFaceFolder(const std::filesystem::path& folder);

// The inverse frequencies of the rotary embedding (head_dim / 2 values) after
// the config's rope_scaling, in float32 as the reference computes them.
std::vector<float> ropeInverseFrequencies(const LlamaConfig& config);

} // namespace qs
