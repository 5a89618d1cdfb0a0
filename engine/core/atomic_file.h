#pragma once
// Writing a file so that nothing is lost and nothing is left behind.
//
// The bytes go to a temporary file in the target's folder (same file system,
// so the final rename is atomic), which commit() syncs and renames over the
// target; the target is never left half-written, and a file abandoned by an
// error or destroyed without commit() is removed.
//
// - The temporary has no name at all where the file system allows it
//   (O_TMPFILE): a process killed even by SIGKILL leaves nothing visible.
//   commit() links it to a hidden name for an instant, then renames that over
//   the target.
// - Named temporaries (the fallback, and writers that open files by name such
//   as libhdf5) are hidden files `.<target name>.qs-tmp-<host>-<pid>-<random>`.
//   SIGTERM, SIGINT and SIGHUP remove them before the process dies (a handler
//   put in place whenever a temporary is named, calling the handler it
//   replaced; a signal that is ignored stays ignored). Those left by a SIGKILL are removed by the
//   next AtomicFile in the same folder once their writer is gone (see
//   removeStaleTemporaries).
// - An overwritten target keeps its permission bits and, where the user may
//   set them, its owner and group; a new file gets 0666 minus the umask (and
//   the folder's default ACL) like any file the user creates.
// - A target that is a symbolic link is followed: the file the link leads to
//   is replaced (a temporary next to it, renamed over it) and the link stays.
//   A target that exists but is not a regular file (a folder, device, pipe) is
//   refused.
//
// Errors are qs::Error "<target>: <what went wrong>".

#include <cstddef>
#include <filesystem>
#include <string>
#include <sys/types.h>

namespace qs {

class AtomicFile {
public:
    enum class Temporary {
        Unnamed, // invisible until commit(); a Named one where the file system refuses O_TMPFILE
        Named,   // a hidden file from the start, for writers that need a path (temporaryPath())
    };

    explicit AtomicFile(std::filesystem::path target, Temporary kind = Temporary::Unnamed);
    ~AtomicFile();
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;

    void write(const void* data, size_t size);
    // Gives the file its final mode (and owner), syncs it and renames it into
    // place. A Named temporary's writer must have closed it by then.
    void commit();

    // The path given.
    const std::filesystem::path& target() const { return target_; }
    // The file commit() replaces: target() or, if that is a symbolic link, the file it leads to.
    const std::filesystem::path& destination() const { return destination_; }
    // The temporary's path; empty while it has no name (an Unnamed temporary before commit()).
    std::string temporaryPath() const;

private:
    [[noreturn]] void fail(const std::string& what, int error) const;
    void createUnnamed();
    void createNamed();
    void finishMetadata(int fd) const;
    void linkIntoFolder();
    void discard();

    std::filesystem::path target_;
    std::filesystem::path destination_;
    std::string leaf_;      // destination_'s file name
    std::string temporary_; // the temporary's file name in the folder (empty while unnamed)
    int folder_ = -1;       // the destination's folder
    int fd_ = -1;           // the temporary
    int pendingSlot_ = -1;  // its entry in the list the signal handler removes, or -1
    bool replaces_ = false; // the destination exists: keep its mode and owner
    mode_t mode_ = 0;       // the mode the file gets at commit()
    uid_t owner_ = 0;
    gid_t group_ = 0;
};

// Convenience for small outputs held in memory.
void writeFileAtomically(const std::filesystem::path& target, const void* data, size_t size);

// Removes the named temporaries in `folder` whose writer is gone: written on
// this host by a process that no longer runs (or a newer process has its pid).
// Temporaries of other hosts (a shared network folder) and of live writers are
// kept. Every AtomicFile does this for its folder; returns how many it removed.
size_t removeStaleTemporaries(const std::filesystem::path& folder);

} // namespace qs
