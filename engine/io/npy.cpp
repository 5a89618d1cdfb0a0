#include "io/npy.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <sys/stat.h>
#include <unistd.h>

#include "core/atomic_file.h"
#include "core/error.h"
#include "io/load_budget.h"
#include "io/npy_header.h"

namespace qs {

static_assert(std::endian::native == std::endian::little, "the .npy reader assumes a little-endian host");

namespace {

[[noreturn]] void fail(std::string_view fileName, std::string_view what)
{
    throw Error(std::string(fileName) + ": " + std::string(what));
}

void checkDataSize(const NpyHeader& h, uint64_t available, std::string_view fileName)
{
    const auto expected = uint64_t(h.dataBytes);
    if (available < expected)
        fail(fileName, "truncated: shape " + shapeToString(h.shape) + " of " + std::string(dtypeName(h.dtype)) +
                           " needs " + std::to_string(expected) + " bytes of data, the file has " +
                           std::to_string(available));
    if (available > expected)
        fail(fileName, std::to_string(available - expected) + " bytes of unexpected data after the " +
                           std::to_string(expected) + " bytes that shape " + shapeToString(h.shape) + " of " +
                           std::string(dtypeName(h.dtype)) + " describes");
}

void byteSwapInPlace(std::byte* data, int64_t count, size_t itemSize)
{
    for (int64_t i = 0; i < count; ++i)
        std::reverse(data + i * int64_t(itemSize), data + (i + 1) * int64_t(itemSize));
}

// Fortran (column-major) data of `shape` into row-major order. The source is the
// row-major layout of the reversed shape, so element (i0, …, in−1) lives at
// Σ i_k · colStride_k with colStride_0 = 1.
void fortranToRowMajor(const std::byte* src, std::byte* dst, const Shape& shape, size_t itemSize)
{
    const size_t rank = shape.size();
    const int64_t count = shapeElementCount(shape);
    if (rank < 2 || count == 0) {
        std::memcpy(dst, src, size_t(count) * itemSize);
        return;
    }
    Shape colStride(rank, 1);
    for (size_t k = 1; k < rank; ++k)
        colStride[k] = colStride[k - 1] * shape[k - 1];
    Shape index(rank, 0);
    const int64_t inner = shape[rank - 1];
    const int64_t innerStride = colStride[rank - 1] * int64_t(itemSize);
    for (int64_t out = 0; out < count; out += inner) {
        int64_t base = 0;
        for (size_t k = 0; k + 1 < rank; ++k)
            base += index[k] * colStride[k];
        const std::byte* s = src + base * int64_t(itemSize);
        std::byte* d = dst + out * int64_t(itemSize);
        for (int64_t j = 0; j < inner; ++j)
            std::memcpy(d + j * int64_t(itemSize), s + j * innerStride, itemSize);
        for (size_t k = rank - 1; k-- > 0;) { // advance the outer index, last varying fastest
            if (++index[k] < shape[k])
                break;
            index[k] = 0;
        }
    }
}

std::string arrayLabel(const NpyHeader& h)
{
    return "the array of shape " + shapeToString(h.shape) + " of " + std::string(dtypeName(h.dtype));
}

// Checks the array against the per-file budget (io/load_budget.h) before
// anything is allocated; `readBuffer`: the data is first read into a buffer of
// its own (Fortran order, reordered after reading).
void checkArrayBudget(const NpyHeader& h, std::string_view fileName, bool readBuffer)
{
    LoadBudget budget{std::string(fileName)};
    if (readBuffer)
        budget.reserve(uint64_t(h.dataBytes), "the Fortran-order data of " + arrayLabel(h));
    budget.reserve(uint64_t(h.dataBytes), arrayLabel(h));
}

Tensor allocateArray(const NpyHeader& h, std::string_view fileName)
{
    checkArrayBudget(h, fileName, false);
    return allocateTensor(h.dtype, h.shape, std::string(fileName), arrayLabel(h));
}

// Turns raw file bytes (already checked to be h.dataBytes long) into the tensor's data.
Tensor decodeData(const NpyHeader& h, const std::byte* raw, std::string_view fileName)
{
    Tensor t = allocateArray(h, fileName);
    auto* out = static_cast<std::byte*>(t.mutableRawData());
    const size_t itemSize = dtypeSize(h.dtype);
    if (h.fortranOrder)
        fortranToRowMajor(raw, out, h.shape, itemSize);
    else if (h.dataBytes)
        std::memcpy(out, raw, size_t(h.dataBytes));
    if (h.bigEndian)
        byteSwapInPlace(out, t.numel(), itemSize);
    if (h.dtype == DType::Bool) // numpy's bool is one byte 0/1; any other byte reads as true
        for (auto& v : t.mutableValues<uint8_t>())
            v = v != 0;
    return t;
}

struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
};

} // namespace

