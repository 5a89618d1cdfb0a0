#pragma once
// What a tokenizer.json describes, read once (tokenizer_json.cpp) and run by
// Tokenizer (tokenizer.cpp). Internal to engine/text.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "text/bpe_model.h"
#include "text/pre_tokenizer.h"
#include "text/unicode_text.h"

namespace qs::text {

struct AddedToken {
    std::string content;
    int32_t id = 0;
    bool special = false;
    bool lstrip = false;     // whitespace before it is removed
    bool rstrip = false;     // whitespace after it is removed
    bool singleWord = false; // not taken where a word character touches it
    bool normalized = false; // matched in the normalized text, not the raw text
};

struct NormalizerStep {
    enum Kind { Unicode, Prepend, Replace } kind = Unicode;
    NormalForm form = NormalForm::Nfc; // Unicode
    std::string text;                  // Prepend: what; Replace: the string replaced
    std::string content;               // Replace: by what
};

struct PreTokenizerStep {
    enum Kind { Split, ByteLevel, Metaspace } kind = Split;
    SplitPattern pattern = SplitPattern::Gpt2;              // Split
    bool addPrefixSpace = false;                            // ByteLevel
    bool useRegex = true;                                   // ByteLevel: split with the GPT-2 pattern first
    std::string replacement;                                // Metaspace
    enum Prepend { Always, First, Never } prepend = Always; // Metaspace
};

struct DecoderStep {
    enum Kind { ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace } kind = ByteLevel;
    std::string pattern; // Replace: the string replaced; Strip: the character; Metaspace: the replacement
    std::string content; // Replace: by what
    int start = 0;       // Strip: at most this many at the start
    int stop = 0;        // Strip: and at the end
};

// Splits text at added tokens, taking at each position the longest token that
// starts there (leftmost-longest, as the reference does). A single_word token
// with a word character right before or after it is not taken, and the
// search goes on after it.
class AddedTokenMatcher {
public:
    void add(const std::string& content, int32_t addedIndex, bool singleWord);
    struct Part {
        std::string_view text;
        int32_t added = -1; // index into Pipeline::added, -1 for plain text
    };
    void split(std::string_view text, std::vector<Part>& parts) const;
    bool empty() const { return byContent_.empty(); }

private:
    struct Entry {
        int32_t added;
        bool singleWord;
    };
    std::unordered_map<std::string, Entry, StringHash, std::equal_to<>> byContent_;
    std::vector<size_t> lengths_; // distinct content lengths, longest first
    bool firstBytes_[256] = {};
};

struct Pipeline {
    std::string name; // the file, for messages
    std::vector<AddedToken> added;
    std::unordered_map<std::string, int32_t> addedIds; // content -> id
    AddedTokenMatcher rawMatcher;                      // added tokens matched before normalization
    AddedTokenMatcher normalizedMatcher;               // and after it
    std::vector<NormalizerStep> normalizers;
    std::vector<PreTokenizerStep> preTokenizers;
    BpeModel model;
    std::vector<std::string> tokens; // by id; empty where no token has the id
    std::vector<bool> special;       // by id: an added token marked special
    std::vector<int32_t> prefix;     // TemplateProcessing: special tokens before the text
    std::vector<int32_t> suffix;     // and after it
    bool hasDecoder = false;
    std::vector<DecoderStep> decoders;
    std::optional<int32_t> bos;
    std::optional<int32_t> eos;
};

// Runs the file's decoders on the tokens of some ids and joins the result.
std::string runDecoders(const Pipeline& p, std::vector<std::string> tokens);

// Reads a tokenizer.json (and, if not empty, a tokenizer_config.json).
std::unique_ptr<Pipeline> readPipeline(std::string_view json, const std::string& name, std::string_view configJson);

} // namespace qs::text
