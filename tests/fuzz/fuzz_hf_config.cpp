// Fuzz target: a Hugging Face folder's config.json through loadHuggingFaceFolder,
// beside a fixed tiny model.safetensors (a 1-layer Llama: vocab 8, hidden 8,
// 2 heads of 4, 1 key/value head, intermediate 16, untied head, q/k/v biases
// for Qwen2's sake), so a config that matches it builds the whole graph and
// the others stop at the field or tensor they get wrong.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "io/hf_folder.h"
#include "io/safetensors.h"
#include "scratch_file.h"

namespace {

void writeTinyWeights(const std::filesystem::path& file)
{
    std::vector<qs::SafetensorsTensor> tensors;
    auto add = [&](const std::string& name, qs::Shape shape) {
        int64_t n = 1;
        for (int64_t d : shape)
            n *= d;
        std::vector<float> values(static_cast<size_t>(n));
        for (size_t i = 0; i < values.size(); ++i)
            values[i] = 0.01f * float(int(i % 13) - 6);
        tensors.push_back({name, qs::Tensor::fromVector(qs::DType::F32, std::move(shape), values), {}});
    };
    add("model.embed_tokens.weight", {8, 8});
    const std::string p = "model.layers.0.";
    add(p + "input_layernorm.weight", {8});
    add(p + "self_attn.q_proj.weight", {8, 8});
    add(p + "self_attn.q_proj.bias", {8});
    add(p + "self_attn.k_proj.weight", {4, 8});
    add(p + "self_attn.k_proj.bias", {4});
    add(p + "self_attn.v_proj.weight", {4, 8});
    add(p + "self_attn.v_proj.bias", {4});
    add(p + "self_attn.o_proj.weight", {8, 8});
    add(p + "post_attention_layernorm.weight", {8});
    add(p + "mlp.gate_proj.weight", {16, 8});
    add(p + "mlp.up_proj.weight", {16, 8});
    add(p + "mlp.down_proj.weight", {8, 16});
    add("model.norm.weight", {8});
    add("lm_head.weight", {8, 8});
    qs::writeSafetensors(file, tensors);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    static qs::fuzz::ScratchFile scratch("config.json");
    static const bool weights = (writeTinyWeights(scratch.write(nullptr, 0).parent_path() / "model.safetensors"), true);
    (void)weights;
    try {
        const std::filesystem::path config = scratch.write(data, size);
        (void)qs::loadHuggingFaceFolder(config.parent_path());
    } catch (const qs::Error&) {
    }
    return 0;
}
