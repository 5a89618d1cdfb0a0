#include "gemm/sgemm.h"

#include <Eigen/Core>
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <string>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include "core/error.h"
#include "core/scratch.h"
#include "gemm/packed_columns.h"

namespace qs::gemm {

namespace {

// Floats past its last strip a PackedMatrix keeps readable (fewColumnsBody's
// vectors run up to 16 − 6 floats past a strip's row).
constexpr int64_t kOverRead = 16;

// Columns of B packed at a time: kDepthBlock x kColumnBlock floats (1 MiB) stay in L2.
constexpr int64_t kColumnBlock = 1024;

#if defined(__x86_64__) && defined(__GNUC__)

// Where the micro-kernels read row k of a B strip: a packed strip (rows one
// after the other), or rows anywhere (implicit GEMM: the rows of a virtual
// column matrix inside a padded input).
struct PackedRows {
    const float* b;
    int64_t stride;
    const float* operator()(int64_t k) const { return b + k * stride; }
};
struct IndirectRows {
    const float* base;
    const int64_t* offsets;
    const float* operator()(int64_t k) const { return base + offsets[k]; }
};

// C[mr, nr] (= or +=) the mr x nr corner of an A-strip (kc x STRIP, k-major;
// only its first MR rows are read) times a B-strip (kc x 2W): 2 * MR sums of W
// floats in registers, each B row loaded once and each A value broadcast once
// per k. Compiled for AVX2 + FMA (6 x 16) and AVX-512 (12 x 32, and 6 x 32 for
// a last strip of at most six rows) below, each also one vector wide (6 x 8,
// 12 x 16, 6 x 16) for a strip of at most that many columns.
// NV = 1 computes only the strip's first W columns: a strip of at most W
// columns (a 3 x 3 plane, the remainder of a row of tiles) then costs half the
// multiply-adds, with the same sums in the same order (the same bits).
// With an epilogue (the tile's own, Epilogue::at), each element is stored finished.
// n < W floats from src to dst in pieces of constant size (vector moves; a
// loop here would become a library call per row).
template <int W> [[gnu::always_inline]] inline void copyFew(float* dst, const float* src, int64_t n)
{
    static_assert(W <= 16);
    int64_t i = 0;
    if (W > 8 && (n & 8)) {
        std::memcpy(dst + i, src + i, 8 * sizeof(float));
        i += 8;
    }
    if (n & 4) {
        std::memcpy(dst + i, src + i, 4 * sizeof(float));
        i += 4;
    }
    if (n & 2) {
        std::memcpy(dst + i, src + i, 2 * sizeof(float));
        i += 2;
    }
    if (n & 1)
        dst[i] = src[i];
}

template <int MR, int STRIP, int W, int NV, class Rows>
[[gnu::always_inline]] inline void microKernelBody(int64_t kc, const float* a, Rows rows, float* c, int64_t ldc,
                                                   int64_t mr, int64_t nr, bool accumulate,
                                                   const Epilogue* epilogue = nullptr)
{
    // (A typedef: GCC drops vector_size from a `using` alias of a dependent size.)
    typedef float V __attribute__((vector_size(W * sizeof(float)), aligned(sizeof(float))));
    V acc[MR][NV];
#pragma GCC unroll 12
    for (int r = 0; r < MR; ++r)
        for (int j = 0; j < NV; ++j)
            acc[r][j] = V{};
    for (int64_t k = 0; k < kc; ++k, a += STRIP) {
        const float* b = rows(k);
        V bv[NV];
        for (int j = 0; j < NV; ++j)
            bv[j] = *reinterpret_cast<const V*>(b + j * W);
#pragma GCC unroll 12
        for (int r = 0; r < MR; ++r)
            for (int j = 0; j < NV; ++j)
                acc[r][j] += a[r] * bv[j];
    }
    if (nr == NV * W) { // whole rows of the tile: straight from the registers
        if (!epilogue) {
            for (int64_t r = 0; r < mr; ++r)
                for (int j = 0; j < NV; ++j) {
                    V* cj = reinterpret_cast<V*>(c + r * ldc + j * W);
                    *cj = accumulate ? *cj + acc[r][j] : acc[r][j];
                }
            return;
        }
        for (int64_t r = 0; r < mr; ++r)
            for (int j = 0; j < NV; ++j) {
                V* cj = reinterpret_cast<V*>(c + r * ldc + j * W);
                const float* added = epilogue->addend ? epilogue->addend + r * ldc + j * W : nullptr;
                V v = accumulate ? *cj + acc[r][j] : acc[r][j];
                epilogue->finishInPlace(v, r, reinterpret_cast<const V*>(added));
                *cj = v;
            }
        return;
    }
    // Part of the tile's columns: its whole vectors as above, the one it ends
    // inside through a buffer (a 48 -> 192 conv on 11 x 11 stored a last strip
    // of 25 columns one element at a time, a quarter of its time; finished
    // element by element, the 8 columns past 32 of a 96 -> 576 conv on 5 x 8
    // took longer than the 32).
    for (int64_t r = 0; r < mr; ++r)
        for (int j = 0; j < NV && j * W < nr; ++j) {
            float* cj = c + r * ldc + j * W;
            const float* added = epilogue && epilogue->addend ? epilogue->addend + r * ldc + j * W : nullptr;
            if ((j + 1) * W <= nr) {
                V v = accumulate ? *reinterpret_cast<V*>(cj) + acc[r][j] : acc[r][j];
                if (epilogue)
                    epilogue->finishInPlace(v, r, reinterpret_cast<const V*>(added));
                *reinterpret_cast<V*>(cj) = v;
                continue;
            }
            // The last n lanes through a buffer: the sums finished as a vector
            // (lanes past n on zeros, dropped), moved in and out in pieces.
            const int64_t n = nr - j * W;
            float buffer[W] = {};
            V v = acc[r][j];
            if (accumulate) {
                copyFew<W>(buffer, cj, n);
                v = *reinterpret_cast<const V*>(buffer) + v;
            }
            if (epilogue) {
                V addend{};
                if (added) {
                    float addends[W] = {};
                    copyFew<W>(addends, added, n);
                    addend = *reinterpret_cast<const V*>(addends);
                }
                epilogue->finishInPlace(v, r, added ? &addend : nullptr);
            }
            *reinterpret_cast<V*>(buffer) = v;
            copyFew<W>(cj, buffer, n);
        }
}

template <class Rows>
[[gnu::target("avx2,fma")]] void microKernelAvx2(int64_t kc, const float* a, Rows rows, float* c, int64_t ldc,
                                                 int64_t mr, int64_t nr, bool accumulate,
                                                 const Epilogue* epilogue = nullptr)
{
    if (nr <= 8)
        microKernelBody<6, 6, 8, 1>(kc, a, rows, c, ldc, mr, nr, accumulate, epilogue);
    else
        microKernelBody<6, 6, 8, 2>(kc, a, rows, c, ldc, mr, nr, accumulate, epilogue);
}

template <int MR, class Rows>
[[gnu::target("avx512f")]] void microKernelAvx512(int64_t kc, const float* a, Rows rows, float* c, int64_t ldc,
                                                  int64_t mr, int64_t nr, bool accumulate,
                                                  const Epilogue* epilogue = nullptr)
{
    if (nr <= 16)
        microKernelBody<MR, 12, 16, 1>(kc, a, rows, c, ldc, mr, nr, accumulate, epilogue);
    else
        microKernelBody<MR, 12, 16, 2>(kc, a, rows, c, ldc, mr, nr, accumulate, epilogue);
}

// C[mr, NC] (= or +=) an A-strip (kc x STRIP, k-major) times NC columns of B
// (element (k, j) at b[k * bk + j * bj]); C element (r, j) at c[r * ldc + j * cj].
// For products with a few columns (a classifier on a small batch, a 1 x 1
// plane), which the micro-kernels would pad to 2W columns: here the vector runs
// along the strip's rows, W >= STRIP lanes loaded at once (W − STRIP past the
// row: PackedMatrix pads its buffer). Each C element is the micro-kernel's sum
// (products in k order from zero, one rounding each), so the same bits.
template <int STRIP, int W, int NC>
[[gnu::always_inline]] inline void fewColumnsBody(int64_t kc, const float* a, const float* b, int64_t bk, int64_t bj,
                                                  float* c, int64_t ldc, int64_t cj, int64_t mr, bool accumulate)
{
    typedef float V __attribute__((vector_size(W * sizeof(float)), aligned(sizeof(float))));
    V acc[NC];
    for (int j = 0; j < NC; ++j)
        acc[j] = V{};
    for (int64_t k = 0; k < kc; ++k, a += STRIP) {
        const V column = *reinterpret_cast<const V*>(a);
        for (int j = 0; j < NC; ++j)
            acc[j] += column * b[k * bk + j * bj];
    }
    for (int j = 0; j < NC; ++j)
        for (int64_t r = 0; r < mr; ++r) {
            float& out = c[r * ldc + j * cj];
            out = accumulate ? out + acc[j][r] : acc[j][r];
        }
}

template <int STRIP, int W>
[[gnu::always_inline]] inline void fewColumns(int64_t kc, const float* a, const float* b, int64_t bk, int64_t bj,
                                              int64_t n, float* c, int64_t ldc, int64_t cj, int64_t mr, bool accumulate)
{
    for (int64_t j = 0; j < n; j += 4, b += 4 * bj, c += 4 * cj) {
        switch (std::min<int64_t>(4, n - j)) {
        case 1:
            fewColumnsBody<STRIP, W, 1>(kc, a, b, bk, bj, c, ldc, cj, mr, accumulate);
            break;
        case 2:
            fewColumnsBody<STRIP, W, 2>(kc, a, b, bk, bj, c, ldc, cj, mr, accumulate);
            break;
        case 3:
            fewColumnsBody<STRIP, W, 3>(kc, a, b, bk, bj, c, ldc, cj, mr, accumulate);
            break;
        default:
            fewColumnsBody<STRIP, W, 4>(kc, a, b, bk, bj, c, ldc, cj, mr, accumulate);
            break;
        }
    }
}

[[gnu::target("avx2,fma")]] void fewColumnsAvx2(int64_t kc, const float* a, const float* b, int64_t bk, int64_t bj,
                                                int64_t n, float* c, int64_t ldc, int64_t cj, int64_t mr,
                                                bool accumulate)
{
    fewColumns<6, 8>(kc, a, b, bk, bj, n, c, ldc, cj, mr, accumulate);
}

[[gnu::target("avx512f")]] void fewColumnsAvx512(int64_t kc, const float* a, const float* b, int64_t bk, int64_t bj,
                                                 int64_t n, float* c, int64_t ldc, int64_t cj, int64_t mr,
                                                 bool accumulate)
{
    fewColumns<12, 16>(kc, a, b, bk, bj, n, c, ldc, cj, mr, accumulate);
}

#endif

// A C tile of rows x cols stored by a kernel without an epilogue, finished in place.
void finishTile(float* c, int64_t ldc, int64_t rows, int64_t cols, const Epilogue& e)
{
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < cols; ++j)
            c[r * ldc + j] = e.finish(c[r * ldc + j], r, j, ldc);
}

// B[kc, nc] (element (k, j) at b[k * bk + j * bj]) into strips of nr columns,
// k-major, the last strip zero-padded. Rows of B that lie in memory are read
// one after the other, each in one run: strip by strip, a pointwise conv's
// 144 input planes were 144 streams of loads at once, more than the
// prefetchers follow (144 -> 24 at batch 8 on 56 x 56 in mobilenet_v2 at
// 224 x 224: 2.03, 2.05 -> 1.75, 1.67 ms).
void packColumns(const float* b, int64_t bk, int64_t bj, int64_t kc, int64_t nc, int64_t nr, float* out)
{
    if (bj == 1) {
        for (int64_t k = 0; k < kc; ++k)
            for (int64_t s = 0; s * nr < nc; ++s) {
                const int64_t j0 = s * nr, width = std::min(nr, nc - j0);
                float* dst = out + s * nr * kc + k * nr;
                copyStripRow(dst, b + k * bk + j0, width);
                if (width < nr) // the last strip's padding (whole strips: no call)
                    std::fill(dst + width, dst + nr, 0.0f);
            }
        return;
    }
    for (int64_t s = 0; s * nr < nc; ++s) {
        const int64_t j0 = s * nr, width = std::min(nr, nc - j0);
        float* strip = out + s * nr * kc;
        for (int64_t k = 0; k < kc; ++k) {
            const float* row = b + k * bk + j0 * bj;
            float* dst = strip + k * nr;
            for (int64_t j = 0; j < width; ++j)
                dst[j] = row[j * bj];
            if (width < nr)
                std::fill(dst + width, dst + nr, 0.0f);
        }
    }
}

} // namespace

