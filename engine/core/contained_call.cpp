#include "core/contained_call.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <new>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/error.h"

#if defined(__SANITIZE_ADDRESS__)
#define QS_CONTAINED_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define QS_CONTAINED_UNDER_ASAN 1
#endif
#endif

#ifdef QS_CONTAINED_UNDER_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

namespace qs {

namespace {

// A frame is one kind byte, an 8-byte little-endian length, then the payload.
constexpr char kData = 'D';
constexpr char kDone = 'Z';
constexpr char kError = 'E';       // a qs::Error thrown by the work: its message
constexpr char kOutOfMemory = 'M'; // the work failed at its memory limit: what failed
constexpr char kFailed = 'F';      // another exception: its what()
constexpr size_t kHeaderBytes = 9;
constexpr size_t kMaxMessageBytes = 64 << 10;
constexpr auto kPollInterval = std::chrono::milliseconds(10);

struct ProcessSize {
    uint64_t virtualBytes = 0;
    uint64_t residentBytes = 0;
};

// The first two fields of /proc/PID/statm (pages); zero when unreadable.
ProcessSize processSize(const std::string& pid)
{
    ProcessSize size;
    std::ifstream statm("/proc/" + pid + "/statm");
    uint64_t virtualPages = 0, residentPages = 0;
    if (statm >> virtualPages >> residentPages) {
        const uint64_t page = uint64_t(::sysconf(_SC_PAGESIZE));
        size.virtualBytes = virtualPages * page;
        size.residentBytes = residentPages * page;
    }
    return size;
}

// The largest address space the process had (VmPeak of /proc/self/status).
uint64_t peakVirtualBytes()
{
    std::ifstream status("/proc/self/status");
    std::string key;
    uint64_t kib = 0;
    while (status >> key) {
        if (key == "VmPeak:" && status >> kib)
            return kib << 10;
        status.ignore(1 << 16, '\n');
    }
    return 0;
}

std::string mebibytes(uint64_t bytes)
{
    return std::to_string(bytes >> 20) + " MiB";
}

// Kills and reaps the child unless it was reaped normally.
class ChildGuard {
public:
    ChildGuard(pid_t pid, int fd) : pid_(pid), fd_(fd) {}
    ~ChildGuard()
    {
        if (fd_ >= 0)
            ::close(fd_);
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            reap();
        }
    }
    ChildGuard(const ChildGuard&) = delete;
    ChildGuard& operator=(const ChildGuard&) = delete;

    int fd() const { return fd_; }
    pid_t pid() const { return pid_; }
    // Waits for the child to end; its wait status.
    int reap()
    {
        int status = 0;
        while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
        }
        pid_ = -1;
        return status;
    }

private:
    pid_t pid_;
    int fd_;
};

// Splits the byte stream into frames; data goes to the receiver as it comes.
class FrameReader {
public:
    explicit FrameReader(const ContainedCall::Receiver& receive) : receive_(receive) {}

    void feed(std::string_view bytes)
    {
        while (!bytes.empty()) {
            if (header_.size() < kHeaderBytes) {
                const size_t take = std::min(kHeaderBytes - header_.size(), bytes.size());
                header_.append(bytes.substr(0, take));
                bytes.remove_prefix(take);
                if (header_.size() == kHeaderBytes) {
                    remaining_ = 0;
                    for (int i = 8; i >= 1; --i)
                        remaining_ = (remaining_ << 8) | uint8_t(header_[size_t(i)]);
                    if (remaining_ == 0) {
                        if (header_[0] == kData)
                            receive_({}, true);
                        finishFrame();
                    }
                }
                continue;
            }
            const size_t take = size_t(std::min<uint64_t>(remaining_, bytes.size()));
            const std::string_view piece = bytes.substr(0, take);
            if (header_[0] == kData)
                receive_(piece, take == remaining_);
            else if (message.size() < kMaxMessageBytes)
                message.append(piece.substr(0, kMaxMessageBytes - message.size()));
            bytes.remove_prefix(take);
            remaining_ -= take;
            if (remaining_ == 0)
                finishFrame();
        }
    }

