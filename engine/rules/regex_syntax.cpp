#include "rules/regex_syntax.h"

#include <algorithm>
#include <array>
#include <vector>

namespace qs {
namespace {

// Messages count positions from 1, as an editor's column does.
std::string at(size_t offset)
{
    return "position " + std::to_string(offset + 1);
}

bool isHex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
bool isDigit(char c)
{
    return c >= '0' && c <= '9';
}

// Thrown inside the scanner only; findRegexSyntaxError turns it into a value.
struct Found {
    RegexSyntaxError error;
};

[[noreturn]] void found(size_t offset, std::string message)
{
    throw Found{{offset, std::move(message)}};
}

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
                closeGroup();
                break;
            case '|':
                prev_ = Prev::Nothing;
                ++i_;
                break;
            case '*':
            case '+':
            case '?':
                quantifier(i_, std::string(1, c));
                ++i_;
                break;
            case '{':
                brace();
                break;
            case '^':
            case '$':
                prev_ = Prev::Assertion;
                ++i_;
                break;
            case '\\':
                escape();
                break;
            case '[':
                bracket();
                prev_ = Prev::Atom;
                break;
            default: // '.', ']', '}' and every other character stand for themselves
                prev_ = Prev::Atom;
                ++i_;
                break;
            }
        }
        if (!groups_.empty())
            found(groups_.back().offset, "missing ')' for the '(' at " + at(groups_.back().offset));
    }

