#include "io/zip_archive.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <zlib.h>

#include "core/error.h"

namespace qs {
namespace {

constexpr uint32_t kLocalSig = 0x04034b50;
constexpr uint32_t kCentralSig = 0x02014b50;
constexpr uint32_t kEndSig = 0x06054b50;
constexpr uint32_t kZip64EndSig = 0x06064b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr size_t kEndBytes = 22;
constexpr size_t kZip64EndBytes = 56;
constexpr size_t kZip64LocatorBytes = 20;
constexpr size_t kCentralBytes = 46;
constexpr size_t kLocalBytes = 30;
constexpr uint16_t kFlagEncrypted = 1u << 0;
constexpr uint16_t kFlagDataDescriptor = 1u << 3;
constexpr uint16_t kFlagStrongEncryption = 1u << 6;
constexpr uint32_t k32 = 0xffffffffu;
// Deflate cannot expand its input more than about 1032:1; the slack covers tiny entries.
constexpr uint64_t kMaxDeflateRatio = 1032;
constexpr uint64_t kDeflateSlack = 1024;

std::string hex(uint64_t v)
{
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
    return buf;
}

// Little-endian fields of a byte range whose bounds were checked by the caller.
class Fields {
public:
    explicit Fields(const std::byte* p) : p_(p) {}
    uint16_t u16(size_t at) const { return uint16_t(byte(at) | byte(at + 1) << 8); }
    uint32_t u32(size_t at) const { return uint32_t(u16(at)) | uint32_t(u16(at + 2)) << 16; }
    uint64_t u64(size_t at) const { return uint64_t(u32(at)) | uint64_t(u32(at + 4)) << 32; }

private:
    unsigned byte(size_t at) const { return unsigned(p_[at]); }
    const std::byte* p_;
};

// The values a zip64 extra field (id 0x0001) replaces, in the order it stores them.
struct Zip64Values {
    uint64_t* uncompressed = nullptr;
    uint64_t* compressed = nullptr;
    uint64_t* offset = nullptr;
    uint32_t* disk = nullptr;
};

// Walks the extra fields of a header; fills the zip64 values that are marked
// 0xFFFFFFFF (pointers set) from the zip64 field. `what` prefixes errors.
void readZip64Extra(const std::byte* extra, size_t length, Zip64Values values, const std::string& what)
{
    size_t at = 0;
    bool found = false;
    while (at + 4 <= length) {
        const Fields f(extra + at);
        const uint16_t id = f.u16(0);
        const uint16_t size = f.u16(2);
        if (at + 4 + size > length)
            throw Error(what + ": extra field " + hex(id) + " of " + std::to_string(size) +
                        " bytes runs past the extra data (" + std::to_string(length) + " bytes)");
        if (id == 0x0001) {
            found = true;
            const Fields z(extra + at + 4);
            size_t used = 0;
            auto take = [&](uint64_t* target, size_t bytes, const char* field) {
                if (!target)
                    return;
                if (used + bytes > size)
                    throw Error(what + ": zip64 extra field of " + std::to_string(size) + " bytes lacks the " + field);
                *target = bytes == 8 ? z.u64(used) : z.u32(used);
                used += bytes;
            };
            take(values.uncompressed, 8, "uncompressed size");
            take(values.compressed, 8, "compressed size");
            take(values.offset, 8, "local header offset");
            if (values.disk) {
                uint64_t disk = 0;
                take(&disk, 4, "disk number");
                *values.disk = uint32_t(disk);
            }
        }
        at += 4 + size;
    }
    if (!found && (values.uncompressed || values.compressed || values.offset || values.disk))
        throw Error(what + ": sizes or offset are 0xFFFFFFFF but there is no zip64 extra field");
}

bool needsZip64(uint64_t v)
{
    return v == k32;
}

// Where the central directory is, from the end record (and the zip64 one).
struct Directory {
    uint64_t count = 0;  // entries
    uint64_t offset = 0; // of the first central entry
    uint64_t size = 0;   // bytes
};

Directory locateDirectory(const MappedFile& file)
{
    const std::string archive = file.path().string();
    auto fail = [&](const std::string& what) { throw Error(archive + ": " + what); };
    const std::byte* base = file.data();
    const uint64_t size = file.size();
    if (size < kEndBytes)
        fail("not a zip archive: " + std::to_string(size) + " bytes, too short for an end-of-central-directory record");

    // The end record is the last signature whose comment reaches exactly the end of the file.
    const uint64_t lowest = size > kEndBytes + 0xffff ? size - kEndBytes - 0xffff : 0;
    uint64_t end = std::numeric_limits<uint64_t>::max();
    for (uint64_t at = size - kEndBytes + 1; at-- > lowest;) {
        const Fields f(base + at);
        if (f.u32(0) == kEndSig && at + kEndBytes + f.u16(20) == size) {
            end = at;
            break;
        }
    }
    if (end == std::numeric_limits<uint64_t>::max())
        fail("not a zip archive or truncated: no end-of-central-directory record in its last " +
             std::to_string(size - lowest) + " bytes");
    const Fields eocd(base + end);
    uint64_t disk = eocd.u16(4), cdDisk = eocd.u16(6), diskEntries = eocd.u16(8);
    Directory d{eocd.u16(10), eocd.u32(16), eocd.u32(12)};
    uint64_t limit = end; // the central directory must end before this offset

    if (end >= kZip64LocatorBytes && Fields(base + end - kZip64LocatorBytes).u32(0) == kZip64LocatorSig) {
        const uint64_t locatorAt = end - kZip64LocatorBytes;
        const Fields locator(base + locatorAt);
        const uint64_t recordAt = locator.u64(8);
        if (locator.u32(4) != 0 || locator.u32(16) > 1)
            fail("zip64 locator at offset " + std::to_string(locatorAt) + " describes a split archive (not supported)");
        if (recordAt > locatorAt || locatorAt - recordAt < kZip64EndBytes)
            fail("zip64 locator at offset " + std::to_string(locatorAt) + " points to offset " +
                 std::to_string(recordAt) + ", where no 56-byte zip64 end record fits before the locator");
        const Fields record(base + recordAt);
        if (record.u32(0) != kZip64EndSig)
            fail("no zip64 end-of-central-directory signature at offset " + std::to_string(recordAt) +
                 " (the zip64 locator points there)");
        if (record.u64(4) < kZip64EndBytes - 12 || record.u64(4) > locatorAt - recordAt - 12)
            fail("zip64 end record at offset " + std::to_string(recordAt) + " has an invalid size field " +
                 std::to_string(record.u64(4)));
        disk = record.u32(16);
        cdDisk = record.u32(20);
        diskEntries = record.u64(24);
        d = {record.u64(32), record.u64(48), record.u64(40)};
        limit = recordAt;
    }
    if (disk != 0 || cdDisk != 0 || diskEntries != d.count)
        fail("split (multi-disk) archives are not supported (end record at offset " + std::to_string(end) + ")");
    if (d.offset > limit || d.size > limit - d.offset)
        fail("central directory (offset " + std::to_string(d.offset) + ", " + std::to_string(d.size) +
             " bytes) runs past the end record at offset " + std::to_string(limit));
    // Every central entry takes at least 46 bytes: this bounds what count may allocate.
    if (d.count > d.size / kCentralBytes)
        fail("end record declares " + std::to_string(d.count) + " entries, more than a central directory of " +
             std::to_string(d.size) + " bytes can hold");
    return d;
}

// Reads the central entry at `at` (inside [at, end)) and advances `at` past it.
ZipEntry readCentralEntry(const MappedFile& file, uint64_t index, uint64_t& at, uint64_t end)
{
    const std::string archive = file.path().string();
    const std::string where = "central directory entry " + std::to_string(index) + " at offset " + std::to_string(at);
    if (end - at < kCentralBytes)
        throw Error(archive + ": " + where + " is truncated: the central directory ends at offset " +
                    std::to_string(end));
    const std::byte* p = file.data() + at;
    const Fields c(p);
    if (c.u32(0) != kCentralSig)
        throw Error(archive + ": " + where + " has no central directory signature (found " + hex(c.u32(0)) + ")");
    ZipEntry e;
    e.flags = c.u16(8);
    e.method = c.u16(10);
    e.crc32 = c.u32(16);
    e.compressedSize = c.u32(20);
    e.uncompressedSize = c.u32(24);
    const uint64_t nameLength = c.u16(28), extraLength = c.u16(30), commentLength = c.u16(32);
    uint32_t startDisk = c.u16(34);
    e.localHeaderOffset = c.u32(42);
    if (end - at - kCentralBytes < nameLength + extraLength + commentLength)
        throw Error(archive + ": " + where + ": name, extra field and comment (" +
                    std::to_string(nameLength + extraLength + commentLength) +
                    " bytes) run past the end of the central directory");
    e.name.assign(reinterpret_cast<const char*>(p + kCentralBytes), size_t(nameLength));
    if (e.name.empty())
        throw Error(archive + ": " + where + " has an empty name");
    const std::string entry = archive + ": entry \"" + e.name + "\"";
    Zip64Values z;
    if (needsZip64(e.uncompressedSize))
        z.uncompressed = &e.uncompressedSize;
    if (needsZip64(e.compressedSize))
        z.compressed = &e.compressedSize;
    if (needsZip64(e.localHeaderOffset))
        z.offset = &e.localHeaderOffset;
    if (startDisk == 0xffff)
        z.disk = &startDisk;
    readZip64Extra(p + kCentralBytes + nameLength, size_t(extraLength), z, entry + " (central directory)");
    if (startDisk != 0)
        throw Error(entry + ": starts on disk " + std::to_string(startDisk) + " (split archives are not supported)");
    if (e.flags & (kFlagEncrypted | kFlagStrongEncryption))
        throw Error(entry + " is encrypted (general purpose flags " + hex(e.flags) +
                    "); encrypted archives are not supported");
    if (e.method != 0 && e.method != 8)
        throw Error(entry + " uses compression method " + std::to_string(e.method) +
                    "; only 0 (stored) and 8 (deflate) are supported");
    if (e.method == 0 && e.compressedSize != e.uncompressedSize)
        throw Error(entry + " is stored but its compressed size " + std::to_string(e.compressedSize) +
                    " differs from its uncompressed size " + std::to_string(e.uncompressedSize));
    if (e.method == 8 && e.uncompressedSize > e.compressedSize * kMaxDeflateRatio + kDeflateSlack)
        throw Error(entry + " declares an uncompressed size of " + std::to_string(e.uncompressedSize) + " bytes from " +
                    std::to_string(e.compressedSize) + " compressed bytes, more than deflate can produce");
    at += kCentralBytes + nameLength + extraLength + commentLength;
    return e;
}

// Checks the local header of `e` against its central entry and sets e.dataOffset.
// Local headers and data must lie before the central directory (`cdOffset`).
void checkLocalHeader(const MappedFile& file, ZipEntry& e, uint64_t cdOffset, const std::string& entry)
{
    const uint64_t lh = e.localHeaderOffset;
    if (lh > cdOffset || cdOffset - lh < kLocalBytes)
        throw Error(entry + ": local header offset " + std::to_string(lh) +
                    " is not before the central directory (offset " + std::to_string(cdOffset) + ")");
    const std::byte* p = file.data() + lh;
    const Fields l(p);
    if (l.u32(0) != kLocalSig)
        throw Error(entry + ": no local header signature at offset " + std::to_string(lh) + " (found " + hex(l.u32(0)) +
                    ")");
    const uint16_t flags = l.u16(6), method = l.u16(8);
    const uint32_t crc = l.u32(14);
    uint64_t compressed = l.u32(18), uncompressed = l.u32(22);
    const uint64_t nameLength = l.u16(26), extraLength = l.u16(28);
    if (cdOffset - lh - kLocalBytes < nameLength + extraLength)
        throw Error(entry + ": local header at offset " + std::to_string(lh) +
                    " has a name and extra field that run into the central directory");
    const std::string_view localName(reinterpret_cast<const char*>(p + kLocalBytes), size_t(nameLength));
    if (localName != e.name)
        throw Error(entry + ": local header at offset " + std::to_string(lh) + " names \"" + std::string(localName) +
                    "\" instead");
    constexpr uint16_t kCompared = kFlagEncrypted | kFlagDataDescriptor;
    if (method != e.method || (flags & kCompared) != (e.flags & kCompared))
        throw Error(entry + ": local header at offset " + std::to_string(lh) +
                    " disagrees with the central directory on method or flags");
    if (!(e.flags & kFlagDataDescriptor)) { // else CRC and sizes follow the data; the central entry has them
        Zip64Values z;
        if (needsZip64(uncompressed))
            z.uncompressed = &uncompressed;
        if (needsZip64(compressed))
            z.compressed = &compressed;
        readZip64Extra(p + kLocalBytes + nameLength, size_t(extraLength), z, entry + " (local header)");
        if (crc != e.crc32 || compressed != e.compressedSize || uncompressed != e.uncompressedSize)
            throw Error(entry + ": local header at offset " + std::to_string(lh) +
                        " disagrees with the central directory on CRC-32 or sizes");
    }
    e.dataOffset = lh + kLocalBytes + nameLength + extraLength;
    if (e.compressedSize > cdOffset - e.dataOffset)
        throw Error(entry + ": " + std::to_string(e.compressedSize) + " bytes of data at offset " +
                    std::to_string(e.dataOffset) + " run into the central directory (offset " +
                    std::to_string(cdOffset) + ")");
}

} // namespace

ZipArchive ZipArchive::open(const std::filesystem::path& path)
{
    return ZipArchive(MappedFile::open(path));
}

ZipArchive::ZipArchive(std::shared_ptr<const MappedFile> file) : file_(std::move(file))
{
    const Directory d = locateDirectory(*file_);
    entries_.reserve(size_t(d.count));
    uint64_t at = d.offset;
    const uint64_t end = d.offset + d.size;
    for (uint64_t i = 0; i < d.count; ++i) {
        ZipEntry e = readCentralEntry(*file_, i, at, end);
        if (!byName_.emplace(e.name, entries_.size()).second)
            throw Error(describe(e) + " appears twice in the central directory");
        entries_.push_back(std::move(e));
    }
    if (at != end)
        throw Error(path().string() + ": central directory has " + std::to_string(end - at) + " bytes after its " +
                    std::to_string(d.count) + " entries (at offset " + std::to_string(at) + ")");
    for (ZipEntry& e : entries_)
        checkLocalHeader(*file_, e, d.offset, describe(e));

    // Entries may not share bytes (overlapping entries are how non-recursive zip bombs multiply).
    std::vector<const ZipEntry*> byOffset;
    for (const ZipEntry& e : entries_)
        byOffset.push_back(&e);
    std::sort(byOffset.begin(), byOffset.end(),
              [](const ZipEntry* a, const ZipEntry* b) { return a->localHeaderOffset < b->localHeaderOffset; });
    for (size_t i = 1; i < byOffset.size(); ++i)
        if (byOffset[i]->localHeaderOffset < byOffset[i - 1]->dataOffset + byOffset[i - 1]->compressedSize)
            throw Error(describe(*byOffset[i]) + ": local header at offset " +
                        std::to_string(byOffset[i]->localHeaderOffset) + " overlaps the data of entry \"" +
                        byOffset[i - 1]->name + "\"");
}

const ZipEntry* ZipArchive::find(std::string_view name) const
{
    const auto it = byName_.find(std::string(name));
    return it == byName_.end() ? nullptr : &entries_[it->second];
}

std::string ZipArchive::describe(const ZipEntry& entry) const
{
    return path().string() + ": entry \"" + entry.name + "\"";
}

std::span<const std::byte> ZipArchive::storedContent(const ZipEntry& entry) const
{
    if (entry.method != 0)
        throw Error(describe(entry) + " is compressed, not stored");
    const std::span<const std::byte> bytes(file_->data() + entry.dataOffset, size_t(entry.compressedSize));
    const uint32_t crc = uint32_t(::crc32_z(0, reinterpret_cast<const Bytef*>(bytes.data()), bytes.size()));
    if (crc != entry.crc32)
        throw Error(describe(entry) + ": CRC-32 mismatch (data " + hex(crc) + ", central directory " +
                    hex(entry.crc32) + "); the archive is corrupt");
    return bytes;
}

ZipEntryReader::ZipEntryReader(const ZipArchive& archive, const ZipEntry& entry) : archive_(archive), entry_(entry)
{
    if (entry_.method == 8) {
        stream_ = std::make_unique<z_stream>();
        if (::inflateInit2(stream_.get(), -MAX_WBITS) != Z_OK) { // raw deflate, as zip stores it
            stream_.reset();
            throw Error(archive_.describe(entry_) + ": cannot start zlib inflate");
        }
    }
    if (entry_.uncompressedSize == 0)
        finish();
}

ZipEntryReader::~ZipEntryReader()
{
    if (stream_)
        ::inflateEnd(stream_.get());
}

void ZipEntryReader::read(std::span<std::byte> out)
{
    if (out.size() > entry_.uncompressedSize - position_)
        throw Error(archive_.describe(entry_) + ": read of " + std::to_string(out.size()) + " bytes at position " +
                    std::to_string(position_) + " runs past its size " + std::to_string(entry_.uncompressedSize));
    if (out.empty())
        return;
    if (stream_)
        inflateInto(out);
    else
        std::memcpy(out.data(), archive_.mapping()->data() + entry_.dataOffset + position_, out.size());
    crc_ = uint32_t(::crc32_z(crc_, reinterpret_cast<const Bytef*>(out.data()), out.size()));
    position_ += out.size();
    if (position_ == entry_.uncompressedSize)
        finish();
}

void ZipEntryReader::skip(uint64_t count)
{
    std::byte scratch[4096];
    while (count) {
        const size_t n = size_t(std::min<uint64_t>(count, sizeof scratch));
        read({scratch, n});
        count -= n;
    }
}

void ZipEntryReader::inflateInto(std::span<std::byte> out)
{
    size_t filled = 0;
    while (filled < out.size()) {
        if (streamEnded_)
            throw Error(archive_.describe(entry_) + ": deflate data ends after " + std::to_string(position_ + filled) +
                        " bytes, the central directory declares " + std::to_string(entry_.uncompressedSize));
        filled += inflateSome(out.subspan(filled), position_ + filled);
    }
}

size_t ZipEntryReader::inflateSome(std::span<std::byte> out, uint64_t producedBefore)
{
    z_stream& z = *stream_;
    if (z.avail_in == 0 && consumed_ < entry_.compressedSize) {
        const uint64_t chunk = std::min<uint64_t>(entry_.compressedSize - consumed_, 1u << 30);
        z.next_in = const_cast<Bytef*>(
            reinterpret_cast<const Bytef*>(archive_.mapping()->data() + entry_.dataOffset + consumed_));
        z.avail_in = uInt(chunk);
        consumed_ += chunk;
    }
    const size_t want = std::min<size_t>(out.size(), 1u << 30);
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = uInt(want);
    const int ret = ::inflate(&z, Z_NO_FLUSH);
    const size_t produced = want - z.avail_out;
    if (ret == Z_STREAM_END)
        streamEnded_ = true;
    else if (ret == Z_BUF_ERROR && z.avail_in == 0 && consumed_ == entry_.compressedSize)
        throw Error(archive_.describe(entry_) + ": deflate data is truncated (its " +
                    std::to_string(entry_.compressedSize) + " compressed bytes end after " +
                    std::to_string(producedBefore + produced) + " of " + std::to_string(entry_.uncompressedSize) +
                    " bytes)");
    else if (ret != Z_OK && ret != Z_BUF_ERROR)
        throw Error(archive_.describe(entry_) + ": corrupt deflate data near compressed offset " +
                    std::to_string(consumed_ - z.avail_in) + ": " +
                    (z.msg ? z.msg : "zlib error " + std::to_string(ret)));
    return produced;
}

void ZipEntryReader::finish()
{
    // Everything declared was produced: the stream must end here without yielding one byte more.
    std::byte extra[1];
    while (stream_ && !streamEnded_)
        if (inflateSome(extra, entry_.uncompressedSize) > 0)
            throw Error(archive_.describe(entry_) + ": deflate data inflates to more than the " +
                        std::to_string(entry_.uncompressedSize) + " bytes the central directory declares");
    if (crc_ != entry_.crc32)
        throw Error(archive_.describe(entry_) + ": CRC-32 mismatch (data " + hex(crc_) + ", central directory " +
                    hex(entry_.crc32) + "); the archive is corrupt");
}

} // namespace qs
