#pragma once
// The column matrix of a convolution (im2col): every window's inputs as one
// column, so that the convolution is one matrix product. Float Conv and the
// int32 ConvInteger build it alike; im2col2d writes into any sink (a row-major
// matrix, or the GEMM's packed layout: gemm/packed_columns.h).

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/ops/window_geometry.h"

namespace qs::ops {

// Copies the window columns [p0, p1) of one group's channels into `col`
// ([channels * kernel elements, p1 - p0], row-major); taps outside the
// input read zero.
template <class T> void im2col(const T* x, int64_t channels, const WindowGeometry& g, int64_t p0, int64_t p1, T* col)
{
    const size_t rank = g.input.size();
    const int64_t inSpatial = shapeElementCount(g.input);
    const int64_t kernelSize = shapeElementCount(g.kernel);
    const int64_t width = p1 - p0;
    std::vector<int64_t> k(rank), o(rank);
    for (int64_t c = 0; c < channels; ++c) {
        const T* xc = x + c * inSpatial;
        std::fill(k.begin(), k.end(), 0);
        for (int64_t kk = 0; kk < kernelSize; ++kk) {
            T* row = col + (c * kernelSize + kk) * width;
            // Output coordinates of p0.
            int64_t rem = p0;
            for (size_t d = rank; d-- > 0;) {
                o[d] = rem % g.output[d];
                rem /= g.output[d];
            }
            for (int64_t p = 0; p < width; ++p) {
                int64_t offset = 0;
                bool inside = true;
                for (size_t d = 0; d < rank; ++d) {
                    const int64_t i = o[d] * g.strides[d] - g.padBegin[d] + k[d] * g.dilations[d];
                    inside = inside && i >= 0 && i < g.input[d];
                    offset = offset * g.input[d] + i;
                }
                row[p] = inside ? xc[offset] : T(0);
                for (size_t d = rank; d-- > 0;) {
                    if (++o[d] < g.output[d])
                        break;
                    o[d] = 0;
                }
            }
            for (size_t d = rank; d-- > 0;) {
                if (++k[d] < g.kernel[d])
                    break;
                k[d] = 0;
            }
        }
    }
}

// Where im2col2d puts its rows: a plain row-major [rows, width] matrix.
template <class T> struct RowMajorColumns {
    T* data;
    int64_t width;
    void fill(int64_t k, int64_t j0, int64_t j1) const
    {
        std::fill(data + k * width + j0, data + k * width + j1, T(0));
    }
    void copy(int64_t k, int64_t j0, int64_t j1, const T* src, int64_t stride) const
    {
        T* dst = data + k * width;
        if (stride == 1)
            std::copy(src, src + (j1 - j0), dst + j0);
        else
            for (int64_t j = j0; j < j1; ++j)
                dst[j] = src[(j - j0) * stride];
    }
};

// im2col for two spatial axes: whole output rows at a time, zeros where a tap
// falls in the padding, a plain (or strided) copy elsewhere. Row k of the
// column matrix is (channel, kh, kw); column j is output position p0 + j.
// The divisions happen once per call, not per row of the matrix or per
// output row (they cost more than the copies of a 1 x 1 conv at stride 2).
template <class T, class Sink>
void im2col2d(const T* x, int64_t channels, const WindowGeometry& g, int64_t p0, int64_t p1, const Sink& out)
{
    const int64_t H = g.input[0], W = g.input[1], KH = g.kernel[0], KW = g.kernel[1];
    const int64_t OW = g.output[1], sw = g.strides[1];
    // Per kw: the first input column's offset and the outputs [lo, hi) whose tap is inside the row.
    struct Tap {
        int64_t offset, lo, hi;
    };
    thread_local std::vector<Tap> taps;
    taps.clear();
    for (int64_t kw = 0; kw < KW; ++kw) {
        const int64_t offset = kw * g.dilations[1] - g.padBegin[1];
        const auto [lo, hi] = stepsInside(offset, sw, W, OW);
        taps.push_back({offset, lo, hi});
    }
    const int64_t ohFirst = p0 / OW, owFirst = p0 % OW;
    for (int64_t c = 0; c < channels; ++c)
        for (int64_t kh = 0; kh < KH; ++kh)
            for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t k = (c * KH + kh) * KW + kw;
                const auto [offset, lo, hi] = taps[size_t(kw)];
                for (int64_t p = p0, oh = ohFirst, owBegin = owFirst; p < p1; ++oh, owBegin = 0) {
                    const int64_t owEnd = std::min(OW, owBegin + (p1 - p));
                    const int64_t j = p - p0 - owBegin; // column of ow = 0 in this output row
                    const int64_t ih = oh * g.strides[0] - g.padBegin[0] + kh * g.dilations[0];
                    if (ih < 0 || ih >= H) {
                        out.fill(k, j + owBegin, j + owEnd);
                    } else {
                        const T* xr = x + (c * H + ih) * W + offset;
                        const int64_t a = std::clamp(lo, owBegin, owEnd), b = std::clamp(hi, a, owEnd);
                        out.fill(k, j + owBegin, j + a);
                        if (a < b)
                            out.copy(k, j + a, j + b, xr + a * sw, sw);
                        out.fill(k, j + b, j + owEnd);
                    }
                    p += owEnd - owBegin;
                }
            }
}

} // namespace qs::ops
