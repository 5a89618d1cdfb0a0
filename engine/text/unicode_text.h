#pragma once
// UTF-8 and the Unicode properties the tokenizer needs. Categories,
// White_Space and normalization forms come from ICU, never from tables typed
// here.

#include <cstddef>
#include <string>
#include <string_view>

namespace qs::text {

// Reads the code point starting at text[pos] and advances pos past it.
// Invalid UTF-8 (overlong forms, surrogates, truncated sequences, values above
// U+10FFFF) is an Error naming `what` and the byte offset.
char32_t nextCodePoint(std::string_view text, size_t& pos, std::string_view what);

// Throws like nextCodePoint if `text` is not valid UTF-8.
void checkUtf8(std::string_view text, std::string_view what);

void appendUtf8(std::string& out, char32_t cp);

// General category L (Lu, Ll, Lt, Lm, Lo): what \p{L} matches.
bool isLetter(char32_t cp);
// General category N (Nd, Nl, No): what \p{N} matches.
bool isNumber(char32_t cp);
// The White_Space property: what \s matches in the tokenizers' patterns.
bool isWhiteSpace(char32_t cp);
// What \w matches in Unicode regexes (Alphabetic, marks, decimal digits,
// connector punctuation, Join_Control): an added token with single_word is
// not taken next to one.
bool isWordCharacter(char32_t cp);

enum class NormalForm { Nfc, Nfd, Nfkc, Nfkd };
std::string normalized(std::string_view utf8, NormalForm form);

} // namespace qs::text