PackedMatrix::PackedMatrix(SimdLevel level, const float* a, int64_t groups, int64_t rows, int64_t depth,
                           int64_t groupStride, int64_t rowStride, int64_t depthStride, Subnormals subnormals)
    : level_(level), rows_(rows), depth_(depth), mr_(level == SimdLevel::Avx512 ? 12 : 6),
      nr_(level == SimdLevel::Avx512 ? 32 : 16), paddedRows_((rows + mr_ - 1) / mr_ * mr_),
      data_(size_t(groups * paddedRows_ * depth + kOverRead), 0.0f)
{
    if (level == SimdLevel::None)
        throw Error("PackedMatrix needs AVX2 or AVX-512 (simdLevel() is baseline)");
    const int64_t strips = paddedRows_ / mr_;
    auto pack = [&](int64_t task) {
        const int64_t g = task / strips, r0 = (task % strips) * mr_;
        const float* ag = a + g * groupStride;
        for (int64_t p0 = 0; p0 < depth; p0 += kDepthBlock) {
            const int64_t kc = std::min(kDepthBlock, depth - p0);
            float* strip = data_.data() + g * paddedRows_ * depth + p0 * paddedRows_ + r0 * kc;
            const int64_t r1 = std::min(rows, r0 + mr_);
            if (rowStride == 1) // rows next to each other (a conv's positions): a strip's row at a time
                for (int64_t k = 0; k < kc; ++k)
                    for (int64_t r = r0; r < r1; ++r)
                        strip[k * mr_ + (r - r0)] = ag[r + (p0 + k) * depthStride];
            else
                for (int64_t r = r0; r < r1; ++r)
                    for (int64_t k = 0; k < kc; ++k)
                        strip[k * mr_ + (r - r0)] = ag[r * rowStride + (p0 + k) * depthStride];
            if (subnormals == Subnormals::Flush)
                for (int64_t i = 0; i < kc * mr_; ++i)
                    strip[i] = std::fabs(strip[i]) < FLT_MIN ? std::copysign(0.0f, strip[i]) : strip[i];
        }
    };
    // A small matrix (an attention head's operand) packs faster than a worker wakes.
    if (groups * rows * depth < (int64_t(1) << 16))
        for (int64_t task = 0; task < groups * strips; ++task)
            pack(task);
    else
        tbb::parallel_for(int64_t(0), groups * strips, pack);
}

