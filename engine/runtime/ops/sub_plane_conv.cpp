#include "runtime/ops/sub_plane_conv.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "core/scratch.h"
#include "gemm/simd_level.h"
#include "runtime/ops/conv_plan.h"
#include "runtime/ops/im2col.h"
#include "runtime/ops/transpose16.h"

namespace qs::ops {

namespace {

#if defined(__x86_64__) && defined(__GNUC__)
// SubPlanes::fillRows at column strides 1 and 2 on AVX-512, for sub-planes up
// to 512 columns wide: each sub-plane row in masked vector moves (stride 2:
// the even lanes of two loads), zeros where the padding is; the masks of each
// column residue's 16-column pieces computed once, not per row. Rows are
// short: a library call per piece (the zeros before and after the input)
// cost more than the copy, as did masks recomputed per row. Single thread,
// fastest of 3000: 16 -> 24 at stride 2 from 48 x 48 0.051 -> 0.040 ms
// (the implicit GEMM); 3 -> 64 at stride 2 from 96 x 96 0.092 -> 0.087.
constexpr int64_t kMaskedFillPieces = 32;
[[gnu::target("avx512f")]] void fillRowsAvx512(const SubPlanes& s, const float* src, const WindowGeometry& g,
                                               int64_t t0, int64_t rows, int64_t stride, float* dst)
{
    const int64_t H = g.input[0], W = g.input[1], sh = g.strides[0], sw = g.strides[1], WS = s.WS;
    const int64_t pieces = (WS + 15) / 16;
    auto bits = [](int64_t from, int64_t to, int64_t width) { // bits [from, to) of `width`, clamped
        from = std::clamp<int64_t>(from, 0, width), to = std::clamp<int64_t>(to, 0, width);
        return uint32_t(((uint64_t(1) << to) - 1) & ~((uint64_t(1) << from) - 1));
    };
    // Per column residue b and piece: the input lanes each load takes, the lanes stored.
    __mmask16 low[2][kMaskedFillPieces], high[2][kMaskedFillPieces], store[kMaskedFillPieces];
    for (int64_t i = 0; i < pieces; ++i) {
        store[i] = __mmask16(bits(0, WS - 16 * i, 16));
        for (int64_t b = 0; b < sw; ++b) {
            const auto [i0, i1] = s.inputColumns[size_t(b)];
            const uint32_t lanes = sw == 1 ? bits(i0 - 16 * i, i1 - 16 * i, 16)
                                           : bits(2 * (i0 - 16 * i), 2 * (i1 - 16 * i), 32) & 0x55555555u;
            low[b][i] = __mmask16(lanes), high[b][i] = __mmask16(lanes >> 16);
        }
    }
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    for (int64_t t = 0; t < rows; ++t)
        for (int64_t a = 0; a < sh; ++a) {
            const int64_t r = (t0 + t) * sh + a, ih = r - g.padBegin[0];
            const bool inside = ih >= 0 && ih < H && r < s.HP;
            for (int64_t b = 0; b < sw; ++b) {
                float* row = dst + ((a * sw + b) * stride + t) * WS;
                // Sub-plane column i reads in[i * sw].
                const float* in = inside ? src + ih * W + b - g.padBegin[1] : nullptr;
                for (int64_t i = 0; i < pieces; ++i) {
                    __m512 v = _mm512_setzero_ps();
                    if (inside && sw == 1)
                        v = _mm512_maskz_loadu_ps(low[b][i], in + 16 * i);
                    else if (inside)
                        v = _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(low[b][i], in + 32 * i), even,
                                                   _mm512_maskz_loadu_ps(high[b][i], in + 32 * i + 16));
                    _mm512_mask_storeu_ps(row + 16 * i, store[i], v);
                }
            }
        }
}
#endif

// rows [n, ld] (row-major, the first `channels` columns used) into sums
// [channels, n], row j at sums + j * ldSums: 16 x 16 blocks through
// registers, the edges one by one; each value finished on its way (`finish`,
// channel j's bias at finish->bias[j]; no addend) where given. Finishing
// there instead of in a pass over the transposed rows saved a read and a
// write of every output (squeezenet's 3 x 3 expands at batch 8).
// Compiled for AVX-512 and AVX2 (on SSE2 the shuffles go through memory);
// transposeRows picks one.
[[gnu::always_inline]] inline void transposeRowsBody(const float* rows, int64_t n, int64_t channels, int64_t ld,
                                                     float* sums, int64_t ldSums, const gemm::Epilogue* finish)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        int64_t j = 0;
        for (; j + 16 <= channels; j += 16) {
            Float16 block[16];
            for (int r = 0; r < 16; ++r)
                block[r] = *reinterpret_cast<const Float16*>(rows + (i + r) * ld + j);
            transpose16(block);
            for (int c = 0; c < 16; ++c) {
                if (finish)
                    finish->finishInPlace<Float16>(block[c], j + c, nullptr);
                *reinterpret_cast<Float16*>(sums + (j + c) * ldSums + i) = block[c];
            }
        }
        for (; j < channels; ++j)
            for (int64_t r = 0; r < 16; ++r) {
                float v = rows[(i + r) * ld + j];
                if (finish)
                    finish->finishInPlace<float>(v, j, nullptr);
                sums[j * ldSums + i + r] = v;
            }
    }
    for (; i < n; ++i)
        for (int64_t j = 0; j < channels; ++j) {
            float v = rows[i * ld + j];
            if (finish)
                finish->finishInPlace<float>(v, j, nullptr);
            sums[j * ldSums + i] = v;
        }
}

