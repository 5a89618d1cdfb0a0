#include "rules/regex_syntax.h"

#include <algorithm>
#include <vector>

#include <re2/re2.h>

#include "core/error.h"

namespace qs {
namespace {

bool isDigit(char c)
{
    return c >= '0' && c <= '9';
}
bool isContinuationByte(char c)
{
    return (static_cast<unsigned char>(c) & 0xC0) == 0x80;
}

// Messages count positions in characters from 1, as an editor's column does.
std::string positionOf(std::string_view p, size_t offset)
{
    size_t characters = 0;
    for (size_t i = 0; i < offset && i < p.size(); ++i)
        characters += !isContinuationByte(p[i]);
    return "position " + std::to_string(characters + 1);
}

// Thrown inside the scanner only; findRegexSyntaxError turns it into a value.
struct Found {
    RegexSyntaxError error;
};

const char* const kNoLookaround =
    "RE2 has no lookaround; match the text itself, or put a rule for the paths to leave out before "
    "this one, without qtypes so they stay float (the first matching rule wins)";
const char* const kNoBackReference = "RE2 matches in linear time and cannot compare with an earlier group; write "
                                     "the group's pattern again instead, e.g. (a|b)(a|b) for (a|b)\\1";

class Scanner {
public:
    explicit Scanner(std::string_view p) : p_(p) {}

    void run()
    {
        while (i_ < p_.size()) {
            const char c = p_[i_];
            switch (c) {
            case '(':
                openGroup();
                break;
            case ')':
                if (groups_.empty())
                    found(i_, "unmatched ')' at " + at(i_) + "; escape it as '\\)' to match it literally");
                groups_.pop_back();
                prev_ = Prev::Atom;
                ++i_;
                break;
            case '|':
                prev_ = Prev::Nothing;
                ++i_;
                break;
            case '*':
            case '+':
            case '?':
                quantifier(i_, 1);
                break;
            case '{':
                if (const size_t length = repetitionLength(); length > 0)
                    quantifier(i_, length);
                else
                    atom(1); // RE2 reads a '{' that starts no {m}, {m,} or {m,n} literally
                break;
            case '\\':
                escape();
                break;
            case '[':
                bracket();
                break;
            default: // '.', '^', '$' (RE2 lets anchors repeat), ']', '}' and every other character
                atom(1);
                break;
            }
        }
        if (!groups_.empty())
            found(groups_.back(), "missing ')' for the '(' at " + at(groups_.back()));
    }

private:
    // What a quantifier would repeat. Unknown: a case the scanner leaves to RE2.
    enum class Prev { Nothing, Atom, Quantified, Lazy, Unknown };

    std::string at(size_t offset) const { return positionOf(p_, offset); }

    [[noreturn]] void found(size_t offset, std::string message) { throw Found{{offset, std::move(message)}}; }

    void atom(size_t length)
    {
        prev_ = Prev::Atom;
        i_ += length;
    }

    void quantifier(size_t start, size_t length)
    {
        const std::string text(p_.substr(start, length));
        const char c = text[0];
        if (prev_ == Prev::Nothing)
            found(start, "nothing to repeat before '" + text + "' at " + at(start) + "; escape it as '\\" +
                             std::string(1, c) + "' to match it literally");
        if (prev_ == Prev::Quantified && c == '?') {
            prev_ = Prev::Lazy; // a*? is the lazy a*
        } else if (prev_ == Prev::Quantified && c == '+') {
            const std::string stacked(p_.substr(quantifierStart_, start + 1 - quantifierStart_));
            found(quantifierStart_, "possessive quantifier '" + stacked + "' at " + at(quantifierStart_) +
                                        " is not supported; write '" + stacked.substr(0, stacked.size() - 1) +
                                        "' (RE2 does not backtrack, so it needs no possessive form)");
        } else if (prev_ == Prev::Quantified || prev_ == Prev::Lazy) {
            const std::string stacked(p_.substr(quantifierStart_, start + length - quantifierStart_));
            found(quantifierStart_, "'" + stacked + "' at " + at(quantifierStart_) +
                                        " repeats a repetition; write one quantifier, or group first: (?:a*)+");
        } else if (prev_ == Prev::Atom) {
            prev_ = Prev::Quantified;
            quantifierStart_ = start;
        }
        if (c == '{')
            checkRepetitionCounts(start, text);
        i_ = start + length;
    }