void PackedMatrix::multiply(int64_t group, const float* b, int64_t bk, int64_t bj, int64_t n, float* c, int64_t ldc,
                            int64_t r0, int64_t r1, const Epilogue* epilogue) const
{
    if (r1 < 0)
        r1 = rows_;
    if (n <= kFewColumns) {
        multiplyFewColumns(group, b, bk, bj, n, c, ldc, 1, r0, r1);
        if (epilogue)
            finishTile(c, ldc, r1 - r0, n, *epilogue);
        return;
    }
    thread_local std::vector<float> packedB;
    growScratch(packedB, size_t(std::min(kDepthBlock, depth_) * ((std::min(n, kColumnBlock) + nr_ - 1) / nr_ * nr_)));
    const float* ag = data_.data() + group * paddedRows_ * depth_;
    for (int64_t j0 = 0; j0 < n; j0 += kColumnBlock) {
        const int64_t nc = std::min(kColumnBlock, n - j0);
        for (int64_t p0 = 0; p0 < depth_; p0 += kDepthBlock) {
            const int64_t kc = std::min(kDepthBlock, depth_ - p0);
            packColumns(b + p0 * bk + j0 * bj, bk, bj, kc, nc, nr_, packedB.data());
            const bool last = p0 + kc == depth_;
            forEachTile(kc, nc, r0, r1, [&](int64_t s, int64_t r) {
                const float* bs = packedB.data() + s * nr_ * kc;
                const int64_t nr = std::min(nr_, nc - s * nr_);
                const Epilogue finished = epilogue && last ? epilogue->at(r - r0, j0 + s * nr_, ldc) : Epilogue{};
                run(kc, ag + p0 * paddedRows_ + r * kc, bs, c + (r - r0) * ldc + j0 + s * nr_, ldc,
                    std::min(mr_, r1 - r), nr, p0 > 0, epilogue && last ? &finished : nullptr);
            });
        }
    }
}