#if defined(__x86_64__) && defined(__GNUC__)
[[gnu::target("avx512f")]] void transposeRowsAvx512(const float* rows, int64_t n, int64_t channels, int64_t ld,
                                                    float* sums, int64_t ldSums, const gemm::Epilogue* finish)
{
    transposeRowsBody(rows, n, channels, ld, sums, ldSums, finish);
}

[[gnu::target("avx2,fma")]] void transposeRowsAvx2(const float* rows, int64_t n, int64_t channels, int64_t ld,
                                                   float* sums, int64_t ldSums, const gemm::Epilogue* finish)
{
    transposeRowsBody(rows, n, channels, ld, sums, ldSums, finish);
}
#endif

// transposeRowsBody at the SIMD level (AVX2 or AVX-512: the callers' paths need one).
void transposeRows(const float* rows, int64_t n, int64_t channels, int64_t ld, float* sums, int64_t ldSums,
                   const gemm::Epilogue* finish)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (gemm::simdLevel() == gemm::SimdLevel::Avx512)
        return transposeRowsAvx512(rows, n, channels, ld, sums, ldSums, finish);
    return transposeRowsAvx2(rows, n, channels, ld, sums, ldSums, finish);
#else
    transposeRowsBody(rows, n, channels, ld, sums, ldSums, finish);
#endif
}

// Channels [j0, j0 + channels) of `positions` outputs from `rows` (position
// after position, ld apart) into dst (channel after channel, P apart),
// finished: in the transposition where the epilogue can take the bias and
// activation (no addend), else in a pass after it.
void transposeFinished(const float* rows, int64_t positions, int64_t channels, int64_t ld, float* dst, int64_t P,
                       const float* bias, const float* addend, const FusedActivation* activation)
{
    if (const auto finish = addend ? std::nullopt : storeEpilogue(bias, nullptr, activation)) {
        transposeRows(rows, positions, channels, ld, dst, P, &*finish);
        return;
    }
    transposeRows(rows, positions, channels, ld, dst, P, nullptr);
    finishRows(dst, channels, positions, P, bias, addend, activation);
}

} // namespace

void SubPlanes::fill(const float* x, int64_t planes, const WindowGeometry& g, float* dst) const
{
    const int64_t H = g.input[0], W = g.input[1];
    // Tasks of 16 KiB of sub-planes at least: small planes are each less
    // work than a task's dispatch.
    const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 12) / plane);
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, planes, grain), [&](const tbb::blocked_range<int64_t>& r) {
        for (int64_t p = r.begin(); p < r.end(); ++p)
            fillRows(x + p * H * W, g, 0, HS, HS, dst + p * plane);
    });
}