Tensor parseNpy(std::span<const std::byte> bytes, std::string_view name)
{
    const NpyHeader h = parseNpyHeader(bytes, name);
    checkDataSize(h, bytes.size() - h.dataOffset, name);
    return decodeData(h, bytes.data() + h.dataOffset, name);
}

Tensor readNpy(const std::filesystem::path& path)
{
    const std::string name = path.string();
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
        fail(name, "is a folder, not an .npy file");
    std::unique_ptr<std::FILE, FileCloser> file(std::fopen(name.c_str(), "rb"));
    if (!file)
        fail(name, std::string("cannot open: ") + std::strerror(errno));
    const uint64_t fileSize = std::filesystem::file_size(path, ec);
    if (ec)
        fail(name, "cannot read its size: " + ec.message());

    std::vector<std::byte> head(std::min<uint64_t>(fileSize, kNpyPreambleBytes));
    if (std::fread(head.data(), 1, head.size(), file.get()) != head.size())
        fail(name, "read error in the npy preamble");
    const size_t dataOffset = npyDataOffset(head, name); // bounded by kNpyMaxHeaderBytes + 12
    if (dataOffset > fileSize)
        fail(name, "truncated: the npy header length (" + std::to_string(dataOffset) +
                       " bytes with preamble) runs past the end of the file (" + std::to_string(fileSize) + " bytes)");
    const size_t already = head.size();
    head.resize(dataOffset);
    if (std::fread(head.data() + already, 1, dataOffset - already, file.get()) != dataOffset - already)
        fail(name, "read error in the npy header");
    const NpyHeader h = parseNpyHeader(head, name);
    checkDataSize(h, fileSize - dataOffset, name);

    if (!h.fortranOrder) { // read straight into the tensor
        Tensor t = allocateArray(h, name);
        if (h.dataBytes && std::fread(t.mutableRawData(), 1, size_t(h.dataBytes), file.get()) != size_t(h.dataBytes))
            fail(name, "read error in the array data");
        if (h.bigEndian)
            byteSwapInPlace(static_cast<std::byte*>(t.mutableRawData()), t.numel(), dtypeSize(h.dtype));
        if (h.dtype == DType::Bool)
            for (auto& v : t.mutableValues<uint8_t>())
                v = v != 0;
        return t;
    }
    checkArrayBudget(h, name, true);
    std::vector<std::byte> raw;
    try {
        raw.resize(size_t(h.dataBytes));
    } catch (const std::bad_alloc&) {
        fail(name,
             "cannot allocate " + std::to_string(h.dataBytes) + " bytes for " + arrayLabel(h) + " (out of memory)");
    }
    if (!raw.empty() && std::fread(raw.data(), 1, raw.size(), file.get()) != raw.size())
        fail(name, "read error in the array data");
    return decodeData(h, raw.data(), name);
}

std::vector<std::byte> encodeNpy(const Tensor& tensor)
{
    std::string header = npyHeaderText(tensor.dtype(), tensor.shape(), 10);
    unsigned char major = 1;
    if (header.size() > 0xffff) {
        major = 2;
        header = npyHeaderText(tensor.dtype(), tensor.shape(), 12);
    }
    const size_t preamble = major == 1 ? 10 : 12;
    std::vector<std::byte> out(preamble + header.size() + tensor.nbytes());
    const unsigned char magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', major, 0};
    std::memcpy(out.data(), magic, sizeof magic);
    for (size_t i = 0; i < preamble - 8; ++i)
        out[8 + i] = std::byte((header.size() >> (8 * i)) & 0xff);
    std::memcpy(out.data() + preamble, header.data(), header.size());
    if (tensor.nbytes())
        std::memcpy(out.data() + preamble + header.size(), tensor.rawData(), tensor.nbytes());
    return out;
}

void writeNpy(const std::filesystem::path& path, const Tensor& tensor)
{
    const std::string name = path.string();
    const std::vector<std::byte> bytes = [&] {
        try {
            return encodeNpy(tensor);
        } catch (const Error& e) {
            fail(name, e.what());
        }
    }();
    writeFileAtomically(path, bytes.data(), bytes.size());
}

} // namespace qs