    // The length of a {m}, {m,} or {m,n} starting at i_, or 0 when there is none.
    size_t repetitionLength() const
    {
        size_t j = i_ + 1;
        const auto digits = [&] {
            const size_t from = j;
            while (j < p_.size() && isDigit(p_[j]))
                ++j;
            return j > from;
        };
        if (!digits())
            return 0;
        if (j < p_.size() && p_[j] == ',') {
            ++j;
            digits();
        }
        return j < p_.size() && p_[j] == '}' ? j + 1 - i_ : 0;
    }

    void checkRepetitionCounts(size_t start, const std::string& text)
    {
        const auto value = [](std::string_view digits) {
            uint64_t v = 0;
            for (const char d : digits)
                v = std::min<uint64_t>(v * 10 + uint64_t(d - '0'), 1u << 30);
            return v;
        };
        const size_t comma = text.find(',');
        const uint64_t lo = value(std::string_view(text).substr(1, std::min(comma, text.size() - 1) - 1));
        const bool bounded = comma == std::string::npos || comma + 2 < text.size();
        const uint64_t hi =
            comma == std::string::npos ? lo : value(std::string_view(text).substr(comma + 1, text.size() - comma - 2));
        if (lo > 1000 || (bounded && hi > 1000))
            found(start, "repetition '" + text + "' at " + at(start) +
                             " counts above 1000, RE2's limit; use a smaller count, or '*' or '+'");
        if (bounded && lo > hi)
            found(start, "repetition '" + text + "' at " + at(start) + " has its minimum above its maximum");
    }

    void openGroup()
    {
        const size_t start = i_;
        const std::string_view rest = p_.substr(i_);
        prev_ = Prev::Nothing;
        if (!rest.starts_with("(?")) {
            groups_.push_back(start);
            ++i_;
            return;
        }
        const auto unsupported = [&](std::string_view token, const std::string& what, const std::string& instead) {
            found(start, what + " '" + std::string(token) + "' at " + at(start) + " is not supported; " + instead);
        };
        if (rest.starts_with("(?=") || rest.starts_with("(?!"))
            unsupported(rest.substr(0, 3), "lookahead", kNoLookaround);
        if (rest.starts_with("(?<=") || rest.starts_with("(?<!"))
            unsupported(rest.substr(0, 4), "lookbehind", kNoLookaround);
        if (rest.starts_with("(?P="))
            unsupported("(?P=", "named back-reference", kNoBackReference);
        if (rest.starts_with("(?<"))
            unsupported("(?<", "group syntax", "write (?P<name>...) for a named group");
        if (rest.starts_with("(?>"))
            unsupported("(?>", "atomic group", "write (?:...) (RE2 does not backtrack, so it needs no atomic form)");
        if (rest.starts_with("(?#"))
            unsupported("(?#", "comment", "remove it");
        if (rest.starts_with("(?("))
            unsupported("(?(", "conditional group", "write the alternatives as (?:a|b), or as separate rules");
        if (rest.starts_with("(?:")) {
            groups_.push_back(start);
            i_ += 3;
            return;
        }
        if (rest.starts_with("(?P<")) { // (?P<name>...): RE2 checks the name
            groups_.push_back(start);
            const size_t close = p_.find('>', i_ + 4);
            i_ = close == std::string_view::npos ? p_.size() : close + 1;
            return;
        }
        // Flags: (?i) or (?i:...). RE2 knows i, m, s and U; Python's a, L, u and x are not RE2's.
        size_t j = i_ + 2;
        while (j < p_.size() && (std::string_view("imsU-").find(p_[j]) != std::string_view::npos))
            ++j;
        if (j < p_.size() && std::string_view("aLux").find(p_[j]) != std::string_view::npos)
            found(j, "flag '" + std::string(1, p_[j]) + "' at " + at(j) +
                         " is not supported; RE2 knows the flags i, m, s and U (write (?i) for case-insensitive)");
        if (j > i_ + 2 && j < p_.size() && p_[j] == ':') {
            groups_.push_back(start);
            i_ = j + 1;
            return;
        }
        if (j > i_ + 2 && j < p_.size() && p_[j] == ')') {
            prev_ = Prev::Unknown; // a flag group repeats nothing itself; RE2 decides
            i_ = j + 1;
            return;
        }
        // Anything else after "(?" is for RE2 to refuse; keep scanning as a group.
        groups_.push_back(start);
        prev_ = Prev::Unknown;
        i_ += 2;
    }

