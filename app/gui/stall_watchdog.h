#pragma once
// Checks that the GUI thread stays responsive: a timer on the GUI thread
// stamps a heartbeat every 10 ms and a watcher thread logs (qWarning) every
// stall longer than the limit, once per stall, with its length. On in debug
// builds, and in any build when QUANTSCOPE_WATCHDOG=1.

#include <atomic>
#include <chrono>
#include <thread>

#include <time.h>

#include <QObject>
#include <QTimer>

namespace qs {

class StallWatchdog : public QObject {
    Q_OBJECT
public:
    explicit StallWatchdog(std::chrono::milliseconds limit = std::chrono::milliseconds(50), QObject* parent = nullptr);
    ~StallWatchdog() override;

    // Whether this build starts one (debug, or QUANTSCOPE_WATCHDOG=1).
    static bool wanted();
    // Stalls seen so far.
    int stalls() const { return stalls_.load(); }
    // The longest gap between two beats seen so far, stall or not (the beat's
    // own 10 ms included; the watcher looks every 10 ms).
    int64_t longestGapMs() const { return longest_.load(); }
    // The most CPU time the GUI thread used between two beats: how long its own
    // work held the event loop, whatever else ran on the machine.
    int64_t longestBusyMs() const { return longestBusyUs_.load() / 1000; }

private:
    static int64_t nowMs();
    // CPU time of the thread that made the watchdog (the GUI thread).
    int64_t guiCpuUs() const;

    std::chrono::milliseconds limit_;
    QTimer beat_;
    std::atomic<int64_t> lastBeat_;
    std::atomic<bool> started_{false};
    std::atomic<bool> stop_{false};
    std::atomic<int> stalls_{0};
    std::atomic<int64_t> longest_{0};
    clockid_t guiClock_{};
    std::atomic<int64_t> lastBeatCpuUs_{0};
    std::atomic<int64_t> longestBusyUs_{0};
    std::thread watcher_;
};

} // namespace qs
