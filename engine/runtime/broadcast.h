#pragma once
// Numpy-style broadcasting, done once for every elementwise kernel: the output
// shape, then a walk over the output in contiguous inner runs where each input
// either advances with the output (step 1) or repeats one element (step 0), so
// the inner loops are plain strided loops the compiler vectorizes. Large outputs
// are split across oneTBB workers by outer rows.

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "core/tensor.h"

namespace qs {

// The broadcast of two shapes; an Error starting with `what` when a pair of
// dimensions differs and neither is 1.
Shape broadcastShapes(const Shape& a, const Shape& b, const std::string& what);

// Strides (in elements) to read a row-major tensor of `shape` as if it had
// shape `target` (its broadcast): 0 along broadcast axes.
Shape broadcastStrides(const Shape& shape, const Shape& target);

// Outputs at least this large are split across threads.
inline constexpr int64_t kParallelElementwiseThreshold = 1 << 15;

// Calls run(outOffset, inOffsets, inSteps, n) for consecutive runs of n output
// elements covering the output of shape `out`, where input k's element for
// output element outOffset + j is inOffsets[k] + j * inSteps[k] (steps are 0
// or 1). `inStrides[k]` come from broadcastStrides. Runs may be called from
// several threads at once.
template <size_t N, class Run> void forEachBroadcastRun(const Shape& out, std::array<Shape, N> inStrides, Run&& run)
{
    // Drop size-1 axes, then merge axes that are contiguous for every input.
    Shape dims;
    std::array<Shape, N> strides;
    for (size_t a = 0; a < out.size(); ++a) {
        if (out[a] == 1)
            continue;
        if (out[a] == 0)
            return;
        bool merge = !dims.empty();
        for (size_t k = 0; merge && k < N; ++k)
            merge = strides[k].back() == inStrides[k][a] * out[a];
        if (merge) {
            dims.back() *= out[a];
            for (size_t k = 0; k < N; ++k)
                strides[k].back() = inStrides[k][a];
        } else {
            dims.push_back(out[a]);
            for (size_t k = 0; k < N; ++k)
                strides[k].push_back(inStrides[k][a]);
        }
    }
    std::array<int64_t, N> steps{};
    if (dims.empty()) { // a scalar output
        std::array<int64_t, N> offsets{};
        run(int64_t(0), offsets, steps, int64_t(1));
        return;
    }
    // The inner axis must step by 0 or 1 for every input; otherwise runs are single elements.
    bool unitInner = true;
    for (size_t k = 0; k < N; ++k)
        unitInner = unitInner && (strides[k].back() == 0 || strides[k].back() == 1);
    if (!unitInner) {
        dims.push_back(1);
        for (size_t k = 0; k < N; ++k)
            strides[k].push_back(0);
    }
    const int64_t inner = dims.back();
    for (size_t k = 0; k < N; ++k)
        steps[k] = strides[k].back();
    const size_t outerRank = dims.size() - 1;
    int64_t rows = 1;
    for (size_t a = 0; a < outerRank; ++a)
        rows *= dims[a];

    auto doRows = [&](int64_t begin, int64_t end) {
        // Decompose the first row index into the outer coordinates once, then count.
        Shape coord(outerRank, 0);
        std::array<int64_t, N> offsets{};
        int64_t r = begin;
        for (size_t a = outerRank; a-- > 0;) {
            coord[a] = r % dims[a];
            r /= dims[a];
            for (size_t k = 0; k < N; ++k)
                offsets[k] += coord[a] * strides[k][a];
        }
        for (int64_t row = begin; row < end; ++row) {
            run(row * inner, offsets, steps, inner);
            for (size_t a = outerRank; a-- > 0;) {
                ++coord[a];
                for (size_t k = 0; k < N; ++k)
                    offsets[k] += strides[k][a];
                if (coord[a] < dims[a])
                    break;
                for (size_t k = 0; k < N; ++k)
                    offsets[k] -= coord[a] * strides[k][a];
                coord[a] = 0;
            }
        }
    };
    if (rows * inner < kParallelElementwiseThreshold) {
        doRows(0, rows);
        return;
    }
    if (rows == 1) { // one long run: split it
        tbb::parallel_for(tbb::blocked_range<int64_t>(0, inner, size_t(kParallelElementwiseThreshold / 4)),
                          [&](const tbb::blocked_range<int64_t>& r) {
                              std::array<int64_t, N> offsets{};
                              for (size_t k = 0; k < N; ++k)
                                  offsets[k] = r.begin() * steps[k];
                              run(r.begin(), offsets, steps, int64_t(r.end() - r.begin()));
                          });
        return;
    }
    const int64_t grain = std::max<int64_t>(1, kParallelElementwiseThreshold / 4 / inner);
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, rows, size_t(grain)),
                      [&](const tbb::blocked_range<int64_t>& r) { doRows(r.begin(), r.end()); });
}

} // namespace qs
