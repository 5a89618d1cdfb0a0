#pragma once
// The BPE model of a tokenizer.json: a vocabulary, merges by rank, and what
// happens to a piece the merges leave outside the vocabulary (byte fallback to
// <0xNN> tokens, the unknown token, consecutive unknowns fused).

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace qs::text {

struct BpeOptions {
    bool byteFallback = false; // a piece outside the vocabulary becomes its <0xNN> byte tokens
    bool fuseUnknown = false;  // consecutive unknown tokens become one
    bool ignoreMerges = false; // a whole word found in the vocabulary is taken as it is
    int32_t unknownId = -1;    // the unknown token's id, -1 when the model has none
};

// Hashes strings and string_views alike, so lookups need no temporary string.
struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};

// Token text -> id.
using Vocab = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class BpeModel {
public:
    BpeModel() = default;
    // `vocab` maps every token (the model's vocabulary and the added tokens)
    // to its id; `merges` are pairs of token ids in rank order, each with the
    // id of the merged token.
    struct Merge {
        int32_t left;
        int32_t right;
        int32_t merged;
    };
    BpeModel(Vocab vocab, const std::vector<Merge>& merges, BpeOptions options);

    BpeModel(BpeModel&& other) noexcept;
    BpeModel& operator=(BpeModel&& other) noexcept;

    // Appends the ids of the pre-tokenized words of one piece of text (the
    // text between two added tokens); with fuseUnknown, consecutive unknowns
    // among them become one.
    void encodeWords(const std::vector<std::string_view>& words, std::vector<int32_t>& ids) const;

    // Appends the ids of one pre-tokenized word (valid UTF-8 in the model's
    // alphabet). Thread-safe; words up to 256 bytes are cached.
    void encodeWord(std::string_view word, std::vector<int32_t>& ids) const;

    // The id of a token, or -1.
    int32_t idOf(std::string_view token) const;

private:
    void mergeWord(std::string_view word, std::vector<int32_t>& ids) const;
    void appendUnknown(std::string_view piece, std::vector<int32_t>& ids) const;

    struct PairHash {
        size_t operator()(uint64_t key) const { return std::hash<uint64_t>()(key * 0x9E3779B97F4A7C15ull); }
    };
    struct MergeValue {
        int32_t rank;
        int32_t merged;
    };

    Vocab vocab_;
    std::unordered_map<uint64_t, MergeValue, PairHash> merges_;
    int32_t byteIds_[256] = {};
    BpeOptions options_;

    mutable std::mutex cacheMutex_;
    mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;
};

} // namespace qs::text