    // Skips \x{...}, \p{...} and \P{...} braces after the two escape characters at i_.
    size_t escapeLength()
    {
        const char e = p_[i_ + 1];
        if ((e == 'x' || e == 'p' || e == 'P') && i_ + 2 < p_.size() && p_[i_ + 2] == '{') {
            const size_t close = p_.find('}', i_ + 3);
            if (close == std::string_view::npos)
                found(i_, "missing '}' for the '\\" + std::string(1, e) + "{' at " + at(i_));
            return close + 1 - i_;
        }
        return 2;
    }

    // An escape outside brackets.
    void escape()
    {
        const size_t start = i_;
        if (i_ + 1 >= p_.size())
            found(start, "trailing '\\' at " + at(start) + "; write '\\\\' to match a backslash");
        const char e = p_[i_ + 1];
        const char next = i_ + 2 < p_.size() ? p_[i_ + 2] : '\0';
        if (e == 'Q') { // \Q...\E: everything between is literal
            const size_t end = p_.find("\\E", i_ + 2);
            const bool empty = end == i_ + 2;
            i_ = end == std::string_view::npos ? p_.size() : end + 2;
            prev_ = empty ? Prev::Unknown : Prev::Atom;
            return;
        }
        if ((e >= '1' && e <= '7' && !(next >= '0' && next <= '7')) || e == '8' || e == '9') {
            // RE2 reads \12 as an octal escape; a lone digit is a back-reference.
            found(start, "back-reference '\\" + std::string(1, e) + "' at " + at(start) + " is not supported; " +
                             kNoBackReference);
        }
        if (e == 'k' && (next == '<' || next == '{' || next == '\''))
            found(start, "named back-reference '\\k" + std::string(1, next) + "' at " + at(start) +
                             " is not supported; " + kNoBackReference);
        if (e == 'Z')
            found(start, "'\\Z' at " + at(start) + " is not supported; write '\\z' (end of text) or '$'");
        if (e == 'b' || e == 'B' || e == 'A' || e == 'z') {
            prev_ = Prev::Unknown; // empty-width: RE2 decides whether it may repeat
            i_ += 2;
            return;
        }
        atom(escapeLength());
    }