    char lastKind = 0;   // the kind of the last frame other than data
    std::string message; // its payload

private:
    void finishFrame()
    {
        if (header_[0] != kData)
            lastKind = header_[0];
        header_.clear();
    }

    const ContainedCall::Receiver& receive_;
    std::string header_;
    uint64_t remaining_ = 0;
};

} // namespace

void ContainedChannel::send(std::string_view bytes)
{
    sendFrame(kData, bytes);
}

void ContainedChannel::sendFrame(char kind, std::string_view bytes)
{
    char header[kHeaderBytes];
    header[0] = kind;
    uint64_t length = bytes.size();
    for (size_t i = 1; i < kHeaderBytes; ++i, length >>= 8)
        header[i] = char(length & 0xff);
    for (std::string_view part : {std::string_view(header, kHeaderBytes), bytes}) {
        while (!part.empty()) {
            const ssize_t n = ::send(fd_, part.data(), part.size(), MSG_NOSIGNAL);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                ::_exit(1); // the parent is gone or stopped listening
            part.remove_prefix(size_t(n));
        }
    }
}

std::string ContainedOutcome::reason() const
{
    switch (status) {
    case Status::Answered:
        return "finished";
    case Status::Crashed:
        return "crashed (" + detail + ")";
    case Status::OutOfMemory:
        return "needed more than its memory budget of " + mebibytes(memoryBudget) +
               (detail.empty() ? std::string() : " (" + detail + ")");
    case Status::TimedOut:
        return "made no progress for " + detail + " and was stopped";
    case Status::NoAnswer:
        return "ended without an answer (" + detail + ")";
    case Status::CannotStart:
        return "could not be started in a separate process (" + detail + ")";
    }
    return detail;
}

void ContainedCall::runChild(int fd, const Work& work, uint64_t addressLimit)
{
    // A crash must end the child by its signal, not in a handler the parent
    // installed (a sanitizer's or a fuzzer's, which would report it as theirs).
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS, SIGPIPE})
        std::signal(sig, SIG_DFL);
#ifdef QS_CONTAINED_UNDER_ASAN
    // A sanitizer report in the child ends the child; libFuzzer's death
    // callback would also save the input as the parent's crash.
    __sanitizer_set_death_callback(nullptr);
#endif
    const rlimit noCore{0, 0};
    ::setrlimit(RLIMIT_CORE, &noCore);
    if (const int null = ::open("/dev/null", O_WRONLY); null >= 0) {
        ::dup2(null, STDOUT_FILENO);
        ::dup2(null, STDERR_FILENO);
        ::close(null);
    }
#ifndef QS_CONTAINED_UNDER_ASAN
    rlimit space{};
    if (::getrlimit(RLIMIT_AS, &space) == 0) {
        // Never looser than a limit the process already had.
        if (space.rlim_cur == RLIM_INFINITY || space.rlim_cur > addressLimit)
            space.rlim_cur = addressLimit;
        ::setrlimit(RLIMIT_AS, &space);
    }
#endif
    ContainedChannel channel(fd);
    // A clean refusal the library gave because an allocation failed at the
    // limit is a memory failure, whatever words the library chose.
    auto nearLimit = [&] {
#ifdef QS_CONTAINED_UNDER_ASAN
        return false;
#else
        try {
            return peakVirtualBytes() + (64u << 20) >= addressLimit;
        } catch (const std::bad_alloc&) {
            return true; // even reading /proc failed to allocate
        }
#endif
    };
    try {
        work(channel);
        channel.sendFrame(kDone, {});
    } catch (const Error& e) {
        channel.sendFrame(nearLimit() ? kOutOfMemory : kError, e.what());
    } catch (const std::bad_alloc&) {
        channel.sendFrame(kOutOfMemory, "an allocation failed");
    } catch (const std::exception& e) {
        channel.sendFrame(nearLimit() ? kOutOfMemory : kFailed, e.what());
    } catch (...) {
        channel.sendFrame(kFailed, "an exception of unknown type");
    }
    ::_exit(0);
}

