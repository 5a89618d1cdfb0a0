#include "runtime/output_extremes.h"

#include <algorithm>
#include <limits>

#include <tbb/task_arena.h>

#include "calib/statistics.h"

namespace qs {

OutputExtremes::OutputExtremes()
    : slots_(new Slot[size_t(tbb::this_task_arena::max_concurrency())]),
      slotCount_(tbb::this_task_arena::max_concurrency())
{
    for (int s = 0; s < slotCount_; ++s) {
        slots_[s].min = std::numeric_limits<float>::infinity();
        slots_[s].max = -std::numeric_limits<float>::infinity();
    }
}

OutputExtremes::~OutputExtremes() = default;

void OutputExtremes::addRows(const float* p, int64_t rows, int64_t n, int64_t ld)
{
    if (rows <= 0 || n <= 0)
        return;
    const Extremes e = extremesOf(p, rows, n, ld);
    const int index = tbb::this_task_arena::current_thread_index();
    Slot& slot = slots_[index >= 0 && index < slotCount_ ? index : 0];
    const std::lock_guard lock(slot.mutex);
    slot.min = std::min(slot.min, e.min);
    slot.max = std::max(slot.max, e.max);
    slot.finite = slot.finite && e.finite;
    slot.count += rows * n;
}

std::optional<Range> OutputExtremes::of(int64_t numel) const
{
    Range r{std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()};
    int64_t count = 0;
    for (int s = 0; s < slotCount_; ++s) {
        const Slot& slot = slots_[s];
        if (!slot.finite)
            return std::nullopt;
        r.min = std::min(r.min, slot.min);
        r.max = std::max(r.max, slot.max);
        count += slot.count;
    }
    if (count != numel || numel == 0)
        return std::nullopt;
    return r;
}

} // namespace qs