void PackedMatrix::multiplyFewColumns(int64_t group, const float* b, int64_t bk, int64_t bj, int64_t n, float* c,
                                      int64_t ldc, int64_t cj, int64_t r0, int64_t r1) const
{
    if (r1 < 0)
        r1 = rows_;
    const float* ag = data_.data() + group * paddedRows_ * depth_;
    for (int64_t p0 = 0; p0 < depth_; p0 += kDepthBlock) {
        const int64_t kc = std::min(kDepthBlock, depth_ - p0);
        for (int64_t r = r0; r < r1; r += mr_)
            runFewColumns(kc, ag + p0 * paddedRows_ + r * kc, b + p0 * bk, bk, bj, n, c + (r - r0) * ldc, ldc, cj,
                          std::min(mr_, r1 - r), p0 > 0);
    }
}

void PackedMatrix::multiplyPacked(int64_t group, const float* packedB, int64_t n, float* c, int64_t ldc, int64_t r0,
                                  int64_t r1, const Epilogue* epilogue) const
{
    if (r1 < 0)
        r1 = rows_;
    const float* ag = data_.data() + group * paddedRows_ * depth_;
    const int64_t paddedWidth = (n + nr_ - 1) / nr_ * nr_;
    // A few columns past the last whole strip (a batch of two 7 x 7 planes: 98
    // columns, 3 strips and 2) would cost a whole micro-tile each row strip.
    const int64_t tail = n % nr_ <= kFewColumns ? n % nr_ : 0, wide = n - tail;
    for (int64_t p0 = 0; p0 < depth_; p0 += kDepthBlock) {
        const int64_t kc = std::min(kDepthBlock, depth_ - p0);
        const float* block = packedB + p0 * paddedWidth;
        const bool last = p0 + kc == depth_;
        forEachTile(kc, wide, r0, r1, [&](int64_t s, int64_t r) {
            const float* bs = block + s * nr_ * kc;
            const int64_t nr = std::min(nr_, wide - s * nr_);
            const Epilogue finished = epilogue && last ? epilogue->at(r - r0, s * nr_, ldc) : Epilogue{};
            run(kc, ag + p0 * paddedRows_ + r * kc, bs, c + (r - r0) * ldc + s * nr_, ldc, std::min(mr_, r1 - r), nr,
                p0 > 0, epilogue && last ? &finished : nullptr);
        });
        if (tail == 0)
            continue;
        const float* bt = block + wide * kc; // the last strip: row k at bt + k * nr_
        for (int64_t r = r0; r < r1; r += mr_)
            runFewColumns(kc, ag + p0 * paddedRows_ + r * kc, bt, nr_, 1, tail, c + (r - r0) * ldc + wide, ldc, 1,
                          std::min(mr_, r1 - r), p0 > 0);
        if (epilogue && last)
            finishTile(c + wide, ldc, r1 - r0, tail, epilogue->at(0, wide, ldc));
    }
}

