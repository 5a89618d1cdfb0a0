#pragma once
// Where a rule's regex is malformed. std::regex rejects a bad pattern without
// saying where; this scanner walks the ECMAScript grammar as libstdc++'s
// std::regex accepts it and names the first error and its position, so a rule
// error can say `invalid regex "layer(1": missing ')' for the '(' at position 6`.
// std::regex stays the authority on what is valid: the scanner only explains.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace qs {

struct RegexSyntaxError {
    size_t offset = 0;   // 0-based byte offset of the character the message is about (an unclosed "(" ...)
    std::string message; // what is wrong, naming the 1-based position ("missing ')' for the '(' at position 6")
};

// The deepest group nesting a rule pattern may have; deeper patterns are
// refused before std::regex compiles them (its compiler recurses per level).
inline constexpr int kMaxRegexNesting = 100;

// The first syntax error of an ECMAScript pattern, or nullopt when the scanner
// finds none: unbalanced ( ) or [ ], a quantifier with nothing to repeat, a bad
// escape (\x, \u, \c, a back-reference to a group that is not closed yet), a
// malformed or inverted {m,n}, an inverted or class-bounded range [z-a], an
// unknown [:class:], an unsupported (?...) group, nesting deeper than kMaxRegexNesting.
std::optional<RegexSyntaxError> findRegexSyntaxError(std::string_view pattern);

} // namespace qs
