#include "text/unicode_text.h"

#include <climits>

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>
#include <unicode/uchar.h>

#include "core/error.h"

namespace qs::text {

namespace {

[[noreturn]] void invalidUtf8(std::string_view what, size_t pos)
{
    throw Error(std::string(what) + ": invalid UTF-8 at byte " + std::to_string(pos));
}

} // namespace

char32_t nextCodePoint(std::string_view text, size_t& pos, std::string_view what)
{
    const size_t start = pos;
    const auto b0 = static_cast<unsigned char>(text[pos]);
    if (b0 < 0x80) {
        ++pos;
        return b0;
    }
    int extra = 0;
    char32_t cp = 0;
    char32_t least = 0;
    if ((b0 & 0xE0) == 0xC0) {
        extra = 1;
        cp = b0 & 0x1F;
        least = 0x80;
    } else if ((b0 & 0xF0) == 0xE0) {
        extra = 2;
        cp = b0 & 0x0F;
        least = 0x800;
    } else if ((b0 & 0xF8) == 0xF0) {
        extra = 3;
        cp = b0 & 0x07;
        least = 0x10000;
    } else {
        invalidUtf8(what, start);
    }
    if (text.size() - start <= size_t(extra))
        invalidUtf8(what, start);
    for (int i = 1; i <= extra; ++i) {
        const auto b = static_cast<unsigned char>(text[start + i]);
        if ((b & 0xC0) != 0x80)
            invalidUtf8(what, start);
        cp = (cp << 6) | (b & 0x3F);
    }
    if (cp < least || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        invalidUtf8(what, start);
    pos = start + extra + 1;
    return cp;
}

void checkUtf8(std::string_view text, std::string_view what)
{
    size_t pos = 0;
    while (pos < text.size()) {
        if (static_cast<unsigned char>(text[pos]) < 0x80)
            ++pos;
        else
            nextCodePoint(text, pos, what);
    }
}

void appendUtf8(std::string& out, char32_t cp)
{
    if (cp < 0x80) {
        out += char(cp);
    } else if (cp < 0x800) {
        out += char(0xC0 | (cp >> 6));
        out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += char(0xE0 | (cp >> 12));
        out += char(0x80 | ((cp >> 6) & 0x3F));
        out += char(0x80 | (cp & 0x3F));
    } else {
        out += char(0xF0 | (cp >> 18));
        out += char(0x80 | ((cp >> 12) & 0x3F));
        out += char(0x80 | ((cp >> 6) & 0x3F));
        out += char(0x80 | (cp & 0x3F));
    }
}

bool isLetter(char32_t cp)
{
    if (cp < 0x80)
        return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
    return (U_GET_GC_MASK(UChar32(cp)) & U_GC_L_MASK) != 0;
}

bool isNumber(char32_t cp)
{
    if (cp < 0x80)
        return cp >= '0' && cp <= '9';
    return (U_GET_GC_MASK(UChar32(cp)) & U_GC_N_MASK) != 0;
}

bool isWhiteSpace(char32_t cp)
{
    if (cp < 0x80)
        return cp == ' ' || (cp >= '\t' && cp <= '\r');
    return u_hasBinaryProperty(UChar32(cp), UCHAR_WHITE_SPACE);
}

bool isWordCharacter(char32_t cp)
{
    if (cp < 0x80)
        return isLetter(cp) || isNumber(cp) || cp == '_';
    const auto c = UChar32(cp);
    return u_hasBinaryProperty(c, UCHAR_ALPHABETIC) || u_hasBinaryProperty(c, UCHAR_JOIN_CONTROL) ||
           (U_GET_GC_MASK(c) & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) != 0;
}

std::string normalized(std::string_view utf8, NormalForm form)
{
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2* normalizer = nullptr;
    switch (form) {
    case NormalForm::Nfc:
        normalizer = icu::Normalizer2::getNFCInstance(status);
        break;
    case NormalForm::Nfd:
        normalizer = icu::Normalizer2::getNFDInstance(status);
        break;
    case NormalForm::Nfkc:
        normalizer = icu::Normalizer2::getNFKCInstance(status);
        break;
    case NormalForm::Nfkd:
        normalizer = icu::Normalizer2::getNFKDInstance(status);
        break;
    }
    if (U_FAILURE(status) || !normalizer)
        throw Error(std::string("ICU has no Unicode normalizer: ") + u_errorName(status));
    if (utf8.size() > size_t(INT32_MAX))
        throw Error("Unicode normalization: a text of " + std::to_string(utf8.size()) +
                    " bytes between special tokens is longer than ICU takes (2 GiB)");
    std::string out;
    out.reserve(utf8.size());
    icu::StringByteSink<std::string> sink(&out);
    normalizer->normalizeUTF8(0, icu::StringPiece(utf8.data(), int32_t(utf8.size())), sink, nullptr, status);
    if (U_FAILURE(status))
        throw Error(std::string("Unicode normalization failed: ") + u_errorName(status));
    return out;
}

} // namespace qs::text
