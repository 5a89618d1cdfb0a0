#pragma once
// What Hdf5File's contained child processes send back and how the parent
// reads it: little-endian integers and length-prefixed strings, every length
// checked (AnswerWriter, AnswerReader); the file's structure with its
// attributes as one message; and the Error for a child that did not answer.
// Internal to io.

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/contained_call.h"
#include "io/hdf5_structure.h"

namespace qs::hdf5 {

// The answers of the child processes, as bytes: little-endian integers and
// length-prefixed strings. The parent checks every length it reads.
class AnswerWriter {
public:
    void number(uint64_t v)
    {
        for (int i = 0; i < 8; ++i, v >>= 8)
            bytes_.push_back(char(v & 0xff));
    }
    void text(std::string_view s)
    {
        number(s.size());
        bytes_.append(s);
    }
    std::string take() { return std::move(bytes_); }

private:
    std::string bytes_;
};

// Reads an AnswerWriter's bytes; an Error naming `file` when they run short.
class AnswerReader {
public:
    AnswerReader(std::string_view bytes, const std::filesystem::path& file) : bytes_(bytes), file_(file) {}
    uint64_t number()
    {
        need(8);
        uint64_t v = 0;
        for (int i = 7; i >= 0; --i)
            v = (v << 8) | uint8_t(bytes_[size_t(i)]);
        bytes_.remove_prefix(8);
        return v;
    }
    // A count of items that each take at least `minBytes` of what is left.
    size_t count(size_t minBytes)
    {
        const uint64_t n = number();
        if (n > bytes_.size() / std::max<size_t>(minBytes, 1))
            garbled();
        return size_t(n);
    }
    std::string text()
    {
        const uint64_t n = number();
        need(n);
        std::string s(bytes_.substr(0, size_t(n)));
        bytes_.remove_prefix(size_t(n));
        return s;
    }
    bool done() const { return bytes_.empty(); }

private:
    void need(uint64_t n)
    {
        if (n > bytes_.size())
            garbled();
    }
    [[noreturn]] void garbled() const;

    std::string_view bytes_;
    const std::filesystem::path& file_;
};

// Throws the Error for a child that did not answer, naming the file and the
// object and saying what it was doing.
[[noreturn]] void failContained(const std::filesystem::path& file, std::string_view object,
                                const ContainedOutcome& outcome, const std::string& doing);

// The groups, datasets and attributes open()'s child found, as one message.
std::string encodeStructure(const std::vector<std::string>& groups, const std::vector<Hdf5Dataset>& datasets,
                            const Hdf5File::Attributes& attributes);
// That message read back into the parent's lists; an Error naming `path` when it is garbled.
void decodeStructure(std::string_view bytes, const std::filesystem::path& path, std::vector<std::string>& groups,
                     std::vector<Hdf5Dataset>& datasets, Hdf5File::Attributes& attributes);

} // namespace qs::hdf5
