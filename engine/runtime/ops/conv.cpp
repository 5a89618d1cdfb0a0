#include "runtime/ops/conv.h"

#include <Eigen/Core>
#include <algorithm>
#include <bit>
#include <cstdlib>
#include <memory>
#include <optional>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>
#include <vector>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "gemm/packed_columns.h"
#include "gemm/sgemm.h"
#include "runtime/ops/quantize_linear.h"

namespace qs::ops {

namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMatrixMap = Eigen::Map<const RowMatrix>;
using StridedMatrixMap = Eigen::Map<RowMatrix, 0, Eigen::OuterStride<>>;

// Tasks per thread a kernel aims for: enough to balance uneven tasks.
constexpr int64_t tasksPerThread = 4;

// Convs whose output planes have at most this many values, with at least this
// many micro-kernel row strips of output channels, share one column matrix
// across the batch (batchedColumnsConv) when it holds at most this many floats
// (64 MiB; a larger batch runs per image rather than grow it without bound).
constexpr int64_t kBatchedColumnsMaxPlane = 256;
constexpr int64_t kBatchedColumnsMinStrips = 4;
constexpr int64_t kBatchedColumnsMaxFloats = int64_t(1) << 24;

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

// Smallest o >= 0 with o * stride >= v (v may be negative).
int64_t firstAtLeast(int64_t v, int64_t stride)
{
    return v <= 0 ? 0 : (v + stride - 1) / stride;
}

// The outputs o in [lo, hi) whose tap o * stride + offset lands inside [0, size).
std::pair<int64_t, int64_t> validOutputs(int64_t offset, int64_t stride, int64_t size, int64_t outputs)
{
    const int64_t lo = std::min(outputs, firstAtLeast(-offset, stride));
    const int64_t hi = std::min(outputs, firstAtLeast(size - offset, stride));
    return {lo, std::max(lo, hi)};
}

// Depthwise 2-D convolution (one input and one output channel per group).
// Depthwise layers are small (7 to 112 columns), where per-row loops would
// spend their time on loop overhead, so every tap is one long multiply-add:
// the zero-padded input is split into strides[0] x strides[1] sub-planes by
// row and column residue (sub-plane (a, b) holds padded rows a, a + sh, ... and
// columns b, b + sw, ...), in which each tap's inputs for consecutive outputs
// are consecutive. Output (oh, ow) sits at oh * WS + ow of a grid as wide as a
// sub-plane; the WS - OW extra columns per row are computed and dropped.
// Compiled also for AVX2 and AVX-512 (chosen by simdLevel()); those fuse each
// multiply-add (FMA, one rounding), so their results may differ from the
// baseline's in the last bit.
[[gnu::always_inline]] inline void depthwise2dBody(const float* x, const float* w, float bias, const WindowGeometry& g,
                                                   float* y)
{
    const int64_t H = g.input[0], W = g.input[1], KH = g.kernel[0], KW = g.kernel[1];
    const int64_t OH = g.output[0], OW = g.output[1], sh = g.strides[0], sw = g.strides[1];
    const int64_t dh = g.dilations[0], dw = g.dilations[1], ph = g.padBegin[0], pw = g.padBegin[1];
    // The padded plane, cut to what the windows reach, and its sub-planes' size.
    const int64_t HP = (OH - 1) * sh + (KH - 1) * dh + 1, WP = (OW - 1) * sw + (KW - 1) * dw + 1;
    const int64_t HS = (HP + sh - 1) / sh, WS = (WP + sw - 1) / sw;
    thread_local std::vector<float> planes, grid;
    planes.assign(size_t(sh * sw * HS * WS), 0.0f);
    const int64_t c0 = std::min(WP, pw), c1 = std::min(WP, W + pw);
    for (int64_t r = std::min(HP, ph); r < std::min(HP, H + ph); ++r) {
        const float* xr = x + (r - ph) * W - pw;
        float* rowOfResidue0 = planes.data() + ((r % sh) * sw * HS + r / sh) * WS;
        if (sw == 1) { // one sub-plane column per input column
            std::copy(xr + c0, xr + c1, rowOfResidue0 + c0);
            continue;
        }
        for (int64_t b = 0; b < sw; ++b) {
            const int64_t first = c0 + ((b - c0 % sw) % sw + sw) % sw;
            float* dst = rowOfResidue0 + b * HS * WS + first / sw;
            const int64_t count = first < c1 ? (c1 - first + sw - 1) / sw : 0;
            if (sw == 2) // a constant stride vectorizes (even/odd deinterleave)
                for (int64_t i = 0; i < count; ++i)
                    dst[i] = xr[first + 2 * i];
            else
                for (int64_t i = 0; i < count; ++i)
                    dst[i] = xr[first + i * sw];
        }
    }
    grid.resize(size_t(OH * WS));
    const int64_t span = (OH - 1) * WS + OW, taps = KH * KW;
    thread_local std::vector<const float*> from;
    from.resize(size_t(taps));
    for (int64_t kh = 0; kh < KH; ++kh)
        for (int64_t kw = 0; kw < KW; ++kw) {
            const int64_t rh = kh * dh, rw = kw * dw;
            from[size_t(kh * KW + kw)] = planes.data() + (((rh % sh) * sw + rw % sw) * HS + rh / sh) * WS + rw / sw;
        }
    // Sixteen outputs at a time through all taps in registers (one store per
    // sixteen outputs, not one per tap); each output still sums the bias, then
    // the taps in order.
    using Lanes = float __attribute__((vector_size(16 * sizeof(float)), aligned(sizeof(float))));
    float* z = grid.data();
    int64_t i = 0;
    for (; i + 16 <= span; i += 16) {
        Lanes acc = bias - Lanes{}; // every lane the bias
        for (int64_t t = 0; t < taps; ++t)
            acc += w[t] * *reinterpret_cast<const Lanes*>(from[size_t(t)] + i);
        *reinterpret_cast<Lanes*>(z + i) = acc;
    }
    for (; i < span; ++i) {
        float acc = bias;
        for (int64_t t = 0; t < taps; ++t)
            acc += w[t] * from[size_t(t)][i];
        z[i] = acc;
    }
    for (int64_t oh = 0; oh < OH; ++oh)
        std::copy(z + oh * WS, z + oh * WS + OW, y + oh * OW);
}

#if defined(__x86_64__) && defined(__GNUC__)
[[gnu::target("avx512f")]] void depthwise2dAvx512(const float* x, const float* w, float bias, const WindowGeometry& g,
                                                  float* y)
{
    depthwise2dBody(x, w, bias, g, y);
}

[[gnu::target("avx2,fma")]] void depthwise2dAvx2(const float* x, const float* w, float bias, const WindowGeometry& g,
                                                 float* y)
{
    depthwise2dBody(x, w, bias, g, y);
}
#endif

void depthwise2d(const float* x, const float* w, float bias, const WindowGeometry& g, float* y)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (gemm::simdLevel() == gemm::SimdLevel::Avx512)
        return depthwise2dAvx512(x, w, bias, g, y);
    if (gemm::simdLevel() == gemm::SimdLevel::Avx2)
        return depthwise2dAvx2(x, w, bias, g, y);
#endif
    depthwise2dBody(x, w, bias, g, y);
}

// Depthwise 2-D convolution of kChannelBlock channels at once, interleaved so
// that one vector holds one pixel of every channel of the block: each tap is
// one multiply-add per output pixel, however small the plane (late layers'
// 7x7 planes are too short for vectors along a row, and per-channel set-up
// would dominate). Four output pixels at a time keep four independent sums
// in flight. Sums run in the same order as depthwise2dBody's (bias, then taps
// row by row), so both paths give the same results.
constexpr int64_t kChannelBlock = 16;
using ChannelVector = float __attribute__((vector_size(kChannelBlock * sizeof(float)), aligned(sizeof(float))));

