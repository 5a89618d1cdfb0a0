#pragma once
// SHA-256 (FIPS 180-4) digests as lower-case hex: the session file and the
// checkpoint manifest record the source model's digest so a changed model is
// noticed when either is reopened.

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

namespace qs {

// An incremental digest: add bytes in any pieces, then read hex() once.
class Sha256 {
public:
    void add(std::span<const uint8_t> bytes);
    // Pads and finishes the digest; adding after this is an error of the caller.
    std::string hex();

private:
    void compress();

    std::array<uint32_t, 8> state_{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    std::array<uint8_t, 64> block_{};
    size_t filled_ = 0;
    uint64_t length_ = 0; // bytes added so far
};

// SHA-256 of bytes, and of a file's content read in 1 MiB pieces; throws Error naming the file it cannot read.
std::string sha256Hex(std::span<const uint8_t> bytes);
std::string sha256OfFile(const std::filesystem::path& file);
// A model's digest: a file's sha256OfFile(); for a folder (a Hugging Face
// checkpoint) the SHA-256 of the lines "<name> <digest>\n" of its `*.json`
// and `*.safetensors` files in name order, where a json file's digest is its
// content's and a safetensors file's is that of its header and size: a
// changed config, tokenizer, index, tensor name, shape, dtype or layout
// changes it, new values in the same layout do not (hashing every weight
// would read gigabytes each time a checkpoint is opened).
std::string sha256OfModel(const std::filesystem::path& path);

} // namespace qs