void SubPlanes::fillRows(const float* src, const WindowGeometry& g, int64_t t0, int64_t rows, int64_t stride,
                         float* dst) const
{
    const int64_t H = g.input[0], W = g.input[1], sh = g.strides[0], sw = g.strides[1];
    const int64_t ph = g.padBegin[0], pw = g.padBegin[1];
#if defined(__x86_64__) && defined(__GNUC__)
    if (gemm::simdLevel() == gemm::SimdLevel::Avx512 && sw <= 2 && WS <= 16 * kMaskedFillPieces)
        return fillRowsAvx512(*this, src, g, t0, rows, stride, dst);
#endif
    for (int64_t t = 0; t < rows; ++t)
        for (int64_t a = 0; a < sh; ++a) {
            const int64_t r = (t0 + t) * sh + a, ih = r - ph;
            for (int64_t b = 0; b < sw; ++b) {
                float* row = dst + ((a * sw + b) * stride + t) * WS;
                if (ih < 0 || ih >= H || r >= HP) {
                    std::fill(row, row + WS, 0.0f);
                    continue;
                }
                const auto [i0, i1] = inputColumns[size_t(b)];
                const float* in = src + ih * W + b - pw;
                std::fill(row, row + i0, 0.0f);
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

std::vector<int64_t> SubPlanes::rowOffsets(int64_t channels, const WindowGeometry& g, int64_t stride) const
{
    // The window's taps in channel 0, then each channel's sh x sw sub-planes later.
    const int64_t sh = g.strides[0], sw = g.strides[1], taps = g.kernel[0] * g.kernel[1];
    std::vector<int64_t> offsets(size_t(channels * taps));
    for (int64_t kh = 0; kh < g.kernel[0]; ++kh)
        for (int64_t kw = 0; kw < g.kernel[1]; ++kw) {
            const int64_t rh = kh * g.dilations[0], rw = kw * g.dilations[1];
            offsets[size_t(kh * g.kernel[1] + kw)] = (((rh % sh) * sw + rw % sw) * stride + rh / sh) * WS + rw / sw;
        }
    const int64_t channelStep = sh * sw * stride * WS;
    for (int64_t c = 1; c < channels; ++c)
        for (int64_t t = 0; t < taps; ++t)
            offsets[size_t(c * taps + t)] = offsets[size_t(t)] + c * channelStep;
    return offsets;
}

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
                      int64_t Mg, const WindowGeometry& g, const ConvOutput& y)
{
    const int64_t OH = g.output[0], OW = g.output[1];
    OutputExtremes* extremes = ctx.outputExtremes(); // each task adds what it wrote
    const SubPlanes s(g);
    const int64_t WS = s.WS, plane = s.plane;
    const int64_t Cg = C / group, P = OH * OW, Q = (OH - 1) * WS + OW, nr = packed.nr();

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
        growScratch(sums, size_t((r1 - r0) * chunk));
        packed.multiplyIndirect(gi, base, offsets, q1 - q0, sums.data(), chunk, r0, r1);
        // Output rows [oh0, oh1), columns [ow0, ow1) of each channel, in one call per channel.
        auto finish = [&](int64_t oh0, int64_t oh1, int64_t ow0, int64_t ow1) {
            if (ow0 >= ow1)
                return;
            for (int64_t m = r0; m < r1; ++m) {
                const int64_t channel = gi * Mg + m;
                float* dst = y.image(n) + channel * P + oh0 * OW + ow0;
                const float* src = sums.data() + (m - r0) * chunk + (oh0 * WS + ow0 - q0);
                finishPlane(src, WS, dst, OW, oh1 - oh0, ow1 - ow0, bias ? bias + channel : nullptr,
                            addend ? addend + (dst - y.data) : nullptr, activation);
                if (extremes)
                    extremes->addRows(dst, oh1 - oh0, ow1 - ow0, OW);
            }
        };
        // The chunk's output rows [a, b): a first and a last that it may hold
        // only part of, whole rows between them.
        int64_t a = q0 / WS, b = (q1 - 1) / WS + 1;
        auto columns = [&](int64_t oh) {
            return std::pair{std::max<int64_t>(0, q0 - oh * WS), std::min(OW, q1 - oh * WS)};
        };
        if (const auto [ow0, ow1] = columns(a); a < b && (ow0 > 0 || ow1 < OW)) {
            finish(a, a + 1, ow0, ow1);
            ++a;
        }
        if (const auto [ow0, ow1] = columns(b - 1); a < b && (ow0 > 0 || ow1 < OW)) {
            finish(b - 1, b, ow0, ow1);
            --b;
        }
        if (a < b)
            finish(a, b, 0, OW);
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
        growScratch(tile, size_t(Cg * perChannel));
        const float* src = x + (n * C + gi * Cg) * g.input[0] * g.input[1];
        for (int64_t c = 0; c < Cg; ++c)
            s.fillRows(src + c * g.input[0] * g.input[1], g, t0, rows, stride, tile.data() + c * perChannel);
        run(tile.data() + (q0 - t0 * WS), offsets.data(), n, gi, 0, Mg, q0);
    });
}

