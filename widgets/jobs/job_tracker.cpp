#include "widgets/jobs/job_tracker.h"

#include <QCoreApplication>
#include <QDeadlineTimer>
#include <QThread>

namespace qs {

JobTracker::JobTracker(QObject* parent) : QObject(parent)
{
    // Engine jobs use oneTBB inside; two pool threads let a load or a
    // calibration run while the weight metrics of an edit are recomputed.
    pool_.setMaxThreadCount(std::max(2, QThread::idealThreadCount() / 2));
    poll_.setInterval(100);
    connect(&poll_, &QTimer::timeout, this, &JobTracker::pollProgress);
}

JobTracker::~JobTracker()
{
    cancelAll();
    pool_.waitForDone();
}

std::shared_ptr<JobTracker::Job> JobTracker::begin(JobKind kind, const QString& title)
{
    cancel(kind);
    auto job = std::make_shared<Job>();
    job->id = ++nextId_;
    job->title = title;
    job->clock.start();
    jobs_[kind] = job;
    if (!poll_.isActive())
        poll_.start();
    emit jobStarted(kind, title);
    return job;
}

bool JobTracker::finish(JobKind kind, const std::shared_ptr<Job>& job, bool cancelled)
{
    const auto it = jobs_.find(kind);
    if (it == jobs_.end() || it->second != job)
        return false; // superseded or cancelled: its result is dropped
    jobs_.erase(it);
    if (jobs_.empty())
        poll_.stop();
    emit jobEnded(kind, job->title, cancelled);
    return true;
}

void JobTracker::cancel(JobKind kind)
{
    const auto it = jobs_.find(kind);
    if (it == jobs_.end())
        return;
    const auto job = it->second;
    job->token.cancel();
    jobs_.erase(it);
    if (jobs_.empty())
        poll_.stop();
    emit jobEnded(kind, job->title, true);
}

void JobTracker::cancelAll()
{
    while (!jobs_.empty())
        cancel(jobs_.begin()->first);
}

void JobTracker::cancelUserFacing()
{
    for (const JobKindInfo& k : kJobKinds)
        if (k.userFacing)
            cancel(k.kind);
}

bool JobTracker::isUserFacingRunning() const
{
    for (const auto& [kind, job] : jobs_)
        if (jobKindInfo(kind).userFacing)
            return true;
    return false;
}

QString JobTracker::userFacingTitle() const
{
    std::shared_ptr<Job> newest;
    for (const auto& [kind, job] : jobs_)
        if (jobKindInfo(kind).userFacing && (!newest || job->id > newest->id))
            newest = job;
    return newest ? newest->title : QString();
}

bool JobTracker::waitForIdle(int timeoutMs)
{
    QDeadlineTimer deadline(timeoutMs);
    while (!jobs_.empty() && !deadline.hasExpired())
        QCoreApplication::processEvents(QEventLoop::AllEvents, 20);
    return jobs_.empty();
}

void JobTracker::pollProgress()
{
    for (const auto& [kind, job] : jobs_) {
        const double fraction = job->fraction.load(std::memory_order_relaxed);
        QString step;
        {
            std::lock_guard lock(job->stepMutex);
            step = QString::fromStdString(job->step);
        }
        const double elapsed = double(job->clock.elapsed()) / 1000.0;
        // An estimate once a little work is done: linear in the fraction.
        const double left = fraction > 0.02 && elapsed > 0.5 ? elapsed * (1.0 - fraction) / fraction : -1.0;
        emit jobProgress(kind, job->title, fraction, step, left);
    }
}

} // namespace qs
