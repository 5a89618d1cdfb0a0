#pragma once
// The float matrix product that Conv, Gemm and MatMul share.
//
// Without -march=native Eigen's product uses SSE2; the CPUs this runs on have
// twice (AVX2 + FMA) or four times (AVX-512) that vector width, so products run
// on hand-written micro-kernels chosen at run time (Eigen where neither exists).
// Blocking as in BLIS: depth blocks of kDepthBlock; per block, B is packed into
// strips of nr() columns (one stays in L1) and every mr-row strip of the packed
// A runs against it. Each C element is one dot product summed in k order, so
// results do not depend on how rows or columns are split into tasks.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/cancellation.h"
#include "gemm/simd_level.h"

namespace qs::gemm {

// Rows of the packed B per depth block; a power of two (PackedColumns in
// packed_columns.h shifts by it).
inline constexpr int64_t kDepthBlock = 256;

// Products with at most this many columns run along A's rows (a matrix-vector
// product each) instead of padding B to a micro-kernel's width.
inline constexpr int64_t kFewColumns = 4;

// Subnormals::Flush packs subnormal values as zeros of their sign, for weights
// packed once: a multiply-add on a subnormal takes a microcode assist, about a
// hundred times slower, and trained weights hold them (7% of the demo
// classifier's: its run took twice as long). Each changes a sum by less than
// 2^-126 times the other operand.
enum class Subnormals { Keep, Flush };

// What a product does to each C element as it stores its last depth block:
// C[r, j] = clamp((sum + bias[r]) + addend[r * ldc + j]), each step rounded,
// the bias and the addend only where given (x + 0 would turn -0 into +0),
// clamp max(v, 0) as v > 0 ? v : 0 (Relu) or v < lo ? lo : (hi < v ? hi : v)
// (Clip). A Conv's bias, folded residual Add and activation, applied while
// the tile is in registers rather than in one more pass over C: the same
// operations in the same order as finishOutputs (runtime/ops/activation.h),
// so the same bits. bias and addend are indexed as C is: bias[0] and
// addend[0] belong to the call's first row and column.
struct Epilogue {
    enum class Clamp { None, Relu, Clip };
    const float* bias = nullptr;
    const float* addend = nullptr;
    Clamp clamp = Clamp::None;
    float lo = 0, hi = 0;

    // The same for the tile from row r, column j of C (row stride ldc) on.
    Epilogue at(int64_t r, int64_t j, int64_t ldc) const
    {
        Epilogue e = *this;
        e.bias = bias ? bias + r : nullptr;
        e.addend = addend ? addend + r * ldc + j : nullptr;
        return e;
    }
    // v finished in place: a float (the sum of element (r, j) of the tile),
    // or a GCC vector of a row's consecutive elements from (r, j) on (by
    // reference: a vector argument's ABI depends on the instruction set);
    // `added` is where the addend's value(s) for it are, when there is an addend.
    template <class T> [[gnu::always_inline]] void finishInPlace(T& v, int64_t r, const T* added) const
    {
        if (bias)
            v = v + bias[r];
        if (addend)
            v = v + *added;
        const T zero{};
        if (clamp == Clamp::Relu) {
            v = v > zero ? v : zero;
        } else if (clamp == Clamp::Clip) {
            const T low = lo - zero, high = hi - zero;
            v = v < low ? low : (high < v ? high : v);
        }
    }
    // Element (r, j) of a tile, finished (v: the sum).
    float finish(float v, int64_t r, int64_t j, int64_t ldc) const
    {
        finishInPlace(v, r, addend ? addend + r * ldc + j : nullptr);
        return v;
    }
};

// One or more [rows, depth] matrices ("groups") packed for the micro-kernels
// of a SIMD level (not None): per group, per depth block, strips of mr rows
// stored k-major, the last strip zero-padded. Element (g, r, k) is read from
// a[g * groupStride + r * rowStride + k * depthStride], so a transposed A packs
// as it is. Packing costs one pass; Conv and Gemm keep packed weights across runs.
class PackedMatrix {
public:
    PackedMatrix(SimdLevel level, const float* a, int64_t groups, int64_t rows, int64_t depth, int64_t groupStride,
                 int64_t rowStride, int64_t depthStride, Subnormals subnormals = Subnormals::Keep);

    // C[r0:r1, 0:n] = A_group[r0:r1, :] * B[depth, n]; element (k, j) of B is
    // b[k * bk + j * bj] (bj = 1: row-major; bk = 1: transposed); C row-major
    // with row stride ldc. r0 is a multiple of mr() (or r1 = rows()). With an
    // epilogue, C is stored finished (its bias and addend indexed as C, from
    // row r0).
    void multiply(int64_t group, const float* b, int64_t bk, int64_t bj, int64_t n, float* c, int64_t ldc,
                  int64_t r0 = 0, int64_t r1 = -1, const Epilogue* epilogue = nullptr) const;
    // The same along A's rows, up to four columns of B at a time (what
    // multiply() does for n <= kFewColumns; the same bits as its micro-kernels),
    // with C element (r, j) at c[(r − r0) * ldc + j * cj]: a transposed C too.
    void multiplyFewColumns(int64_t group, const float* b, int64_t bk, int64_t bj, int64_t n, float* c, int64_t ldc,
                            int64_t cj, int64_t r0 = 0, int64_t r1 = -1) const;
    // The same with B already in the packed-column layout (nr() columns per
    // strip, kDepthBlock rows per depth block, the last strip zero-padded).
    // Rows [r0, r1) only, as in multiply(). A last strip of at most
    // kFewColumns columns runs along A's rows instead of a padded micro-tile.
    // An epilogue as in multiply().
    void multiplyPacked(int64_t group, const float* packedB, int64_t n, float* c, int64_t ldc, int64_t r0 = 0,
                        int64_t r1 = -1, const Epilogue* epilogue = nullptr) const;

