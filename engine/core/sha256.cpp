#include "core/sha256.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <vector>

#include "core/error.h"

namespace qs {

namespace {

constexpr std::array<uint32_t, 64> kRoundConstants{
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

uint32_t rotr(uint32_t x, int n)
{
    return (x >> n) | (x << (32 - n));
}

} // namespace

void Sha256::add(std::span<const uint8_t> bytes)
{
    length_ += bytes.size();
    while (!bytes.empty()) {
        const size_t take = std::min(bytes.size(), block_.size() - filled_);
        std::memcpy(block_.data() + filled_, bytes.data(), take);
        filled_ += take;
        bytes = bytes.subspan(take);
        if (filled_ == block_.size()) {
            compress();
            filled_ = 0;
        }
    }
}

std::string Sha256::hex()
{
    // Padding: a one bit, zeros up to 56 bytes into a block, then the message length in bits (big-endian).
    const uint64_t bits = length_ * 8;
    const uint8_t one = 0x80, zero = 0;
    add({&one, 1});
    while (filled_ != 56)
        add({&zero, 1});
    for (int i = 7; i >= 0; --i) {
        const uint8_t b = uint8_t(bits >> (8 * i));
        add({&b, 1});
    }
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out;
    out.reserve(64);
    for (const uint32_t h : state_)
        for (int i = 3; i >= 0; --i) {
            const uint8_t b = uint8_t(h >> (8 * i));
            out += kDigits[b >> 4];
            out += kDigits[b & 15];
        }
    return out;
}

void Sha256::compress()
{
    std::array<uint32_t, 64> w{};
    for (size_t i = 0; i < 16; ++i)
        w[i] = uint32_t(block_[4 * i]) << 24 | uint32_t(block_[4 * i + 1]) << 16 | uint32_t(block_[4 * i + 2]) << 8 |
               uint32_t(block_[4 * i + 3]);
    for (size_t i = 16; i < 64; ++i) {
        const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
        const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    auto v = state_;
    for (size_t i = 0; i < 64; ++i) {
        const uint32_t s1 = rotr(v[4], 6) ^ rotr(v[4], 11) ^ rotr(v[4], 25);
        const uint32_t ch = (v[4] & v[5]) ^ (~v[4] & v[6]);
        const uint32_t t1 = v[7] + s1 + ch + kRoundConstants[i] + w[i];
        const uint32_t s0 = rotr(v[0], 2) ^ rotr(v[0], 13) ^ rotr(v[0], 22);
        const uint32_t maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
        v = {t1 + s0 + maj, v[0], v[1], v[2], v[3] + t1, v[4], v[5], v[6]};
    }
    for (size_t i = 0; i < 8; ++i)
        state_[i] += v[i];
}

std::string sha256Hex(std::span<const uint8_t> bytes)
{
    Sha256 h;
    h.add(bytes);
    return h.hex();
}

std::string sha256OfFile(const std::filesystem::path& file)
{
    std::ifstream in(file, std::ios::binary);
    if (!in)
        throw Error(file.string() + ": cannot open the file to hash it");
    Sha256 h;
    std::vector<char> buffer(1 << 20);
    while (in) {
        in.read(buffer.data(), std::streamsize(buffer.size()));
        h.add({reinterpret_cast<const uint8_t*>(buffer.data()), size_t(in.gcount())});
    }
    if (in.bad())
        throw Error(file.string() + ": read error while hashing");
    return h.hex();
}

std::string sha256OfModel(const std::filesystem::path& path)
{
    std::error_code ec;
    if (!std::filesystem::is_directory(path, ec))
        return sha256OfFile(path);
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
        const std::string ext = entry.path().extension().string();
        if (entry.is_regular_file(ec) && (ext == ".json" || ext == ".safetensors"))
            files.push_back(entry.path());
    }
    if (ec)
        throw Error(path.string() + ": cannot list the folder to hash it (" + ec.message() + ")");
    std::sort(files.begin(), files.end());
    Sha256 h;
    for (const auto& file : files) {
        std::string digest;
        if (file.extension() == ".safetensors") {
            // The header (every tensor's name, dtype, shape and byte range) and the size, not the
            // gigabytes of weights: opening a checkpoint must not read it whole.
            std::ifstream in(file, std::ios::binary);
            uint64_t headerBytes = 0;
            if (!in.read(reinterpret_cast<char*>(&headerBytes), 8))
                throw Error(file.string() + ": cannot read the header to hash it");
            const uint64_t size = std::filesystem::file_size(file, ec);
            headerBytes = std::min<uint64_t>(headerBytes, size > 8 ? size - 8 : 0);
            std::string header(size_t(std::min<uint64_t>(headerBytes, uint64_t(256) << 20)), '\0');
            if (!in.read(header.data(), std::streamsize(header.size())))
                throw Error(file.string() + ": read error while hashing");
            header.push_back(' ');
            header.append(std::to_string(size));
            digest = sha256Hex({reinterpret_cast<const uint8_t*>(header.data()), header.size()});
        } else {
            digest = sha256OfFile(file);
        }
        const std::string line = file.filename().string() + " " + digest + "\n";
        h.add({reinterpret_cast<const uint8_t*>(line.data()), line.size()});
    }
    return h.hex();
}

} // namespace qs
