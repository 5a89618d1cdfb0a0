#include "core/atomic_file.h"

#include <atomic>
#include <cctype>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <iterator>
#include <limits>
#include <mutex>
#include <optional>
#include <sstream>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

namespace qs {

namespace {

// ---- Named temporaries the signal handler removes ----------------------------
//
// A fixed table, so that the handler reads it without locks or allocation:
// state 0 is a free entry, 1 one being filled, 2 a name that exists on disk.
// `owner` keeps a forked child (which inherits the table) from removing its
// parent's files.

struct PendingName {
    std::atomic<int> state{0};
    pid_t owner = 0;
    int folder = -1;
    char leaf[NAME_MAX + 1] = {};
};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler reads the state without locks");

constexpr int kHandledSignals[] = {SIGTERM, SIGINT, SIGHUP};
PendingName gPending[64];
struct sigaction gPrevious[std::size(kHandledSignals)];

void removePendingNames(int signal, siginfo_t* info, void* context)
{
    const int savedErrno = errno;
    const pid_t self = ::getpid();
    for (PendingName& p : gPending)
        if (p.state.load(std::memory_order_acquire) == 2 && p.owner == self)
            ::unlinkat(p.folder, p.leaf, 0);
    size_t i = 0;
    while (i + 1 < std::size(kHandledSignals) && kHandledSignals[i] != signal)
        ++i;
    const struct sigaction& previous = gPrevious[i];
    if ((previous.sa_flags & SA_SIGINFO) && previous.sa_sigaction) {
        previous.sa_sigaction(signal, info, context);
    } else if (!(previous.sa_flags & SA_SIGINFO) && previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
        previous.sa_handler(signal);
    } else {
        // Die of the signal as if no handler had been there (the parent sees WTERMSIG).
        struct sigaction defaultAction {};
        defaultAction.sa_handler = SIG_DFL;
        sigemptyset(&defaultAction.sa_mask);
        ::sigaction(signal, &defaultAction, nullptr);
        sigset_t only;
        sigemptyset(&only);
        sigaddset(&only, signal);
        ::sigprocmask(SIG_UNBLOCK, &only, nullptr);
        ::raise(signal);
    }
    errno = savedErrno;
}

// Puts the handler in place for each signal unless it is there or the signal
// is ignored (nohup, a background job of a script: it stays ignored). Checked
// at every registration, so that a handler the application installed after
// ours is chained to rather than left to lose the temporaries.
void ensureSignalHandler()
{
    static std::mutex installing;
    const std::lock_guard lock(installing);
    for (size_t i = 0; i < std::size(kHandledSignals); ++i) {
        struct sigaction current {};
        if (::sigaction(kHandledSignals[i], nullptr, &current) != 0)
            continue;
        const bool siginfo = current.sa_flags & SA_SIGINFO;
        if ((siginfo && current.sa_sigaction == removePendingNames) || (!siginfo && current.sa_handler == SIG_IGN))
            continue;
        gPrevious[i] = current;
        struct sigaction ours {};
        ours.sa_sigaction = removePendingNames;
        ours.sa_flags = SA_SIGINFO | SA_RESTART;
        sigemptyset(&ours.sa_mask);
        ::sigaction(kHandledSignals[i], &ours, nullptr);
    }
}

// The entry's index, or -1 when the table is full.
int registerPending(int folder, const std::string& leaf)
{
    ensureSignalHandler();
    for (int i = 0; i < int(std::size(gPending)); ++i) {
        int expected = 0;
        if (gPending[i].state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
            PendingName& p = gPending[i];
            p.owner = ::getpid();
            p.folder = folder;
            std::memcpy(p.leaf, leaf.c_str(), leaf.size() + 1);
            p.state.store(2, std::memory_order_release);
            return i;
        }
    }
    return -1;
}

void unregisterPending(int& slot)
{
    if (slot >= 0)
        gPending[slot].state.store(0, std::memory_order_release);
    slot = -1;
}

// ---- Names of temporaries ----------------------------------------------------
//
// `.<target name>.qs-tmp-<host>-<pid>-<8 random letters/digits>`: hidden, and
// a later run can tell whether its writer still lives. The host has only
// letters, digits and `_`, so the name splits at its last two `-`.

constexpr std::string_view kMarker = ".qs-tmp-";

const std::string& hostLabel()
{
    static const std::string label = [] {
        char name[256] = {};
        if (::gethostname(name, sizeof name - 1) != 0 || !name[0])
            return std::string("host");
        std::string s;
        for (const char* c = name; *c && s.size() < 32; ++c)
            s += std::isalnum(static_cast<unsigned char>(*c)) ? *c : '_';
        return s;
    }();
    return label;
}

std::string randomLetters()
{
    static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    static std::atomic<uint64_t> counter{0};
    unsigned char bytes[8];
    if (::getrandom(bytes, sizeof bytes, GRND_NONBLOCK) != ssize_t(sizeof bytes)) {
        uint64_t x = uint64_t(std::time(nullptr)) * 0x9E3779B97F4A7C15ull ^ ++counter ^ uint64_t(::getpid()) << 32;
        std::memcpy(bytes, &x, sizeof bytes);
    }
    std::string s;
    for (const unsigned char b : bytes)
        s += kAlphabet[b % (sizeof kAlphabet - 1)];
    return s;
}

std::string temporaryName(const std::string& leaf)
{
    // Short enough for NAME_MAX whatever the target's name; cut at a UTF-8 character boundary.
    size_t keep = std::min<size_t>(leaf.size(), 160);
    while (keep > 0 && keep < leaf.size() && (static_cast<unsigned char>(leaf[keep]) & 0xC0) == 0x80)
        --keep;
    return "." + leaf.substr(0, keep) + std::string(kMarker) + hostLabel() + "-" + std::to_string(::getpid()) + "-" +
           randomLetters();
}

struct TemporaryName {
    std::string host;
    pid_t pid = 0;
};

std::optional<TemporaryName> parseTemporaryName(std::string_view name)
{
    const size_t marker = name.rfind(kMarker);
    if (name.empty() || name[0] != '.' || marker == std::string_view::npos || marker < 2)
        return std::nullopt;
    const std::string_view rest = name.substr(marker + kMarker.size());
    const size_t last = rest.rfind('-');
    if (last == std::string_view::npos || rest.size() - last - 1 != 8)
        return std::nullopt;
    const size_t second = rest.rfind('-', last - 1);
    if (second == std::string_view::npos || second == 0 || last - second - 1 == 0 || last - second - 1 > 9)
        return std::nullopt;
    TemporaryName t;
    t.host = std::string(rest.substr(0, second));
    for (const char c : rest.substr(second + 1, last - second - 1)) {
        if (c < '0' || c > '9')
            return std::nullopt;
        t.pid = t.pid * 10 + (c - '0');
    }
    return t;
}

// When process `pid` started (seconds since the epoch), from /proc.
std::optional<time_t> processStart(pid_t pid)
{
    static const std::optional<long> bootTime = []() -> std::optional<long> {
        std::ifstream stat("/proc/stat");
        for (std::string key; stat >> key;) {
            long value = 0;
            if (key == "btime" && stat >> value)
                return value;
            stat.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
        }
        return std::nullopt;
    }();
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!bootTime || !std::getline(in, line))
        return std::nullopt;
    const size_t close = line.rfind(')'); // the command name may hold spaces and parentheses
    if (close == std::string::npos)
        return std::nullopt;
    std::istringstream fields(line.substr(close + 1));
    std::string field;
    for (int i = 3; i <= 22 && fields >> field; ++i)
        if (i == 22) // starttime, in clock ticks after boot
            return time_t(*bootTime + std::strtoll(field.c_str(), nullptr, 10) / ::sysconf(_SC_CLK_TCK));
    return std::nullopt;
}

bool writerIsGone(const TemporaryName& t, const struct stat& file)
{
    if (t.host != hostLabel() || t.pid <= 0)
        return false; // another machine's file in a shared folder: its pid means nothing here
    if (::kill(t.pid, 0) != 0 && errno == ESRCH)
        return true;
    // The pid runs, but a process that started after the file's last change cannot be its writer.
    const std::optional<time_t> start = processStart(t.pid);
    return start && *start > file.st_mtime + 2;
}

size_t removeStaleIn(int folder)
{
    const int listing = ::dup(folder);
    DIR* dir = listing >= 0 ? ::fdopendir(listing) : nullptr;
    if (!dir) {
        if (listing >= 0)
            ::close(listing);
        return 0;
    }
    ::rewinddir(dir);
    size_t removed = 0;
    while (const dirent* entry = ::readdir(dir)) {
        const std::optional<TemporaryName> name = parseTemporaryName(entry->d_name);
        struct stat st;
        if (name && ::fstatat(folder, entry->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
            writerIsGone(*name, st) && ::unlinkat(folder, entry->d_name, 0) == 0)
            ++removed;
    }
    ::closedir(dir);
    return removed;
}

// The file a path leads to through symbolic links (the path itself if it is none or does not exist).
std::filesystem::path followLinks(const std::filesystem::path& target)
{
    std::filesystem::path p = target;
    for (int hops = 0;; ++hops) {
        struct stat st;
        if (::lstat(p.c_str(), &st) != 0) {
            if (errno == ENOENT)
                return p;
            throw Error(target.string() + ": cannot read the existing file: " + std::strerror(errno));
        }
        if (!S_ISLNK(st.st_mode))
            return p;
        if (hops == 40)
            throw Error(target.string() + ": too many levels of symbolic links");
        std::error_code error;
        const std::filesystem::path next = std::filesystem::read_symlink(p, error);
        if (error)
            throw Error(target.string() + ": cannot read the symbolic link " + p.string() + ": " + error.message());
        p = next.is_absolute() ? next : p.parent_path() / next;
    }
}

} // namespace

AtomicFile::AtomicFile(std::filesystem::path target, Temporary kind) : target_(std::move(target))
{
    destination_ = followLinks(target_);
    leaf_ = destination_.filename().string();
    if (leaf_.empty() || leaf_ == "." || leaf_ == "..")
        fail("names a folder, not a file", 0);
    const std::filesystem::path folder = destination_.has_parent_path() ? destination_.parent_path() : ".";
    folder_ = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (folder_ < 0)
        fail("cannot create a temporary file in its folder", errno);
    struct stat st;
    if (::fstatat(folder_, leaf_.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (!S_ISREG(st.st_mode)) {
            ::close(folder_);
            fail("exists and is not a regular file (a folder, device or pipe); it is not replaced", 0);
        }
        replaces_ = true;
        mode_ = st.st_mode & 07777;
        owner_ = st.st_uid;
        group_ = st.st_gid;
    }
    removeStaleIn(folder_);
    try {
        if (kind == Temporary::Unnamed)
            createUnnamed();
        else
            createNamed();
    } catch (...) {
        discard();
        ::close(folder_);
        throw;
    }
}

AtomicFile::~AtomicFile()
{
    discard();
    if (folder_ >= 0)
        ::close(folder_);
}

void AtomicFile::fail(const std::string& what, int error) const
{
    throw Error(target_.string() + ": " + what + (error ? std::string(": ") + std::strerror(error) : std::string()));
}

void AtomicFile::createUnnamed()
{
    // commit() names the file through /proc/self/fd (linkat with AT_EMPTY_PATH needs a privilege).
    if (::access("/proc/self/fd", X_OK) == 0) {
        fd_ = ::openat(folder_, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
        if (fd_ < 0 && errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
            fail("cannot create a temporary file in its folder", errno);
    }
    // A file system without O_TMPFILE (some network and FUSE file systems) or
    // no /proc: a named temporary, which only a SIGKILL can leave behind.
    if (fd_ < 0)
        return createNamed();
    struct stat st;
    if (::fstat(fd_, &st) != 0 || ::fchmod(fd_, 0600) != 0)
        fail("cannot create a temporary file in its folder", errno);
    if (!replaces_)
        mode_ = st.st_mode & 07777; // 0666 less the umask: what a new file of the user gets
}

void AtomicFile::createNamed()
{
    for (int attempt = 0; fd_ < 0; ++attempt) {
        temporary_ = temporaryName(leaf_);
        pendingSlot_ = registerPending(folder_, temporary_);
        if (pendingSlot_ < 0)
            fail("cannot create a temporary file in its folder: 64 files are being written at once", 0);
        fd_ = ::openat(folder_, temporary_.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd_ < 0) {
            const int error = errno;
            unregisterPending(pendingSlot_);
            temporary_.clear();
            if (error != EEXIST || attempt == 20)
                fail("cannot create a temporary file in its folder", error);
        }
    }
    struct stat st;
    // Private while it is written; commit() gives it its final mode.
    if (::fstat(fd_, &st) != 0 || ::fchmod(fd_, 0600) != 0)
        fail("cannot create a temporary file in its folder", errno);
    if (!replaces_)
        mode_ = st.st_mode & 07777;
}

std::string AtomicFile::temporaryPath() const
{
    if (temporary_.empty())
        return {};
    const std::filesystem::path folder = destination_.has_parent_path() ? destination_.parent_path() : ".";
    return (folder / temporary_).string();
}

void AtomicFile::write(const void* data, size_t size)
{
    if (fd_ < 0)
        fail("write after the file was committed or abandoned", 0);
    auto* p = static_cast<const char*>(data);
    while (size) {
        const ssize_t n = ::write(fd_, p, size);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            const int error = n < 0 ? errno : ENOSPC;
            discard();
            fail("write failed", error);
        }
        p += n;
        size -= size_t(n);
    }
}

void AtomicFile::finishMetadata(int fd) const
{
    mode_t mode = mode_;
    struct stat now;
    if (replaces_ && ::fstat(fd, &now) == 0 && (now.st_uid != owner_ || now.st_gid != group_)) {
        // Only a privileged user may give a file away; a user in the group may still keep the group.
        if (::fchown(fd, owner_, group_) != 0) {
            mode &= ~mode_t(S_ISUID | S_ISGID); // not for a file of another owner
            if (::fchown(fd, uid_t(-1), group_) != 0)
                mode &= ~mode_t(S_ISGID);
        }
    }
    if (::fchmod(fd, mode) != 0 || ::fsync(fd) != 0)
        fail("cannot finish the temporary file", errno);
}

void AtomicFile::linkIntoFolder()
{
    const std::string self = "/proc/self/fd/" + std::to_string(fd_);
    for (int attempt = 0; temporary_.empty(); ++attempt) {
        std::string name = temporaryName(leaf_);
        pendingSlot_ = registerPending(folder_, name);
        if (pendingSlot_ < 0)
            fail("cannot put the written file into place: 64 files are being written at once", 0);
        if (::linkat(AT_FDCWD, self.c_str(), folder_, name.c_str(), AT_SYMLINK_FOLLOW) == 0) {
            temporary_ = std::move(name);
        } else {
            const int error = errno;
            unregisterPending(pendingSlot_);
            if (error != EEXIST || attempt == 20)
                fail("cannot put the written file into place", error);
        }
    }
}

void AtomicFile::commit()
{
    if (fd_ < 0)
        fail("commit after the file was committed or abandoned", 0);
    try {
        if (temporary_.empty()) {
            finishMetadata(fd_);
            linkIntoFolder();
        } else {
            // The writer may have written through a descriptor of its own (libhdf5): finish the file by its name.
            const int named = ::openat(folder_, temporary_.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
            if (named < 0)
                fail("cannot finish the temporary file", errno);
            try {
                finishMetadata(named);
            } catch (...) {
                ::close(named);
                throw;
            }
            ::close(named);
        }
        if (::close(fd_) != 0) {
            fd_ = -1;
            fail("cannot finish the temporary file", errno);
        }
        fd_ = -1;
        if (::renameat(folder_, temporary_.c_str(), folder_, leaf_.c_str()) != 0)
            fail("cannot put the written file into place", errno);
    } catch (...) {
        discard();
        throw;
    }
    unregisterPending(pendingSlot_);
    temporary_.clear();
    ::fsync(folder_); // the rename itself reaches the disk (best effort: the file is in place either way)
}

void AtomicFile::discard()
{
    if (fd_ >= 0)
        ::close(fd_);
    fd_ = -1;
    if (!temporary_.empty() && folder_ >= 0)
        ::unlinkat(folder_, temporary_.c_str(), 0);
    temporary_.clear();
    unregisterPending(pendingSlot_);
}

void writeFileAtomically(const std::filesystem::path& target, const void* data, size_t size)
{
    AtomicFile out(target);
    out.write(data, size);
    out.commit();
}

size_t removeStaleTemporaries(const std::filesystem::path& folder)
{
    const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    const size_t removed = removeStaleIn(fd);
    ::close(fd);
    return removed;
}

} // namespace qs
