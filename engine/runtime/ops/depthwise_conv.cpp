#include "runtime/ops/depthwise_conv.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <vector>

#include "core/scratch.h"
#include "gemm/simd_level.h"
#include "runtime/ops/transpose16.h"

namespace qs::ops {

namespace {

// Outputs depthwise2d computes at once (four vectors of sixteen).
constexpr int64_t kDepthwiseBlock = 64;
// Floats of sub-plane and grid from which a unit-stride depthwise conv runs
// row by row (depthwise2dRowsBody): past about 3/4 of a 48 KiB L1.
constexpr int64_t kDepthwiseRowsFrom = 9216;

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
// n floats from src to dst (not overlapping) in vectors of sixteen, the last
// one ending at n (overlapping the one before); shorter rows float by float.
// Inline: a library call per row of a 48 x 48 plane's copies in and out cost
// more than the copies.
[[gnu::always_inline]] inline void copyRow(const float* src, float* dst, int64_t n)
{
    if (n < 16) {
        for (int64_t i = 0; i < n; ++i)
            dst[i] = src[i];
        return;
    }
    for (int64_t i = 0; i + 16 < n; i += 16)
        *reinterpret_cast<Float16*>(dst + i) = *reinterpret_cast<const Float16*>(src + i);
    *reinterpret_cast<Float16*>(dst + n - 16) = *reinterpret_cast<const Float16*>(src + n - 16);
}

// One block of kDepthwiseBlock outputs of a channel, in four vectors of
// sixteen (a lone vector waits on its previous multiply-add at every tap),
// each started at the bias ({b, b, b, b}, b every lane the bias): then tap
// after tap, clamped when there is an epilogue. Both per-channel paths sum
// through it, so they give the same bits.
using DepthwiseLanes = float __attribute__((vector_size(16 * sizeof(float)), aligned(sizeof(float))));
struct DepthwiseBlockSums {
    DepthwiseLanes a0, a1, a2, a3;