// rows[i][j] <-> rows[j][i] for a 16 x 16 block in registers: four butterfly
// stages; at block size b, row i (with i & b == 0) and row i + b swap their
// off-diagonal b x b blocks.
[[gnu::always_inline]] inline void transpose16(ChannelVector rows[16])
{
#if defined(__clang__)
    // Clang has no __builtin_shuffle with a runtime mask; the fuzzing and
    // sanitizer builds use clang, where a plain swap is fast enough.
    for (int i = 0; i < 16; ++i)
        for (int j = i + 1; j < 16; ++j) {
            const float t = rows[i][j];
            rows[i][j] = rows[j][i];
            rows[j][i] = t;
        }
#else
    using Index = int __attribute__((vector_size(16 * sizeof(int))));
    auto stage = [&]<int B>() {
        Index lo, hi;
        for (int j = 0; j < 16; ++j) {
            lo[j] = (j & B) ? 16 + j - B : j;
            hi[j] = (j & B) ? 16 + j : j + B;
        }
        for (int i = 0; i < 16; ++i)
            if ((i & B) == 0) {
                const ChannelVector a = rows[i], b = rows[i + B];
                rows[i] = __builtin_shuffle(a, b, lo);
                rows[i + B] = __builtin_shuffle(a, b, hi);
            }
    };
    stage.template operator()<8>();
    stage.template operator()<4>();
    stage.template operator()<2>();
    stage.template operator()<1>();
#endif
}

// Channels [0, channels) of x (planes of H x W) against their taps w (KH x KW
// each) into y (planes of OH x OW), channels <= kChannelBlock.
[[gnu::always_inline]] inline void depthwiseBlockBody(const float* x, int64_t channels, const float* w,
                                                      const float* bias, const WindowGeometry& g, float* y)
{
    constexpr int64_t CB = kChannelBlock, ILP = 4;
    const int64_t H = g.input[0], W = g.input[1], KH = g.kernel[0], KW = g.kernel[1];
    const int64_t OH = g.output[0], OW = g.output[1], sh = g.strides[0], sw = g.strides[1];
    const int64_t dh = g.dilations[0], dw = g.dilations[1], ph = g.padBegin[0], pw = g.padBegin[1];
    const int64_t HP = (OH - 1) * sh + (KH - 1) * dh + 1, WP = (OW - 1) * sw + (KW - 1) * dw + 1;
    thread_local std::vector<float> in, out, taps;
    in.resize(size_t(HP * WP * CB));
    // Interleave: sixteen input pixels (of the flattened plane, so short rows
    // too) of every channel at a time through a register transpose, each pixel
    // then stored at its padded position; the rest element by element. Padded
    // rows [r0, r1) and columns [col0, col1) hold input pixels; the border
    // around them is the padding, which reads zero.
    const int64_t r0 = std::max<int64_t>(0, ph), r1 = std::min(HP, H + ph);
    const int64_t col0 = std::max<int64_t>(0, pw), col1 = std::min(WP, W + pw);
    const auto zero = [&](int64_t from, int64_t to) {
        std::fill(in.data() + from * CB, in.data() + std::max(from, to) * CB, 0.0f);
    };
    zero(0, r0 * WP);
    for (int64_t r = r0; r < r1; ++r) {
        zero(r * WP, r * WP + col0);
        zero(r * WP + col1, (r + 1) * WP);
    }
    zero(std::max(r0, r1) * WP, HP * WP);
    // Input pixel (row, col) of the plane lands at padded (row + ph, col + pw),
    // when that lies inside the windows' reach; walked without divisions.
    struct Pixel {
        int64_t row = 0, col = 0;
    };
    const auto next = [&](Pixel& p) {
        if (++p.col == W) {
            p.col = 0;
            ++p.row;
        }
    };
    const auto inside = [&](const Pixel& p) {
        return p.row + ph >= r0 && p.row + ph < r1 && p.col + pw >= col0 && p.col + pw < col1;
    };
    const auto at = [&](const Pixel& p) { return in.data() + ((p.row + ph) * WP + p.col + pw) * CB; };
    int64_t q = 0;
    Pixel pixel;
    if (channels == CB)
        for (; q + 16 <= H * W; q += 16) {
            ChannelVector block[16];
            for (int64_t c = 0; c < CB; ++c)
                block[c] = *reinterpret_cast<const ChannelVector*>(x + c * H * W + q);
            transpose16(block);
            for (int64_t j = 0; j < 16; ++j, next(pixel))
                if (inside(pixel))
                    *reinterpret_cast<ChannelVector*>(at(pixel)) = block[j];
        }
    for (; q < H * W; ++q, next(pixel))
        if (inside(pixel))
            for (int64_t c = 0; c < channels; ++c)
                at(pixel)[c] = x[c * H * W + q];
    if (channels < CB) // the unused lanes of every pixel: zero rather than stale
        for (int64_t r = r0; r < r1; ++r)
            for (int64_t col = col0; col < col1; ++col)
                std::fill(in.data() + (r * WP + col) * CB + channels, in.data() + (r * WP + col + 1) * CB, 0.0f);
    taps.assign(size_t(KH * KW * CB), 0.0f);
    ChannelVector b{};
    for (int64_t c = 0; c < channels; ++c) {
        for (int64_t t = 0; t < KH * KW; ++t)
            taps[size_t(t * CB + c)] = w[c * KH * KW + t];
        b[c] = bias ? bias[c] : 0.0f;
    }
    out.resize(size_t(OH * OW * CB));
    for (int64_t oh = 0; oh < OH; ++oh) {
        int64_t ow = 0;
        for (; ow + ILP <= OW; ow += ILP) {
            ChannelVector acc[ILP];
            for (int64_t j = 0; j < ILP; ++j)
                acc[j] = b;
            for (int64_t kh = 0; kh < KH; ++kh) {
                const float* row = in.data() + ((oh * sh + kh * dh) * WP + ow * sw) * CB;
                for (int64_t kw = 0; kw < KW; ++kw) {
                    const ChannelVector tap =
                        *reinterpret_cast<const ChannelVector*>(taps.data() + (kh * KW + kw) * CB);
                    const float* px = row + kw * dw * CB;
                    for (int64_t j = 0; j < ILP; ++j)
                        acc[j] += tap * *reinterpret_cast<const ChannelVector*>(px + j * sw * CB);
                }
            }
            for (int64_t j = 0; j < ILP; ++j)
                *reinterpret_cast<ChannelVector*>(out.data() + (oh * OW + ow + j) * CB) = acc[j];
        }
        for (; ow < OW; ++ow) {
            ChannelVector acc = b;
            for (int64_t kh = 0; kh < KH; ++kh)
                for (int64_t kw = 0; kw < KW; ++kw)
                    acc += *reinterpret_cast<const ChannelVector*>(taps.data() + (kh * KW + kw) * CB) *
                           *reinterpret_cast<const ChannelVector*>(in.data() +
                                                                   ((oh * sh + kh * dh) * WP + ow * sw + kw * dw) * CB);
            *reinterpret_cast<ChannelVector*>(out.data() + (oh * OW + ow) * CB) = acc;
        }
    }
    // De-interleave: sixteen pixels at a time through a register transpose.
    const int64_t P = OH * OW;
    int64_t p = 0;
    for (; p + 16 <= P; p += 16) {
        ChannelVector block[16];
        for (int64_t j = 0; j < 16; ++j)
            block[j] = *reinterpret_cast<const ChannelVector*>(out.data() + (p + j) * CB);
        transpose16(block);
        for (int64_t c = 0; c < channels; ++c)
            *reinterpret_cast<ChannelVector*>(y + c * P + p) = block[c];
    }
    for (; p < P; ++p)
        for (int64_t c = 0; c < channels; ++c)
            y[c * P + p] = out[size_t(p * CB + c)];
}

