#include "io/npy_header.h"

#include <array>
#include <cstring>
#include <limits>
#include <optional>

#include "core/error.h"
#include "io/npy.h"

namespace qs {
namespace {

constexpr std::array<unsigned char, 6> kMagic{0x93, 'N', 'U', 'M', 'P', 'Y'};

[[noreturn]] void fail(std::string_view fileName, std::string_view what)
{
    throw Error(std::string(fileName) + ": " + std::string(what));
}

struct DescrEntry {
    char kind; // numpy's kind character
    int size;  // bytes
    DType dtype;
};
constexpr std::array<DescrEntry, 12> kDescrs{{
    {'b', 1, DType::Bool},
    {'i', 1, DType::I8},
    {'u', 1, DType::U8},
    {'i', 2, DType::I16},
    {'u', 2, DType::U16},
    {'i', 4, DType::I32},
    {'u', 4, DType::U32},
    {'i', 8, DType::I64},
    {'u', 8, DType::U64},
    {'f', 2, DType::F16},
    {'f', 4, DType::F32},
    {'f', 8, DType::F64},
}};
constexpr std::string_view kSupportedDescrs = "b1, i1, u1, i2, u2, i4, u4, i8, u8, f2, f4, f8";

// A strict reader of the one Python literal numpy writes:
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// Strings in single or double quotes without escapes, True/False, tuples of
// non-negative decimal integers, optional trailing commas, spaces.
class DictParser {
public:
    DictParser(std::string_view text, std::string_view fileName) : text_(text), file_(fileName) {}

    NpyHeader parse()
    {
        NpyHeader h;
        std::optional<std::string> descr;
        std::optional<bool> fortran;
        std::optional<Shape> shape;
        expect('{', "the header dict to start with '{'");
        while (true) {
            skipSpace();
            if (peek() == '}') {
                ++pos_;
                break;
            }
            const std::string key = readString("a quoted key");
            expect(':', "':' after key '" + key + "'");
            if (key == "descr") {
                if (descr)
                    failField(key, "appears twice");
                skipSpace();
                if (peek() == '[')
                    failField(key, "structured (record) dtypes are not supported");
                descr = readString("a dtype string such as '<f4'");
            } else if (key == "fortran_order") {
                if (fortran)
                    failField(key, "appears twice");
                fortran = readBool(key);
            } else if (key == "shape") {
                if (shape)
                    failField(key, "appears twice");
                shape = readShape();
            } else {
                fail(file_, "npy header: unknown key '" + key + "' (expected 'descr', 'fortran_order', 'shape')");
            }
            skipSpace();
            if (peek() == ',') {
                ++pos_;
                continue;
            }
            expect('}', "',' or '}' after the value of '" + key + "'");
            break;
        }
        skipSpace();
        if (pos_ != text_.size())
            fail(file_, "npy header: unexpected text after the dict at offset " + std::to_string(pos_));
        if (!descr)
            failField("descr", "is missing");
        if (!fortran)
            failField("fortran_order", "is missing");
        if (!shape)
            failField("shape", "is missing");
        applyDescr(*descr, h);
        h.fortranOrder = *fortran;
        h.shape = std::move(*shape);
        return h;
    }

private:
    [[noreturn]] void failField(std::string_view field, std::string_view what) const
    {
        fail(file_, "npy header field '" + std::string(field) + "' " + std::string(what));
    }
    [[noreturn]] void failSyntax(std::string_view expected) const
    {
        fail(file_, "npy header: expected " + std::string(expected) + " at offset " + std::to_string(pos_));
    }

    char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
    void skipSpace()
    {
        while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n'))
            ++pos_;
    }
    void expect(char c, std::string_view expected)
    {
        skipSpace();
        if (peek() != c)
            failSyntax(expected);
        ++pos_;
    }

