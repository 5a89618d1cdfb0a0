#pragma once
// A text tokenizer read from a Hugging Face tokenizer.json: byte-level BPE
// (GPT-2, Llama 3, Qwen 2/3) and SentencePiece-style BPE with byte fallback
// (Llama 2, Mistral). Its ids are those of the Hugging Face tokenizers for the
// same file (docs/text-data.md says how that was checked). Any other model
// kind, normalizer, pre-tokenizer, post-processor or decoder is refused when
// the file is loaded, with an Error naming the file and the field.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace qs {

namespace text {
struct Pipeline;
}

class Tokenizer {
public:
    // Reads `path` (a tokenizer.json). When a tokenizer_config.json sits beside
    // it, its bos_token and eos_token name the BOS and EOS tokens.
    static Tokenizer load(const std::filesystem::path& path);
    // Parses tokenizer.json text; `name` is what errors call the file.
    // `configJson`, when not empty, is the tokenizer_config.json text.
    static Tokenizer fromJson(std::string_view json, const std::string& name, std::string_view configJson = {});

    Tokenizer(Tokenizer&&) noexcept;
    Tokenizer& operator=(Tokenizer&&) noexcept;
    ~Tokenizer();

    struct EncodeOptions {
        // Add the special tokens of the file's TemplateProcessing post-processor
        // (Llama 2's BOS, say), as the reference does by default.
        bool addSpecialTokens = true;
    };
    // The ids of UTF-8 text; added tokens written in the text (e.g.
    // "<|im_start|>") become their ids. Invalid UTF-8 is an Error naming the
    // byte offset. Safe to call from several threads at once.
    std::vector<int32_t> encode(std::string_view utf8, EncodeOptions options) const;
    std::vector<int32_t> encode(std::string_view utf8) const { return encode(utf8, EncodeOptions{}); }

    // The text of ids through the file's decoder (the bytes the tokens stand
    // for; a cut in the middle of a character stays cut). An id outside the
    // vocabulary is an Error.
    std::string decode(std::span<const int32_t> ids, bool skipSpecialTokens = false) const;

    // One more than the largest id of the vocabulary and the added tokens.
    int32_t vocabSize() const;
    // The token of an id (empty for an id no token has).
    std::string_view tokenText(int32_t id) const;
    // The id of a token (vocabulary or added), if there is one.
    std::optional<int32_t> idOf(std::string_view token) const;
    // BOS and EOS, from tokenizer_config.json if it names them, else from the
    // TemplateProcessing post-processor (the special token before and after
    // the text).
    std::optional<int32_t> bosId() const;
    std::optional<int32_t> eosId() const;

private:
    explicit Tokenizer(std::unique_ptr<text::Pipeline> pipeline);
    std::unique_ptr<text::Pipeline> pipeline_;
};

} // namespace qs