void fewPositionsConv(const KernelContext& ctx, const gemm::PackedColumnMatrix& weights, const float* x,
                      const float* bias, const float* addend, const FusedActivation* activation, int64_t N, int64_t C,
                      int64_t M, const WindowGeometry& g, const ConvOutput& y)
{
    const int64_t P = g.output[0] * g.output[1], K = C * shapeElementCount(g.kernel), width = N * P,
                  inSpatial = shapeElementCount(g.input);
    OutputExtremes* extremes = ctx.outputExtremes(); // each task adds what it wrote
    // The column matrix [K, N * P], image after image, in pieces of channels
    // (every element written), then packed as the product's rows.
    // (One image through a 1 x 1 window at unit strides without pads: the
    // input is that matrix, packed as it is.)
    const int64_t kernelSize = K / C;
    const bool inPlace = N == 1 && kernelSize == 1 && inSpatial == P;
    std::unique_ptr<float[]> columns;
    if (!inPlace) {
        const int64_t channelsPerPiece = std::max<int64_t>(1, (int64_t(1) << 12) / (kernelSize * P));
        const int64_t pieces = (C + channelsPerPiece - 1) / channelsPerPiece;
        columns.reset(new float[size_t(K * width)]);
        tbb::parallel_for(int64_t(0), N * pieces, [&](int64_t task) {
            const int64_t n = task / pieces, c0 = task % pieces * channelsPerPiece,
                          channels = std::min(channelsPerPiece, C - c0);
            im2col2d(x + (n * C + c0) * inSpatial, channels, g, 0, P,
                     RowMajorColumns<float>{columns.get() + c0 * kernelSize * width + n * P, width});
        });
    }
    const gemm::PackedMatrix positions(gemm::simdLevel(), inPlace ? x : columns.get(), 1, width, K, 0, 1, width);

    // Tasks of whole strips of output channels, a few per thread; each strip
    // is one contiguous piece of the packed weights.
    const int64_t nr = weights.nr(), strips = weights.strips();
    const int64_t tasks = std::min(strips, kConvTasksPerThread * tbb::this_task_arena::max_concurrency());
    auto taskStart = [&](int64_t t) { return t * strips / tasks; };
    const std::unique_ptr<float[]> sums(new float[size_t(width * M)]); // Y^T, every element written
    tbb::parallel_for(int64_t(0), tasks, [&](int64_t task) {
        ctx.checkCancelled();
        const int64_t s0 = taskStart(task), s1 = taskStart(task + 1);
        for (int64_t s = s0; s < s1; ++s)
            positions.multiplyPacked(0, weights.strip(s), weights.stripWidth(s), sums.get() + s * nr, M, 0, width);
        // Channels [j0, j1) of each image: transposed into y, then finished in one pass.
        const int64_t j0 = s0 * nr, j1 = std::min(M, s1 * nr);
        for (int64_t n = 0; n < N; ++n) {
            float* dst = y.image(n) + j0 * P;
            transposeFinished(sums.get() + n * P * M + j0, P, j1 - j0, M, dst, P, bias ? bias + j0 : nullptr,
                              addend ? addend + (dst - y.data) : nullptr, activation);
            if (extremes)
                extremes->addRows(dst, j1 - j0, P, P);
        }
    });
}