#if defined(__x86_64__) && defined(__GNUC__)
[[gnu::target("avx512f")]] void depthwiseBlockAvx512(const float* x, int64_t channels, const float* w,
                                                     const float* bias, const WindowGeometry& g, float* y)
{
    depthwiseBlockBody(x, channels, w, bias, g, y);
}

[[gnu::target("avx2,fma")]] void depthwiseBlockAvx2(const float* x, int64_t channels, const float* w, const float* bias,
                                                    const WindowGeometry& g, float* y)
{
    depthwiseBlockBody(x, channels, w, bias, g, y);
}
#endif

void depthwiseBlock(const float* x, int64_t channels, const float* w, const float* bias, const WindowGeometry& g,
                    float* y)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (gemm::simdLevel() == gemm::SimdLevel::Avx512)
        return depthwiseBlockAvx512(x, channels, w, bias, g, y);
    if (gemm::simdLevel() == gemm::SimdLevel::Avx2)
        return depthwiseBlockAvx2(x, channels, w, bias, g, y);
#endif
    depthwiseBlockBody(x, channels, w, bias, g, y);
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
template <class T, class Sink>
void im2col2d(const T* x, int64_t channels, const WindowGeometry& g, int64_t p0, int64_t p1, const Sink& out)
{
    const int64_t H = g.input[0], W = g.input[1], KH = g.kernel[0], KW = g.kernel[1];
    const int64_t OW = g.output[1], sw = g.strides[1];
    for (int64_t c = 0; c < channels; ++c)
        for (int64_t kh = 0; kh < KH; ++kh)
            for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t k = (c * KH + kh) * KW + kw;
                const int64_t offset = kw * g.dilations[1] - g.padBegin[1];
                const auto [lo, hi] = validOutputs(offset, sw, W, OW);
                for (int64_t p = p0; p < p1;) {
                    const int64_t oh = p / OW, owBegin = p % OW, owEnd = std::min(OW, owBegin + (p1 - p));
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

std::vector<int64_t> spatialOf(const Shape& shape)
{
    return {shape.begin() + 2, shape.end()};
}

} // namespace

WindowGeometry resolveWindow(const KernelContext& ctx, const std::vector<int64_t>& input,
                             const std::vector<int64_t>& kernel, bool ceilMode, bool hasDilations)
{
    const size_t rank = input.size();
    WindowGeometry g;
    g.input = input;
    g.kernel = kernel;
    g.strides = ctx.intsAttribute("strides", std::vector<int64_t>(rank, 1));
    g.dilations =
        hasDilations ? ctx.intsAttribute("dilations", std::vector<int64_t>(rank, 1)) : std::vector<int64_t>(rank, 1);
    if (g.strides.size() != rank || g.dilations.size() != rank)
        ctx.fail("strides and dilations need " + std::to_string(rank) + " values, one per spatial axis");
    for (size_t d = 0; d < rank; ++d)
        if (g.strides[d] < 1 || g.dilations[d] < 1 || kernel[d] < 1)
            ctx.fail("kernel sizes, strides and dilations must be positive");
    const std::string autoPad = ctx.stringAttribute("auto_pad", "NOTSET");
    g.padBegin.assign(rank, 0);
    g.padEnd.assign(rank, 0);
    g.output.assign(rank, 0);
    for (size_t d = 0; d < rank; ++d) {
        const int64_t extent = (kernel[d] - 1) * g.dilations[d] + 1;
        if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
            g.output[d] = (input[d] + g.strides[d] - 1) / g.strides[d];
            const int64_t total = std::max<int64_t>(0, (g.output[d] - 1) * g.strides[d] + extent - input[d]);
            g.padBegin[d] = autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
            g.padEnd[d] = total - g.padBegin[d];
            continue;
        }
        if (autoPad == "NOTSET") {
            const std::vector<int64_t> pads = ctx.intsAttribute("pads", std::vector<int64_t>(2 * rank, 0));
            if (pads.size() != 2 * rank)
                ctx.fail("pads needs " + std::to_string(2 * rank) + " values (begins, then ends)");
            g.padBegin[d] = pads[d];
            g.padEnd[d] = pads[d + rank];
            if (g.padBegin[d] < 0 || g.padEnd[d] < 0)
                ctx.fail("pads must not be negative");
        } else if (autoPad != "VALID") {
            ctx.fail("auto_pad '" + autoPad + "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
        }
        const int64_t span = input[d] + g.padBegin[d] + g.padEnd[d] - extent;
        if (span < 0)
            ctx.fail("the window (" + std::to_string(extent) + ") is larger than the padded input (" +
                     std::to_string(input[d] + g.padBegin[d] + g.padEnd[d]) + ") on spatial axis " + std::to_string(d));
        if (ceilMode) {
            g.output[d] = (span + g.strides[d] - 1) / g.strides[d] + 1;
            // The last window must start inside the input or its begin padding.
            if ((g.output[d] - 1) * g.strides[d] >= input[d] + g.padBegin[d])
                --g.output[d];
        } else {
            g.output[d] = span / g.strides[d] + 1;
        }
    }
    return g;
}

namespace {

// Shapes of a Conv or ConvInteger node, checked.
struct ConvPlan {
    int64_t N = 0, C = 0, M = 0, group = 1, Cg = 0, Mg = 0;
    std::vector<int64_t> kernel;
    WindowGeometry g;
    Shape outputShape;
};

ConvPlan planConv(const KernelContext& ctx, const Tensor& X, const Tensor& Wt)
{
    if (X.rank() < 3 || Wt.rank() != X.rank())
        ctx.fail("X " + shapeToString(X.shape()) + " and W " + shapeToString(Wt.shape()) +
                 " must both be [N, C, spatial...] and [M, C/group, kernel...]");
    ConvPlan plan;
    plan.N = X.dim(0);
    plan.C = X.dim(1);
    plan.M = Wt.dim(0);
    plan.group = ctx.intAttribute("group", 1);
    if (plan.group < 1 || plan.C % plan.group != 0 || plan.M % plan.group != 0 || Wt.dim(1) != plan.C / plan.group)
        ctx.fail("group " + std::to_string(plan.group) + " does not fit X " + shapeToString(X.shape()) + " and W " +
                 shapeToString(Wt.shape()));
    plan.Cg = plan.C / plan.group;
    plan.Mg = plan.M / plan.group;
    plan.kernel = spatialOf(Wt.shape());
    if (auto ks = ctx.optionalIntsAttribute("kernel_shape"); ks && *ks != plan.kernel)
        ctx.fail("kernel_shape does not match W " + shapeToString(Wt.shape()));
    plan.g = resolveWindow(ctx, spatialOf(X.shape()), plan.kernel, false, true);
    plan.outputShape = {plan.N, plan.M};
    plan.outputShape.insert(plan.outputShape.end(), plan.g.output.begin(), plan.g.output.end());
    return plan;
}

// An 8-bit tensor minus its zero point as int32; the zero point is a scalar or
// holds one value per each of `slices` equal leading slices (W's output channels).
std::vector<int32_t> centredCodes(const KernelContext& ctx, const Tensor& t, const Tensor* zp, int64_t slices,
                                  const char* name)
{
    if (t.dtype() != DType::U8 && t.dtype() != DType::I8)
        ctx.fail(std::string(name) + " must be int8 or uint8, not " + std::string(dtypeName(t.dtype())));
    if (zp && (zp->dtype() != t.dtype() || (zp->numel() != 1 && zp->numel() != slices)))
        ctx.fail(std::string(name) + "'s zero point " + shapeToString(zp->shape()) + " must be a scalar or hold " +
                 std::to_string(slices) + " values of " + std::string(dtypeName(t.dtype())));
    auto read = [](const Tensor& v, size_t i) {
        return v.dtype() == DType::U8 ? int32_t(v.values<uint8_t>()[i]) : int32_t(v.values<int8_t>()[i]);
    };
    const int64_t sliceSize = slices > 0 ? t.numel() / slices : 1;
    std::vector<int32_t> out(size_t(t.numel()));
    for (size_t i = 0; i < out.size(); ++i)
        out[i] = read(t, i) - (zp ? read(*zp, zp->numel() == 1 ? 0 : size_t(int64_t(i) / sliceSize)) : 0);
    return out;
}

} // namespace

namespace {

// The padded input of a 2-D window split by row and column residue modulo
// the strides into sh x sw sub-planes of HS x WS (sub-plane (a, b) holds
// padded rows a, a + sh, ... and columns b, b + sw, ...): each window tap then
// reads consecutive values for consecutive outputs, at any stride. A window
// of rows (fillRows) keeps rows [t0, t0 + rows) of every sub-plane.
struct SubPlanes {
    int64_t HP, HS, WS, sub, plane; // padded rows; sub-plane extent; floats per sub-plane, per input plane

    explicit SubPlanes(const WindowGeometry& g)
        : HP((g.output[0] - 1) * g.strides[0] + (g.kernel[0] - 1) * g.dilations[0] + 1),
          HS((HP + g.strides[0] - 1) / g.strides[0]),
          WS(((g.output[1] - 1) * g.strides[1] + (g.kernel[1] - 1) * g.dilations[1] + g.strides[1]) / g.strides[1]),
          sub(HS * WS), plane(g.strides[0] * g.strides[1] * sub)
    {
    }

    // `planes` whole input planes of x into dst, one after the other, every element written.
    void fill(const float* x, int64_t planes, const WindowGeometry& g, float* dst) const
    {
        const int64_t H = g.input[0], W = g.input[1];
        tbb::parallel_for(int64_t(0), planes,
                          [&](int64_t p) { fillRows(x + p * H * W, g, 0, HS, HS, dst + p * plane); });
    }

    // Rows [t0, t0 + rows) of the sub-planes of one input plane (src) into
    // dst, sub-plane after sub-plane, each `stride` rows long (rows past the
    // padded input are zeros; rows past `rows` are left alone).
    void fillRows(const float* src, const WindowGeometry& g, int64_t t0, int64_t rows, int64_t stride, float* dst) const
    {
        const int64_t H = g.input[0], W = g.input[1], sh = g.strides[0], sw = g.strides[1];
        const int64_t ph = g.padBegin[0], pw = g.padBegin[1];
        for (int64_t t = 0; t < rows; ++t)
            for (int64_t a = 0; a < sh; ++a) {
                const int64_t r = (t0 + t) * sh + a, ih = r - ph;
                for (int64_t b = 0; b < sw; ++b) {
                    float* row = dst + ((a * sw + b) * stride + t) * WS;
                    // Sub-plane column i is padded column b + i * sw, input column b + i * sw - pw.
                    const int64_t i0 = std::min(WS, pw > b ? (pw - b + sw - 1) / sw : 0);
                    const int64_t i1 = std::max(i0, std::min(WS, W + pw > b ? (W + pw - b + sw - 1) / sw : 0));
                    if (ih < 0 || ih >= H || r >= HP) {
                        std::fill(row, row + WS, 0.0f);
                        continue;
                    }
                    std::fill(row, row + i0, 0.0f);
                    const float* in = src + ih * W + b - pw;
                    if (sw == 1)
                        std::copy(in + i0, in + i1, row + i0);
                    else if (sw == 2) // a constant stride vectorizes
                        for (int64_t i = i0; i < i1; ++i)
                            row[i] = in[i * 2];
                    else
                        for (int64_t i = i0; i < i1; ++i)
                            row[i] = in[i * sw];
                    std::fill(row + i1, row + WS, 0.0f);
                }
            }
    }

    // Where row (c, kh, kw) of the virtual column matrix starts, for
    // `channels` channels whose sub-planes are `stride` rows long.
    std::vector<int64_t> rowOffsets(int64_t channels, const WindowGeometry& g, int64_t stride) const
    {
        const int64_t sh = g.strides[0], sw = g.strides[1];
        std::vector<int64_t> offsets;
        for (int64_t c = 0; c < channels; ++c)
            for (int64_t kh = 0; kh < g.kernel[0]; ++kh)
                for (int64_t kw = 0; kw < g.kernel[1]; ++kw) {
                    const int64_t rh = kh * g.dilations[0], rw = kw * g.dilations[1];
                    offsets.push_back(((c * sh * sw + (rh % sh) * sw + rw % sw) * stride + rh / sh) * WS + rw / sw);
                }
        return offsets;
    }
};

// 2-D Conv as an implicit GEMM, with no column matrix. Each (image,
// channel)'s input is copied once, zero-padded to what the windows reach
// (HP x WP), and split by row and column residue modulo the strides into
// sh x sw sub-planes of HS x WS (sub-plane (a, b) holds padded rows a, a + sh,
// ... and columns b, b + sw, ...). Row (c, kh, kw) of the virtual column matrix
// is then one sub-plane read from a fixed offset on, column q standing for
// output (q / WS, q % WS): consecutive outputs read consecutive inputs, for
// every tap and stride. The WS - OW columns per output row that fall between
// rows are computed and dropped.
void implicitGemmConv(const KernelContext& ctx, const gemm::PackedMatrix& packed, const float* x, const float* bias,
                      const float* addend, const FusedActivation* activation, int64_t N, int64_t C, int64_t group,
                      int64_t Mg, const WindowGeometry& g, float* y)
{
    const int64_t OH = g.output[0], OW = g.output[1];
    const SubPlanes s(g);
    const int64_t WS = s.WS, plane = s.plane;
    const int64_t Cg = C / group, M = Mg * group, P = OH * OW, Q = (OH - 1) * WS + OW, nr = packed.nr();

    // Weights that outgrow L2 (late layers: 512 x 4608 floats, 9 MiB) split
    // into row blocks of about 1 MiB; a task keeps one block in cache for all
    // images and columns, so the weights stream from memory once per run, not
    // once per column chunk. Small weights: tasks over (image, column chunk),
    // every task all rows.
    const int64_t threads = tbb::this_task_arena::max_concurrency();
    const int64_t K = Cg * g.kernel[0] * g.kernel[1], mr = packed.mr();
    // Blocks: a multiple of the thread count, each a near-equal share of the mr-row strips.
    const int64_t rowStrips = (Mg + mr - 1) / mr;
    int64_t rowBlocks = (Mg * K * int64_t(sizeof(float)) + (int64_t(1) << 20) - 1) >> 20;
    rowBlocks = rowBlocks <= 1 ? 1 : std::min(rowStrips, (rowBlocks + threads - 1) / threads * threads);
    auto blockStart = [&](int64_t b) { return std::min(Mg, b * rowStrips / rowBlocks * mr); };
    const int64_t rowBlock = (rowStrips + rowBlocks - 1) / rowBlocks * mr; // the largest block
    const int64_t strips = (Q + nr - 1) / nr;
    const int64_t wanted = rowBlocks > 1 ? 1 : (4 * threads + N * group - 1) / (N * group); // chunks per (image, group)
    const int64_t fits = std::max<int64_t>(1, (int64_t(1) << 17) / (rowBlock * nr));
    const int64_t chunk = nr * std::clamp<int64_t>((strips + wanted - 1) / wanted, 1, fits);
    const int64_t chunks = (Q + chunk - 1) / chunk;

    // The chunk [q0, q1) of one image, rows [r0, r1) of group gi, its virtual
    // column matrix's row k at base + offsets[k]: sums, then the columns that are outputs.
    auto run = [&](const float* base, const int64_t* offsets, int64_t n, int64_t gi, int64_t r0, int64_t r1,
                   int64_t q0) {
        const int64_t q1 = std::min(Q, q0 + chunk);
        thread_local std::vector<float> sums;
        sums.resize(size_t((r1 - r0) * chunk));
        packed.multiplyIndirect(gi, base, offsets, q1 - q0, sums.data(), chunk, r0, r1);
        for (int64_t oh = q0 / WS; oh * WS < q1; ++oh) {
            const int64_t ow0 = std::max<int64_t>(0, q0 - oh * WS), ow1 = std::min(OW, q1 - oh * WS);
            if (ow0 >= ow1)
                continue;
            for (int64_t m = r0; m < r1; ++m) {
                const int64_t channel = gi * Mg + m;
                float* dst = y + (n * M + channel) * P + oh * OW + ow0;
                const float* src = sums.data() + (m - r0) * chunk + (oh * WS + ow0 - q0);
                finishOutputs(src, dst, ow1 - ow0, bias ? bias + channel : nullptr,
                              addend ? addend + (dst - y) : nullptr, activation);
            }
        }
    };
    if (rowBlocks > 1) {
        // Every row block reads every image's whole sub-planes: filled once,
        // with nr zeros after them (a strip at the end reads up to nr - 1
        // columns past Q). (Left unwritten at allocation: fill() writes every element.)
        const std::unique_ptr<float[]> padded(new float[size_t(N * C * plane + nr)]);
        s.fill(x, N * C, g, padded.get());
        std::fill(padded.get() + N * C * plane, padded.get() + N * C * plane + nr, 0.0f);
        const std::vector<int64_t> offsets = s.rowOffsets(Cg, g, s.HS);
        tbb::parallel_for(int64_t(0), group * rowBlocks, [&](int64_t task) {
            const int64_t gi = task / rowBlocks, r0 = blockStart(task % rowBlocks),
                          r1 = blockStart(task % rowBlocks + 1);
            for (int64_t n = 0; n < N; ++n)
                for (int64_t q0 = 0; q0 < Q; q0 += chunk) {
                    ctx.checkCancelled();
                    run(padded.get() + (n * C + gi * Cg) * plane + q0, offsets.data(), n, gi, r0, r1, q0);
                }
        });
        return;
    }
    // One task per chunk: it fills the sub-plane rows its columns read into a
    // buffer of its thread, where the product finds them in L2. (Filling the
    // batch's sub-planes first wrote them out of cache: resnet18's 56 x 56
    // convs spent 220 us of 1.5 ms on it, 70 us when refilled in cache.)
    // Column q of a chunk from q0 stands for output (q / WS, q % WS); with
    // the window's reach down (halo rows) and right (reach columns) and the
    // product's reads up to nr - 1 columns past its last, a chunk reads rows
    // q0 / WS to lastRow(q1) of each sub-plane; the buffer holds `stride` rows
    // per sub-plane, enough for any chunk.
    const int64_t halo = (g.kernel[0] - 1) * g.dilations[0] / g.strides[0];
    const int64_t reach = (g.kernel[1] - 1) * g.dilations[1] / g.strides[1];
    auto lastRow = [&](int64_t q1) { return (q1 + nr - 2 + reach) / WS + halo; };
    const int64_t stride = (chunk + nr - 2 + reach + WS - 1) / WS + halo + 1;
    const std::vector<int64_t> offsets = s.rowOffsets(Cg, g, stride);
    const int64_t perChannel = g.strides[0] * g.strides[1] * stride * WS;
    tbb::parallel_for(int64_t(0), N * group * chunks, [&](int64_t task) {
        ctx.checkCancelled();
        const int64_t ng = task / chunks, n = ng / group, gi = ng % group, q0 = (task % chunks) * chunk;
        const int64_t t0 = q0 / WS, rows = lastRow(std::min(Q, q0 + chunk)) - t0 + 1;
        thread_local std::vector<float> tile;
        tile.resize(size_t(Cg * perChannel));
        const float* src = x + (n * C + gi * Cg) * g.input[0] * g.input[1];
        for (int64_t c = 0; c < Cg; ++c)
            s.fillRows(src + c * g.input[0] * g.input[1], g, t0, rows, stride, tile.data() + c * perChannel);
        run(tile.data() + (q0 - t0 * WS), offsets.data(), n, gi, 0, Mg, q0);
    });
}

// Consecutive columns of the batch's column matrix that read consecutive
// values (one output row of one image, within one strip): `length` values
// from `from` past a tap's row offset in the sub-planes, into strip `strip`
// from column `column`.
struct ColumnPiece {
    int32_t from, strip, column, length;
};

// One row of the column matrix, piece by piece; strips stripStride floats apart.
void copyPieces(const float* src, const std::vector<ColumnPiece>& pieces, float* row, int64_t stripStride)
{
    for (const ColumnPiece& p : pieces)
        std::copy(src + p.from, src + p.from + p.length, row + p.strip * stripStride + p.column);
}

#if defined(__x86_64__) && defined(__GNUC__)
// The same with masked vector moves: pieces are short (7 or 14 values), and a
// library copy call per piece cost more than the copy.
[[gnu::target("avx512f")]] void copyPiecesAvx512(const float* src, const std::vector<ColumnPiece>& pieces, float* row,
                                                 int64_t stripStride)
{
    for (const ColumnPiece& p : pieces) {
        const float* from = src + p.from;
        float* to = row + p.strip * stripStride + p.column;
        for (int32_t i = 0; i < p.length; i += 16) {
            const __mmask16 mask = p.length - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (p.length - i)) - 1);
            _mm512_mask_storeu_ps(to + i, mask, _mm512_maskz_loadu_ps(mask, from + i));
        }
    }
}
#endif

