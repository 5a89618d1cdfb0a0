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

#include "core/tensor.h"

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

// Tells the kernel that the whole pages inside [data, data + size) are not
// needed for now (madvise MADV_PAGEOUT): pages of a file mapping leave the
// process's resident set and are read again from the page cache or the file
// when next touched; anonymous pages go to swap where there is one, else
// stay. Nothing is lost either way. For passes that read a large mapped
// checkpoint once, tensor by tensor (weight-only quantization, exports), so
// the resident set does not grow to the whole file. A kernel without
// MADV_PAGEOUT (before Linux 5.4) ignores it.
void releaseResidentPages(const void* data, size_t size);
// The same for a tensor's storage.
void releaseResidentPages(const Tensor& t);

} // namespace qs