PackedColumnMatrix::PackedColumnMatrix(SimdLevel level, const float* b, int64_t depth, int64_t width, int64_t bk,
                                       int64_t bj, Subnormals subnormals)
    : depth_(depth), width_(width), nr_(level == SimdLevel::Avx512 ? 32 : 16)
{
    if (level == SimdLevel::None)
        throw Error("PackedColumnMatrix needs AVX2 or AVX-512 (simdLevel() is baseline)");
    data_.assign(size_t(strips() * depth * nr_ + kOverRead), 0.0f);
    tbb::parallel_for(int64_t(0), strips(), [&](int64_t s) {
        // One strip's rows, k-major: the packed-column layout of an nr-column matrix.
        float* out = data_.data() + s * depth * nr_;
        packColumns(b + s * nr_ * bj, bk, bj, depth, stripWidth(s), nr_, out);
        if (subnormals == Subnormals::Flush)
            for (int64_t i = 0; i < depth * nr_; ++i)
                out[i] = std::fabs(out[i]) < FLT_MIN ? std::copysign(0.0f, out[i]) : out[i];
    });
}

void PackedMatrix::run(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int64_t mr, int64_t nr,
                       bool accumulate, const Epilogue* epilogue) const
{
#if defined(__x86_64__) && defined(__GNUC__)
    // A strip of 7 to 9 rows (a 3 x 3 plane) skips the multiply-adds of the
    // last three rows; 6 rows or fewer half of them.
    if (level_ == SimdLevel::Avx512 && mr <= 6)
        microKernelAvx512<6>(kc, a, PackedRows{b, nr_}, c, ldc, mr, nr, accumulate, epilogue);
    else if (level_ == SimdLevel::Avx512 && mr <= 9)
        microKernelAvx512<9>(kc, a, PackedRows{b, nr_}, c, ldc, mr, nr, accumulate, epilogue);
    else if (level_ == SimdLevel::Avx512)
        microKernelAvx512<12>(kc, a, PackedRows{b, nr_}, c, ldc, mr, nr, accumulate, epilogue);
    else
        microKernelAvx2(kc, a, PackedRows{b, nr_}, c, ldc, mr, nr, accumulate, epilogue);
#else
    (void)kc, (void)a, (void)b, (void)c, (void)ldc, (void)mr, (void)nr, (void)accumulate, (void)epilogue;
#endif
}

