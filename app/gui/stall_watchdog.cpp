#include "gui/stall_watchdog.h"

#include <pthread.h>

#include <QtGlobal>

namespace qs {

StallWatchdog::StallWatchdog(std::chrono::milliseconds limit, QObject* parent)
    : QObject(parent), limit_(limit), lastBeat_(nowMs())
{
    pthread_getcpuclockid(pthread_self(), &guiClock_);
    lastBeatCpuUs_.store(guiCpuUs());
    beat_.setInterval(10);
    // Watching starts with the first beat, i.e. once the event loop runs: the
    // time before (building the window) is start-up, not a stall.
    connect(&beat_, &QTimer::timeout, this, [this] {
        lastBeat_.store(nowMs());
        lastBeatCpuUs_.store(guiCpuUs());
        started_.store(true);
    });
    beat_.start();
    watcher_ = std::thread([this] {
        bool inStall = false;
        int64_t worst = 0;
        while (!stop_.load()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
            // The beat itself fires every 10 ms: a gap beyond limit + 10 ms is a stall.
            if (!started_.load())
                continue;
            const int64_t gap = nowMs() - lastBeat_.load();
            if (gap > longest_.load())
                longest_.store(gap);
            const int64_t busy = guiCpuUs() - lastBeatCpuUs_.load();
            if (busy > longestBusyUs_.load())
                longestBusyUs_.store(busy);
            if (gap > limit_.count() + 10) {
                inStall = true;
                worst = std::max(worst, gap);
            } else if (inStall) {
                inStall = false;
                ++stalls_;
                qWarning("watchdog: the GUI thread was blocked for %lld ms (limit %lld ms)", (long long)worst,
                         (long long)limit_.count());
                worst = 0;
            }
        }
    });
}

StallWatchdog::~StallWatchdog()
{
    stop_.store(true);
    watcher_.join();
}

bool StallWatchdog::wanted()
{
#ifndef NDEBUG
    return true;
#else
    return qEnvironmentVariableIntValue("QUANTSCOPE_WATCHDOG") == 1;
#endif
}

int64_t StallWatchdog::guiCpuUs() const
{
    timespec t{};
    clock_gettime(guiClock_, &t);
    return int64_t(t.tv_sec) * 1000000 + t.tv_nsec / 1000;
}

int64_t StallWatchdog::nowMs()
{
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

} // namespace qs
