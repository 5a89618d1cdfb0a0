#pragma once
// A whole file mapped read-only into memory. Tensors borrow from it by holding
// the shared_ptr as their storage owner, so the mapping lives as long as any
// tensor that points into it.
//
// A mapping reflects the file on disk: if another process truncates the file
// while it is mapped, touching the lost pages raises SIGBUS. Loaders map files
// the user opened and never write them, which is the usual contract of mmap.

#include <cstddef>
#include <filesystem>
#include <memory>
#include <span>

namespace qs {

class MappedFile {
public:
    // Maps `path` (a regular file). A missing file, a folder, a device or an
    // unreadable file is an Error naming the file. An empty file has size 0 and
    // no mapping.
    static std::shared_ptr<const MappedFile> open(const std::filesystem::path& path);

    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const std::filesystem::path& path() const { return path_; }
    const std::byte* data() const { return data_; }
    size_t size() const { return size_; }
    std::span<const std::byte> bytes() const { return {data_, size_}; }

private:
    MappedFile(std::filesystem::path path, const std::byte* data, size_t size)
        : path_(std::move(path)), data_(data), size_(size)
    {
    }

    std::filesystem::path path_;
    const std::byte* data_ = nullptr;
    size_t size_ = 0;
};

} // namespace qs
