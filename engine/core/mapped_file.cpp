#include "core/mapped_file.h"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

namespace qs {
namespace {

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& what)
{
    throw Error(path.string() + ": " + what);
}

// Closes the descriptor on every path out of open(); the mapping does not need it.
struct Descriptor {
    int fd;
    ~Descriptor()
    {
        if (fd >= 0)
            ::close(fd);
    }
};

} // namespace

std::shared_ptr<const MappedFile> MappedFile::open(const std::filesystem::path& path)
{
    Descriptor file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
    if (file.fd < 0) {
        const int err = errno;
        fail(path, err == ENOENT ? std::string("no such file") : std::string("cannot open: ") + std::strerror(err));
    }
    struct stat st {};
    if (::fstat(file.fd, &st) != 0)
        fail(path, std::string("cannot read its size: ") + std::strerror(errno));
    if (S_ISDIR(st.st_mode))
        fail(path, "is a folder, not a file");
    if (!S_ISREG(st.st_mode))
        fail(path, "is not a regular file (a device, pipe or socket cannot be mapped)");
    if (st.st_size < 0 || uint64_t(st.st_size) > uint64_t(SIZE_MAX))
        fail(path, "its size (" + std::to_string(st.st_size) + " bytes) does not fit in memory");
    const size_t size = size_t(st.st_size);
    if (size == 0) // mmap of length 0 is an error; an empty file is simply empty
        return std::shared_ptr<const MappedFile>(new MappedFile(path, nullptr, 0));
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, file.fd, 0);
    if (p == MAP_FAILED)
        fail(path, std::string("cannot map into memory: ") + std::strerror(errno));
    return std::shared_ptr<const MappedFile>(new MappedFile(path, static_cast<const std::byte*>(p), size));
}

MappedFile::~MappedFile()
{
    if (data_)
        ::munmap(const_cast<std::byte*>(data_), size_);
}

void releaseResidentPages(const void* data, size_t size)
{
#ifndef MADV_PAGEOUT
    constexpr int MADV_PAGEOUT = 21; // Linux 5.4's value; older kernels answer EINVAL, which is ignored
#endif
    const long page = sysconf(_SC_PAGESIZE);
    if (page <= 0 || !data || size == 0)
        return;
    const auto begin = (reinterpret_cast<uintptr_t>(data) + uintptr_t(page) - 1) / uintptr_t(page) * uintptr_t(page);
    const auto end = (reinterpret_cast<uintptr_t>(data) + size) / uintptr_t(page) * uintptr_t(page);
    if (end > begin)
        (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_PAGEOUT);
}

void releaseResidentPages(const Tensor& t)
{
    releaseResidentPages(t.rawData(), size_t(t.numel()) * dtypeSize(t.dtype()));
}

} // namespace qs
