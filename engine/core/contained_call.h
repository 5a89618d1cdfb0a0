#pragma once
// Running code we cannot trust with the process: a third-party parser (libhdf5,
// libonnx's shape inference) fed a hostile file can crash, allocate without end
// or loop. ContainedCall runs such a piece of work in a forked child process
// and lets only its answer back, as bytes over a socket.
//
// Bounds on the child:
// - memory: at most `memoryBudget` bytes beyond what the process had mapped at
//   fork(). Enforced twice: an address-space limit (RLIMIT_AS) in the child, so
//   an allocation past it fails inside the library, and the parent watching the
//   child's resident size (/proc/PID/statm) and killing it past the same bound.
//   Under AddressSanitizer only the watch applies (RLIMIT_AS would break the
//   sanitizer's shadow memory reservations).
// - time: the child is killed when it sends nothing for `stallTimeout`.
// - signals: a child that dies of a signal (SIGSEGV in the library) is
//   reported as crashed; it never takes the caller with it.
// - lifetime: the child is killed (SIGKILL) when the thread that forked it
//   ends, so a caller that crashes or is killed leaves no library running in
//   an orphan (PR_SET_PDEATHSIG; run() waits for the child on that thread).
// The child's stdout and stderr go to /dev/null (a library's messages never
// reach the user), it writes no core file, and it ends with _exit: nothing the
// parent registered with atexit runs twice. There is no in-process fallback:
// when fork() fails the call fails.
//
// The work runs on a copy of the caller's memory, so it may read anything the
// caller had (a parsed protobuf, a path) without sending it. It must not
// depend on locks another thread of the parent might have held at fork():
// hold the lock of the library it uses around run().

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace qs {

// Bytes a contained call may allocate by default: 1 GiB.
inline constexpr uint64_t kContainedMemoryBudget = uint64_t(1) << 30;

struct ContainmentLimits {
    uint64_t memoryBudget = kContainedMemoryBudget; // bytes beyond the size at fork(); default 1 GiB
    std::chrono::milliseconds stallTimeout{60'000}; // killed after this long without sending; default 60 s
};

// The child's end of the channel: what the work sends back.
class ContainedChannel {
public:
    explicit ContainedChannel(int fd) : fd_(fd) {}
    // Sends the next piece of the answer; blocks while the parent is behind.
    void send(std::string_view bytes);

private:
    friend class ContainedCall;
    void sendFrame(char kind, std::string_view bytes);
    int fd_;
};

// How a contained call ended.
struct ContainedOutcome {
    enum class Status {
        Answered,    // the work returned; every piece it sent was received
        Crashed,     // killed by a signal it raised (detail: the signal)
        OutOfMemory, // past its memory budget (detail: what failed, if known)
        TimedOut,    // sent nothing for the stall timeout and was killed
        NoAnswer,    // ended without finishing its answer (detail: exit status or exception)
        CannotStart, // fork() or socketpair() failed (detail: the system's reason)
    };
    Status status = Status::Answered;
    std::string detail;
    uint64_t memoryBudget = 0; // the budget in force, for the message

    bool answered() const { return status == Status::Answered; }
    // What happened in words, e.g. "crashed (signal 11, Segmentation fault)" or
    // "needed more than its memory budget of 1024 MiB".
    std::string reason() const;
};

class ContainedCall {
public:
    using Work = std::function<void(ContainedChannel&)>;
    // Gets the bytes of each send() in order, possibly in several pieces;
    // `ends` is true for the last piece of a send().
    using Receiver = std::function<void(std::string_view piece, bool ends)>;

    // Runs `work` in a child; every piece it sends is passed to `receive` in
    // order, in the calling thread. A qs::Error thrown by the work is thrown
    // again here with the same message (the work's own clean refusal); an
    // exception thrown by `receive` kills the child and propagates. Every
    // other way the child ends is returned as the outcome, for the caller to
    // word with the file and object it was working on.
    static ContainedOutcome run(const Work& work, const Receiver& receive, const ContainmentLimits& limits = {});

private:
    // The child's whole life: its bounds, the work, the closing frame, _exit.
    [[noreturn]] static void runChild(int fd, const Work& work, uint64_t addressLimit);
};

} // namespace qs
