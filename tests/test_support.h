#pragma once
// Small helpers the test suites share: Debian's python3 for fixture
// generators, the build's quantscope-cli, whole-file reads and writes, a tensor's bytes for exact
// comparisons, and relative differences.

#include <QByteArray>
#include <QProcess>
#include <QString>
#include <QStringList>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <span>
#include <string>

#include "core/error.h"
#include "core/tensor.h"

namespace qs::test {

// Debian's interpreter, where python3-numpy, -onnx and -h5py live (not a pyenv shim).
inline const QString kPython = QStringLiteral("/usr/bin/python3");

// Runs a committed generator script with arguments; true when it exited 0.
inline bool runPython(const QString& script, const QStringList& arguments, int timeoutMs = 120000)
{
    QProcess p;
    p.setProcessChannelMode(QProcess::ForwardedChannels);
    p.start(kPython, QStringList{script} + arguments);
    return p.waitForFinished(timeoutMs) && p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0;
}

// What quantscope-cli printed and how it ended.
struct CliRun {
    int exitCode = -1; // stays -1 for a crash, a signal or a timeout: never an answer
    QByteArray out;
    QByteArray err;
};

// Runs the quantscope-cli of this build (QUANTSCOPE_CLI, set by quantscope_add_test).
inline CliRun runCli(const QStringList& arguments, int timeoutMs = 120000)
{
    QProcess p;
    p.start(QStringLiteral(QUANTSCOPE_CLI), arguments);
    CliRun r;
    if (!p.waitForFinished(timeoutMs) || p.exitStatus() != QProcess::NormalExit)
        return r;
    r.exitCode = p.exitCode();
    r.out = p.readAllStandardOutput();
    r.err = p.readAllStandardError();
    return r;
}

inline void writeFile(const std::string& path, const std::string& bytes)
{
    // A new file rather than a truncated one: ext4 flushes a file truncated to zero, which is slow.
    std::filesystem::remove(path);
    std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

inline std::string readFile(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
}

// The largest |a_i − b_i| / |b_i| (b_i = 0 counts as 1e-30).
inline double maxRelativeDifference(std::span<const double> a, std::span<const double> b)
{
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i)
        worst = std::max(worst, std::abs(a[i] - b[i]) / std::max(std::abs(b[i]), 1e-30));
    return worst;
}

// max |a − b| / max |b| of two float32 tensors of one shape.
inline double relativeToRange(const Tensor& a, const Tensor& b)
{
    const auto x = a.values<float>(), y = b.values<float>();
    double diff = 0, range = 0;
    for (size_t i = 0; i < y.size(); ++i) {
        diff = std::max(diff, std::abs(double(x[i]) - double(y[i])));
        range = std::max(range, std::abs(double(y[i])));
    }
    return diff / range;
}

inline QByteArray bytesOf(const Tensor& t)
{
    return QByteArray(static_cast<const char*>(t.rawData()), qsizetype(t.nbytes()));
}

// The Error's message, or an empty string when `load` accepted its input. Any
// other exception (std::bad_alloc when an AddressSpaceCap stops an allocation)
// escapes and fails the test.
inline QString errorOf(const std::function<void()>& load)
{
    try {
        load();
    } catch (const Error& e) {
        return QString::fromUtf8(e.what());
    }
    return {};
}

// Caps the process's address space at what it maps now plus `headroom` until
// destroyed: an allocation of what a hostile file declares, or a read that
// escaped its containment, then fails here instead of taking the machine's memory.
class AddressSpaceCap {
public:
    explicit AddressSpaceCap(uint64_t headroom)
    {
        getrlimit(RLIMIT_AS, &saved_);
        uint64_t pages = 0;
        std::ifstream("/proc/self/statm") >> pages;
        rlimit cap = saved_;
        cap.rlim_cur = std::min<uint64_t>(pages * uint64_t(sysconf(_SC_PAGESIZE)) + headroom, saved_.rlim_max);
        active_ = setrlimit(RLIMIT_AS, &cap) == 0;
    }
    ~AddressSpaceCap() { setrlimit(RLIMIT_AS, &saved_); }
    AddressSpaceCap(const AddressSpaceCap&) = delete;
    AddressSpaceCap& operator=(const AddressSpaceCap&) = delete;
    bool active() const { return active_; }

private:
    rlimit saved_{};
    bool active_ = false;
};

} // namespace qs::test