    std::string readString(std::string_view expected)
    {
        skipSpace();
        const char quote = peek();
        if (quote != '\'' && quote != '"')
            failSyntax(expected);
        const size_t start = ++pos_;
        while (pos_ < text_.size() && text_[pos_] != quote) {
            if (text_[pos_] == '\\')
                failSyntax("a string without escapes");
            ++pos_;
        }
        if (pos_ == text_.size())
            failSyntax("a closing quote");
        return std::string(text_.substr(start, pos_++ - start));
    }

    bool readBool(std::string_view field)
    {
        skipSpace();
        for (auto [word, value] : {std::pair{std::string_view("True"), true}, {std::string_view("False"), false}}) {
            if (text_.substr(pos_, word.size()) == word) {
                pos_ += word.size();
                return value;
            }
        }
        failField(field, "must be True or False");
    }

    Shape readShape()
    {
        expect('(', "'(' starting the shape tuple");
        Shape shape;
        bool needComma = false; // a 1-tuple needs its trailing comma: (3,)
        while (true) {
            skipSpace();
            if (peek() == ')') {
                if (needComma)
                    failField("shape", "must be a tuple: a single dimension is written (n,)");
                ++pos_;
                return shape;
            }
            if (peek() == '-')
                failField("shape", "has a negative dimension");
            if (peek() < '0' || peek() > '9')
                failField("shape", "must be a tuple of non-negative integers");
            int64_t d = 0;
            while (peek() >= '0' && peek() <= '9') {
                const int digit = peek() - '0';
                if (d > (std::numeric_limits<int64_t>::max() - digit) / 10)
                    failField("shape", "has a dimension that overflows 64 bits");
                d = d * 10 + digit;
                ++pos_;
            }
            if (shape.size() >= 64)
                failField("shape", "has more than 64 dimensions");
            shape.push_back(d);
            skipSpace();
            if (peek() == ',') {
                ++pos_;
                needComma = false;
            } else {
                needComma = shape.size() == 1;
                if (peek() != ')')
                    failField("shape", "must be a tuple of non-negative integers");
            }
        }
    }

    void applyDescr(const std::string& descr, NpyHeader& h) const
    {
        if (descr == "O" || descr == "|O" || descr == "<O" || descr == ">O")
            failField("descr", "is 'O' (object array): refused, loading it would run pickle");
        if (descr.size() < 2)
            failField("descr", "'" + descr + "' is not a dtype of " + std::string(kSupportedDescrs));
        char order = '=';
        std::string_view rest = descr;
        if (rest[0] == '<' || rest[0] == '>' || rest[0] == '|' || rest[0] == '=') {
            order = rest[0];
            rest.remove_prefix(1);
        }
        for (const DescrEntry& e : kDescrs) {
            if (rest.size() == 2 && rest[0] == e.kind && rest[1] == char('0' + e.size)) {
                if (order == '|' && e.size > 1)
                    failField("descr", "'" + descr + "' gives no byte order ('|') for a multi-byte type");
                h.dtype = e.dtype;
                h.bigEndian = order == '>' && e.size > 1;
                return;
            }
        }
        failField("descr", "'" + descr + "' is not a supported dtype (" + std::string(kSupportedDescrs) + ")");
    }

