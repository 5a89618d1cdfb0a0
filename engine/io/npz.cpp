#include "io/npz.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "io/load_budget.h"
#include "io/npy.h"

namespace qs {
namespace {

constexpr std::string_view kSuffix = ".npy";

bool isArrayMember(const std::string& name)
{
    return name.size() > kSuffix.size() && name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0;
}

// The .npy header of a member, reading only the header's bytes.
NpyHeader readMemberHeader(const ZipArchive& archive, const ZipEntry& entry, const std::string& member)
{
    if (entry.method == 0) {
        const std::span<const std::byte> bytes(archive.mapping()->data() + entry.dataOffset,
                                               size_t(entry.uncompressedSize));
        return parseNpyHeader(bytes, member);
    }
    ZipEntryReader reader(archive, entry);
    std::vector<std::byte> head(size_t(std::min<uint64_t>(entry.uncompressedSize, kNpyPreambleBytes)));
    reader.read(head);
    const size_t dataOffset = npyDataOffset(head, member); // bounded by kNpyMaxHeaderBytes
    if (dataOffset > entry.uncompressedSize)
        throw Error(member + ": truncated: the npy header length (" + std::to_string(dataOffset) +
                    " bytes with preamble) runs past the end of the member (" + std::to_string(entry.uncompressedSize) +
                    " bytes)");
    const size_t already = head.size();
    head.resize(dataOffset);
    reader.read(std::span(head).subspan(already));
    return parseNpyHeader(head, member);
}

// Little-endian (or single-byte), C order and not bool: the member's bytes are the tensor's bytes.
bool isNativeLayout(const NpyHeader& h)
{
    return !h.fortranOrder && !h.bigEndian && h.dtype != DType::Bool;
}

} // namespace

NpzFile NpzFile::open(const std::filesystem::path& path)
{
    NpzFile f(ZipArchive::open(path));
    const auto& entries = f.archive_.entries();
    for (size_t i = 0; i < entries.size(); ++i) {
        const ZipEntry& e = entries[i];
        if (!isArrayMember(e.name)) {
            f.otherMembers_.push_back(e.name);
            continue;
        }
        const std::string member = f.archive_.describe(e);
        NpzArray a;
        a.name = e.name.substr(0, e.name.size() - kSuffix.size());
        a.header = readMemberHeader(f.archive_, e, member);
        a.entry = i;
        a.compressed = e.method != 0;
        const uint64_t dataBytes = e.uncompressedSize - a.header.dataOffset;
        if (dataBytes != uint64_t(a.header.dataBytes))
            throw Error(member + ": shape " + shapeToString(a.header.shape) + " of " +
                        std::string(dtypeName(a.header.dtype)) + " needs " + std::to_string(a.header.dataBytes) +
                        " bytes of data, the member holds " + std::to_string(dataBytes));
        if (!f.byName_.emplace(a.name, f.arrays_.size()).second)
            throw Error(member + ": array \"" + a.name + "\" appears twice");
        f.arrays_.push_back(std::move(a));
    }
    return f;
}

const NpzArray* NpzFile::find(std::string_view name) const
{
    const auto it = byName_.find(std::string(name));
    return it == byName_.end() ? nullptr : &arrays_[it->second];
}

Tensor NpzFile::read(std::string_view name) const
{
    const NpzArray* a = find(name);
    if (!a)
        throw Error(path().string() + ": has no array \"" + std::string(name) + "\"");
    return read(*a);
}

uint64_t NpzFile::allocatedBytes(const NpzArray& array) const
{
    const ZipEntry& e = archive_.entries().at(array.entry);
    const NpyHeader& h = array.header;
    if (e.method == 0) {
        const std::byte* p = archive_.mapping()->data() + e.dataOffset + h.dataOffset;
        const bool borrows = isNativeLayout(h) && reinterpret_cast<uintptr_t>(p) % dtypeSize(h.dtype) == 0;
        return borrows ? 0 : uint64_t(h.dataBytes);
    }
    // Inflated straight into the tensor, or inflated whole first and then decoded.
    return isNativeLayout(h) ? uint64_t(h.dataBytes) : e.uncompressedSize + uint64_t(h.dataBytes);
}

Tensor NpzFile::read(const NpzArray& array) const
{
    const ZipEntry& e = archive_.entries().at(array.entry);
    const NpyHeader& h = array.header;
    const std::string member = archive_.describe(e);
    const std::string what = "array of shape " + shapeToString(h.shape) + " of " + std::string(dtypeName(h.dtype));
    LoadBudget(member).reserve(allocatedBytes(array), what);
    if (e.method == 0) {
        const auto content = archive_.storedContent(e);
        const std::byte* p = content.data() + h.dataOffset;
        if (isNativeLayout(h) && reinterpret_cast<uintptr_t>(p) % dtypeSize(h.dtype) == 0)
            return Tensor::borrow(h.dtype, h.shape, h.dataBytes ? p : nullptr, archive_.mapping());
        return parseNpy(content, member);
    }
    ZipEntryReader reader(archive_, e);
    std::vector<std::byte> bytes(h.dataOffset);
    reader.read(bytes);
    if (isNativeLayout(h)) {
        Tensor t = allocateTensor(h.dtype, h.shape, member, what);
        reader.read({static_cast<std::byte*>(t.mutableRawData()), size_t(h.dataBytes)});
        return t;
    }
    try {
        bytes.resize(size_t(e.uncompressedSize));
    } catch (const std::bad_alloc&) {
        throw Error(member + ": cannot allocate " + std::to_string(e.uncompressedSize) +
                    " bytes to inflate the member (out of memory)");
    }
    reader.read(std::span(bytes).subspan(h.dataOffset));
    return parseNpy(bytes, member);
}

NpzRowReader::NpzRowReader(const NpzFile& file, const NpzArray& array) : file_(file), array_(array)
{
    const NpyHeader& h = array_.header;
    const ZipEntry& entry = file_.archive().entries().at(array_.entry);
    if (h.shape.empty())
        throw Error(file_.archive().describe(entry) + ": a 0-d array has no rows to stream");
    rowBytes_ = h.shape[0] ? h.dataBytes / h.shape[0] : 0;
    if (!h.fortranOrder) {
        reader_ = std::make_unique<ZipEntryReader>(file_.archive(), entry);
        reader_->skip(h.dataOffset);
    }
}

Tensor NpzRowReader::next(int64_t count)
{
    const NpyHeader& h = array_.header;
    if (count < 0)
        throw Error(file_.path().string() + ": array \"" + array_.name + "\": cannot read a negative number of rows");
    const int64_t n = std::min(count, rowCount() - position_);
    Shape shape = h.shape;
    shape[0] = n;
    // A row's size is declared by the header (a deflated member may declare
    // 1032 times its compressed size): the batch is checked before it is allocated.
    const std::string member = file_.archive().describe(file_.archive().entries().at(array_.entry));
    const std::string what = std::to_string(n) + " rows of " + shapeToString(h.shape);
    LoadBudget(member).reserve(uint64_t(n) * uint64_t(rowBytes_), what);
    Tensor rows = allocateTensor(h.dtype, shape, member, what);
    auto* out = static_cast<std::byte*>(rows.mutableRawData());
    const size_t bytes = size_t(n * rowBytes_);
    if (h.fortranOrder) {
        if (!whole_)
            whole_ = file_.read(array_);
        if (bytes)
            std::memcpy(out, static_cast<const std::byte*>(whole_->rawData()) + position_ * rowBytes_, bytes);
    } else {
        reader_->read({out, bytes});
        const size_t item = dtypeSize(h.dtype);
        if (h.bigEndian)
            for (size_t i = 0; i < bytes; i += item)
                std::reverse(out + i, out + i + item);
        if (h.dtype == DType::Bool)
            for (auto& v : rows.mutableValues<uint8_t>())
                v = v != 0;
    }
    position_ += n;
    return rows;
}

} // namespace qs