    // Tap weight wt times the block's 64 inputs from f on.
    [[gnu::always_inline]] void add(float wt, const float* f)
    {
        const DepthwiseLanes* v = reinterpret_cast<const DepthwiseLanes*>(f);
        a0 += wt * v[0];
        a1 += wt * v[1];
        a2 += wt * v[2];
        a3 += wt * v[3];
    }
    // The 64 sums, clamped by `clamp` when given, at out.
    [[gnu::always_inline]] void store(float* out, const gemm::Epilogue* clamp)
    {
        if (clamp) {
            const DepthwiseLanes* none = nullptr; // (no addend)
            clamp->finishInPlace(a0, 0, none);
            clamp->finishInPlace(a1, 0, none);
            clamp->finishInPlace(a2, 0, none);
            clamp->finishInPlace(a3, 0, none);
        }
        DepthwiseLanes* o = reinterpret_cast<DepthwiseLanes*>(out);
        o[0] = a0, o[1] = a1, o[2] = a2, o[3] = a3;
    }
};

[[gnu::always_inline]] inline void depthwise2dBody(const float* x, const float* w, float bias,
                                                   const DepthwisePlanes& d, float* y, const gemm::Epilogue* clamp)
{
    const WindowGeometry& g = d.g;
    const int64_t H = g.input[0], W = g.input[1], OH = g.output[0], OW = g.output[1];
    const int64_t sh = g.strides[0], sw = g.strides[1], ph = g.padBegin[0], pw = g.padBegin[1];
    const int64_t HP = d.sub.HP, HS = d.sub.HS, WS = d.sub.WS;
    // The thread's sub-planes: zeroed when they last held another node's
    // layout; otherwise only the input is copied in, over the last channel's
    // (the padding and the slack past the sub-planes stay zero).
    thread_local std::vector<float> planes, grid;
    thread_local uint64_t planesLayout = 0;
    if (planesLayout != d.id) {
        planes.assign(size_t(d.planesSize), 0.0f);
        planesLayout = d.id;
    }
    for (int64_t r = std::min(HP, ph), rh = r % sh, rs = r / sh; r < std::min(HP, H + ph); ++r) {
        const float* xr = x + (r - ph) * W - pw; // padded column c of the row at xr[c]
        float* rowOfResidue0 = planes.data() + (rh * sw * HS + rs) * WS;
        if (++rh == sh)
            rh = 0, ++rs;
        // Sub-plane b's column i is padded column b + i * sw; [i0, i1) hold input.
        for (int64_t b = 0; b < sw; ++b) {
            const auto [i0, i1] = d.sub.inputColumns[size_t(b)];
            const float* src = xr + b + i0 * sw;
            float* dst = rowOfResidue0 + b * HS * WS + i0;
            if (sw == 1) // one sub-plane column per input column
                copyRow(src, dst, i1 - i0);
            else if (sw == 2) // a constant stride vectorizes (even/odd deinterleave)
                for (int64_t i = 0; i < i1 - i0; ++i)
                    dst[i] = src[2 * i];
            else
                for (int64_t i = 0; i < i1 - i0; ++i)
                    dst[i] = src[i * sw];
        }
    }
    growScratch(grid, size_t(d.gridSize));
    // Blocks of kDepthwiseBlock = 64 outputs (DepthwiseBlockSums) through all
    // taps in registers, one store per vector. The last block runs whole into
    // the grid's slack rather than output by output (a scalar tail was as long
    // as the vector work on 24 x 24 planes). 144 channels of 24 x 24, fastest
    // of 3000 single-thread runs: 0.068 -> 0.056 ms.
    float* z = grid.data();
    const int64_t taps = int64_t(d.taps.size());
    const int64_t* tapStart = d.taps.data();
    const float* base = planes.data();
    const DepthwiseLanes start = bias - DepthwiseLanes{};
    for (int64_t i = 0; i < d.span; i += kDepthwiseBlock) {
        DepthwiseBlockSums sums{start, start, start, start};
        for (int64_t t = 0; t < taps; ++t)
            sums.add(w[t], base + tapStart[t] + i);
        sums.store(z + i, clamp);
    }
    for (int64_t oh = 0; oh < OH; ++oh)
        copyRow(z + oh * WS, y + oh * OW, OW);
}

// The same for unit strides on planes whose sub-plane outgrows L1
// (DepthwisePlanes::byRows): output row by output row, the taps read from the
// input rows its windows cover, each copied once, zero-padded, into a ring of
// (KH - 1) * dh + 1 rows, and the sums stored straight into y. The same
// operations in the same order as depthwise2dBody (bias, then every tap row by
// row, padding included as zeros), so the same bits. (The whole padded plane,
// then the grid, then the copy out: three passes over 52 KiB per channel of
// 112 x 112, through L2.)
[[gnu::always_inline]] inline void depthwise2dRowsBody(const float* x, const float* w, float bias,
                                                       const DepthwisePlanes& d, float* y, const gemm::Epilogue* clamp)
{
    const WindowGeometry& g = d.g;
    const int64_t H = g.input[0], W = g.input[1], OH = g.output[0], OW = g.output[1];
    const int64_t KH = g.kernel[0], KW = g.kernel[1], dh = g.dilations[0], dw = g.dilations[1];
    const int64_t ph = g.padBegin[0], pw = g.padBegin[1];
    const int64_t span = (KH - 1) * dh + 1, rowFloats = d.rowFloats;
    // Ring slot ih % span holds padded input row ih (or the zeros of a row
    // outside the input); `held` says which row each slot holds.
    thread_local std::vector<float> ring, tail;
    thread_local std::vector<int64_t> held;
    growScratch(ring, size_t(span * rowFloats));
    growScratch(tail, size_t(kDepthwiseBlock));
    held.assign(size_t(span), std::numeric_limits<int64_t>::min());
    auto paddedRow = [&](int64_t ih) -> const float* {
        const int64_t slot = (ih % span + span) % span; // ih < 0 in the top padding
        float* row = ring.data() + slot * rowFloats;
        if (held[size_t(slot)] == ih)
            return row;
        held[size_t(slot)] = ih;
        if (ih < 0 || ih >= H) {
            std::fill(row, row + rowFloats, 0.0f);
            return row;
        }
        std::fill(row, row + pw, 0.0f);
        copyRow(x + ih * W, row + pw, W);
        std::fill(row + pw + W, row + rowFloats, 0.0f);
        return row;
    };
    const float* rows[16]; // KH <= 16 (DepthwisePlanes::byRows)
    const DepthwiseLanes start = bias - DepthwiseLanes{};
    for (int64_t oh = 0; oh < OH; ++oh) {
        for (int64_t kh = 0; kh < KH; ++kh)
            rows[kh] = paddedRow(oh - ph + kh * dh);
        float* yr = y + oh * OW;
        for (int64_t i = 0; i < OW; i += kDepthwiseBlock) {
            DepthwiseBlockSums sums{start, start, start, start};
            for (int64_t kh = 0; kh < KH; ++kh)
                for (int64_t kw = 0; kw < KW; ++kw)
                    sums.add(w[kh * KW + kw], rows[kh] + i + kw * dw);
            // A whole block straight into the row; the row's last part through `tail`.
            sums.store(i + kDepthwiseBlock <= OW ? yr + i : tail.data(), clamp);
            if (i + kDepthwiseBlock > OW)
                std::copy(tail.data(), tail.data() + (OW - i), yr + i);
        }
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
[[gnu::target("avx512f")]] void depthwise2dRowsAvx512(const float* x, const float* w, float bias,
                                                      const DepthwisePlanes& d, float* y, const gemm::Epilogue* clamp)
{
    depthwise2dRowsBody(x, w, bias, d, y, clamp);
}

[[gnu::target("avx2,fma")]] void depthwise2dRowsAvx2(const float* x, const float* w, float bias,
                                                     const DepthwisePlanes& d, float* y, const gemm::Epilogue* clamp)
{
    depthwise2dRowsBody(x, w, bias, d, y, clamp);
}

[[gnu::target("avx512f")]] void depthwise2dAvx512(const float* x, const float* w, float bias,
                                                  const DepthwisePlanes& d, float* y, const gemm::Epilogue* clamp)
{
    depthwise2dBody(x, w, bias, d, y, clamp);
}

[[gnu::target("avx2,fma")]] void depthwise2dAvx2(const float* x, const float* w, float bias, const DepthwisePlanes& d,
                                                 float* y, const gemm::Epilogue* clamp)
{
    depthwise2dBody(x, w, bias, d, y, clamp);
}
#endif

} // namespace

DepthwisePlanes::DepthwisePlanes(const WindowGeometry& geometry)
    : g(geometry), sub(geometry), taps(sub.rowOffsets(1, geometry, sub.HS))
{
    static std::atomic<uint64_t> layouts{0};
    id = ++layouts;
    const int64_t OH = g.output[0], OW = g.output[1];
    span = (OH - 1) * sub.WS + OW;
    // (kDepthwiseBlock zeros past the sub-planes: the last block of outputs
    // reads up to kDepthwiseBlock - 1 past where the outputs end.)
    planesSize = sub.plane + kDepthwiseBlock;
    gridSize = std::max(OH * sub.WS, (span + kDepthwiseBlock - 1) / kDepthwiseBlock * kDepthwiseBlock);
    // Rows: the padded row the last block of outputs reads up to, whole blocks.
    rowFloats = (OW + kDepthwiseBlock - 1) / kDepthwiseBlock * kDepthwiseBlock + (g.kernel[1] - 1) * g.dilations[1];
    rowFloats = std::max(rowFloats, g.input[1] + g.padBegin[1]);
    byRows = g.strides[0] == 1 && g.strides[1] == 1 && g.kernel[0] <= 16 && planesSize + gridSize > kDepthwiseRowsFrom;
}

void depthwise2d(const float* x, const float* w, float bias, const DepthwisePlanes& planes, float* y,
                 const gemm::Epilogue* clamp)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (gemm::simdLevel() == gemm::SimdLevel::Avx512)
        return planes.byRows ? depthwise2dRowsAvx512(x, w, bias, planes, y, clamp)
                             : depthwise2dAvx512(x, w, bias, planes, y, clamp);
    if (gemm::simdLevel() == gemm::SimdLevel::Avx2)
        return planes.byRows ? depthwise2dRowsAvx2(x, w, bias, planes, y, clamp)
                             : depthwise2dAvx2(x, w, bias, planes, y, clamp);
#endif
    if (planes.byRows)
        return depthwise2dRowsBody(x, w, bias, planes, y, clamp);
    depthwise2dBody(x, w, bias, planes, y, clamp);
}

namespace {

// Depthwise 2-D convolution of kChannelBlock channels at once, interleaved so
// that one vector holds one pixel of every channel of the block: each tap is
// one multiply-add per output pixel, however small the plane (late layers'
// 7x7 planes are too short for vectors along a row, and per-channel set-up
// would dominate). Four output pixels at a time keep four independent sums
// in flight. Sums run in the same order as depthwise2dBody's (bias, then taps
// row by row), so both paths give the same results.
static_assert(kChannelBlock == 16, "one pixel of a block is one Float16");
using ChannelVector = Float16;

// One pixel's sums stored, clamped when there is a Relu's or Clip's epilogue:
// the separate activation's bits, without a pass over the output. (A free
// function: a lambda in the body would not take its target's instructions.)
[[gnu::always_inline]] inline void storeClamped(float* at, ChannelVector v, const gemm::Epilogue* clamp)
{
    const ChannelVector* none = nullptr;
    if (clamp)
        clamp->finishInPlace(v, 0, none);
    *reinterpret_cast<ChannelVector*>(at) = v;
}

// What a window does over a block's interleaved pixels: the conv's sum of
// bias and taps times pixels, zero padding; MaxPool's maximum, padding that
// never wins. `step` runs once per tap and pixel in the same order on every
// path: taps row by row.
struct MultiplyAddWindow {
    static constexpr float kPadding = 0.0f;
    const float* taps; // (KH x KW) vectors, DepthwiseBlockTaps::block
    ChannelVector bias;
    const gemm::Epilogue* clamp;

