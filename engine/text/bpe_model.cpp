#include "text/bpe_model.h"

#include <cstdio>
#include <queue>

#include "text/unicode_text.h"

namespace qs::text {

namespace {

constexpr size_t cachedWordBytes = 256;
constexpr size_t cacheEntries = 1 << 18; // then the cache starts over

uint64_t pairKey(int32_t left, int32_t right)
{
    return (uint64_t(uint32_t(left)) << 32) | uint32_t(right);
}

} // namespace

BpeModel::BpeModel(Vocab vocab, const std::vector<Merge>& merges, BpeOptions options)
    : vocab_(std::move(vocab)), options_(options)
{
    merges_.reserve(merges.size());
    for (size_t rank = 0; rank < merges.size(); ++rank) {
        const Merge& m = merges[rank];
        // A pair listed twice keeps its first (lowest) rank.
        merges_.emplace(pairKey(m.left, m.right), MergeValue{int32_t(rank), m.merged});
    }
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        byteIds_[b] = idOf(name);
    }
}

BpeModel::BpeModel(BpeModel&& other) noexcept
    : vocab_(std::move(other.vocab_)), merges_(std::move(other.merges_)), options_(other.options_),
      cache_(std::move(other.cache_))
{
    std::copy(std::begin(other.byteIds_), std::end(other.byteIds_), byteIds_);
}

BpeModel& BpeModel::operator=(BpeModel&& other) noexcept
{
    vocab_ = std::move(other.vocab_);
    merges_ = std::move(other.merges_);
    options_ = other.options_;
    cache_ = std::move(other.cache_);
    std::copy(std::begin(other.byteIds_), std::end(other.byteIds_), byteIds_);
    return *this;
}

int32_t BpeModel::idOf(std::string_view token) const
{
    const auto it = vocab_.find(token);
    return it == vocab_.end() ? -1 : it->second;
}

void BpeModel::encodeWords(const std::vector<std::string_view>& words, std::vector<int32_t>& ids) const
{
    const size_t first = ids.size();
    for (std::string_view word : words)
        encodeWord(word, ids);
    if (!options_.fuseUnknown || options_.unknownId < 0)
        return;
    // Consecutive unknowns of one call become one, across words too.
    size_t out = first;
    for (size_t i = first; i < ids.size(); ++i) {
        if (ids[i] == options_.unknownId && out > first && ids[out - 1] == options_.unknownId)
            continue;
        ids[out++] = ids[i];
    }
    ids.resize(out);
}

void BpeModel::encodeWord(std::string_view word, std::vector<int32_t>& ids) const
{
    if (word.empty())
        return;
    if (options_.ignoreMerges) {
        const int32_t whole = idOf(word);
        if (whole >= 0) {
            ids.push_back(whole);
            return;
        }
    }
    const bool cacheable = word.size() <= cachedWordBytes;
    if (cacheable) {
        std::lock_guard lock(cacheMutex_);
        const auto it = cache_.find(word);
        if (it != cache_.end()) {
            ids.insert(ids.end(), it->second.begin(), it->second.end());
            return;
        }
    }
    const size_t first = ids.size();
    mergeWord(word, ids);
    if (cacheable) {
        std::lock_guard lock(cacheMutex_);
        if (cache_.size() >= cacheEntries)
            cache_.clear();
        cache_.emplace(std::string(word), std::vector<int32_t>(ids.begin() + ptrdiff_t(first), ids.end()));
    }
}

// Merges the word's characters, always the pair of lowest rank first and of
// equal ranks the leftmost, until no listed pair is left.
void BpeModel::mergeWord(std::string_view word, std::vector<int32_t>& ids) const
{
    struct Symbol {
        int32_t id;   // -1: a character outside the vocabulary
        size_t begin; // bytes of the word it covers
        size_t end;
        int32_t prev; // neighbours in the list, -1 at the ends
        int32_t next;
        bool alive;
    };
    std::vector<Symbol> symbols;
    symbols.reserve(word.size());
    size_t pos = 0;
    while (pos < word.size()) {
        const size_t begin = pos;
        nextCodePoint(word, pos, "word");
        const int32_t index = int32_t(symbols.size());
        symbols.push_back({idOf(word.substr(begin, pos - begin)), begin, pos, index - 1, index + 1, true});
    }
    symbols.back().next = -1;

    struct Candidate {
        int32_t rank;
        int32_t left; // symbol index
        int32_t leftId;
        int32_t rightId;
        bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
    };
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
    const auto consider = [&](int32_t left) {
        if (left < 0)
            return;
        const int32_t right = symbols[size_t(left)].next;
        if (right < 0)
            return;
        const int32_t a = symbols[size_t(left)].id;
        const int32_t b = symbols[size_t(right)].id;
        if (a < 0 || b < 0)
            return;
        const auto it = merges_.find(pairKey(a, b));
        if (it != merges_.end())
            queue.push({it->second.rank, left, a, b});
    };
    for (int32_t i = 0; i + 1 < int32_t(symbols.size()); ++i)
        consider(i);
    while (!queue.empty()) {
        const Candidate c = queue.top();
        queue.pop();
        Symbol& left = symbols[size_t(c.left)];
        if (!left.alive || left.id != c.leftId || left.next < 0)
            continue;
        Symbol& right = symbols[size_t(left.next)];
        if (right.id != c.rightId)
            continue;
        left.id = merges_.find(pairKey(c.leftId, c.rightId))->second.merged;
        left.end = right.end;
        right.alive = false;
        left.next = right.next;
        if (right.next >= 0)
            symbols[size_t(right.next)].prev = c.left;
        consider(left.prev);
        consider(c.left);
    }
    for (int32_t i = 0; i >= 0; i = symbols[size_t(i)].next) {
        const Symbol& s = symbols[size_t(i)];
        if (s.id >= 0)
            ids.push_back(s.id);
        else
            appendUnknown(word.substr(s.begin, s.end - s.begin), ids);
    }
}

void BpeModel::appendUnknown(std::string_view piece, std::vector<int32_t>& ids) const
{
    if (options_.byteFallback) {
        bool all = true;
        for (char c : piece)
            all = all && byteIds_[static_cast<unsigned char>(c)] >= 0;
        if (all) {
            for (char c : piece)
                ids.push_back(byteIds_[static_cast<unsigned char>(c)]);
            return;
        }
    }
    if (options_.unknownId < 0)
        return; // dropped, as the reference does without an unknown token
    ids.push_back(options_.unknownId);
}

} // namespace qs::text