// 2-D Conv (group 1) on small planes with many output channels, the late
// stages of a CNN. Per image, a 7 x 7 output fills 49 of 64 micro-tile
// columns (and the implicit GEMM's rows of 9 padded columns hold 7 outputs),
// so the whole batch shares one column matrix instead: N * P columns, whole
// strips and a few left over for the along-the-rows kernel (98 = 3 x 32 + 2).
// Its strips are copied once from the sub-planes, then tasks take blocks of
// output channels, each running all columns against its rows of the weights.
// Needs N * C * SubPlanes(g).plane below 2^31 (int32 piece offsets).
void batchedColumnsConv(const KernelContext& ctx, const gemm::PackedMatrix& packed, const float* x, const float* bias,
                        const float* addend, const FusedActivation* activation, int64_t N, int64_t C, int64_t M,
                        const WindowGeometry& g, float* y)
{
    const SubPlanes planes(g);
    const int64_t OW = g.output[1], P = g.output[0] * OW, K = C * shapeElementCount(g.kernel), width = N * P;
    const int64_t nr = packed.nr(), mr = packed.mr(), paddedWidth = (width + nr - 1) / nr * nr;
    const std::unique_ptr<float[]> padded(new float[size_t(N * C * planes.plane)]);
    planes.fill(x, N * C, g, padded.get());
    const std::vector<int64_t> offsets = planes.rowOffsets(C, g, planes.HS);
    std::vector<ColumnPiece> pieces;
    for (int64_t j = 0; j < width;) {
        const int64_t n = j / P, oh = j % P / OW, ow = j % P % OW;
        const int64_t length = std::min(OW - ow, nr - j % nr);
        pieces.push_back(
            {int32_t(n * C * planes.plane + oh * planes.WS + ow), int32_t(j / nr), int32_t(j % nr), int32_t(length)});
        j += length;
    }
    // Per depth block of kDepthBlock rows, strips of nr columns, k-major (what
    // multiplyPacked reads); zeros past `width` in the last strip.
    // (Left unwritten at allocation: the loop below writes every element.)
    const std::unique_ptr<float[]> columns(new float[size_t(K * paddedWidth)]);
    const int64_t rowsPerTask = std::max<int64_t>(1, (int64_t(1) << 14) / paddedWidth);
    auto copy = copyPieces;
#if defined(__x86_64__) && defined(__GNUC__)
    if (gemm::simdLevel() == gemm::SimdLevel::Avx512)
        copy = copyPiecesAvx512;
#endif
    tbb::parallel_for(int64_t(0), (K + rowsPerTask - 1) / rowsPerTask, [&](int64_t task) {
        for (int64_t k = task * rowsPerTask; k < std::min(K, (task + 1) * rowsPerTask); ++k) {
            const int64_t block = k / gemm::kDepthBlock * gemm::kDepthBlock,
                          kc = std::min(gemm::kDepthBlock, K - block);
            float* row = columns.get() + block * paddedWidth + (k - block) * nr;
            const float* src = padded.get() + offsets[size_t(k)];
            copy(src, pieces, row, kc * nr);
            if (width < paddedWidth) {
                float* last = row + (paddedWidth / nr - 1) * kc * nr;
                std::fill(last + width % nr, last + nr, 0.0f);
            }
        }
    });

    // Blocks of output channels: at least four per thread (TBB balances them),
    // and small enough that a block's weights for one depth block stay in L2.
    const int64_t threads = tbb::this_task_arena::max_concurrency();
    const int64_t rowStrips = (M + mr - 1) / mr;
    const int64_t rowBlocks = std::min(rowStrips, tasksPerThread * threads);
    auto blockStart = [&](int64_t b) { return std::min(M, b * rowStrips / rowBlocks * mr); };
    const std::unique_ptr<float[]> sums(new float[size_t(M * width)]);
    tbb::parallel_for(int64_t(0), rowBlocks, [&](int64_t block) {
        ctx.checkCancelled();
        const int64_t r0 = blockStart(block), r1 = blockStart(block + 1);
        packed.multiplyPacked(0, columns.get(), width, sums.get() + r0 * width, width, r0, r1);
        for (int64_t m = r0; m < r1; ++m)
            for (int64_t n = 0; n < N; ++n) {
                float* dst = y + (n * M + m) * P;
                const float* src = sums.get() + m * width + n * P;
                finishOutputs(src, dst, P, bias ? bias + m : nullptr, addend ? addend + (dst - y) : nullptr,
                              activation);
            }
    });
}

} // namespace