    // The same with B virtual: element (k, j) is base[rowOffsets[k] + j] (an
    // implicit GEMM: rows of a column matrix that lie inside a padded input).
    // Reads up to nr() - 1 columns past n in every row; they must be readable.
    // Rows [r0, r1) only, as in multiply().
    void multiplyIndirect(int64_t group, const float* base, const int64_t* rowOffsets, int64_t n, float* c, int64_t ldc,
                          int64_t r0 = 0, int64_t r1 = -1) const;

    int64_t rows() const { return rows_; }
    int64_t mr() const { return mr_; }
    int64_t nr() const { return nr_; }

private:
    // f(s, r) for every micro-tile of one depth block of kc rows and n columns:
    // B's strip s against the A-strip from row r, rows [r0, r1). When that
    // block is all of the product's depth (kDepthBlock at most), A-strip by
    // A-strip: each of C's rows is written in one run along the n columns, mr
    // rows at a time, where strip by strip every row of C advances by nr
    // columns at once, more streams of stores than the caches follow (a
    // pointwise conv 16 -> 96 at batch 8 on 112 x 112 planes, C 37 MiB: 5.6-5.9
    // -> 2.3-2.8 ms in mobilenet_v2 at 224 x 224). Deeper products, which
    // store each C element after two or more blocks, keep B's strip in L1
    // while A streams past it, strip by strip. (Only up to a depth of 64, the
    // products of depth 128 in the encoders and up to 256 in mobilenet_v2,
    // mnasnet and efficientnet_b0 at batch 8 measured the same or slower, not
    // faster.) Every C element is the same dot product either way.
    template <class F> void forEachTile(int64_t kc, int64_t n, int64_t r0, int64_t r1, F&& f) const
    {
        if (kc == depth_)
            for (int64_t r = r0; r < r1; r += mr_)
                for (int64_t s = 0; s * nr_ < n; ++s)
                    f(s, r);
        else
            for (int64_t s = 0; s * nr_ < n; ++s)
                for (int64_t r = r0; r < r1; r += mr_)
                    f(s, r);
    }
    void run(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int64_t mr, int64_t nr,
             bool accumulate, const Epilogue* epilogue = nullptr) const;
    // One depth block of an A-strip (its first mr rows) times n <= kFewColumns
    // columns of B, along the rows (fewColumnsAvx512 or fewColumnsAvx2).
    void runFewColumns(int64_t kc, const float* a, const float* b, int64_t bk, int64_t bj, int64_t n, float* c,
                       int64_t ldc, int64_t cj, int64_t mr, bool accumulate) const;

    SimdLevel level_;
    int64_t rows_, depth_, mr_, nr_, paddedRows_;
    std::vector<float> data_;
};

// A [depth, width] matrix (element (k, j) at b[k * bk + j * bj]) packed
// once, strip after strip of nr columns (a SIMD level's, not None): strip s
// is the packed-column layout of columns [s * nr, s * nr + nr), all depth
// blocks together, so that PackedMatrix::multiplyPacked reads it as a B of
// at most nr columns and a task that takes whole strips streams one
// contiguous piece of memory. For products whose other operand changes on
// every call (a convolution's weights against a few columns of activations).
class PackedColumnMatrix {
public:
    PackedColumnMatrix(SimdLevel level, const float* b, int64_t depth, int64_t width, int64_t bk, int64_t bj,
                       Subnormals subnormals = Subnormals::Keep);

    int64_t depth() const { return depth_; }
    int64_t width() const { return width_; }
    int64_t nr() const { return nr_; }
    int64_t strips() const { return (width_ + nr_ - 1) / nr_; }
    const float* strip(int64_t s) const { return data_.data() + s * depth_ * nr_; }
    // Columns in strip s (nr but for the last).
    int64_t stripWidth(int64_t s) const { return std::min(nr_, width_ - s * nr_); }

private:
    int64_t depth_, width_, nr_;
    std::vector<float> data_;
};

// C[M, N] = alpha * op(A)[M, K] * op(B)[K, N], with op a transpose when asked;
// A, B and C row-major with leading dimensions lda, ldb, ldc. Splits into tasks
// over rows and columns when large enough (serial otherwise); checks `cancel`
// between tasks. K = 0 gives zeros.
void sgemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
           const float* B, int64_t ldb, float* C, int64_t ldc, const CancellationToken* cancel = nullptr);

} // namespace qs::gemm
