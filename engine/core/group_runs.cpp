#include "core/group_runs.h"

#include <tbb/parallel_for.h>

namespace qs {

GroupRuns::GroupRuns(const BlockLayout& layout)
{
    const Shape& shape = layout.shape;
    const Shape grid = layout.gridShape();
    elements = shapeElementCount(shape);
    shape_ = shape;
    block_ = layout.block;
    groups = layout.groupCount();
    // The split axis is the last one whose block does not cover it; everything
    // after it is inside every run.
    int split = -1;
    for (int i = int(shape.size()) - 1; i >= 0; --i)
        if (layout.block[size_t(i)] < shape[size_t(i)]) {
            split = i;
            break;
        }
    if (split < 0) {
        rowLength = runLength = std::max<int64_t>(elements, 1);
        isRowMajorGroups_ = true;
        return;
    }
    int64_t inner = 1;
    for (size_t i = size_t(split) + 1; i < shape.size(); ++i)
        inner *= shape[i];
    rowLength = shape[size_t(split)] * inner;
    runLength = layout.block[size_t(split)] * inner;
    runsPerRow = grid[size_t(split)];
    isRowMajorGroups_ = true;
    int64_t stride = runsPerRow;
    for (int i = split - 1; i >= 0; --i) {
        rows *= shape[size_t(i)];
        outerShape_.insert(outerShape_.begin(), shape[size_t(i)]);
        outerBlock_.insert(outerBlock_.begin(), layout.block[size_t(i)]);
        outerGroupStride_.insert(outerGroupStride_.begin(), stride);
        stride *= grid[size_t(i)];
        if (layout.block[size_t(i)] != 1 && shape[size_t(i)] > 1)
            isRowMajorGroups_ = false;
    }
}

int64_t GroupRuns::rowGroup(int64_t row) const
{
    int64_t group = 0;
    for (size_t i = outerShape_.size(); i-- > 0;) {
        const int64_t idx = row % outerShape_[i];
        row /= outerShape_[i];
        group += (idx / outerBlock_[i]) * outerGroupStride_[i];
    }
    return group;
}

std::vector<int64_t> GroupRuns::groupSizes() const
{
    // A group's size is the product over axes of its extent along each axis
    // (block, or what is left at a ragged end): walk the grid in row-major order.
    std::vector<int64_t> sizes(size_t(groups), elements == 0 ? 0 : 1);
    if (elements == 0)
        return sizes;
    int64_t inner = 1; // groups per step of the current axis
    for (size_t i = shape_.size(); i-- > 0;) {
        const int64_t cells = (shape_[i] + block_[i] - 1) / block_[i];
        for (int64_t g = 0; g < groups; ++g) {
            const int64_t idx = (g / inner) % cells;
            sizes[size_t(g)] *= std::min(block_[i], shape_[i] - idx * block_[i]);
        }
        inner *= cells;
    }
    return sizes;
}

GroupMajorValues::GroupMajorValues(std::span<const float> x, const BlockLayout& layout)
{
    const GroupRuns runs(layout);
    if (int64_t(x.size()) != runs.elements)
        throw Error("GroupMajorValues: " + std::to_string(x.size()) + " values for a tensor of shape " +
                    shapeToString(layout.shape));
    const std::vector<int64_t> sizes = runs.groupSizes();
    offsets_.assign(sizes.size() + 1, 0);
    for (size_t g = 0; g < sizes.size(); ++g)
        offsets_[g + 1] = offsets_[g] + sizes[g];
    if (runs.groupMajor() || x.empty()) {
        view_ = x;
        return;
    }
    storage_.resize(x.size());
    // A parallel counting sort of the runs: a fixed number of row blocks count
    // what they hold of each group, the counts become each block's start within
    // each group, then every block copies its runs in parallel.
    const int64_t budget = std::max<int64_t>(1, (int64_t(1) << 23) / std::max<int64_t>(runs.groups, 1));
    const int64_t blocks = std::clamp<int64_t>(std::min<int64_t>(runs.rows, 64), 1, budget);
    const auto forRunsOfBlock = [&](int64_t b, auto&& f) {
        for (int64_t r = runs.rows * b / blocks; r < runs.rows * (b + 1) / blocks; ++r) {
            const int64_t base = runs.rowGroup(r);
            for (int64_t k = 0; k < runs.runsPerRow; ++k) {
                const int64_t begin = r * runs.rowLength + k * runs.runLength;
                f(base + k, begin, std::min(runs.runLength, runs.rowLength - k * runs.runLength));
            }
        }
    };
    std::vector<std::vector<int64_t>> cursor(size_t(blocks), std::vector<int64_t>(size_t(runs.groups), 0));
    tbb::parallel_for(int64_t(0), blocks, [&](int64_t b) {
        forRunsOfBlock(b, [&](int64_t g, int64_t, int64_t length) { cursor[size_t(b)][size_t(g)] += length; });
    });
    for (size_t g = 0; g < size_t(runs.groups); ++g) {
        int64_t position = offsets_[g];
        for (auto& c : cursor) {
            const int64_t n = c[g];
            c[g] = position;
            position += n;
        }
    }
    tbb::parallel_for(int64_t(0), blocks, [&](int64_t b) {
        std::vector<int64_t>& c = cursor[size_t(b)];
        forRunsOfBlock(b, [&](int64_t g, int64_t begin, int64_t length) {
            std::copy(x.begin() + begin, x.begin() + begin + length, storage_.begin() + c[size_t(g)]);
            c[size_t(g)] += length;
        });
    });
    view_ = storage_;
}

} // namespace qs
