#pragma once
// The pre-tokenizer split patterns byte-level BPE files use, scanned by hand:
// the patterns need a lookahead (`\s+(?!\S)`) that RE2 does not have. Each
// scanner takes, at every position, the first alternative of the pattern that
// matches there, with the backtracking a regex engine would do, so its pieces
// are the pattern's matches.

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace qs::text {

enum class SplitPattern {
    // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
    // (GPT-2; the ByteLevel pre-tokenizer's own pattern when use_regex is true)
    Gpt2,
    // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
    // ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
    // (Llama 3)
    Llama3,
    // The same with \p{N} single digits (Qwen 2 and 3)
    Qwen2,
};

// The pattern a Split pre-tokenizer's Regex string is, or nothing for any
// other regex.
std::optional<SplitPattern> recognizedSplitPattern(std::string_view regex);

// Appends to `pieces` the matches of `pattern` in `text` and, between them,
// whatever no alternative matched (a Split with behavior Isolated). `text` is
// valid UTF-8; pieces point into it.
void splitIsolated(std::string_view text, SplitPattern pattern, std::vector<std::string_view>& pieces);

// GPT-2's reversible map of bytes to printable characters (the ByteLevel
// pre-tokenizer and decoder): printable Latin-1 bytes stand for themselves,
// the others for U+0100 onwards in byte order.
struct ByteAlphabet {
    ByteAlphabet();
    std::string utf8[256];                              // byte -> its character, UTF-8
    std::unordered_map<char32_t, unsigned char> byteOf; // character -> byte
};
const ByteAlphabet& byteAlphabet();

// Replaces every `from` in s by `to` (a String pattern of Replace).
void replaceAll(std::string& s, std::string_view from, std::string_view to);

} // namespace qs::text