    std::string_view text_;
    std::string_view file_;
    size_t pos_ = 0;
};

uint32_t readLittleEndian(std::span<const std::byte> bytes, size_t offset, size_t width)
{
    uint32_t v = 0;
    for (size_t i = 0; i < width; ++i)
        v |= uint32_t(std::to_integer<uint8_t>(bytes[offset + i])) << (8 * i);
    return v;
}

std::string_view descrOf(DType dtype)
{
    switch (dtype) {
    case DType::Bool:
        return "|b1";
    case DType::I8:
        return "|i1";
    case DType::U8:
        return "|u1";
    case DType::I16:
        return "<i2";
    case DType::U16:
        return "<u2";
    case DType::I32:
        return "<i4";
    case DType::U32:
        return "<u4";
    case DType::I64:
        return "<i8";
    case DType::U64:
        return "<u8";
    case DType::F16:
        return "<f2";
    case DType::F32:
        return "<f4";
    case DType::F64:
        return "<f8";
    case DType::BF16:
        break;
    }
    throw Error("bfloat16 tensors have no .npy dtype: convert them to float32 first");
}

} // namespace

size_t npyDataOffset(std::span<const std::byte> preamble, std::string_view fileName)
{
    if (preamble.size() < 10 || std::memcmp(preamble.data(), kMagic.data(), kMagic.size()) != 0)
        fail(fileName, "not an .npy file (missing the \\x93NUMPY magic)");
    const auto major = std::to_integer<uint8_t>(preamble[6]);
    const auto minor = std::to_integer<uint8_t>(preamble[7]);
    if (major < 1 || major > 3 || minor != 0)
        fail(fileName, "npy version " + std::to_string(major) + "." + std::to_string(minor) +
                           " is not supported (expected 1.0, 2.0 or 3.0)");
    const size_t lengthWidth = major == 1 ? 2 : 4;
    if (preamble.size() < 8 + lengthWidth)
        fail(fileName, "truncated: the npy header length field is cut off");
    const uint32_t headerLength = readLittleEndian(preamble, 8, lengthWidth);
    if (headerLength > kNpyMaxHeaderBytes)
        fail(fileName, "npy header length " + std::to_string(headerLength) + " exceeds the limit of " +
                           std::to_string(kNpyMaxHeaderBytes) + " bytes");
    return 8 + lengthWidth + headerLength;
}

NpyHeader parseNpyHeader(std::span<const std::byte> bytes, std::string_view fileName)
{
    const size_t dataOffset = npyDataOffset(bytes, fileName);
    if (bytes.size() < dataOffset)
        fail(fileName, "truncated: the npy header length (" + std::to_string(dataOffset) +
                           " bytes with preamble) runs past the end of the file (" + std::to_string(bytes.size()) +
                           " bytes)");
    const size_t preambleBytes = std::to_integer<uint8_t>(bytes[6]) == 1 ? 10 : 12;
    std::string_view text(reinterpret_cast<const char*>(bytes.data()) + preambleBytes, dataOffset - preambleBytes);
    // numpy ends the header with '\n' after space padding; accept the padding and
    // the newline, nothing else, around the dict.
    while (!text.empty() && (text.back() == ' ' || text.back() == '\n'))
        text.remove_suffix(1);
    for (char c : text)
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t')
            fail(fileName, "npy header contains a control character");
    NpyHeader h = DictParser(text, fileName).parse();
    h.dataOffset = dataOffset;
    int64_t count = 0;
    try {
        count = shapeElementCount(h.shape);
    } catch (const Error&) {
        fail(fileName, "npy header field 'shape' " + shapeToString(h.shape) + " has more elements than 64 bits count");
    }
    const auto itemSize = int64_t(dtypeSize(h.dtype));
    if (count > std::numeric_limits<int64_t>::max() / itemSize)
        fail(fileName, "npy header field 'shape' " + shapeToString(h.shape) + " needs more bytes than 64 bits count");
    h.dataBytes = count * itemSize;
    return h;
}

std::string npyHeaderText(DType dtype, const Shape& shape, size_t preambleBytes)
{
    std::string dims;
    for (size_t i = 0; i < shape.size(); ++i)
        dims += std::to_string(shape[i]) + (shape.size() == 1 || i + 1 < shape.size() ? "," : "");
    // numpy writes "(3,)" and "(3, 4)": a space after inner commas.
    std::string spaced;
    for (size_t i = 0; i < dims.size(); ++i) {
        spaced += dims[i];
        if (dims[i] == ',' && i + 1 < dims.size())
            spaced += ' ';
    }
    std::string text =
        "{'descr': '" + std::string(descrOf(dtype)) + "', 'fortran_order': False, 'shape': (" + spaced + "), }";
    const size_t unpadded = preambleBytes + text.size() + 1;
    text.append((64 - unpadded % 64) % 64, ' ');
    text += '\n';
    return text;
}

} // namespace qs
