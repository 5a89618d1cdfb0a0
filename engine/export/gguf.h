#pragma once
// GGUF export (llama.cpp): a Hugging Face folder's Llama-family model
// (io/hf_folder.h) written as llama.cpp reads it, each layer's weight in the
// GGUF block format its rule chose (q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k,
// q6_k: numerics/gguf_blocks.h, the same encoder the simulation decodes) or,
// left float, in its stored dtype (f32, f16, bf16). Any other weight qtype is
// refused naming the layer, since llama.cpp could not run it.
//
// The file (GGUF version 3, little-endian, alignment 32):
//   metadata  general.architecture ("llama" for Llama and Mistral, "qwen2"),
//             general.name, general.alignment, <arch>.context_length,
//             embedding_length, block_count, feed_forward_length,
//             attention.head_count, attention.head_count_kv,
//             attention.key_length / value_length (head_dim), rope.dimension_count,
//             rope.freq_base, attention.layer_norm_rms_epsilon, vocab_size,
//             rope.scaling.type / factor (linear); the tokenizer's
//             tokenizer.ggml.{model, pre, tokens, token_type, merges,
//             bos_token_id, eos_token_id, add_bos_token};
//   tensors   token_embd, blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_output,
//             ffn_norm, ffn_gate, ffn_up, ffn_down}.weight (and attn_q/k/v/output,
//             ffn_*.bias where the checkpoint has biases), output_norm, output
//             (absent when tied: llama.cpp then reads token_embd),
//             rope_freqs (llama3 rope scaling: per-frequency divisors);
//             dimensions innermost first, so an [out, in] weight is ne = {in, out}
//             and blocks run along `in`, as the simulation's.
//   For the "llama" architecture ggml's rotary embedding pairs neighbouring
//   elements, so the rows of q_proj and k_proj (and their biases) are written
//   permuted within each head (row h·d + 2i + j holds row h·d + j·d/2 + i);
//   "qwen2" uses the rotate-half pairing and keeps the checkpoint's order.
//   Each row is encoded on its own, so the permutation moves blocks, never
//   changes them: the simulation's errors are the file's.
//
// Vocabulary from the folder's tokenizer.json: byte-level BPE (GPT-2, Llama 3,
// Qwen2) as llama.cpp's "gpt2" model, with its merges and pre-tokenizer name;
// SentencePiece-style BPE with byte fallback (Llama 2, Mistral) as its "llama"
// model, each merge's rank becoming its token's score. Without tokenizer.json,
// a byte-level vocabulary of the 256 byte tokens (for test models). Ids past
// the tokenizer's up to vocab_size are written as unused `[PAD<id>]` tokens.
//
// The file is written atomically, one tensor at a time (each weight widened,
// encoded, written and released), so memory stays near the largest tensor.

#include <filesystem>

#include "core/cancellation.h"
#include "export/checkpoint.h"
#include "graph/model.h"
#include "quantization/quantization_plan.h"

namespace qs {

// GGML's type ids as GGUF stores them.
enum class GgmlType : uint32_t {
    F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8,
    Q4_K = 12, Q5_K = 13, Q6_K = 14, BF16 = 30,
};

// What a GGUF file's header says, read back to check a written file: its
// version, tensor and metadata counts. Throws Error naming the file when it
// is not a GGUF file or is cut short.
struct GgufHeader {
    uint32_t version = 0;
    uint64_t tensors = 0;
    uint64_t metadata = 0;
};
GgufHeader readGgufHeader(const std::filesystem::path& file);

ExportSummary exportGguf(const Model& model, const QuantizationPlan& plan, const std::filesystem::path& out,
                         const CancellationToken& cancel = {}, const ProgressCallback& progress = {});

} // namespace qs
