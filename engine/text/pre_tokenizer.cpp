#include "text/pre_tokenizer.h"

#include "text/unicode_text.h"

namespace qs::text {

namespace {

constexpr std::string_view gpt2Regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view llama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view qwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

enum Class : unsigned char { Letter, Number, Space, Other };

struct Char {
    char32_t cp;
    Class cls;
    size_t byte; // offset in the text
};

Class classOf(char32_t cp)
{
    if (isLetter(cp))
        return Letter;
    if (isNumber(cp))
        return Number;
    if (isWhiteSpace(cp))
        return Space;
    return Other;
}

bool isLineBreak(char32_t cp)
{
    return cp == '\r' || cp == '\n';
}

char32_t asciiLower(char32_t cp)
{
    return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
}

class Scanner {
public:
    Scanner(std::string_view text, SplitPattern pattern) : text_(text), pattern_(pattern)
    {
        size_t pos = 0;
        while (pos < text.size()) {
            const size_t at = pos;
            const char32_t cp = nextCodePoint(text, pos, "text");
            chars_.push_back({cp, classOf(cp), at});
        }
        chars_.push_back({0, Other, text.size()}); // sentinel, never part of a match
    }

    void run(std::vector<std::string_view>& pieces)
    {
        const size_t n = chars_.size() - 1;
        size_t unmatchedFrom = 0;
        size_t i = 0;
        while (i < n) {
            const size_t end = matchAt(i);
            if (end == i) {
                ++i;
                continue;
            }
            if (unmatchedFrom < i)
                pieces.push_back(slice(unmatchedFrom, i));
            pieces.push_back(slice(i, end));
            i = end;
            unmatchedFrom = end;
        }
        if (unmatchedFrom < n)
            pieces.push_back(slice(unmatchedFrom, n));
    }

private:
    std::string_view slice(size_t from, size_t to) const
    {
        return text_.substr(chars_[from].byte, chars_[to].byte - chars_[from].byte);
    }
    bool is(size_t i, Class c) const { return i < chars_.size() - 1 && chars_[i].cls == c; }
    bool isChar(size_t i, char32_t cp) const { return i < chars_.size() - 1 && chars_[i].cp == cp; }
    size_t runOf(size_t i, Class c) const
    {
        while (is(i, c))
            ++i;
        return i;
    }

    // The end of the match at i (in chars), or i when no alternative matches.
    size_t matchAt(size_t i) const
    {
        const size_t n = chars_.size() - 1;
        const bool gpt2 = pattern_ == SplitPattern::Gpt2;
        // Contractions: 's 't 're 've 'm 'll 'd (ASCII case-insensitive except GPT-2).
        if (isChar(i, '\'') && i + 1 < n) {
            const auto fold = [&](size_t k) { return gpt2 ? chars_[k].cp : asciiLower(chars_[k].cp); };
            const char32_t a = fold(i + 1);
            if (a == 's' || a == 't' || a == 'm' || a == 'd')
                return i + 2;
            if (i + 2 < n) {
                const char32_t b = fold(i + 2);
                if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
                    return i + 3;
            }
        }
        if (gpt2) {
            //  ?\p{L}+ |  ?\p{N}+ |  ?[^\s\p{L}\p{N}]+
            const size_t j = isChar(i, ' ') ? i + 1 : i;
            for (Class c : {Letter, Number, Other})
                if (is(j, c))
                    return runOf(j, c);
        } else {
            // [^\r\n\p{L}\p{N}]?\p{L}+
            if (i + 1 < n && !isLineBreak(chars_[i].cp) && (is(i, Space) || is(i, Other)) && is(i + 1, Letter))
                return runOf(i + 1, Letter);
            if (is(i, Letter))
                return runOf(i, Letter);
            // \p{N}{1,3} or \p{N}
            if (is(i, Number)) {
                const size_t most = pattern_ == SplitPattern::Llama3 ? 3 : 1;
                size_t j = i;
                while (j - i < most && is(j, Number))
                    ++j;
                return j;
            }
            //  ?[^\s\p{L}\p{N}]+[\r\n]*
            const size_t j = isChar(i, ' ') ? i + 1 : i;
            if (is(j, Other)) {
                size_t k = runOf(j, Other);
                while (k < n && isLineBreak(chars_[k].cp))
                    ++k;
                return k;
            }
            // \s*[\r\n]+ : through the last line break of the whitespace run.
            if (is(i, Space)) {
                const size_t e = runOf(i, Space);
                for (size_t k = e; k > i; --k)
                    if (isLineBreak(chars_[k - 1].cp))
                        return k;
            }
        }
        // \s+(?!\S) | \s+
        if (is(i, Space)) {
            const size_t e = runOf(i, Space);
            if (e == n || e - 1 == i)
                return e;
            return e - 1;
        }
        return i;
    }

    std::string_view text_;
    SplitPattern pattern_;
    std::vector<Char> chars_;
};

} // namespace

ByteAlphabet::ByteAlphabet()
{
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
        const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        const char32_t cp = printable ? char32_t(b) : next++;
        appendUtf8(utf8[b], cp);
        byteOf[cp] = static_cast<unsigned char>(b);
    }
}

const ByteAlphabet& byteAlphabet()
{
    static const ByteAlphabet alphabet;
    return alphabet;
}

void replaceAll(std::string& s, std::string_view from, std::string_view to)
{
    if (from.empty())
        return;
    std::string out;
    size_t pos = 0;
    for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
        out.append(s, pos, hit - pos);
        out.append(to);
    }
    out.append(s, pos);
    s = std::move(out);
}

std::optional<SplitPattern> recognizedSplitPattern(std::string_view regex)
{
    if (regex == gpt2Regex)
        return SplitPattern::Gpt2;
    if (regex == llama3Regex)
        return SplitPattern::Llama3;
    if (regex == qwen2Regex)
        return SplitPattern::Qwen2;
    return std::nullopt;
}

void splitIsolated(std::string_view text, SplitPattern pattern, std::vector<std::string_view>& pieces)
{
    Scanner(text, pattern).run(pieces);
}

} // namespace qs::text