private:
    enum class Prev { Nothing, Atom, Assertion };
    struct Group {
        size_t offset;
        int capture; // capture group number, 0 for (?: (?= (?!
        bool lookahead;
    };
    // One element of a bracket expression: a single character, or a class
    // (\d, [:alpha:], [=a=]) that cannot bound a range.
    struct Item {
        size_t offset;
        bool isClass;
        char value;
    };

    void quantifier(size_t offset, const std::string& text)
    {
        if (prev_ == Prev::Nothing)
            found(offset, "nothing to repeat before '" + text + "' at " + at(offset) + "; escape it as '\\" +
                              text.substr(0, 1) + "' to match it literally");
        if (prev_ == Prev::Assertion)
            found(offset,
                  "'" + text + "' at " + at(offset) + " repeats an anchor or assertion, which cannot be repeated");
    }

    void openGroup()
    {
        const size_t start = i_;
        Group g{start, 0, false};
        if (i_ + 1 < p_.size() && p_[i_ + 1] == '?') {
            const char kind = i_ + 2 < p_.size() ? p_[i_ + 2] : '\0';
            if (kind != ':' && kind != '=' && kind != '!')
                found(start,
                      "'(?' at " + at(start) + " must be followed by ':', '=' or '!' ((?:...), (?=...), (?!...))");
            g.lookahead = kind != ':';
            i_ += 3;
        } else {
            g.capture = ++captures_;
            i_ += 1;
        }
        if (int(groups_.size()) >= kMaxRegexNesting)
            found(start, "groups nested deeper than " + std::to_string(kMaxRegexNesting) + " at " + at(start));
        groups_.push_back(g);
        prev_ = Prev::Nothing;
    }

    void closeGroup()
    {
        if (groups_.empty())
            found(i_, "unmatched ')' at " + at(i_) + "; escape it as '\\)' to match it literally");
        const Group g = groups_.back();
        groups_.pop_back();
        if (g.capture > 0) {
            if (closed_.size() <= size_t(g.capture))
                closed_.resize(size_t(g.capture) + 1, false);
            closed_[size_t(g.capture)] = true;
        }
        prev_ = g.lookahead ? Prev::Assertion : Prev::Atom;
        ++i_;
    }

    // {m}, {m,} or {m,n} with decimal m, n and no spaces.
    void brace()
    {
        const size_t start = i_;
        size_t j = i_ + 1;
        const auto number = [&](uint64_t& value) {
            const size_t from = j;
            value = 0;
            while (j < p_.size() && isDigit(p_[j])) {
                value = std::min<uint64_t>(value * 10 + uint64_t(p_[j] - '0'), uint64_t(1) << 40);
                ++j;
            }
            return j > from;
        };
        const auto malformed = [&]() {
            if (j >= p_.size())
                found(start, "missing '}' for the '{' at " + at(start));
            found(j, "unexpected '" + std::string(1, p_[j]) + "' at " + at(j) + " in the repetition starting at " +
                         at(start) + "; write {m}, {m,} or {m,n}, or '\\{' for a literal brace");
        };
        uint64_t lo = 0, hi = 0;
        if (!number(lo))
            malformed();
        bool bounded = true;
        if (j < p_.size() && p_[j] == ',')
            ++j, bounded = number(hi);
        else
            hi = lo;
        if (j >= p_.size() || p_[j] != '}')
            malformed();
        const std::string text(p_.substr(start, j + 1 - start));
        quantifier(start, text);
        if (bounded && lo > hi)
            found(start, "repetition '" + text + "' at " + at(start) + " has its minimum above its maximum");
        i_ = j + 1;
    }

    // `count` hex digits after \x or \u; returns their value.
    unsigned hexDigits(size_t start, size_t count)
    {
        unsigned v = 0;
        for (size_t k = 0; k < count; ++k) {
            const size_t j = i_ + 2 + k;
            if (j >= p_.size() || !isHex(p_[j]))
                found(start, "'\\" + std::string(1, p_[i_ + 1]) + "' at " + at(start) + " needs " +
                                 (count == 2 ? "two" : "four") + " hex digits");
            const char c = p_[j];
            v = v * 16 + unsigned(isDigit(c) ? c - '0' : (c | 0x20) - 'a' + 10);
        }
        return v;
    }

    // An escape outside brackets.
    void escape()
    {
        const size_t start = i_;
        if (i_ + 1 >= p_.size())
            found(start, "trailing '\\' at " + at(start) + "; write '\\\\' to match a backslash");
        const char e = p_[i_ + 1];
        prev_ = Prev::Atom;
        if (e == 'b' || e == 'B') {
            prev_ = Prev::Assertion;
            i_ += 2;
        } else if (e == 'x' || e == 'u') {
            const size_t count = e == 'x' ? 2 : 4;
            hexDigits(start, count);
            i_ += 2 + count;
        } else if (e == 'c') {
            if (i_ + 2 >= p_.size())
                found(start, "'\\c' at " + at(start) + " needs a control letter after it (\\cA ... \\cZ)");
            i_ += 3;
        } else if (e >= '1' && e <= '9') {
            size_t j = i_ + 1;
            uint64_t n = 0;
            while (j < p_.size() && isDigit(p_[j]))
                n = std::min<uint64_t>(n * 10 + uint64_t(p_[j++] - '0'), uint64_t(1) << 40);
            const std::string text(p_.substr(start, j - start));
            if (n > uint64_t(captures_))
                found(start, "back-reference '" + text + "' at " + at(start) + " refers to group " + std::to_string(n) +
                                 ", but only " + std::to_string(captures_) + " group" + (captures_ == 1 ? "" : "s") +
                                 " open before it");
            if (n >= closed_.size() || !closed_[size_t(n)])
                found(start, "back-reference '" + text + "' at " + at(start) + " refers to group " + std::to_string(n) +
                                 ", which is still open there");
            i_ = j;
        } else {
            i_ += 2; // \d \s \w \n \0 and identity escapes such as \. \/ \-
        }
    }

    // A bracket expression [...] or [^...]; ECMAScript reads "[]" as the empty class.
    void bracket()
    {
        const size_t start = i_;
        ++i_;
        if (i_ < p_.size() && p_[i_] == '^')
            ++i_;
        while (true) {
            if (i_ >= p_.size())
                found(start, "missing ']' for the '[' at " + at(start));
            if (p_[i_] == ']') {
                ++i_;
                return;
            }
            const Item lhs = item(start);
            if (i_ + 1 < p_.size() && p_[i_] == '-' && p_[i_ + 1] != ']') {
                const size_t dash = i_;
                ++i_;
                if (lhs.isClass)
                    found(lhs.offset, "the range at " + at(dash) + " starts with a character class at " +
                                          at(lhs.offset) + "; put '-' first or last to match it literally");
                const Item rhs = item(start);
                if (rhs.isClass)
                    found(rhs.offset, "the range at " + at(dash) + " ends with a character class at " + at(rhs.offset) +
                                          "; put '-' first or last to match it literally");
                if (lhs.value > rhs.value)
                    found(lhs.offset, "range '" + std::string(p_.substr(lhs.offset, i_ - lhs.offset)) + "' at " +
                                          at(lhs.offset) + " is inverted: its start comes after its end");
            }
        }
    }

    Item item(size_t bracketStart)
    {
        const size_t start = i_;
        const char c = p_[i_];
        if (c == '[' && i_ + 1 < p_.size() && (p_[i_ + 1] == ':' || p_[i_ + 1] == '.' || p_[i_ + 1] == '=')) {
            const char kind = p_[i_ + 1];
            const char close[] = {kind, ']', '\0'};
            const size_t end = p_.find(close, i_ + 2);
            if (end == std::string_view::npos)
                found(start, "unterminated '[" + std::string(1, kind) + "' at " + at(start) + "; close it with '" +
                                 close + "'");
            const std::string_view name = p_.substr(i_ + 2, end - (i_ + 2));
            i_ = end + 2;
            if (kind == ':') {
                static constexpr std::array<std::string_view, 15> kClasses{"alnum", "alpha",  "blank", "cntrl", "digit",
                                                                           "graph", "lower",  "print", "punct", "space",
                                                                           "upper", "xdigit", "d",     "s",     "w"};
                if (std::find(kClasses.begin(), kClasses.end(), name) == kClasses.end())
                    found(start, "unknown character class '[:" + std::string(name) + ":]' at " + at(start) +
                                     "; use one of alnum, alpha, blank, cntrl, digit, graph, lower, print, punct, "
                                     "space, upper, xdigit");
                return {start, true, 0};
            }
            if (name.size() != 1)
                found(start, std::string(kind == '.' ? "collating element" : "equivalence class") + " '[" +
                                 std::string(1, kind) + std::string(name) + std::string(1, kind) + "]' at " +
                                 at(start) + " must name a single character");
            return {start, kind == '=', name[0]};
        }
        if (c != '\\') {
            ++i_;
            return {start, false, c};
        }
        if (i_ + 1 >= p_.size())
            found(start, "trailing '\\' at " + at(start) + " inside the '[' at " + at(bracketStart));
        const char e = p_[i_ + 1];
        switch (e) {
        case 'd':
        case 'D':
        case 's':
        case 'S':
        case 'w':
        case 'W':
            i_ += 2;
            return {start, true, 0};
        case 'x':
        case 'u': {
            const size_t count = e == 'x' ? 2 : 4;
            const unsigned v = hexDigits(start, count);
            i_ += 2 + count;
            return {start, false, static_cast<char>(v)};
        }
        case 'c':
            if (i_ + 2 >= p_.size())
                found(start, "'\\c' at " + at(start) + " needs a control letter after it (\\cA ... \\cZ)");
            i_ += 3;
            return {start, false, static_cast<char>(p_[start + 2] % 32)};
        case 'b':
            i_ += 2;
            return {start, false, '\b'};
        case 'n':
            i_ += 2;
            return {start, false, '\n'};
        case 'r':
            i_ += 2;
            return {start, false, '\r'};
        case 't':
            i_ += 2;
            return {start, false, '\t'};
        case 'f':
            i_ += 2;
            return {start, false, '\f'};
        case 'v':
            i_ += 2;
            return {start, false, '\v'};
        case '0':
            i_ += 2;
            return {start, false, '\0'};
        default:
            if (e >= '1' && e <= '9')
                found(start, "back-reference '\\" + std::string(1, e) + "' at " + at(start) +
                                 " is not allowed inside the '[' at " + at(bracketStart));
            i_ += 2;
            return {start, false, e};
        }
    }

    std::string_view p_;
    size_t i_ = 0;
    Prev prev_ = Prev::Nothing;
    std::vector<Group> groups_;
    int captures_ = 0;
    std::vector<bool> closed_; // closed_[n]: capture group n has been closed
};

} // namespace

std::optional<RegexSyntaxError> findRegexSyntaxError(std::string_view pattern)
{
    try {
        Scanner(pattern).run();
    } catch (const Found& f) {
        return f.error;
    }
    return std::nullopt;
}

} // namespace qs
