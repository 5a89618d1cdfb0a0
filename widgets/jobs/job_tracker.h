#pragma once
// The one place background work starts. A job is a callable that receives a
// cancellation token and a progress callback and returns a value; it runs on
// Qt's thread pool and its result is posted back to the GUI thread with a
// queued call. Jobs have a kind (job_kind.h): starting a job cancels the
// running job of the same kind ("latest wins"), and a result whose job is no
// longer the current one of its kind is dropped, never shown.

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <QElapsedTimer>
#include <QMetaObject>
#include <QObject>
#include <QPointer>
#include <QString>
#include <QThreadPool>
#include <QTimer>

#include "core/cancellation.h"
#include "core/error.h"
#include "widgets/jobs/job_kind.h"

namespace qs {

class JobTracker : public QObject {
    Q_OBJECT
public:
    explicit JobTracker(QObject* parent = nullptr);
    ~JobTracker() override;

    // Runs `work` in the background; `done` gets its value on the GUI thread,
    // `failed` the Error's message (not called on cancellation). Returns the job id.
    template <class T>
    quint64 start(JobKind kind, const QString& title,
                  std::function<T(const CancellationToken&, const ProgressCallback&)> work,
                  std::function<void(T)> done, std::function<void(const QString&)> failed = {});

    // Cancels the running job of `kind` (its result will be dropped).
    void cancel(JobKind kind);
    void cancelAll();
    // Cancels the jobs the user follows (JobKindInfo::userFacing): "Cancel Jobs".
    void cancelUserFacing();
    // Whether a job the user follows is running (the status bar shows progress).
    bool isUserFacingRunning() const;
    // The title of the newest running job the user follows (empty: none runs).
    QString userFacingTitle() const;
    bool isRunning(JobKind kind) const { return jobs_.count(kind) != 0; }
    bool isIdle() const { return jobs_.empty(); }
    // Processes events until no job runs or `timeoutMs` passes (tests, quit).
    bool waitForIdle(int timeoutMs);

signals:
    void jobStarted(JobKind kind, const QString& title);
    // Polled from the GUI thread: fraction done, the job's step text, and the
    // estimated seconds left (negative while unknown).
    void jobProgress(JobKind kind, const QString& title, double fraction, const QString& step,
                     double secondsLeft);
    // A job ended: finished, failed or cancelled.
    void jobEnded(JobKind kind, const QString& title, bool cancelled);

private:
    struct Job {
        quint64 id = 0;
        QString title;
        CancellationToken token;
        std::atomic<double> fraction{0.0};
        std::mutex stepMutex;
        std::string step;
        QElapsedTimer clock;
    };

    std::shared_ptr<Job> begin(JobKind kind, const QString& title);
    // True when `job` is still the current one of `kind`; then it is removed.
    bool finish(JobKind kind, const std::shared_ptr<Job>& job, bool cancelled);
    void pollProgress();

    quint64 nextId_ = 0;
    std::map<JobKind, std::shared_ptr<Job>> jobs_; // running, by kind
    QThreadPool pool_;
    QTimer poll_;
};

template <class T>
quint64 JobTracker::start(JobKind kind, const QString& title,
                          std::function<T(const CancellationToken&, const ProgressCallback&)> work,
                          std::function<void(T)> done, std::function<void(const QString&)> failed)
{
    std::shared_ptr<Job> job = begin(kind, title);
    ProgressCallback progress = [job](double fraction, std::string_view step) {
        job->fraction.store(fraction, std::memory_order_relaxed);
        std::lock_guard lock(job->stepMutex);
        job->step.assign(step);
    };
    pool_.start([this, kind, job, work = std::move(work), done = std::move(done), failed = std::move(failed),
                 progress]() {
        try {
            auto value = std::make_shared<T>(work(job->token, progress));
            QMetaObject::invokeMethod(
                this,
                [this, kind, job, value, done] {
                    if (finish(kind, job, false) && done)
                        done(std::move(*value));
                },
                Qt::QueuedConnection);
        } catch (const Cancelled&) {
            QMetaObject::invokeMethod(this, [this, kind, job] { finish(kind, job, true); }, Qt::QueuedConnection);
        } catch (const std::exception& e) {
            // A qs::Error is written for the user; anything else is a check the engine
            // is missing, said as such rather than as a bare library message ("map::at").
            QString doing = job->title.isEmpty() ? QString::fromUtf8(jobKindInfo(kind).name.data(),
                                                                       qsizetype(jobKindInfo(kind).name.size()))
                                                 : job->title; // "Loading model.onnx"
            if (!doing.isEmpty())
                doing[0] = doing[0].toLower();
            const QString message =
                dynamic_cast<const Error*>(&e)
                    ? QString::fromStdString(e.what())
                    : QStringLiteral("internal error while %1: %2").arg(doing, QString::fromStdString(e.what()));
            QMetaObject::invokeMethod(
                this,
                [this, kind, job, message, failed] {
                    if (finish(kind, job, false) && failed)
                        failed(message);
                },
                Qt::QueuedConnection);
        }
    });
    return job->id;
}

// One kind of job on a tracker, held by the widget that shows its results
// (a chart view): a new start supersedes the last ("latest wins"), and when
// the widget goes, so does the result still on its way.
class JobSlot {
public:
    // `jobs` may go first (its jobs are then dropped with it).
    JobSlot(JobTracker* jobs, JobKind kind) : jobs_(jobs), kind_(kind) {}
    ~JobSlot() { cancel(); }
    JobSlot(const JobSlot&) = delete;
    JobSlot& operator=(const JobSlot&) = delete;

    template <class T>
    void start(const QString& title, std::function<T(const CancellationToken&)> work, std::function<void(T)> done,
               std::function<void(const QString&)> failed)
    {
        if (!jobs_)
            return; // the tracker is gone: the app is closing
        jobs_->start<T>(
            kind_, title, [work = std::move(work)](const CancellationToken& cancel, const ProgressCallback&) {
                return work(cancel);
            },
            std::move(done), std::move(failed));
    }
    void cancel()
    {
        if (jobs_)
            jobs_->cancel(kind_);
    }
    bool busy() const { return jobs_ && jobs_->isRunning(kind_); }

private:
    QPointer<JobTracker> jobs_;
    JobKind kind_;
};

} // namespace qs
