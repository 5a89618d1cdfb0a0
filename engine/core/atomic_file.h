#pragma once
// Writing a file so that nothing is lost: the bytes go to a hidden temporary
// file in the target's folder (same file system, so the final rename is
// atomic), which commit() syncs and renames over the target. A file abandoned
// by an error or destroyed without commit() is removed; the target is never
// left half-written. Errors are qs::Error "<target>: <what went wrong>".

#include <cstddef>
#include <filesystem>
#include <string>

namespace qs {

class AtomicFile {
public:
    explicit AtomicFile(std::filesystem::path target);
    ~AtomicFile();
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;

    void write(const void* data, size_t size);
    // Makes the file readable like any saved file (0644), syncs it and renames it into place.
    void commit();

    const std::filesystem::path& target() const { return target_; }

private:
    [[noreturn]] void fail(const std::string& what) const;

    std::filesystem::path target_;
    std::string temporary_;
    int fd_ = -1;
};

// Convenience for small outputs held in memory.
void writeFileAtomically(const std::filesystem::path& target, const void* data, size_t size);

} // namespace qs