void conv(KernelContext& ctx)
{
    const Tensor& X = ctx.floatInput(0);
    const Tensor& Wt = ctx.floatInput(1);
    const Tensor* B = ctx.optionalInput(2);
    const ConvPlan plan = planConv(ctx, X, Wt);
    const int64_t N = plan.N, C = plan.C, M = plan.M, group = plan.group, Cg = plan.Cg, Mg = plan.Mg;
    const std::vector<int64_t>& kernel = plan.kernel;
    const WindowGeometry& g = plan.g;
    if (B && (B->dtype() != DType::F32 || B->numel() != M))
        ctx.fail("B must be float32 with " + std::to_string(M) + " values");
    Tensor Y = Tensor::uninitialized(DType::F32, plan.outputShape);
    const float* x = X.values<float>().data();
    const float* w = Wt.values<float>().data();
    const float* bias = B ? B->values<float>().data() : nullptr;
    float* y = Y.mutableValues<float>().data();

    const int64_t inSpatial = shapeElementCount(g.input), P = shapeElementCount(g.output),
                  kernelSize = shapeElementCount(kernel);
    const int64_t K = Cg * kernelSize;

    // Folded nodes: an activation, and a residual Add's other operand when it has
    // the output's shape (else the interpreter runs the Add and what follows).
    const FusedActivation* activation = ctx.fusedActivation();
    const Tensor* residual = ctx.fusedAddend();
    if (residual && ((Cg == 1 && Mg == 1 && kernel.size() == 2) || residual->dtype() != DType::F32 ||
                     residual->shape() != plan.outputShape)) {
        ctx.declineFusion();
        residual = nullptr;
        activation = nullptr;
    }
    const float* addend = residual ? residual->values<float>().data() : nullptr;
    // Depthwise with enough channels to fill a vector, on small planes, or on
    // planes up to 64 x 64 outputs with strides (the per-channel path splits
    // those into strided sub-planes, which costs more than interleaving
    // channels: 72 channels of 56 x 56 at stride 2 took 177 us per batch of
    // two, 85 us interleaved). kChannelBlock channels per task.
    const bool strided = g.strides[0] * g.strides[1] > 1;
    if (Cg == 1 && Mg == 1 && kernel.size() == 2 && group >= kChannelBlock / 2 &&
        (P <= 256 || (strided && P <= 4096))) {
        const int64_t blocks = (group + kChannelBlock - 1) / kChannelBlock;
        tbb::parallel_for(int64_t(0), N * blocks, [&](int64_t task) {
            const int64_t n = task / blocks, c0 = (task % blocks) * kChannelBlock;
            const int64_t channels = std::min(kChannelBlock, group - c0);
            float* yc = y + (n * M + c0) * P;
            depthwiseBlock(x + (n * C + c0) * inSpatial, channels, w + c0 * kernelSize, bias ? bias + c0 : nullptr, g,
                           yc);
            if (activation)
                activation->apply(yc, channels * P);
        });
        ctx.setOutput(0, std::move(Y));
        return;
    }
    if (Cg == 1 && Mg == 1 && kernel.size() == 2) {
        tbb::parallel_for(int64_t(0), N * group, [&](int64_t ng) {
            const int64_t c = ng % group;
            depthwise2d(x + ng * inSpatial, w + c * kernelSize, bias ? bias[c] : 0.0f, g, y + ng * P);
            if (activation)
                activation->apply(y + ng * P, P);
        });
        ctx.setOutput(0, std::move(Y));
        return;
    }

    // A 1x1 window with unit strides and no pads reads the input as its own column matrix.
    bool pointwise = kernelSize == 1;
    for (size_t d = 0; d < kernel.size(); ++d)
        pointwise = pointwise && g.strides[d] == 1 && g.padBegin[d] == 0 && g.padEnd[d] == 0;

    // Tasks: (batch, group, column chunk); a chunk's column buffer stays near L2 size
    // while its GEMM stays wide enough to run at full speed.
    // With few (batch, group) pairs, chunks also shrink so that every thread gets work.
    const int64_t wantedChunks =
        (tasksPerThread * tbb::this_task_arena::max_concurrency() + N * group - 1) / (N * group);
    const int64_t chunk = std::max<int64_t>(
        64, std::min((int64_t(1) << 18) / std::max<int64_t>(K, 1), (P + wantedChunks - 1) / wantedChunks));
    const int64_t chunks = (P + chunk - 1) / chunk;
    const gemm::SimdLevel level = gemm::simdLevel();
    // Packed once per weight tensor and kept in the node's memo across runs.
    std::shared_ptr<const gemm::PackedMatrix> packed;
    if (level != gemm::SimdLevel::None) {
        auto pack = [&] {
            return std::make_shared<const gemm::PackedMatrix>(level, w, group, Mg, K, Mg * K, K, 1,
                                                              gemm::Subnormals::Flush);
        };
        packed = ctx.memo() ? ctx.memo()->get<gemm::PackedMatrix>(Wt, pack) : pack();
    }
    // Small planes, many output channels: one column matrix for the batch.
    // resnet18 at batch 2, per conv: 14 x 14 stages 1.90-2.00 -> 1.74-1.81 ms,
    // 7 x 7 1.85-1.91 -> 1.79-1.83, the stride-2 convs onto them 1.18 -> 0.98
    // and 1.10 -> 0.99. (1 x 1 windows stay per image: their column matrix is
    // their input, and copying it cost more than the padded strips saved.)
    if (packed && kernel.size() == 2 && group == 1 && kernelSize > 1 && P <= kBatchedColumnsMaxPlane &&
        Mg >= kBatchedColumnsMinStrips * packed->mr() && K * N * P <= kBatchedColumnsMaxFloats &&
        N * C * SubPlanes(g).plane < (int64_t(1) << 31)) {
        batchedColumnsConv(ctx, *packed, x, bias, addend, activation, N, C, M, g, y);
        ctx.setOutput(0, std::move(Y));
        return;
    }
    // Implicit GEMM for 2-D windows; a strided 1x1 conv would copy all of its
    // input to read a quarter of it, so it stays on the column matrix.
    if (packed && kernel.size() == 2 && kernelSize > 1) {
        implicitGemmConv(ctx, *packed, x, bias, addend, activation, N, C, group, Mg, g, y);
        ctx.setOutput(0, std::move(Y));
        return;
    }
    // Bias and fused activation on a chunk's outputs while they are still in cache.
    auto epilogue = [&](int64_t gi, StridedMatrixMap& yg, int64_t width) {
        for (int64_t m = 0; m < Mg; ++m)
            finishOutputs(&yg(m, 0), &yg(m, 0), width, bias ? bias + gi * Mg + m : nullptr,
                          addend ? addend + (&yg(m, 0) - y) : nullptr, activation);
    };
    tbb::parallel_for(int64_t(0), N * group * chunks, [&](int64_t task) {
        ctx.checkCancelled();
        const int64_t ng = task / chunks, p0 = (task % chunks) * chunk, p1 = std::min(P, p0 + chunk);
        const int64_t n = ng / group, gi = ng % group;
        const float* xg = x + (n * C + gi * Cg) * inSpatial;
        ConstMatrixMap wg(w + gi * Mg * K, Mg, K);
        StridedMatrixMap yg(y + (n * M + gi * Mg) * P + p0, Mg, p1 - p0, Eigen::OuterStride<>(P));
        // The column matrix [K, p1 - p0] (row stride `ldcol`): the input itself for a pointwise conv.
        thread_local std::vector<float> buffer;
        if (packed && !pointwise && kernel.size() == 2) {
            // The column matrix goes straight into the GEMM's packed layout.
            gemm::PackedColumns into{nullptr, K, p1 - p0, std::countr_zero(uint64_t(packed->nr())),
                                     std::countr_zero(uint64_t(gemm::kDepthBlock))};
            buffer.resize(size_t(K * into.paddedWidth()));
            into.data = buffer.data();
            im2col2d(xg, Cg, g, p0, p1, into);
            into.padLastStrip();
            packed->multiplyPacked(gi, buffer.data(), p1 - p0, yg.data(), P);
            epilogue(gi, yg, p1 - p0);
            return;
        }
        const float* col = xg + p0;
        int64_t ldcol = P;
        if (!pointwise) {
            buffer.resize(size_t(K * (p1 - p0)));
            if (kernel.size() == 2)
                im2col2d(xg, Cg, g, p0, p1, RowMajorColumns<float>{buffer.data(), p1 - p0});
            else
                im2col(xg, Cg, g, p0, p1, buffer.data());
            col = buffer.data();
            ldcol = p1 - p0;
        }
        if (packed)
            packed->multiply(gi, col, ldcol, 1, p1 - p0, yg.data(), P);
        else
            yg.noalias() =
                wg * Eigen::Map<const RowMatrix, 0, Eigen::OuterStride<>>(col, K, p1 - p0, Eigen::OuterStride<>(ldcol));
        epilogue(gi, yg, p1 - p0);
    });
    ctx.setOutput(0, std::move(Y));
}

