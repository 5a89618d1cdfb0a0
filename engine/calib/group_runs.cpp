#include "calib/group_runs.h"

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
    std::vector<int64_t> cursor(offsets_.begin(), offsets_.end() - 1);
    runs.forEachPiece(0, runs.elements, [&](int64_t g, int64_t begin, int64_t end) {
        std::copy(x.begin() + begin, x.begin() + end, storage_.begin() + cursor[size_t(g)]);
        cursor[size_t(g)] += end - begin;
    });
    view_ = storage_;
}

} // namespace qs
