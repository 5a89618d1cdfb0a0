#pragma once
// The smallest and largest value of a kernel's float32 output, gathered by the
// kernel's own tasks right after each writes its piece, while that piece is in
// the task's cache: a dynamic activation range then costs no pass of its own
// over the tensor (QuantizationHook asks for it; NodeObserver::wantsExtremesOf).

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

#include "quant/scale.h"

namespace qs {

class OutputExtremes {
public:
    OutputExtremes();
    ~OutputExtremes();
    OutputExtremes(const OutputExtremes&) = delete;
    OutputExtremes& operator=(const OutputExtremes&) = delete;

    // Adds `rows` rows of n values, row r at p + r * ld. Called from any task,
    // once per element of the output: a kernel that writes an element and does
    // not add it, or adds one twice, leaves the count short or over and the
    // extremes unused.
    void addRows(const float* p, int64_t rows, int64_t n, int64_t ld);
    void add(const float* p, int64_t n) { addRows(p, 1, n, n); }

    // {min, max} when exactly `numel` values were added and all were finite;
    // nullopt otherwise (the reader then computes the range from the tensor,
    // which also names a NaN or Inf). After the kernel's tasks have finished.
    std::optional<Range> of(int64_t numel) const;

private:
    // One per thread of the arena, each on its own cache line: a kernel's
    // tasks on small planes add a few hundred values each, and one shared
    // accumulator made the threads take its cache line from each other.
    struct alignas(64) Slot {
        std::mutex mutex; // taken by one thread but for a thread outside the arena's numbering
        float min, max;
        bool finite = true;
        int64_t count = 0;
    };
    std::unique_ptr<Slot[]> slots_;
    int slotCount_;
};

} // namespace qs
