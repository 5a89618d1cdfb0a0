#pragma once
// The packed-column layout of PackedMatrix::multiplyPacked's B, written piece
// by piece (Conv's im2col writes its column matrix straight into it).

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace qs::gemm {

// A matrix written straight into the layout PackedMatrix::multiplyPacked reads
// (what packColumns in sgemm.cpp makes of a row-major matrix): per depth block
// of kDepthBlock rows, strips of nr columns, k-major. Conv's im2col writes its
// column matrix through it, which saves one pass over that matrix.
// n consecutive floats from src to dst: the micro-kernels' whole strips (32
// columns for AVX-512, 16 for AVX2) at a constant size, as vector moves, not a
// library call per piece (packing 16 -> 96 on 48 x 48 made 1152 calls of 128
// bytes; packColumns' calls were 4% of mnasnet's run at batch 1).
// Shorter pieces (a 3 x 3 plane's nine columns per image, where a batch's
// planes share strips) move as overlapping pieces of 8 or 4 floats: a
// library call each took a third of packing 576 channels of 3 x 3 at batch 8.
inline void copyStripRow(float* dst, const float* src, int64_t n)
{
    if (n == 32) {
        std::memcpy(dst, src, 32 * sizeof(float));
    } else if (n == 16) {
        std::memcpy(dst, src, 16 * sizeof(float));
    } else if (n >= 8) {
        for (int64_t i = 0; i + 8 < n; i += 8)
            std::memcpy(dst + i, src + i, 8 * sizeof(float));
        std::memcpy(dst + n - 8, src + n - 8, 8 * sizeof(float));
    } else if (n >= 4) {
        std::memcpy(dst, src, 4 * sizeof(float));
        std::memcpy(dst + n - 4, src + n - 4, 4 * sizeof(float));
    } else {
        for (int64_t i = 0; i < n; ++i)
            dst[i] = src[i];
    }
}

struct PackedColumns {
    float* data;
    int64_t rows, width;
    int nrShift;    // strips of 1 << nrShift columns
    int depthShift; // depth blocks of 1 << depthShift rows

    int64_t nr() const { return int64_t(1) << nrShift; }
    // Columns [0, paddedWidth()) are stored; those past `width` must read zero.
    int64_t paddedWidth() const { return (width + nr() - 1) >> nrShift << nrShift; }
    // (Shifts, not divisions: this runs for every piece of every row.)
    float* at(int64_t k, int64_t j) const
    {
        const int64_t block = k >> depthShift << depthShift;
        const int64_t kc = std::min(int64_t(1) << depthShift, rows - block);
        return data + block * paddedWidth() + (j >> nrShift) * kc * nr() + ((k - block) << nrShift) + (j & (nr() - 1));
    }
    // [j0, j1) split where strips end.
    template <class F> void pieces(int64_t k, int64_t j0, int64_t j1, F f) const
    {
        while (j0 < j1) {
            const int64_t end = std::min(j1, ((j0 >> nrShift) + 1) << nrShift);
            f(at(k, j0), j0, end);
            j0 = end;
        }
    }
    void fill(int64_t k, int64_t j0, int64_t j1) const
    {
        pieces(k, j0, j1, [](float* dst, int64_t a, int64_t b) { std::fill(dst, dst + (b - a), 0.0f); });
    }
    void copy(int64_t k, int64_t j0, int64_t j1, const float* src, int64_t stride) const
    {
        pieces(k, j0, j1, [&](float* dst, int64_t a, int64_t b) {
            const float* from = src + (a - j0) * stride;
            if (stride == 1)
                copyStripRow(dst, from, b - a);
            else if (stride == 2) // a constant stride vectorizes (the stride-2 convs of every downsampling stage)
                for (int64_t j = 0; j < b - a; ++j)
                    dst[j] = from[j * 2];
            else
                for (int64_t j = 0; j < b - a; ++j)
                    dst[j] = from[j * stride];
        });
    }
    // Zeros in the last strip's columns past `width`.
    void padLastStrip() const
    {
        for (int64_t k = 0; k < rows && width < paddedWidth(); ++k)
            std::fill(at(k, width), at(k, width) + (paddedWidth() - width), 0.0f);
    }
};

} // namespace qs::gemm
