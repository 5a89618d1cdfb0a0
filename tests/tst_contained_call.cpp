// ContainedCall: a child's answer arrives whole and in order; a clean refusal
// comes back as the same Error; a crash, a runaway allocation and a stall end
// the child, not the caller, each reported as what it was; the child prints
// nothing, and it dies with its caller.
#include <QtTest>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "core/contained_call.h"
#include "core/error.h"

using namespace qs;

namespace {

// Runs `work` contained, collecting what it sends.
ContainedOutcome runCollecting(const ContainedCall::Work& work, std::vector<std::string>& messages,
                               const ContainmentLimits& limits = {})
{
    std::string current;
    return ContainedCall::run(
        work,
        [&](std::string_view piece, bool ends) {
            current.append(piece);
            if (ends) {
                messages.push_back(current);
                current.clear();
            }
        },
        limits);
}

} // namespace

class TestContainedCall : public QObject {
    Q_OBJECT

private slots:
    void answersArriveWholeAndInOrder()
    {
        std::vector<std::string> messages;
        const std::string big(3 << 20, 'b'); // larger than a socket buffer
        const ContainedOutcome outcome = runCollecting(
            [&](ContainedChannel& channel) {
                channel.send("first");
                channel.send({});
                channel.send(big);
                channel.send("last");
            },
            messages);
        QVERIFY2(outcome.answered(), outcome.reason().c_str());
        QCOMPARE(messages.size(), size_t(4));
        QCOMPARE(messages[0], std::string("first"));
        QVERIFY(messages[1].empty());
        QVERIFY(messages[2] == big);
        QCOMPARE(messages[3], std::string("last"));
    }

    void errorsComeBackWithTheirMessage()
    {
        std::vector<std::string> messages;
        try {
            runCollecting([](ContainedChannel&) { throw Error("model.h5: /dense: cannot read the data"); }, messages);
            QFAIL("no Error thrown");
        } catch (const Error& e) {
            QCOMPARE(std::string(e.what()), std::string("model.h5: /dense: cannot read the data"));
        }
    }

    void aCrashEndsOnlyTheChild()
    {
        std::vector<std::string> messages;
        const ContainedOutcome outcome = runCollecting(
            [](ContainedChannel& channel) {
                channel.send("before");
                std::raise(SIGSEGV);
            },
            messages);
        QCOMPARE(int(outcome.status), int(ContainedOutcome::Status::Crashed));
        QVERIFY2(outcome.reason().find("crashed (signal 11") != std::string::npos, outcome.reason().c_str());
        QCOMPARE(messages, std::vector<std::string>{"before"});
    }

    // The child touches memory until something stops it: the address-space
    // limit (an allocation fails) or the parent's watch of its resident size.
    void aRunawayAllocationIsStoppedAtTheBudget()
    {
        ContainmentLimits limits;
        limits.memoryBudget = 64 << 20;
        std::vector<std::string> messages;
        const auto start = std::chrono::steady_clock::now();
        const ContainedOutcome outcome = runCollecting(
            [](ContainedChannel&) {
                std::vector<std::vector<char>> blocks;
                for (int i = 0; i < 64; ++i) // 2 GiB if nothing stopped it
                    blocks.emplace_back(32 << 20, char(i + 1));
            },
            messages, limits);
        QCOMPARE(int(outcome.status), int(ContainedOutcome::Status::OutOfMemory));
        QVERIFY2(outcome.reason().find("memory budget of 64 MiB") != std::string::npos, outcome.reason().c_str());
        QVERIFY(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
    }

    void aStalledChildIsStopped()
    {
        ContainmentLimits limits;
        limits.stallTimeout = std::chrono::milliseconds(300);
        std::vector<std::string> messages;
        const auto start = std::chrono::steady_clock::now();
        const ContainedOutcome outcome = runCollecting(
            [](ContainedChannel& channel) {
                channel.send("working");
                std::this_thread::sleep_for(std::chrono::seconds(30));
            },
            messages, limits);
        QCOMPARE(int(outcome.status), int(ContainedOutcome::Status::TimedOut));
        QVERIFY(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
        QCOMPARE(messages, std::vector<std::string>{"working"});
    }

    void theChildDiesWithItsCaller()
    {
        // A caller process runs a contained call whose work never ends, and is
        // killed: the child must not live on as an orphan (spinning in a
        // library, as a looping libhdf5 did under the fuzzer).
        int pipeFds[2];
        QVERIFY(::pipe(pipeFds) == 0);
        const pid_t caller = ::fork();
        QVERIFY(caller >= 0);
        if (caller == 0) {
            ::close(pipeFds[0]);
            std::vector<std::string> messages;
            runCollecting(
                [&](ContainedChannel&) {
                    const pid_t self = ::getpid();
                    if (::write(pipeFds[1], &self, sizeof self) != sizeof self)
                        ::_exit(2);
                    for (;;)
                        ::pause();
                },
                messages);
            ::_exit(0);
        }
        ::close(pipeFds[1]);
        pid_t child = 0;
        QCOMPARE(::read(pipeFds[0], &child, sizeof child), ssize_t(sizeof child));
        ::close(pipeFds[0]);
        QVERIFY(child > 0 && child != caller);
        ::kill(caller, SIGKILL);
        ::waitpid(caller, nullptr, 0);
        // Gone (or a zombie nobody has reaped yet) within 5 s.
        auto running = [](pid_t pid) {
            std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
            std::string text((std::istreambuf_iterator<char>(stat)), {});
            const size_t close = text.rfind(')');
            return !text.empty() && close != std::string::npos && close + 2 < text.size() && text[close + 2] != 'Z';
        };
        bool alive = true;
        for (int i = 0; i < 500 && alive; ++i) {
            alive = running(child);
            if (alive)
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        if (alive)
            ::kill(child, SIGKILL); // do not leave it behind when the check fails
        QVERIFY2(!alive, "the contained child outlived its killed caller");
    }

    void aChildThatExitsWithoutAnsweringIsReported()
    {
        std::vector<std::string> messages;
        const ContainedOutcome outcome = runCollecting([](ContainedChannel&) { ::_exit(3); }, messages);
        QCOMPARE(int(outcome.status), int(ContainedOutcome::Status::NoAnswer));
        QVERIFY2(outcome.reason().find("exit status 3") != std::string::npos, outcome.reason().c_str());
    }

    // Whatever the child's library prints goes nowhere: the parent's stderr
    // stays clean.
    void theChildPrintsNothing()
    {
        std::fflush(stderr);
        char name[] = "/tmp/tst_contained_call_XXXXXX";
        const int fd = mkstemp(name);
        const int saved = dup(2);
        dup2(fd, 2);
        std::vector<std::string> messages;
        const ContainedOutcome outcome = runCollecting(
            [](ContainedChannel&) {
                std::fprintf(stderr, "HDF5-DIAG: Error detected\n");
                std::fflush(stderr);
            },
            messages);
        std::fflush(stderr);
        dup2(saved, 2);
        close(saved);
        const off_t printed = lseek(fd, 0, SEEK_END);
        close(fd);
        unlink(name);
        QVERIFY(outcome.answered());
        QCOMPARE(printed, off_t(0));
    }
};

QTEST_APPLESS_MAIN(TestContainedCall)
#include "tst_contained_call.moc"
