// The .npz writer: what np.savez writes (io/npz.h).
#include <cstdint>
#include <limits>
#include <vector>

#include <zlib.h>

#include "core/atomic_file.h"
#include "core/error.h"
#include "io/npy.h"
#include "io/npz.h"

namespace qs {
namespace {

void put16(std::vector<unsigned char>& out, uint32_t v)
{
    out.push_back(static_cast<unsigned char>(v & 0xff));
    out.push_back(static_cast<unsigned char>((v >> 8) & 0xff));
}

void put32(std::vector<unsigned char>& out, uint32_t v)
{
    put16(out, v & 0xffff);
    put16(out, v >> 16);
}

} // namespace

void writeNpz(const std::filesystem::path& path, const std::map<std::string, Tensor>& arrays)
{
    constexpr uint32_t kDosDate = (0u << 9) | (1u << 5) | 1u; // 1980-01-01, the zip epoch
    std::vector<unsigned char> directory;
    AtomicFile file(path);
    uint64_t offset = 0;
    for (const auto& [name, tensor] : arrays) {
        const std::vector<std::byte> npy = encodeNpy(tensor);
        const std::string member = name + ".npy";
        if (offset + npy.size() + member.size() + 30 > std::numeric_limits<uint32_t>::max() || member.size() > 0xffff)
            throw Error(path.string() + ": the arrays exceed what an .npz without zip64 holds (4 GiB)");
        const auto crc = uint32_t(crc32(0L, reinterpret_cast<const Bytef*>(npy.data()), uInt(npy.size())));
        std::vector<unsigned char> header;
        put32(header, 0x04034b50);
        put16(header, 20); // version needed: 2.0
        put16(header, 0);  // flags
        put16(header, 0);  // stored
        put16(header, 0);  // time
        put16(header, kDosDate);
        put32(header, crc);
        put32(header, uint32_t(npy.size()));
        put32(header, uint32_t(npy.size()));
        put16(header, uint32_t(member.size()));
        put16(header, 0); // extra
        header.insert(header.end(), member.begin(), member.end());

        put32(directory, 0x02014b50);
        put16(directory, 20); // made by
        directory.insert(directory.end(), header.begin() + 4, header.begin() + 30);
        put16(directory, 0); // comment
        put16(directory, 0); // disk
        put16(directory, 0); // internal attributes
        put32(directory, 0); // external attributes
        put32(directory, uint32_t(offset));
        directory.insert(directory.end(), member.begin(), member.end());

        file.write(header.data(), header.size());
        file.write(npy.data(), npy.size());
        offset += header.size() + npy.size();
    }
    std::vector<unsigned char> end;
    put32(end, 0x06054b50);
    put16(end, 0);
    put16(end, 0);
    put16(end, uint32_t(arrays.size()));
    put16(end, uint32_t(arrays.size()));
    put32(end, uint32_t(directory.size()));
    put32(end, uint32_t(offset));
    put16(end, 0);
    file.write(directory.data(), directory.size());
    file.write(end.data(), end.size());
    file.commit();
}

} // namespace qs
