#pragma once
// How the groups of a BlockLayout lie in a row-major buffer. The tensor is read
// as `rows` rows of `rowLength` consecutive elements; each row is cut into
// runs of `runLength` elements (the last run of a row may be shorter) and run k
// of row r belongs to group rowGroup(r) + k. Kernels walk runs instead of
// asking for the group of every element.

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "core/block_layout.h"

namespace qs {

class GroupRuns {
public:
    explicit GroupRuns(const BlockLayout& layout);

    int64_t elements = 0;   // product of the shape
    int64_t groups = 0;     // layout.groupCount()
    int64_t rows = 1;       // product of the axes before the split axis
    int64_t rowLength = 0;  // elements per row
    int64_t runLength = 0;  // elements per run (the last run of a row may be shorter)
    int64_t runsPerRow = 1; // groups met along one row

    // The group of the first run of row r.
    int64_t rowGroup(int64_t row) const;
    // Whether every group is one run and groups follow each other in memory
    // (per-tensor, per-channel on axis 0, ...): the buffer is already group-major.
    bool groupMajor() const { return isRowMajorGroups_; }

    // Calls f(group, begin, end) for each piece of a run inside the flat range [begin, end).
    template <class F> void forEachPiece(int64_t begin, int64_t end, F&& f) const
    {
        while (begin < end) {
            const int64_t row = begin / rowLength, offset = begin - row * rowLength;
            const int64_t run = offset / runLength;
            const int64_t runEnd = row * rowLength + std::min(rowLength, (run + 1) * runLength);
            const int64_t stop = std::min(end, runEnd);
            f(rowGroup(row) + run, begin, stop);
            begin = stop;
        }
    }

    // Elements in each group.
    std::vector<int64_t> groupSizes() const;

private:
    Shape shape_, block_;
    Shape outerShape_, outerBlock_, outerGroupStride_;
    bool isRowMajorGroups_ = false;
};

// A tensor's values reordered so that each group's elements are consecutive (in
// their flat order). Borrows the input when it is already group-major.
class GroupMajorValues {
public:
    GroupMajorValues(std::span<const float> x, const BlockLayout& layout);
    int64_t groupCount() const { return int64_t(offsets_.size()) - 1; }
    std::span<const float> group(int64_t g) const
    {
        return view_.subspan(size_t(offsets_[size_t(g)]), size_t(offsets_[size_t(g) + 1] - offsets_[size_t(g)]));
    }

private:
    std::vector<float> storage_;
    std::span<const float> view_;
    std::vector<int64_t> offsets_;
};

} // namespace qs