namespace {

// (x - x_zero_point) convolved with (w - w_zero_point), exactly in int32.
Tensor integerConv(const KernelContext& ctx, size_t xi, size_t xZero, size_t wi, size_t wZero, ConvPlan& plan)
{
    const Tensor& X = ctx.input(xi);
    const Tensor& Wt = ctx.input(wi);
    plan = planConv(ctx, X, Wt);
    // Zero points are subtracted first, so padding contributes zero as the op defines.
    const std::vector<int32_t> x = centredCodes(ctx, X, ctx.optionalInput(xZero), 1, "x");
    const std::vector<int32_t> w = centredCodes(ctx, Wt, ctx.optionalInput(wZero), plan.M, "w");
    Tensor Y(DType::I32, plan.outputShape);
    int32_t* y = Y.mutableValues<int32_t>().data();
    const int64_t inSpatial = shapeElementCount(plan.g.input), P = shapeElementCount(plan.g.output);
    const int64_t K = plan.Cg * shapeElementCount(plan.kernel);
    using IntMatrix = Eigen::Matrix<int32_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    tbb::parallel_for(int64_t(0), plan.N * plan.group, [&](int64_t ng) {
        ctx.checkCancelled();
        const int64_t n = ng / plan.group, gi = ng % plan.group;
        std::vector<int32_t> col(size_t(K * P));
        const int32_t* xg = x.data() + (n * plan.C + gi * plan.Cg) * inSpatial;
        if (plan.kernel.size() == 2)
            im2col2d(xg, plan.Cg, plan.g, 0, P, RowMajorColumns<int32_t>{col.data(), P});
        else
            im2col(xg, plan.Cg, plan.g, 0, P, col.data());
        Eigen::Map<IntMatrix>(y + (n * plan.M + gi * plan.Mg) * P, plan.Mg, P).noalias() =
            Eigen::Map<const IntMatrix>(w.data() + gi * plan.Mg * K, plan.Mg, K) *
            Eigen::Map<const IntMatrix>(col.data(), K, P);
    });
    return Y;
}

} // namespace