ContainedOutcome ContainedCall::run(const Work& work, const Receiver& receive, const ContainmentLimits& limits)
{
    ContainedOutcome outcome;
    outcome.memoryBudget = limits.memoryBudget;
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) < 0) {
        outcome.status = ContainedOutcome::Status::CannotStart;
        outcome.detail = std::strerror(errno);
        return outcome;
    }
    const ProcessSize atFork = processSize("self");
    std::fflush(nullptr);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) {
        outcome.status = ContainedOutcome::Status::CannotStart;
        outcome.detail = std::strerror(errno);
        ::close(fds[0]);
        ::close(fds[1]);
        return outcome;
    }
    if (pid == 0) {
        // The child dies with the thread that forked it (which waits for it):
        // a parent that crashes or is killed must not leave a library spinning
        // in an orphan. The parent may have died before the call took effect.
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent)
            ::_exit(1);
        ::close(fds[0]);
        runChild(fds[1], work, atFork.virtualBytes + limits.memoryBudget);
    }
    ::close(fds[1]);
    ChildGuard child(pid, fds[0]);
    const std::string pidText = std::to_string(pid);
    const uint64_t residentLimit = atFork.residentBytes + limits.memoryBudget;
    FrameReader frames(receive);
    enum class Killed { No, ForMemory, ForTime } killed = Killed::No;
    auto lastProgress = std::chrono::steady_clock::now();
    std::string buffer(1 << 16, '\0');
    while (killed == Killed::No) {
        pollfd p{child.fd(), POLLIN, 0};
        const int ready = ::poll(&p, 1, int(kPollInterval.count()));
        if (ready > 0) {
            const ssize_t n = ::read(child.fd(), buffer.data(), buffer.size());
            if (n == 0)
                break; // the child closed its end: it has ended
            if (n < 0 && errno != EINTR && errno != EAGAIN)
                break;
            if (n > 0) {
                frames.feed(std::string_view(buffer.data(), size_t(n)));
                lastProgress = std::chrono::steady_clock::now();
            }
        } else if (ready < 0 && errno != EINTR) {
            break;
        }
        if (processSize(pidText).residentBytes > residentLimit) {
            ::kill(pid, SIGKILL);
            killed = Killed::ForMemory;
        } else if (std::chrono::steady_clock::now() - lastProgress > limits.stallTimeout) {
            ::kill(pid, SIGKILL);
            killed = Killed::ForTime;
        }
    }
    const int status = child.reap();

    using Status = ContainedOutcome::Status;
    if (killed == Killed::ForMemory) {
        outcome.status = Status::OutOfMemory;
    } else if (killed == Killed::ForTime) {
        outcome.status = Status::TimedOut;
        outcome.detail = std::to_string(limits.stallTimeout.count() / 1000) + " s";
    } else if (WIFSIGNALED(status)) {
        outcome.status = Status::Crashed;
        const char* name = ::strsignal(WTERMSIG(status));
        outcome.detail = "signal " + std::to_string(WTERMSIG(status)) + (name ? std::string(", ") + name : "");
    } else if (frames.lastKind == kDone) {
        outcome.status = Status::Answered;
    } else if (frames.lastKind == kError) {
        throw Error(frames.message);
    } else if (frames.lastKind == kOutOfMemory) {
        outcome.status = Status::OutOfMemory;
        outcome.detail = frames.message;
    } else if (frames.lastKind == kFailed) {
        outcome.status = Status::NoAnswer;
        outcome.detail = frames.message;
    } else {
        outcome.status = Status::NoAnswer;
        outcome.detail = "exit status " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
    return outcome;
}

} // namespace qs
