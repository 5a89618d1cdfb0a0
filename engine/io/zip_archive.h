#pragma once
// A read-only zip archive over a memory-mapped file: what .npz files are.
//
// open() validates the whole directory before anything is trusted: the
// end-of-central-directory record is searched only in the last 65557 bytes
// (22 bytes of record plus the longest comment), zip64 locator and record are
// followed when present, each central entry is bounds-checked against the
// central directory and the file, zip64 extra fields replace 0xFFFFFFFF sizes
// and offsets, each local header must agree with its central entry (name,
// method, and CRC and sizes unless a data descriptor is used), entries may not
// overlap one another or the central directory, names are unique, and a
// deflate entry may not declare more than deflate can produce from its
// compressed size. Encrypted entries, split archives and compression methods
// other than 0 (stored) and 8 (deflate) are refused.
//
// Errors are qs::Error naming the archive, the entry and the field or offset.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/mapped_file.h"

typedef struct z_stream_s z_stream;

namespace qs {

struct ZipEntry {
    std::string name;
    uint16_t method = 0; // 0 stored, 8 deflate
    uint16_t flags = 0;  // general purpose bits (bit 3: sizes in a data descriptor)
    uint32_t crc32 = 0;
    uint64_t compressedSize = 0;
    uint64_t uncompressedSize = 0;
    uint64_t localHeaderOffset = 0;
    uint64_t dataOffset = 0; // where the entry's stored or compressed bytes start in the file
};

class ZipArchive {
public:
    static ZipArchive open(const std::filesystem::path& path);
    explicit ZipArchive(std::shared_ptr<const MappedFile> file);

    const std::filesystem::path& path() const { return file_->path(); }
    const std::shared_ptr<const MappedFile>& mapping() const { return file_; }
    // In central-directory order.
    const std::vector<ZipEntry>& entries() const { return entries_; }
    // nullptr when absent.
    const ZipEntry* find(std::string_view name) const;

    // The bytes of a stored (method 0) entry inside the mapping, after checking
    // their CRC-32 (a pass over the data).
    std::span<const std::byte> storedContent(const ZipEntry& entry) const;
    // "archive.npz: entry \"w.npy\"", the prefix of every error about an entry.
    std::string describe(const ZipEntry& entry) const;

private:
    std::shared_ptr<const MappedFile> file_;
    std::vector<ZipEntry> entries_;
    std::unordered_map<std::string, size_t> byName_;
};

// Reads one entry's uncompressed content front to back, stored or deflated,
// without holding more than the caller's buffer: so an array can be streamed.
// The declared uncompressed size is a hard bound: deflate data that would
// produce more (a "bomb") or less is an Error, and the CRC-32 is checked when
// the last byte has been read.
class ZipEntryReader {
public:
    ZipEntryReader(const ZipArchive& archive, const ZipEntry& entry);
    ~ZipEntryReader();
    ZipEntryReader(const ZipEntryReader&) = delete;
    ZipEntryReader& operator=(const ZipEntryReader&) = delete;

    // Fills `out` with the next out.size() bytes; asking for more than remain is an Error.
    void read(std::span<std::byte> out);
    // Reads and drops the next `count` bytes (an .npy header before the rows).
    void skip(uint64_t count);
    uint64_t position() const { return position_; }
    uint64_t size() const { return entry_.uncompressedSize; }

private:
    void inflateInto(std::span<std::byte> out);
    // One inflate call into `out`, feeding compressed input as needed; returns the
    // bytes produced. `producedBefore` only words the error messages.
    size_t inflateSome(std::span<std::byte> out, uint64_t producedBefore);
    void finish();

    const ZipArchive& archive_;
    ZipEntry entry_;
    std::unique_ptr<z_stream> stream_; // deflate entries only
    uint64_t position_ = 0;            // uncompressed bytes delivered
    uint64_t consumed_ = 0;            // compressed bytes handed to zlib
    uint32_t crc_ = 0;
    bool streamEnded_ = false;
};

} // namespace qs