void convInteger(KernelContext& ctx)
{
    ConvPlan plan;
    ctx.setOutput(0, integerConv(ctx, 0, 2, 1, 3, plan));
}

void qLinearConv(KernelContext& ctx)
{
    ConvPlan plan;
    Tensor acc = integerConv(ctx, 0, 2, 3, 5, plan);
    auto scale = [&](size_t i, int64_t count, const char* name) {
        const Tensor& t = ctx.input(i);
        if (t.dtype() != DType::F32 || (t.numel() != 1 && t.numel() != count))
            ctx.fail(std::string(name) + " " + shapeToString(t.shape()) + " must be float32 with 1 or " +
                     std::to_string(count) + " values");
        return t.values<float>();
    };
    const auto xScale = scale(1, 1, "x_scale");
    const auto wScale = scale(4, plan.M, "w_scale");
    const auto yScale = scale(6, 1, "y_scale");
    const int64_t P = shapeElementCount(plan.g.output);
    if (const Tensor* B = ctx.optionalInput(8)) {
        // The bias is already in the accumulator's units (x_scale * w_scale).
        if (B->dtype() != DType::I32 || B->numel() != plan.M)
            ctx.fail("B must be int32 with " + std::to_string(plan.M) + " values");
        auto a = acc.mutableValues<int32_t>();
        for (size_t e = 0; e < a.size(); ++e)
            a[e] += B->values<int32_t>()[size_t((int64_t(e) / P) % plan.M)];
    }
    auto multiplier = [&](int64_t e) {
        const int64_t m = (e / P) % plan.M;
        return xScale[0] * wScale[wScale.size() == 1 ? 0 : size_t(m)] / yScale[0];
    };
    ctx.setOutput(0, requantize(ctx, acc, multiplier, ctx.optionalInput(7)));
}

