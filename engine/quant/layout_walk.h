#pragma once
// Walking a BlockLayout as runs of consecutive elements, so that kernels do no
// per-element group arithmetic. Axes of size 1 are dropped and neighbouring
// axes that are both whole (block = size) or both per-index (block = 1) are
// merged: per-tensor becomes one row, per-channel [O, I] becomes O rows of I,
// MX blocks along the last axis become rows cut into blocks of 32.
// Within a row (the last merged axis), elements either share one group per
// tile of `rowBlock` elements, or — when rowBlock is 1 — element j of the row
// is in group rowGroup + j (per-channel along the last axis), so the kernel
// reads a contiguous span of scales.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/block_layout.h"

namespace qs {

class LayoutWalk {
public:
    explicit LayoutWalk(const BlockLayout& layout)
    {
        struct Axis {
            int64_t size, block;
        };
        std::vector<Axis> axes;
        for (size_t i = 0; i < layout.shape.size(); ++i) {
            const int64_t size = layout.shape[i];
            const int64_t block = std::min(layout.block[i], size);
            if (size == 1)
                continue;
            const bool whole = block == size, perIndex = block == 1;
            if (!axes.empty()) {
                Axis& prev = axes.back();
                if ((whole && prev.block == prev.size) || (perIndex && prev.block == 1)) {
                    prev.size *= size;
                    prev.block = whole ? prev.size : 1;
                    continue;
                }
            }
            axes.push_back({size, block});
        }
        if (axes.empty())
            axes.push_back({1, 1});
        rowLength_ = axes.back().size;
        rowBlock_ = axes.back().block;
        int64_t gridStride = (rowLength_ + rowBlock_ - 1) / rowBlock_;
        for (size_t i = axes.size() - 1; i-- > 0;) {
            outer_.insert(outer_.begin(), {axes[i].size, axes[i].block, gridStride});
            gridStride *= (axes[i].size + axes[i].block - 1) / axes[i].block;
        }
    }

    int64_t rowLength() const { return rowLength_; }
    bool perElementGroups() const { return rowBlock_ == 1 && rowLength_ > 1; }

    // Calls run(flatStart, count, group) for every run of elements in
    // [begin, end) sharing one group; with perElementGroups(), element j of a
    // run is in group `group + j`.
    template <class Run> void forEachRun(int64_t begin, int64_t end, Run&& run) const
    {
        int64_t pos = begin;
        while (pos < end) {
            const int64_t row = pos / rowLength_;
            int64_t col = pos - row * rowLength_;
            const int64_t rowGroup = groupOfRow(row);
            const int64_t colEnd = std::min(rowLength_, col + (end - pos));
            if (rowBlock_ == 1) {
                run(pos, colEnd - col, rowGroup + col);
                pos += colEnd - col;
                continue;
            }
            while (col < colEnd) {
                const int64_t tile = col / rowBlock_;
                const int64_t tileEnd = std::min(colEnd, (tile + 1) * rowBlock_);
                run(pos, tileEnd - col, rowGroup + tile);
                pos += tileEnd - col;
                col = tileEnd;
            }
        }
    }

private:
    struct OuterAxis {
        int64_t size, block, gridStride;
    };

    int64_t groupOfRow(int64_t row) const
    {
        int64_t group = 0;
        for (size_t i = outer_.size(); i-- > 0;) {
            const int64_t idx = row % outer_[i].size;
            row /= outer_[i].size;
            group += idx / outer_[i].block * outer_[i].gridStride;
        }
        return group;
    }

    std::vector<OuterAxis> outer_; // merged axes before the row axis, outermost first
    int64_t rowLength_ = 1;
    int64_t rowBlock_ = 1;
};

} // namespace qs