    [[gnu::always_inline]] void start(ChannelVector& acc) const { acc = bias; }
    [[gnu::always_inline]] const float* tap(int64_t t) const { return taps + t * kChannelBlock; }
    [[gnu::always_inline]] static void step(ChannelVector& acc, const float* tap, const float* pixel)
    {
        acc += *reinterpret_cast<const ChannelVector*>(tap) * *reinterpret_cast<const ChannelVector*>(pixel);
    }
    [[gnu::always_inline]] void store(float* at, ChannelVector v) const { storeClamped(at, v, clamp); }
};
// A running std::max from -inf, as pool2d's window-by-window loop: an equal
// later value does not replace the maximum, and a NaN never enters it.
struct MaximumWindow {
    static constexpr float kPadding = -std::numeric_limits<float>::infinity();

    [[gnu::always_inline]] static void start(ChannelVector& acc) { acc = ChannelVector{} + kPadding; }
    [[gnu::always_inline]] static const float* tap(int64_t) { return nullptr; }
    [[gnu::always_inline]] static void step(ChannelVector& acc, const float*, const float* pixel)
    {
        const ChannelVector v = *reinterpret_cast<const ChannelVector*>(pixel);
        acc = acc < v ? v : acc;
    }
    [[gnu::always_inline]] static void store(float* at, ChannelVector v)
    {
        *reinterpret_cast<ChannelVector*>(at) = v;
    }
};

// Channels [0, channels) of x (planes of H x W) through `window` (each pixel
// of the padded input read as one vector of the block's channels) into output
// rows [oh0, oh1) of y (planes of OH x OW), channels <= kChannelBlock.
template <class Window>
[[gnu::always_inline]] inline void windowBlockBody(const float* x, int64_t channels, const Window& window,
                                                   const WindowGeometry& g, int64_t oh0, int64_t oh1, float* y)
{
    constexpr int64_t CB = kChannelBlock, ILP = 4;
    const int64_t H = g.input[0], W = g.input[1], KH = g.kernel[0], KW = g.kernel[1];
    const int64_t OW = g.output[1], sh = g.strides[0], sw = g.strides[1];
    const int64_t dh = g.dilations[0], dw = g.dilations[1], ph = g.padBegin[0], pw = g.padBegin[1];
    const int64_t WP = (OW - 1) * sw + (KW - 1) * dw + 1;
    // The padded rows output rows [oh0, oh1) read: [top, bottom), of which the
    // input's rows [i0, i1) (input row i is padded row i + ph).
    const int64_t top = oh0 * sh, bottom = (oh1 - 1) * sh + (KH - 1) * dh + 1;
    const int64_t i0 = std::clamp<int64_t>(top - ph, 0, H), i1 = std::clamp<int64_t>(bottom - ph, i0, H);
    // The padded block from padded row `top` on: input pixel (row, col) at
    // (row + ph - top, col + pw), rows of WB pixels. Every pixel of input
    // rows [i0, i1) has its place, also those past the windows' reach, so
    // the copy below needs no bounds check; the padding reads Window::kPadding.
    const int64_t WB = std::max(WP, W + pw), HB = std::max(bottom, i1 + ph) - top;
    // The block's rows of input (none when the part lies in the padding below the input).
    const int64_t first = std::max<int64_t>(0, i0 + ph - top), last = std::max(first, i1 + ph - top);
    thread_local std::vector<float> in, out;
    growScratch(in, size_t(HB * WB * CB));
    const auto zero = [&](int64_t from, int64_t to) {
        std::fill(in.data() + from * CB, in.data() + std::max(from, to) * CB, Window::kPadding);
    };
    zero(0, first * WB);
    for (int64_t r = first; r < last; ++r) {
        zero(r * WB, r * WB + pw);
        zero(r * WB + pw + W, (r + 1) * WB);
    }
    zero(last * WB, HB * WB);
    // Interleave: sixteen input pixels (of the flattened plane, so short rows
    // too) of every channel at a time through a register transpose, each
    // pixel then stored at its padded position, stepping to the next row's
    // start at the end of a row; the rest element by element. (With a bounds
    // check per pixel, as when the block held only what the windows read,
    // the stores took a fifth of a stride-2 conv of 96 channels from 48 x 48.)
    float* dst = in.data() + (first * WB + pw) * CB;
    int64_t col = 0;
    const auto step = [&] {
        dst += CB;
        if (++col == W)
            col = 0, dst += (WB - W) * CB;
    };
    const float* xr = x + i0 * W; // the input rows [i0, i1): (i1 - i0) * W pixels per channel
    const int64_t pixels = (i1 - i0) * W;
    // A last block of fewer channels transposes zero rows for the others: the
    // unused lanes of every pixel read zero rather than stale values. (Element
    // by element, its copy took as long as its multiply-adds.)
    int64_t q = 0;
    for (; q + 16 <= pixels; q += 16) {
        ChannelVector block[16];
        for (int64_t c = 0; c < CB; ++c)
            block[c] = c < channels ? *reinterpret_cast<const ChannelVector*>(xr + c * H * W + q) : ChannelVector{};
        transpose16(block);
#pragma GCC unroll 16
        for (int64_t j = 0; j < 16; ++j) {
            *reinterpret_cast<ChannelVector*>(dst) = block[j];
            step();
        }
    }
    // The last pixels (all of a plane smaller than 16: 3 x 3 late layers) go
    // through the transpose too: a channel's sixteen floats read on into the
    // next channels' planes, whose lanes are not stored; only a load that would
    // leave the block's channels takes its pixels one by one.
    if (q < pixels) {
        const int64_t rest = pixels - q, blockEnd = channels * H * W;
        ChannelVector block[16];
        for (int64_t c = 0; c < CB; ++c) {
            const int64_t from = c * H * W + i0 * W + q;
            if (c < channels && from + 16 <= blockEnd) {
                block[c] = *reinterpret_cast<const ChannelVector*>(xr + c * H * W + q);
            } else {
                block[c] = ChannelVector{};
                for (int64_t j = 0; c < channels && j < rest; ++j)
                    block[c][j] = xr[c * H * W + q + j];
            }
        }
        transpose16(block);
        for (int64_t j = 0; j < rest; ++j) {
            *reinterpret_cast<ChannelVector*>(dst) = block[j];
            step();
        }
    }
    growScratch(out, size_t((oh1 - oh0) * OW * CB));
    thread_local std::vector<int64_t> leftovers;
    if (leftovers.size() < size_t((oh1 - oh0) * (OW % ILP)))
        leftovers.resize(size_t((oh1 - oh0) * (OW % ILP)));
    int64_t* rest = leftovers.data();
    int64_t restCount = 0;
    for (int64_t oh = 0; oh < oh1 - oh0; ++oh) {
        int64_t ow = 0;
        for (; ow + ILP <= OW; ow += ILP) {
            ChannelVector acc[ILP];
            for (int64_t j = 0; j < ILP; ++j)
                window.start(acc[j]);
            for (int64_t kh = 0; kh < KH; ++kh) {
                const float* row = in.data() + ((oh * sh + kh * dh) * WB + ow * sw) * CB;
                for (int64_t kw = 0; kw < KW; ++kw) {
                    const float* tap = window.tap(kh * KW + kw);
                    const float* px = row + kw * dw * CB;
                    for (int64_t j = 0; j < ILP; ++j)
                        Window::step(acc[j], tap, px + j * sw * CB);
                }
            }
            for (int64_t j = 0; j < ILP; ++j)
                window.store(out.data() + (oh * OW + ow + j) * CB, acc[j]);
        }
        // The row's last OW % ILP pixels join those of the next rows.
        for (; ow < OW; ++ow)
            rest[restCount++] = oh * OW + ow;
    }
    // Pixels left over at the rows' ends, ILP at a time across rows, each
    // from its own window's corner: on planes narrower than ILP (3 x 3 late
    // layers) every pixel is one, and one at a time made each pixel's sum a
    // chain of KH * KW dependent multiply-adds.
    for (int64_t r = 0; r < restCount; r += ILP) {
        const int64_t n = std::min(ILP, restCount - r);
        const float* corner[ILP];
        ChannelVector acc[ILP];
        for (int64_t j = 0; j < ILP; ++j) {
            const int64_t pixel = rest[r + std::min(j, n - 1)]; // a short group repeats its last pixel
            corner[j] = in.data() + ((pixel / OW) * sh * WB + (pixel % OW) * sw) * CB;
            window.start(acc[j]);
        }
        for (int64_t kh = 0; kh < KH; ++kh)
            for (int64_t kw = 0; kw < KW; ++kw) {
                const float* tap = window.tap(kh * KW + kw);
                const int64_t offset = (kh * dh * WB + kw * dw) * CB;
                for (int64_t j = 0; j < ILP; ++j)
                    Window::step(acc[j], tap, corner[j] + offset);
            }
        for (int64_t j = 0; j < n; ++j)
            window.store(out.data() + rest[r + j] * CB, acc[j]);
    }
    // De-interleave: sixteen pixels at a time through a register transpose,
    // into output rows [oh0, oh1) of each channel's plane.
    const int64_t P = g.output[0] * OW, done = (oh1 - oh0) * OW;
    float* yr = y + oh0 * OW;
    // The last done % 16 pixels first, through the transpose too. When this
    // call has whole planes, a channel's vector may run on into the next
    // channels' first pixels, which their own stores (their tail here, in
    // channel order, or the sixteen-pixel loop after) write again; never past
    // the block's channels, and never with parts of planes (another task's rows).
    const int64_t tail = done % 16, tailStart = done - tail;
    if (tail > 0) {
        ChannelVector block[16];
        for (int64_t j = 0; j < 16; ++j)
            block[j] = j < tail ? *reinterpret_cast<const ChannelVector*>(out.data() + (tailStart + j) * CB)
                                : ChannelVector{};
        transpose16(block);
        const bool wholePlanes = done == P;
        for (int64_t c = 0; c < channels; ++c) {
            float* to = yr + c * P + tailStart;
            if (wholePlanes && c * P + tailStart + 16 <= channels * P)
                *reinterpret_cast<ChannelVector*>(to) = block[c];
            else
                for (int64_t j = 0; j < tail; ++j)
                    to[j] = block[c][j];
        }
    }
    int64_t p = 0;
    for (; p + 16 <= done; p += 16) {
        ChannelVector block[16];
        for (int64_t j = 0; j < 16; ++j)
            block[j] = *reinterpret_cast<const ChannelVector*>(out.data() + (p + j) * CB);
        transpose16(block);
        for (int64_t c = 0; c < channels; ++c)
            *reinterpret_cast<ChannelVector*>(yr + c * P + p) = block[c];
    }
}

MultiplyAddWindow multiplyAdd(const float* taps, const float* bias, int64_t channels, const gemm::Epilogue* clamp)
{
    ChannelVector b{};
    for (int64_t c = 0; c < channels; ++c)
        b[c] = bias ? bias[c] : 0.0f;
    return {taps, b, clamp};
}

#if defined(__x86_64__) && defined(__GNUC__)
[[gnu::target("avx512f")]] void depthwiseBlockAvx512(const float* x, int64_t channels, const MultiplyAddWindow& window,
                                                     const WindowGeometry& g, int64_t oh0, int64_t oh1, float* y)
{
    windowBlockBody(x, channels, window, g, oh0, oh1, y);
}

[[gnu::target("avx2,fma")]] void depthwiseBlockAvx2(const float* x, int64_t channels, const MultiplyAddWindow& window,
                                                    const WindowGeometry& g, int64_t oh0, int64_t oh1, float* y)
{
    windowBlockBody(x, channels, window, g, oh0, oh1, y);
}

[[gnu::target("avx512f")]] void maxPoolBlockAvx512(const float* x, int64_t channels, const WindowGeometry& g,
                                                   int64_t oh0, int64_t oh1, float* y)
{
    windowBlockBody(x, channels, MaximumWindow{}, g, oh0, oh1, y);
}

[[gnu::target("avx2")]] void maxPoolBlockAvx2(const float* x, int64_t channels, const WindowGeometry& g, int64_t oh0,
                                              int64_t oh1, float* y)
{
    windowBlockBody(x, channels, MaximumWindow{}, g, oh0, oh1, y);
}
#endif

} // namespace

DepthwiseBlockTaps::DepthwiseBlockTaps(const float* w, int64_t channels, int64_t kernelSize)
    : kernelSize(kernelSize), taps(size_t((channels + kChannelBlock - 1) / kChannelBlock * kernelSize * kChannelBlock))
{
    for (int64_t c = 0; c < channels; ++c)
        for (int64_t t = 0; t < kernelSize; ++t)
            taps[size_t(((c / kChannelBlock) * kernelSize + t) * kChannelBlock + c % kChannelBlock)] =
                w[c * kernelSize + t];
}

void depthwiseBlock(const float* x, int64_t channels, const float* taps, const float* bias, const WindowGeometry& g,
                    int64_t oh0, int64_t oh1, float* y, const gemm::Epilogue* clamp)
{
    const MultiplyAddWindow window = multiplyAdd(taps, bias, channels, clamp);
#if defined(__x86_64__) && defined(__GNUC__)
    if (gemm::simdLevel() == gemm::SimdLevel::Avx512)
        return depthwiseBlockAvx512(x, channels, window, g, oh0, oh1, y);
    if (gemm::simdLevel() == gemm::SimdLevel::Avx2)
        return depthwiseBlockAvx2(x, channels, window, g, oh0, oh1, y);
#endif
    windowBlockBody(x, channels, window, g, oh0, oh1, y);
}

void maxPoolBlock(const float* x, int64_t channels, const WindowGeometry& g, int64_t oh0, int64_t oh1, float* y)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (gemm::simdLevel() == gemm::SimdLevel::Avx512)
        return maxPoolBlockAvx512(x, channels, g, oh0, oh1, y);
    if (gemm::simdLevel() == gemm::SimdLevel::Avx2)
        return maxPoolBlockAvx2(x, channels, g, oh0, oh1, y);
#endif
    windowBlockBody(x, channels, MaximumWindow{}, g, oh0, oh1, y);
}

} // namespace qs::ops
