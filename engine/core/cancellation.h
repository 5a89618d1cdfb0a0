#pragma once
// Cooperative cancellation and progress reporting for long engine jobs.
// A job checks the token at least once per batch and inside long loops; the
// GUI or CLI that started it sets the token and reads progress.

#include <atomic>
#include <functional>
#include <memory>
#include <string_view>

#include "core/error.h"

namespace qs {

class Cancelled : public Error {
public:
    Cancelled() : Error("cancelled") {}
};

class CancellationToken {
public:
    CancellationToken() : flag_(std::make_shared<std::atomic<bool>>(false)) {}
    void cancel() { flag_->store(true, std::memory_order_relaxed); }
    bool isCancelled() const { return flag_->load(std::memory_order_relaxed); }
    // Throws Cancelled when cancellation was requested.
    void check() const
    {
        if (isCancelled())
            throw Cancelled();
    }

private:
    std::shared_ptr<std::atomic<bool>> flag_; // shared by all copies of a token
};

// Receives the fraction done in [0, 1] and a short label of the current step.
using ProgressCallback = std::function<void(double fraction, std::string_view step)>;

} // namespace qs