namespace {

// A tile of MR output positions (position r reads tap k at base[offsets[k] +
// q[r]]) against one strip of 2W output channels (row k of the strip at
// b + k * 2W), into tile[r * 2W + j]: per depth block a sum from zero in k
// order, added to the blocks before it, as the GEMM's micro-kernels sum.
// Consecutive positions of one output row (q[r] = q[0] + r) read their taps
// at fixed displacements from one pointer per tap; other tiles hold MR offsets
// in registers, which the 24 sums leave too few of (GCC kept them in vector
// registers and moved them out per tap: 12 -> 64 channels on 23 x 23, a
// fifth of the kernel's instructions).
template <int MR, int W, bool Consecutive>
[[gnu::always_inline]] inline void positionTileBody(int64_t K, const float* base, const int64_t* offsets,
                                                    const int64_t* q, const float* b, float* tile)
{
    typedef float V __attribute__((vector_size(W * sizeof(float)), aligned(sizeof(float))));
    const float* first = base + q[0];
    for (int64_t k0 = 0; k0 < K; k0 += gemm::kDepthBlock) {
        const int64_t k1 = std::min(K, k0 + gemm::kDepthBlock);
        V acc[MR][2];
        for (int r = 0; r < MR; ++r)
            acc[r][0] = acc[r][1] = V{};
        for (int64_t k = k0; k < k1; ++k) {
            const V b0 = *reinterpret_cast<const V*>(b + k * 2 * W), b1 = *reinterpret_cast<const V*>(b + k * 2 * W + W);
            const float* ak = Consecutive ? first + offsets[k] : base + offsets[k];
#pragma GCC unroll 12
            for (int r = 0; r < MR; ++r) {
                const float a = Consecutive ? ak[r] : ak[q[r]];
                acc[r][0] += a * b0;
                acc[r][1] += a * b1;
            }
        }
        for (int r = 0; r < MR; ++r)
            for (int j = 0; j < 2; ++j) {
                V* out = reinterpret_cast<V*>(tile + r * 2 * W + j * W);
                *out = k0 == 0 ? acc[r][j] : *out + acc[r][j];
            }
    }
}

template <int W, int... MR>
[[gnu::always_inline]] inline void positionTile(std::integer_sequence<int, MR...>, int mr, bool consecutive, int64_t K,
                                                const float* base, const int64_t* offsets, const int64_t* q,
                                                const float* b, float* tile)
{
    ((mr == MR + 1 ? (consecutive ? positionTileBody<MR + 1, W, true>(K, base, offsets, q, b, tile)
                                  : positionTileBody<MR + 1, W, false>(K, base, offsets, q, b, tile))
                   : void()),
     ...);
}

#if defined(__x86_64__) && defined(__GNUC__)
[[gnu::target("avx512f")]] void positionTileAvx512(int mr, bool consecutive, int64_t K, const float* base,
                                                   const int64_t* offsets, const int64_t* q, const float* b,
                                                   float* tile)
{
    positionTile<16>(std::make_integer_sequence<int, 12>(), mr, consecutive, K, base, offsets, q, b, tile);
}

[[gnu::target("avx2,fma")]] void positionTileAvx2(int mr, bool consecutive, int64_t K, const float* base,
                                                  const int64_t* offsets, const int64_t* q, const float* b, float* tile)
{
    positionTile<8>(std::make_integer_sequence<int, 6>(), mr, consecutive, K, base, offsets, q, b, tile);
}
#endif

} // namespace

