#include "core/atomic_file.h"

#include <cerrno>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

namespace qs {

AtomicFile::AtomicFile(std::filesystem::path target) : target_(std::move(target))
{
    const auto folder = target_.has_parent_path() ? target_.parent_path() : std::filesystem::path(".");
    std::string leaf = "."; // hidden, made unique by mkstemp's XXXXXX
    leaf += target_.filename().string();
    leaf += ".tmp-XXXXXX";
    temporary_ = (folder / leaf).string();
    fd_ = ::mkstemp(temporary_.data());
    if (fd_ < 0)
        fail(std::string("cannot create a temporary file in its folder: ") + std::strerror(errno));
}

AtomicFile::~AtomicFile()
{
    if (fd_ >= 0) {
        ::close(fd_);
        ::unlink(temporary_.c_str());
    }
}

void AtomicFile::fail(const std::string& what) const { throw Error(target_.string() + ": " + what); }

void AtomicFile::write(const void* data, size_t size)
{
    auto* p = static_cast<const char*>(data);
    while (size) {
        const ssize_t n = ::write(fd_, p, size);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            fail(std::string("write failed: ") + std::strerror(errno));
        p += n;
        size -= size_t(n);
    }
}

void AtomicFile::commit()
{
    // mkstemp creates 0600; a saved file is an ordinary, readable file.
    if (::fchmod(fd_, 0644) != 0 || ::fsync(fd_) != 0)
        fail(std::string("cannot finish the temporary file: ") + std::strerror(errno));
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0 || ::rename(temporary_.c_str(), target_.c_str()) != 0) {
        const int err = errno;
        ::unlink(temporary_.c_str());
        fail(std::string("cannot put the written file into place: ") + std::strerror(err));
    }
}

void writeFileAtomically(const std::filesystem::path& target, const void* data, size_t size)
{
    AtomicFile out(target);
    out.write(data, size);
    out.commit();
}

} // namespace qs