    // A bracket expression [...] or [^...]; a ']' right after the '[' (or '[^') is literal.
    void bracket()
    {
        const size_t start = i_;
        ++i_;
        if (i_ < p_.size() && p_[i_] == '^')
            ++i_;
        if (i_ < p_.size() && p_[i_] == ']')
            ++i_;
        while (true) {
            if (i_ >= p_.size())
                found(start, "missing ']' for the '[' at " + at(start) + "; write '\\[' to match it literally");
            const char c = p_[i_];
            if (c == ']') {
                atom(1);
                return;
            }
            if (c == '\\') {
                if (i_ + 1 >= p_.size())
                    found(i_, "trailing '\\' at " + at(i_) + " inside the '[' at " + at(start));
                const char e = p_[i_ + 1];
                if ((e >= '1' && e <= '7' && !(i_ + 2 < p_.size() && p_[i_ + 2] >= '0' && p_[i_ + 2] <= '7')) ||
                    e == '8' || e == '9')
                    found(i_, "back-reference '\\" + std::string(1, e) + "' at " + at(i_) +
                                  " is not allowed inside the '[' at " + at(start));
                i_ += escapeLength();
                continue;
            }
            if (c == '[' && i_ + 1 < p_.size() && p_[i_ + 1] == ':') {
                const size_t close = p_.find(":]", i_ + 2);
                if (close != std::string_view::npos) {
                    i_ = close + 2; // [:alpha:]; RE2 checks the name
                    continue;
                }
            }
            ++i_;
        }
    }