void PackedMatrix::runFewColumns(int64_t kc, const float* a, const float* b, int64_t bk, int64_t bj, int64_t n,
                                 float* c, int64_t ldc, int64_t cj, int64_t mr, bool accumulate) const
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (level_ == SimdLevel::Avx512)
        fewColumnsAvx512(kc, a, b, bk, bj, n, c, ldc, cj, mr, accumulate);
    else
        fewColumnsAvx2(kc, a, b, bk, bj, n, c, ldc, cj, mr, accumulate);
#else
    (void)kc, (void)a, (void)b, (void)bk, (void)bj, (void)n, (void)c, (void)ldc, (void)cj, (void)mr, (void)accumulate;
#endif
}

void PackedMatrix::multiplyIndirect(int64_t group, const float* base, const int64_t* rowOffsets, int64_t n, float* c,
                                    int64_t ldc, int64_t r0, int64_t r1) const
{
    if (r1 < 0)
        r1 = rows_;
#if defined(__x86_64__) && defined(__GNUC__)
    const float* ag = data_.data() + group * paddedRows_ * depth_;
    for (int64_t p0 = 0; p0 < depth_; p0 += kDepthBlock) {
        const int64_t kc = std::min(kDepthBlock, depth_ - p0);
        for (int64_t j0 = 0; j0 < n; j0 += nr_) {
            const IndirectRows rows{base + j0, rowOffsets + p0};
            const int64_t nr = std::min(nr_, n - j0);
            for (int64_t r = r0; r < r1; r += mr_) {
                const float* as = ag + p0 * paddedRows_ + r * kc;
                float* cs = c + (r - r0) * ldc + j0;
                const int64_t mr = std::min(mr_, r1 - r);
                if (level_ == SimdLevel::Avx512 && mr <= 6)
                    microKernelAvx512<6>(kc, as, rows, cs, ldc, mr, nr, p0 > 0);
                else if (level_ == SimdLevel::Avx512)
                    microKernelAvx512<12>(kc, as, rows, cs, ldc, mr, nr, p0 > 0);
                else
                    microKernelAvx2(kc, as, rows, cs, ldc, mr, nr, p0 > 0);
            }
        }
    }
#else
    (void)group, (void)base, (void)rowOffsets, (void)n, (void)c, (void)ldc, (void)r0, (void)r1;
#endif
}

void sgemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
           const float* B, int64_t ldb, float* C, int64_t ldc, const CancellationToken* cancel)
{
    if (M <= 0 || N <= 0)
        return;
    if (K <= 0) {
        for (int64_t i = 0; i < M; ++i)
            std::fill(C + i * ldc, C + i * ldc + N, 0.0f);
        return;
    }
    const SimdLevel level = simdLevel();
    // Tasks: a few per thread for large products, one for small ones (waking
    // a worker costs more than they take).
    const bool parallel = M * N * K >= (int64_t(1) << 18);
    const int64_t wanted = parallel ? 4 * int64_t(tbb::this_task_arena::max_concurrency()) : 1;

    if (level == SimdLevel::None) {
        using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
        using Strided = Eigen::Map<const RowMatrix, 0, Eigen::OuterStride<>>;
        const int64_t step = std::max<int64_t>(std::min<int64_t>(M, 32), (M + wanted - 1) / wanted);
        auto rowsTask = [&](int64_t task) {
            if (cancel)
                cancel->check();
            const int64_t r0 = task * step, rows = std::min(M, r0 + step) - r0;
            Eigen::Map<RowMatrix, 0, Eigen::OuterStride<>> c(C + r0 * ldc, rows, N, Eigen::OuterStride<>(ldc));
            const Strided a = transA ? Strided(A + r0, K, rows, Eigen::OuterStride<>(lda))
                                     : Strided(A + r0 * lda, rows, K, Eigen::OuterStride<>(lda));
            const Strided b =
                transB ? Strided(B, N, K, Eigen::OuterStride<>(ldb)) : Strided(B, K, N, Eigen::OuterStride<>(ldb));
            if (transA && transB)
                c.noalias() = alpha * (a.transpose() * b.transpose());
            else if (transA)
                c.noalias() = alpha * (a.transpose() * b);
            else if (transB)
                c.noalias() = alpha * (a * b.transpose());
            else
                c.noalias() = alpha * (a * b);
        };
        const int64_t tasks = (M + step - 1) / step;
        if (tasks == 1)
            rowsTask(0);
        else
            tbb::parallel_for(int64_t(0), tasks, rowsTask);
        return;
    }

    const PackedMatrix a(level, A, 1, M, K, 0, transA ? 1 : lda, transA ? lda : 1);
    const int64_t bk = transB ? 1 : ldb, bj = transB ? ldb : 1;
    const int64_t mr = a.mr(), nr = a.nr();
    // Column blocks first (each packs its B once per row block), then row
    // blocks, until there are `wanted` tasks or blocks reach one strip.
    const int64_t colBlock = std::min((N + nr - 1) / nr * nr, kColumnBlock);
    const int64_t colBlocks = (N + colBlock - 1) / colBlock;
    const int64_t rowsWanted = std::max<int64_t>(1, (wanted + colBlocks - 1) / colBlocks);
    const int64_t rowBlock = std::max<int64_t>(4 * mr, ((M + rowsWanted - 1) / rowsWanted + mr - 1) / mr * mr);
    const int64_t rowBlocks = (M + rowBlock - 1) / rowBlock;
    auto task = [&](int64_t t) {
        if (cancel)
            cancel->check();
        const int64_t r0 = (t / colBlocks) * rowBlock, r1 = std::min(M, r0 + rowBlock);
        const int64_t j0 = (t % colBlocks) * colBlock, width = std::min(N, j0 + colBlock) - j0;
        float* c = C + r0 * ldc + j0;
        a.multiply(0, B + j0 * bj, bk, bj, width, c, ldc, r0, r1);
        if (alpha != 1.0f)
            for (int64_t i = 0; i < r1 - r0; ++i)
                for (int64_t j = 0; j < width; ++j)
                    c[i * ldc + j] *= alpha;
    };
    if (rowBlocks * colBlocks == 1)
        task(0);
    else
        tbb::parallel_for(int64_t(0), rowBlocks * colBlocks, task);
}

} // namespace qs::gemm
