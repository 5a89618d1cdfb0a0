// AtomicFile: what an export leaves behind when it is killed, fails or
// overwrites a file. Writers run in forked children so that they can be killed
// at a known point in the middle of a write.
#include <QtTest>

#include <csignal>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <functional>
#include <poll.h>
#include <string>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "export/checkpoint_sinks.h"

using namespace qs;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> listing(const fs::path& folder)
{
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(folder))
        names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
}

std::string contents(const fs::path& file)
{
    std::ifstream in(file, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void put(const fs::path& file, const std::string& text, mode_t mode)
{
    std::ofstream(file, std::ios::binary) << text;
    QCOMPARE(::chmod(file.c_str(), mode), 0);
}

mode_t modeOf(const fs::path& file)
{
    struct stat st {};
    ::stat(file.c_str(), &st);
    return st.st_mode & 07777;
}

// A forked writer. The child runs `body`, which reports progress by writing a
// line to `report`; it is killed (SIGKILL) and reaped when the test ends early.
class Child {
public:
    explicit Child(const std::function<void(int report)>& body)
    {
        int fds[2];
        if (::pipe(fds) != 0)
            return;
        std::fflush(nullptr);
        pid_ = ::fork();
        if (pid_ == 0) {
            ::close(fds[0]);
            // A process as the CLI starts: no handlers (the test library's would print a backtrace).
            for (const int signal : {SIGTERM, SIGINT, SIGHUP})
                ::signal(signal, SIG_DFL);
            try {
                body(fds[1]);
            } catch (...) {
                ::_exit(90);
            }
            ::_exit(0);
        }
        ::close(fds[1]);
        read_ = fds[0];
    }
    ~Child()
    {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
        if (read_ >= 0)
            ::close(read_);
    }
    pid_t pid() const { return pid_; }

    // The next line the child reported; empty if it died or was silent for 20 s.
    std::string nextLine()
    {
        std::string line;
        char c;
        pollfd p{read_, POLLIN, 0};
        while (::poll(&p, 1, 20000) == 1 && ::read(read_, &c, 1) == 1 && c != '\n')
            line += c;
        return line;
    }
    // Waits up to 20 s for the child to end; its wait status (killed by SIGKILL if it did not end).
    int wait()
    {
        int status = 0;
        for (int waited = 0; ::waitpid(pid_, &status, WNOHANG) == 0; ++waited) {
            if (waited == 2000)
                ::kill(pid_, SIGKILL);
            ::usleep(10000);
        }
        pid_ = -1;
        return status;
    }

private:
    pid_t pid_ = -1;
    int read_ = -1;
};

void report(int fd, const std::string& line)
{
    const std::string text = line + "\n";
    if (::write(fd, text.data(), text.size()) != ssize_t(text.size()))
        ::_exit(91);
}

// Writes 8 MiB through `file`, reports its temporary's path (empty if unnamed)
// and waits to be killed.
[[noreturn]] void writeAndWait(AtomicFile& file, int fd)
{
    const std::vector<char> block(1 << 20, 'x');
    for (int i = 0; i < 8; ++i)
        file.write(block.data(), block.size());
    report(fd, "path:" + file.temporaryPath());
    for (;;)
        ::pause();
}

std::string errorOf(const std::function<void()>& f)
{
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return {};
}

} // namespace

class TestAtomicFile : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    int folders_ = 0;

    // A new empty folder for one test.
    fs::path folder()
    {
        const fs::path f = fs::path(dir_.path().toStdString()) / ("case" + std::to_string(++folders_));
        fs::create_directories(f);
        return f;
    }

    // Whether AtomicFile writes through an unnamed temporary (O_TMPFILE) in this folder.
    static bool unnamedTemporaries(const fs::path& folder)
    {
        AtomicFile probe(folder / "probe");
        return probe.temporaryPath().empty();
    }
    // File systems known to give O_TMPFILE: there, a named temporary is a regression, not a skip.
    static bool offersUnnamedTemporaries(const fs::path& folder)
    {
        struct statfs fs {};
        if (::statfs(folder.c_str(), &fs) != 0)
            return false;
        for (const unsigned long magic : {0xEF53ul, 0x01021994ul, 0x58465342ul, 0x9123683Eul}) // ext4 tmpfs xfs btrfs
            if (static_cast<unsigned long>(fs.f_type) == magic)
                return true;
        return false;
    }

private slots:
    void unnamedTemporaryIsInvisibleUntilCommit()
    {
        const fs::path f = folder();
        AtomicFile file(f / "a.bin");
        QVERIFY2(file.temporaryPath().empty() || !offersUnnamedTemporaries(f), "O_TMPFILE was not used");
        if (!file.temporaryPath().empty())
            QSKIP("this file system refuses O_TMPFILE; the named fallback is tested below");
        file.write("abc", 3);
        QCOMPARE(listing(f), std::vector<std::string>{});
        file.commit();
        QCOMPARE(listing(f), std::vector<std::string>{"a.bin"});
        QCOMPARE(contents(f / "a.bin"), std::string("abc"));
    }

    void namedTemporaryIsHiddenAndRecognisable()
    {
        const fs::path f = folder();
        AtomicFile file(f / "model.h5", AtomicFile::Temporary::Named);
        const fs::path temporary = file.temporaryPath();
        QVERIFY(fs::exists(temporary));
        QCOMPARE(temporary.parent_path(), f);
        const std::string name = temporary.filename().string();
        QVERIFY2(name.rfind(".model.h5.qs-tmp-", 0) == 0, name.c_str());
        const std::string pid = '-' + std::to_string(::getpid()) += '-';
        QVERIFY2(name.find(pid) != std::string::npos, name.c_str());
        file.write("hdf", 3);
        file.commit();
        QCOMPARE(listing(f), std::vector<std::string>{"model.h5"});
        QCOMPARE(contents(f / "model.h5"), std::string("hdf"));
    }

    void sigkillMidWriteLeavesNothingVisible()
    {
        const fs::path f = folder();
        QVERIFY2(unnamedTemporaries(f) || !offersUnnamedTemporaries(f), "O_TMPFILE was not used");
        if (!unnamedTemporaries(f))
            QSKIP("this file system refuses O_TMPFILE: a SIGKILL leaves a named temporary (cleaned later)");
        put(f / "out.safetensors", "old", 0644);
        Child child([&](int fd) {
            AtomicFile file(f / "out.safetensors");
            writeAndWait(file, fd);
        });
        QCOMPARE(child.nextLine(), std::string("path:")); // mid-write, through an unnamed file
        QCOMPARE(::kill(child.pid(), SIGKILL), 0);
        const int status = child.wait();
        QVERIFY(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        QCOMPARE(listing(f), std::vector<std::string>{"out.safetensors"});
        QCOMPARE(contents(f / "out.safetensors"), std::string("old"));
    }

    void terminatingSignalRemovesNamedTemporary_data()
    {
        QTest::addColumn<int>("signal");
        QTest::newRow("SIGTERM") << int(SIGTERM);
        QTest::newRow("SIGINT") << int(SIGINT);
        QTest::newRow("SIGHUP") << int(SIGHUP);
    }
    void terminatingSignalRemovesNamedTemporary()
    {
        QFETCH(int, signal);
        const fs::path f = folder();
        put(f / "out.bin", "old", 0644);
        Child child([&](int fd) {
            AtomicFile file(f / "out.bin", AtomicFile::Temporary::Named);
            writeAndWait(file, fd);
        });
        const std::string line = child.nextLine();
        QVERIFY2(line.rfind("path:", 0) == 0 && line.size() > 5, line.c_str());
        const fs::path temporary = line.substr(5);
        QCOMPARE(fs::file_size(temporary), uintmax_t(8 << 20)); // the file the handler must remove
        QCOMPARE(::kill(child.pid(), signal), 0);
        const int status = child.wait();
        // The process still dies of the signal, as without the handler.
        QVERIFY2(WIFSIGNALED(status) && WTERMSIG(status) == signal, std::to_string(status).c_str());
        QCOMPARE(listing(f), std::vector<std::string>{"out.bin"});
        QCOMPARE(contents(f / "out.bin"), std::string("old"));
    }

    void sigtermDuringHdf5ExportLeavesNothing()
    {
        const fs::path f = folder();
        const fs::path out = f / "model.h5";
        Child child([&](int fd) {
            std::vector<CheckpointEntry> entries;
            for (int i = 0; i < 4; ++i)
                entries.push_back({"layer" + std::to_string(i) + ".weight",
                                   "F32",
                                   {512, 512},
                                   [] {
                                       return Tensor(DType::F32, {512, 512});
                                   },
                                   ""});
            const ProgressCallback progress = [&](double fraction, std::string_view) {
                if (fraction >= 0.5 && fraction < 1) { // two datasets written, two to go
                    report(fd, "writing");
                    for (;;)
                        ::pause();
                }
            };
            writeHdf5Checkpoint(out, entries, "{}", CancellationToken(), progress);
        });
        QCOMPARE(child.nextLine(), std::string("writing"));
        const std::vector<std::string> during = listing(f);
        QCOMPARE(during.size(), size_t(1));
        QVERIFY2(during[0].rfind(".model.h5.qs-tmp-", 0) == 0, during[0].c_str());
        QCOMPARE(::kill(child.pid(), SIGTERM), 0);
        const int status = child.wait();
        QVERIFY(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
        QCOMPARE(listing(f), std::vector<std::string>{});
    }

    void ignoredSignalStaysIgnored()
    {
        // A writer started with SIGINT ignored (a background job of a script) is not killed by it.
        const fs::path f = folder();
        Child child([&](int fd) {
            ::signal(SIGINT, SIG_IGN);
            AtomicFile file(f / "out.bin", AtomicFile::Temporary::Named);
            writeAndWait(file, fd);
        });
        QVERIFY(child.nextLine().rfind("path:", 0) == 0);
        QCOMPARE(::kill(child.pid(), SIGINT), 0);
        QTest::qWait(200);
        QCOMPARE(::waitpid(child.pid(), nullptr, WNOHANG), 0); // still running
        QCOMPARE(listing(f).size(), size_t(1));                // and its temporary still there
    }

    void handlerInstalledBeforeIsStillCalled()
    {
        // An application's own SIGTERM handler (here: exit with status 7) runs after the temporaries are removed.
        const fs::path f = folder();
        Child child([&](int fd) {
            ::signal(SIGTERM, [](int) { ::_exit(7); });
            AtomicFile file(f / "out.bin", AtomicFile::Temporary::Named);
            writeAndWait(file, fd);
        });
        QVERIFY(child.nextLine().rfind("path:", 0) == 0);
        QCOMPARE(listing(f).size(), size_t(1));
        QCOMPARE(::kill(child.pid(), SIGTERM), 0);
        const int status = child.wait();
        QVERIFY2(WIFEXITED(status) && WEXITSTATUS(status) == 7, std::to_string(status).c_str());
        QCOMPARE(listing(f), std::vector<std::string>{});
    }

    void staleTemporaryOfKilledRunIsRemovedByNextExport()
    {
        const fs::path f = folder();
        Child child([&](int fd) {
            AtomicFile file(f / "big.h5", AtomicFile::Temporary::Named);
            writeAndWait(file, fd);
        });
        const std::string line = child.nextLine();
        QVERIFY2(line.rfind("path:", 0) == 0 && line.size() > 5, line.c_str());
        const fs::path killed = line.substr(5);
        QCOMPARE(::kill(child.pid(), SIGKILL), 0);
        child.wait();
        QVERIFY(fs::exists(killed)); // SIGKILL cannot be handled: the name stays, for now

        // A temporary of a live writer in this process, one of another host, and
        // one whose pid now belongs to a process that started after it was last written.
        AtomicFile live(f / "live.bin", AtomicFile::Temporary::Named);
        const std::string ours = fs::path(live.temporaryPath()).filename().string();
        const std::string pid = '-' + std::to_string(::getpid()) += '-';
        const size_t at = ours.find(pid);
        QVERIFY(at != std::string::npos);
        const fs::path otherHost = f / (".x.bin.qs-tmp-elsewhere" + ours.substr(at));
        const fs::path reusedPid = f / (".y.bin.qs-tmp-" + ours.substr(ours.find("qs-tmp-") + 7));
        put(otherHost, "?", 0600);
        put(reusedPid, "?", 0600);
        const struct timespec longAgo[2] = {{978307200, 0}, {978307200, 0}}; // 2001
        QCOMPARE(::utimensat(AT_FDCWD, reusedPid.c_str(), longAgo, 0), 0);
        put(f / ".keep.tmp-abc", "user's own file", 0644); // not a name of ours

        writeFileAtomically(f / "next.bin", "n", 1);
        QVERIFY(!fs::exists(killed));
        QVERIFY(!fs::exists(reusedPid));
        QVERIFY(fs::exists(live.temporaryPath()));
        QVERIFY(fs::exists(otherHost));
        QVERIFY(fs::exists(f / ".keep.tmp-abc"));
        QCOMPARE(removeStaleTemporaries(f), size_t(0));
        live.commit();
        QVERIFY(fs::exists(f / "live.bin"));
    }

    void overwrittenFileKeepsItsMode_data()
    {
        QTest::addColumn<int>("mode");
        QTest::addColumn<bool>("named");
        for (const bool named : {false, true}) {
            const char* kind = named ? "named" : "unnamed";
            QTest::addRow("0600 %s", kind) << 0600 << named;
            QTest::addRow("0640 %s", kind) << 0640 << named;
            QTest::addRow("0755 %s", kind) << 0755 << named;
            QTest::addRow("0444 %s", kind) << 0444 << named;
        }
    }
    void overwrittenFileKeepsItsMode()
    {
        QFETCH(int, mode);
        QFETCH(bool, named);
        const fs::path f = folder();
        put(f / "out.bin", "old", mode_t(mode));
        AtomicFile file(f / "out.bin", named ? AtomicFile::Temporary::Named : AtomicFile::Temporary::Unnamed);
        file.write("new", 3);
        file.commit();
        QCOMPARE(contents(f / "out.bin"), std::string("new"));
        QCOMPARE(int(modeOf(f / "out.bin")), mode);
    }

    void hdf5ExportKeepsTheModeOfThePreviousFile()
    {
        const fs::path f = folder();
        put(f / "model.h5", "old", 0600);
        std::vector<CheckpointEntry> entries{{"w", "F32", {4}, [] { return Tensor(DType::F32, {4}); }, ""}};
        writeHdf5Checkpoint(f / "model.h5", entries, "{}", CancellationToken(), {});
        QCOMPARE(int(modeOf(f / "model.h5")), 0600);
        QVERIFY(contents(f / "model.h5") != "old");
    }

    void overwrittenFileKeepsItsOwner()
    {
        if (::geteuid() != 0)
            QSKIP("only root may create a file owned by another user");
        const fs::path f = folder();
        put(f / "out.bin", "old", 0640);
        QCOMPARE(::chown((f / "out.bin").c_str(), 65534, 65534), 0);
        writeFileAtomically(f / "out.bin", "new", 3);
        struct stat st {};
        QCOMPARE(::stat((f / "out.bin").c_str(), &st), 0);
        QCOMPARE(st.st_uid, uid_t(65534));
        QCOMPARE(st.st_gid, gid_t(65534));
        QCOMPARE(int(st.st_mode & 07777), 0640);
    }

    void newFileFollowsTheUmask_data()
    {
        QTest::addColumn<int>("umask");
        QTest::addColumn<bool>("named");
        for (const bool named : {false, true}) {
            const char* kind = named ? "named" : "unnamed";
            QTest::addRow("022 %s", kind) << 022 << named;
            QTest::addRow("027 %s", kind) << 027 << named;
            QTest::addRow("077 %s", kind) << 077 << named;
            QTest::addRow("002 %s", kind) << 002 << named;
        }
    }
    void newFileFollowsTheUmask()
    {
        QFETCH(int, umask);
        QFETCH(bool, named);
        const fs::path f = folder();
        const mode_t previous = ::umask(mode_t(umask));
        {
            AtomicFile file(f / "new.bin", named ? AtomicFile::Temporary::Named : AtomicFile::Temporary::Unnamed);
            file.write("x", 1);
            file.commit();
        }
        ::umask(previous);
        QCOMPARE(int(modeOf(f / "new.bin")), 0666 & ~umask);
    }

    void symbolicLinkIsFollowedAndKept()
    {
        const fs::path f = folder();
        fs::create_directories(f / "runs");
        put(f / "runs" / "model.bin", "old", 0600);
        fs::create_symlink("runs/model.bin", f / "latest.bin");
        writeFileAtomically(f / "latest.bin", "new", 3);
        QVERIFY(fs::is_symlink(f / "latest.bin"));
        QCOMPARE(fs::read_symlink(f / "latest.bin"), fs::path("runs/model.bin"));
        QCOMPARE(contents(f / "runs" / "model.bin"), std::string("new"));
        QCOMPARE(int(modeOf(f / "runs" / "model.bin")), 0600);
        QCOMPARE(listing(f), (std::vector<std::string>{"latest.bin", "runs"}));
        QCOMPARE(listing(f / "runs"), std::vector<std::string>{"model.bin"});

        // A chain of links, and a link to a file not written yet.
        fs::create_symlink("latest.bin", f / "chain.bin");
        fs::create_symlink("runs/next.bin", f / "next.bin");
        writeFileAtomically(f / "chain.bin", "2nd", 3);
        writeFileAtomically(f / "next.bin", "3rd", 3);
        QCOMPARE(contents(f / "runs" / "model.bin"), std::string("2nd"));
        QCOMPARE(contents(f / "runs" / "next.bin"), std::string("3rd"));
        QVERIFY(fs::is_symlink(f / "chain.bin") && fs::is_symlink(f / "next.bin"));
        AtomicFile through(f / "chain.bin");
        QCOMPARE(through.destination(), f / "runs" / "model.bin");

        // A loop is an error naming the file.
        fs::create_symlink("loop-b", f / "loop-a");
        fs::create_symlink("loop-a", f / "loop-b");
        const std::string loop = errorOf([&] { writeFileAtomically(f / "loop-a", "x", 1); });
        QVERIFY2(loop.find("loop-a") != std::string::npos && loop.find("symbolic links") != std::string::npos,
                 loop.c_str());
    }

    void folderOrDeviceIsNotReplaced()
    {
        const fs::path f = folder();
        fs::create_directories(f / "sub");
        const std::string folderError = errorOf([&] { writeFileAtomically(f / "sub", "x", 1); });
        QVERIFY2(folderError.find("sub") != std::string::npos &&
                     folderError.find("not a regular file") != std::string::npos,
                 folderError.c_str());
        QVERIFY(fs::is_directory(f / "sub"));
        QVERIFY2(::mkfifo((f / "pipe").c_str(), 0600) == 0, "mkfifo");
        QVERIFY(errorOf([&] { writeFileAtomically(f / "pipe", "x", 1); }).find("not a regular file") !=
                std::string::npos);
        QVERIFY(fs::is_fifo(f / "pipe"));
        QCOMPARE(listing(f), (std::vector<std::string>{"pipe", "sub"}));
    }

    void errorMidWriteKeepsTheOldFile_data()
    {
        QTest::addColumn<bool>("named");
        QTest::newRow("unnamed") << false;
        QTest::newRow("named") << true;
    }
    void errorMidWriteKeepsTheOldFile()
    {
        // The child may not grow files beyond 1 MiB: the 2 MiB write fails with EFBIG.
        QFETCH(bool, named);
        const fs::path f = folder();
        put(f / "out.bin", "old", 0644);
        Child child([&](int fd) {
            ::signal(SIGXFSZ, SIG_IGN);
            const rlimit limit{1 << 20, 1 << 20};
            ::setrlimit(RLIMIT_FSIZE, &limit);
            AtomicFile file(f / "out.bin", named ? AtomicFile::Temporary::Named : AtomicFile::Temporary::Unnamed);
            const std::vector<char> block(2 << 20, 'x');
            report(fd, errorOf([&] { file.write(block.data(), block.size()); }));
            report(fd, errorOf([&] { file.commit(); }));
        });
        const std::string error = child.nextLine();
        QVERIFY2(error.find("out.bin") != std::string::npos && error.find("write failed") != std::string::npos,
                 error.c_str());
        QVERIFY(!child.nextLine().empty()); // nothing to commit after a failed write
        const int status = child.wait();
        QVERIFY(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        QCOMPARE(listing(f), std::vector<std::string>{"out.bin"});
        QCOMPARE(contents(f / "out.bin"), std::string("old"));
    }

    void abandonedFileKeepsTheOldFile()
    {
        const fs::path f = folder();
        put(f / "out.bin", "old", 0644);
        for (const auto kind : {AtomicFile::Temporary::Unnamed, AtomicFile::Temporary::Named}) {
            AtomicFile file(f / "out.bin", kind);
            file.write("new", 3);
        } // destroyed without commit(), as when an exporter throws
        QCOMPARE(listing(f), std::vector<std::string>{"out.bin"});
        QCOMPARE(contents(f / "out.bin"), std::string("old"));
    }

    void missingFolderIsAnErrorNamingTheFile()
    {
        const fs::path f = folder();
        const std::string error = errorOf([&] { writeFileAtomically(f / "no" / "such.bin", "x", 1); });
        QVERIFY2(error.find("such.bin") != std::string::npos &&
                     error.find("cannot create a temporary file in its folder") != std::string::npos,
                 error.c_str());
    }
};

QTEST_GUILESS_MAIN(TestAtomicFile)
#include "tst_atomic_file.moc"