void convTranspose(KernelContext& ctx)
{
    const Tensor& X = ctx.floatInput(0);
    const Tensor& Wt = ctx.floatInput(1);
    const Tensor* B = ctx.optionalInput(2);
    if (X.rank() < 3 || Wt.rank() != X.rank())
        ctx.fail("X " + shapeToString(X.shape()) + " and W " + shapeToString(Wt.shape()) +
                 " must both be [N, C, spatial...] and [C, M/group, kernel...]");
    const size_t rank = size_t(X.rank() - 2);
    const int64_t N = X.dim(0), C = X.dim(1);
    const int64_t group = ctx.intAttribute("group", 1);
    if (group < 1 || C % group != 0 || Wt.dim(0) != C)
        ctx.fail("group " + std::to_string(group) + " does not fit X " + shapeToString(X.shape()) + " and W " +
                 shapeToString(Wt.shape()));
    const int64_t Mg = Wt.dim(1), M = Mg * group, Cg = C / group;
    if (B && (B->dtype() != DType::F32 || B->numel() != M))
        ctx.fail("B must be float32 with " + std::to_string(M) + " values");
    const std::vector<int64_t> kernel = spatialOf(Wt.shape()), input = spatialOf(X.shape());
    if (auto ks = ctx.optionalIntsAttribute("kernel_shape"); ks && *ks != kernel)
        ctx.fail("kernel_shape does not match W " + shapeToString(Wt.shape()));
    const auto strides = ctx.intsAttribute("strides", std::vector<int64_t>(rank, 1));
    const auto dilations = ctx.intsAttribute("dilations", std::vector<int64_t>(rank, 1));
    const auto outputPadding = ctx.intsAttribute("output_padding", std::vector<int64_t>(rank, 0));
    if (strides.size() != rank || dilations.size() != rank || outputPadding.size() != rank)
        ctx.fail("strides, dilations and output_padding need one value per spatial axis");
    const std::string autoPad = ctx.stringAttribute("auto_pad", "NOTSET");
    auto outputShape = ctx.optionalIntsAttribute("output_shape");
    if (outputShape && outputShape->size() == rank + 2)
        outputShape = std::vector<int64_t>(outputShape->begin() + 2, outputShape->end());
    if (outputShape && outputShape->size() != rank)
        ctx.fail("output_shape needs one value per spatial axis");

    std::vector<int64_t> padBegin(rank, 0), out(rank, 0);
    const auto pads = ctx.intsAttribute("pads", std::vector<int64_t>(2 * rank, 0));
    if (pads.size() != 2 * rank)
        ctx.fail("pads needs " + std::to_string(2 * rank) + " values (begins, then ends)");
    for (size_t d = 0; d < rank; ++d) {
        if (strides[d] < 1 || dilations[d] < 1)
            ctx.fail("strides and dilations must be positive");
        const int64_t full = strides[d] * (input[d] - 1) + outputPadding[d] + (kernel[d] - 1) * dilations[d] + 1;
        const bool same = autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER";
        if (outputShape || same) {
            out[d] = outputShape ? (*outputShape)[d] : input[d] * strides[d];
            const int64_t total = full - out[d];
            // ONNX: SAME_UPPER puts the smaller half first, everything else the larger; halves
            // round down as Python's // does, so a negative total (output_shape larger than
            // the natural size) grows the end and keeps the start.
            const int64_t half = total >= 0 ? total / 2 : -((1 - total) / 2);
            padBegin[d] = autoPad == "SAME_UPPER" ? half : total - half;
        } else {
            if (autoPad != "NOTSET" && autoPad != "VALID")
                ctx.fail("auto_pad '" + autoPad + "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
            if (autoPad == "NOTSET")
                padBegin[d] = pads[d];
            out[d] = full - (autoPad == "NOTSET" ? pads[d] + pads[d + rank] : 0);
        }
        if (out[d] < 1)
            ctx.fail("the output would have no elements on spatial axis " + std::to_string(d));
    }

    Shape yShape{N, M};
    yShape.insert(yShape.end(), out.begin(), out.end());
    Tensor Y(DType::F32, yShape);
    const float* x = X.values<float>().data();
    const float* w = Wt.values<float>().data();
    float* y = Y.mutableValues<float>().data();
    const int64_t inSpatial = shapeElementCount(input), outSpatial = shapeElementCount(out),
                  kernelSize = shapeElementCount(kernel);
    const int64_t rows = Mg * kernelSize;

    // Tasks: (batch, group, block of output channels). A block's rows of
    // col = W^T X ([channels * kernel, input positions]) scatter into its own
    // output channels only, so blocks never write the same element.
    const int64_t wantedBlocks =
        (tasksPerThread * tbb::this_task_arena::max_concurrency() + N * group - 1) / (N * group);
    const int64_t mBlock = std::max<int64_t>(1, (Mg + wantedBlocks - 1) / wantedBlocks);
    const int64_t blocks = (Mg + mBlock - 1) / mBlock;
    tbb::parallel_for(int64_t(0), N * group * blocks, [&](int64_t task) {
        ctx.checkCancelled();
        const int64_t ng = task / blocks, m0 = (task % blocks) * mBlock, m1 = std::min(Mg, m0 + mBlock);
        const int64_t n = ng / group, gi = ng % group;
        ConstMatrixMap wg(w + gi * Cg * rows, Cg, rows);
        ConstMatrixMap xg(x + (n * C + gi * Cg) * inSpatial, Cg, inSpatial);
        const RowMatrix col = wg.middleCols(m0 * kernelSize, (m1 - m0) * kernelSize).transpose() * xg;
        float* yg = y + (n * M + gi * Mg) * outSpatial;
        for (int64_t m = m0; m < m1; ++m) {
            const float bias = B ? B->values<float>()[size_t(gi * Mg + m)] : 0.0f;
            std::fill(yg + m * outSpatial, yg + (m + 1) * outSpatial, bias);
        }
        std::vector<int64_t> k(rank), i(rank);
        for (int64_t r = m0 * kernelSize; r < m1 * kernelSize; ++r) {
            const int64_t m = r / kernelSize;
            int64_t rem = r % kernelSize;
            for (size_t d = rank; d-- > 0;) {
                k[d] = rem % kernel[d];
                rem /= kernel[d];
            }
            std::fill(i.begin(), i.end(), 0);
            const float* src = col.data() + (r - m0 * kernelSize) * inSpatial;
            float* dst = yg + m * outSpatial;
            for (int64_t p = 0; p < inSpatial; ++p) {
                int64_t offset = 0;
                bool inside = true;
                for (size_t d = 0; d < rank; ++d) {
                    const int64_t o = i[d] * strides[d] - padBegin[d] + k[d] * dilations[d];
                    inside = inside && o >= 0 && o < out[d];
                    offset = offset * out[d] + o;
                }
                if (inside)
                    dst[offset] += src[p];
                for (size_t d = rank; d-- > 0;) {
                    if (++i[d] < input[d])
                        break;
                    i[d] = 0;
                }
            }
        }
    });
    ctx.setOutput(0, std::move(Y));
}

} // namespace qs::ops