void positionRowsConv(const KernelContext& ctx, const gemm::PackedColumnMatrix& weights, const float* x,
                      const float* bias, const float* addend, const FusedActivation* activation, int64_t N, int64_t C,
                      const WindowGeometry& g, const ConvOutput& y)
{
#if defined(__x86_64__) && defined(__GNUC__)
    const bool avx512 = gemm::simdLevel() == gemm::SimdLevel::Avx512;
    auto tileKernel = avx512 ? positionTileAvx512 : positionTileAvx2;
    constexpr int64_t kMaxRows = 12;
    const int64_t mrMax = avx512 ? 12 : 6;
    const SubPlanes planes(g);
    const int64_t OW = g.output[1], P = g.output[0] * OW, K = weights.depth(), nr = weights.nr(), width = N * P;
    OutputExtremes* extremes = ctx.outputExtremes(); // each task adds what it wrote
    // (Left unwritten at allocation: fill() writes every element.)
    const std::unique_ptr<float[]> padded(new float[size_t(N * C * planes.plane)]);
    planes.fill(x, N * C, g, padded.get());
    const std::vector<int64_t> offsets = planes.rowOffsets(C, g, planes.HS);

    // Position i of the batch is output i % P of image i / P; its taps sit
    // past where it reads in its image's sub-planes, so a tile may span images.
    // Tasks: (strip of output channels, run of position tiles), at least
    // kConvTasksPerThread per thread where the batch has the tiles.
    const int64_t strips = weights.strips(), tiles = (width + mrMax - 1) / mrMax;
    const int64_t wanted = kConvTasksPerThread * tbb::this_task_arena::max_concurrency();
    const int64_t runs = std::clamp<int64_t>((wanted + strips - 1) / strips, 1, tiles);
    const int64_t run = (tiles + runs - 1) / runs * mrMax;
    const int64_t chunks = (width + run - 1) / run;
    tbb::parallel_for(int64_t(0), strips * chunks, [&](int64_t task) {
        ctx.checkCancelled();
        const int64_t s = task / chunks, i0 = task % chunks * run, i1 = std::min(width, i0 + run),
                      channels = weights.stripWidth(s);
        // The strip's sums, position after position as the tiles store them
        // (row i - i0 of `rows`, nr channels), then transposed into y image
        // by image and finished there in one pass. (The tiles' scalar
        // transposition took 12% of a 16 -> 64 conv on 23 x 23; finishing
        // channel by channel from a second buffer, 6% of a 32 -> 64 conv at
        // stride 2 from 12 x 12. With the masked fill, the hoisted tap
        // offsets and fill tasks of 16 KiB, single thread, fastest of 3000:
        // 3 x 3 convs 32 -> 64 at stride 2 from 12 x 12 0.0197 -> 0.0138 ms,
        // 64 -> 96 at stride 2 from 6 x 6 0.0181 -> 0.0110, 64 -> 64 on
        // 6 x 6 0.0259 -> 0.0202, 24 -> 32 at stride 2 from 24 x 24 0.0245 ->
        // 0.0179: detection_head's convs, where ONNX Runtime takes 0.011,
        // 0.010, 0.017 and 0.021.)
        thread_local std::vector<float> rowsBlock;
        float* rows = growScratch(rowsBlock, size_t(nr * (i1 - i0)));
        int64_t q[kMaxRows];
        // Where position i reads: image n, output row oh, column ow, stepped along.
        int64_t n = i0 / P, oh = i0 % P / OW, ow = i0 % P % OW;
        // Rows of at least mrMax outputs are tiled row by row, so that every
        // tile's positions are consecutive.
        for (int64_t i = i0; i < i1;) {
            const int64_t mr = std::min({mrMax, i1 - i, OW >= mrMax ? OW - ow : mrMax});
            bool consecutive = true;
            for (int64_t r = 0; r < mr; ++r) {
                q[r] = n * C * planes.plane + oh * planes.WS + ow;
                consecutive = consecutive && q[r] == q[0] + r;
                if (++ow == OW) {
                    ow = 0;
                    if (++oh == g.output[0])
                        oh = 0, ++n;
                }
            }
            tileKernel(int(mr), consecutive, K, padded.get(), offsets.data(), q, weights.strip(s),
                       rows + (i - i0) * nr);
            i += mr;
        }
        const int64_t m0 = s * nr;
        for (int64_t i = i0; i < i1;) { // one image's outputs at a time
            const int64_t image = i / P, end = std::min(i1, (image + 1) * P);
            float* dst = y.image(image) + m0 * P + i % P;
            transposeFinished(rows + (i - i0) * nr, end - i, channels, nr, dst, P, bias ? bias + m0 : nullptr,
                              addend ? addend + (dst - y.data) : nullptr, activation);
            if (extremes)
                extremes->addRows(dst, channels, end - i, P);
            i = end;
        }
    });
#else
    (void)ctx, (void)weights, (void)x, (void)bias, (void)addend, (void)activation, (void)N, (void)C, (void)g,
        (void)y;
    throw Error("positionRowsConv needs x86-64 vector instructions");
#endif
}

} // namespace qs::ops