    std::string_view p_;
    size_t i_ = 0;
    Prev prev_ = Prev::Nothing;
    size_t quantifierStart_ = 0; // where the quantifier of a Quantified or Lazy atom starts
    std::vector<size_t> groups_; // offsets of the '(' of the open groups
};

// The offset of the first byte that does not start a valid UTF-8 sequence, or npos.
size_t firstInvalidUtf8(std::string_view p)
{
    size_t i = 0;
    while (i < p.size()) {
        const auto b = static_cast<unsigned char>(p[i]);
        const size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
        if (n == 0 || i + n > p.size())
            return i;
        for (size_t k = 1; k < n; ++k)
            if (!isContinuationByte(p[i + k]))
                return i;
        i += n;
    }
    return std::string_view::npos;
}

// RE2's refusal of a pattern the scanner found nothing wrong with, in the
// scanner's terms: what, where (RE2 names the offending text; its first
// occurrence is taken) and what to write instead.
RegexSyntaxError explainRe2Error(std::string_view p, const re2::RE2& re)
{
    const std::string& arg = re.error_arg();
    const size_t found = arg.empty() ? std::string_view::npos : p.find(arg);
    const size_t offset = found == std::string_view::npos ? 0 : found;
    const std::string where = found == std::string_view::npos ? std::string() : " at " + positionOf(p, offset);
    const std::string quoted = "'" + excerptAround(arg, 0) + "'" + where;
    switch (re.error_code()) {
    case re2::RE2::ErrorBadEscape:
        return {offset, "escape " + quoted +
                            " is not one RE2 knows; escape only punctuation (\\. \\/ \\( ...), or use \\d \\w \\s "
                            "\\pL \\x{41}"};
    case re2::RE2::ErrorBadCharClass:
    case re2::RE2::ErrorBadCharRange:
        return {offset, "character class " + quoted +
                            " is invalid; write a range low-high (a-z, not z-a), a POSIX class such as [:alpha:] "
                            "or a Unicode class such as \\pL"};
    case re2::RE2::ErrorMissingBracket:
        return {offset, "missing ']' for " + quoted};
    case re2::RE2::ErrorMissingParen:
    case re2::RE2::ErrorUnexpectedParen:
        return {0, "unbalanced parentheses; every '(' needs a ')', and '\\(' '\\)' match them literally"};
    case re2::RE2::ErrorTrailingBackslash:
        return {p.empty() ? 0 : p.size() - 1, "trailing '\\'; write '\\\\' to match a backslash"};
    case re2::RE2::ErrorRepeatArgument:
        return {offset, "nothing to repeat before " + quoted + "; escape it to match it literally"};
    case re2::RE2::ErrorRepeatSize:
        return {offset, "repetition " + quoted +
                            " is too large: counts, multiplied through nested repetitions, may be at most 1000"};
    case re2::RE2::ErrorRepeatOp:
        return {offset, quoted + " repeats a repetition; write one quantifier, or group first: (?:a*)+"};
    case re2::RE2::ErrorBadPerlOp:
        return {offset, "group syntax " + quoted +
                            " is not supported; RE2 knows (...), (?:...), (?P<name>...) and the flags (?i) (?m) (?s) "
                            "(?U)"};
    case re2::RE2::ErrorBadUTF8: {
        const size_t bad = firstInvalidUtf8(p);
        if (bad == std::string_view::npos)
            return {0, "RE2 reads part of it as invalid UTF-8; check its \\x{...} escapes"};
        return {bad, "the pattern is not valid UTF-8 at byte " + std::to_string(bad + 1) +
                         "; write the character itself in UTF-8 or as \\x{...}"};
    }
    case re2::RE2::ErrorBadNamedCapture:
        return {offset, "group name " + quoted + " is invalid or repeated; a name is letters, digits and '_'"};
    case re2::RE2::ErrorPatternTooLarge:
        return {0, "the compiled pattern needs more than " + std::to_string(kMaxPatternMemory >> 20) +
                       " MiB, the limit of one rule; use smaller {m,n} counts, fewer alternatives or several rules"};
    default:
        return {offset, "RE2 refuses it (error " + std::to_string(int(re.error_code())) + ")" + where};
    }
}

// Checks `pattern`; on success `compiled` (when given) holds it compiled.
std::optional<RegexSyntaxError> check(std::string_view pattern, std::shared_ptr<const re2::RE2>* compiled)
{
    if (pattern.size() > kMaxPatternLength)
        return RegexSyntaxError{kMaxPatternLength, "the pattern is " + std::to_string(pattern.size()) +
                                                       " bytes long, more than the " +
                                                       std::to_string(kMaxPatternLength) +
                                                       " a module_path may have; split it into several rules"};
    try {
        Scanner(pattern).run();
    } catch (const Found& f) {
        return f.error;
    }
    re2::RE2::Options options;
    options.set_log_errors(false);
    options.set_max_mem(kMaxPatternMemory);
    options.set_never_capture(true); // groups only group: rules read no submatches
    auto re = std::make_shared<const re2::RE2>(re2::StringPiece(pattern.data(), pattern.size()), options);
    if (!re->ok())
        return explainRe2Error(pattern, *re);
    if (compiled)
        *compiled = std::move(re);
    return std::nullopt;
}

} // namespace

std::optional<RegexSyntaxError> findRegexSyntaxError(std::string_view pattern)
{
    return check(pattern, nullptr);
}

std::shared_ptr<const re2::RE2> compileModulePathRegex(std::string_view pattern)
{
    std::shared_ptr<const re2::RE2> compiled;
    if (const auto error = check(pattern, &compiled)) {
        std::string quoted = "\"" + excerptAround(pattern, error->offset) + "\"";
        if (pattern.size() > kPatternExcerptLength)
            quoted += " (" + std::to_string(pattern.size()) + " bytes)";
        throw Error("invalid regex " + quoted + ": " + error->message);
    }
    return compiled;
}

std::string excerptAround(std::string_view text, size_t offset)
{
    if (text.size() <= kPatternExcerptLength)
        return std::string(text);
    size_t start = offset > kPatternExcerptLength / 2 ? offset - kPatternExcerptLength / 2 : 0;
    start = std::min(start, text.size() - kPatternExcerptLength);
    size_t end = start + kPatternExcerptLength;
    while (start > 0 && start < text.size() && isContinuationByte(text[start]))
        ++start;
    while (end < text.size() && isContinuationByte(text[end]))
        --end;
    return (start > 0 ? "..." : "") + std::string(text.substr(start, end - start)) + (end < text.size() ? "..." : "");
}

std::string escapeModulePath(std::string_view path)
{
    std::string out;
    out.reserve(path.size() + 8);
    for (const char c : path) {
        if (c == '\0') {
            out += "\\x00";
            continue;
        }
        if (std::string_view("\\.+*?()|[]{}^$").find(c) != std::string_view::npos)
            out += '\\';
        out += c;
    }
    return out;
}

} // namespace qs
