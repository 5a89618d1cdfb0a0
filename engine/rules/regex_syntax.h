#pragma once
// Rule regexes (a rule's module_path) are RE2 patterns: matching takes time
// linear in the path, uses no recursion and a bounded amount of memory, so no
// pattern can hang or crash the app. RE2's syntax is what Qwix users write, Python
// `re`, minus back-references and lookaround (docs/rules.md, "Regex syntax").
//
// RE2 says what is wrong but not where; a scanner walks the pattern first and
// names the first mistake and its position (an unclosed '(', a lookahead, a
// back-reference ...) with what to write instead. RE2 stays the authority on what
// is valid: the scanner never refuses a pattern RE2 accepts (tst_rules checks it),
// and a pattern only RE2 refuses is explained from RE2's error code.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace re2 {
class RE2;
}

namespace qs {

// The longest module_path pattern a rule may have, in bytes.
inline constexpr size_t kMaxPatternLength = 4096;
// The memory one compiled pattern may use (RE2's max_mem): its program and the
// cache of its matcher. A pattern whose program does not fit is refused when the
// rule is read; a matcher whose cache fills up keeps matching, more slowly (RE2
// falls back from its DFA to its NFA, still linear in the path).
inline constexpr int64_t kMaxPatternMemory = int64_t(1) << 20;
// The longest module path a model may have, in bytes. Real paths have tens of
// characters; a longer one comes from a hostile or broken file (a 50,000-character
// tensor name in a safetensors header) and is refused where paths are made
// (uniqueModulePaths, graph/module_path.h), so matching never sees one.
inline constexpr size_t kMaxModulePathLength = 4096;
// The most characters of a pattern an error message quotes.
inline constexpr size_t kPatternExcerptLength = 60;

struct RegexSyntaxError {
    size_t offset = 0;   // 0-based byte offset of what the message is about (an unclosed "(" ...)
    std::string message; // what is wrong and what to write instead, naming the 1-based position
};

// The first reason RE2 (as rules use it) refuses `pattern`, or nullopt when it
// accepts it: longer than kMaxPatternLength, unbalanced ( ) or [ ], a quantifier
// with nothing to repeat or stacked on another (`a**`, possessive `a*+`), a
// back-reference (\1, (?P=name), \k<name>), lookahead or lookbehind, an atomic
// group, a Python-only flag or group syntax, \Z, a bad escape or class, a
// repetition count above 1000, a program larger than kMaxPatternMemory.
std::optional<RegexSyntaxError> findRegexSyntaxError(std::string_view pattern);

// `pattern` compiled for full matching of module paths. Throws Error
// `invalid regex "<excerpt>": <findRegexSyntaxError's message>`, where the excerpt
// is the pattern, or at most kPatternExcerptLength characters of it around the
// error followed by the pattern's length.
std::shared_ptr<const re2::RE2> compileModulePathRegex(std::string_view pattern);

// At most kPatternExcerptLength bytes of `text` around `offset` (cut at UTF-8
// character boundaries), with "..." where text was left out.
std::string excerptAround(std::string_view text, size_t offset);

// A pattern that matches exactly `path` (every character RE2 treats specially
// is escaped): what the GUI writes when it proposes a rule for given layers.
std::string escapeModulePath(std::string_view path);

} // namespace qs
