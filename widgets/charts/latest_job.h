#pragma once
// Runs one kind of chart computation off the GUI thread (QtConcurrent) and
// delivers its result on the GUI thread (QFutureWatcher). A newer request
// supersedes an older one: the older one's token is cancelled and its result,
// should it still arrive, is dropped. Errors arrive as text for the view to show.

#include <functional>
#include <optional>

#include <QFutureWatcher>
#include <QObject>
#include <QString>
#include <QtConcurrent/QtConcurrentRun>

#include "core/cancellation.h"
#include "core/error.h"

namespace qs {

template <class T> class LatestJob {
public:
    explicit LatestJob(QObject* owner) : owner_(owner) {}
    ~LatestJob() { token_.cancel(); }
    LatestJob(const LatestJob&) = delete;
    LatestJob& operator=(const LatestJob&) = delete;

    // Starts `work`; `done` or `failed` runs on the owner's thread unless a later
    // start() or cancel() came first.
    void start(std::function<T(const CancellationToken&)> work, std::function<void(T)> done,
               std::function<void(QString)> failed)
    {
        token_.cancel();
        token_ = CancellationToken();
        const unsigned id = ++generation_;
        ++running_;
        auto* watcher = new QFutureWatcher<Outcome>(owner_);
        QObject::connect(watcher, &QFutureWatcher<Outcome>::finished, owner_, [this, watcher, id, done, failed] {
            --running_;
            const Outcome outcome = watcher->result();
            watcher->deleteLater();
            if (id != generation_)
                return; // superseded
            if (outcome.value)
                done(*outcome.value);
            else if (!outcome.cancelled)
                failed(outcome.error);
        });
        const CancellationToken token = token_;
        watcher->setFuture(QtConcurrent::run([work = std::move(work), token] {
            Outcome o;
            try {
                o.value = work(token);
            } catch (const Cancelled&) {
                o.cancelled = true;
            } catch (const std::exception& e) {
                o.error = QString::fromStdString(e.what());
            }
            return o;
        }));
    }
    // Drops whatever is running.
    void cancel()
    {
        token_.cancel();
        ++generation_;
    }
    bool busy() const { return running_ > 0; }

private:
    struct Outcome {
        std::optional<T> value;
        QString error;
        bool cancelled = false;
    };
    QObject* owner_;
    CancellationToken token_;
    unsigned generation_ = 0;
    int running_ = 0;
};

} // namespace qs
