#include "gemm/gram.h"

#include <algorithm>
#include <vector>

#include <tbb/parallel_for.h>
#include <tbb/parallel_invoke.h>
#include <tbb/task_arena.h>

namespace qs::gemm {

namespace {

// H's MR × NR corner at h (column-major, leading dimension ldh; only mr × nr of
// it is added to) += an A strip (kc × MR, k-major) times a B strip (kc × NR,
// k-major) transposed: MR / W vectors of W doubles per column of the corner in
// registers, each A row loaded once and each B value broadcast once per k.
template <int MR, int NR, int W>
[[gnu::always_inline]] inline void gramBody(int64_t kc, const double* a, const double* b, double* h, int64_t ldh,
                                            int64_t mr, int64_t nr)
{
    // (A typedef: GCC drops vector_size from a `using` alias of a dependent size.)
    typedef double V __attribute__((vector_size(W * sizeof(double)), aligned(sizeof(double))));
    constexpr int NV = MR / W;
    V acc[NR][NV];
#pragma GCC unroll 12
    for (int j = 0; j < NR; ++j)
        for (int v = 0; v < NV; ++v)
            acc[j][v] = V{};
    for (int64_t k = 0; k < kc; ++k, a += MR, b += NR) {
        V av[NV];
        for (int v = 0; v < NV; ++v)
            av[v] = *reinterpret_cast<const V*>(a + v * W);
#pragma GCC unroll 12
        for (int j = 0; j < NR; ++j)
            for (int v = 0; v < NV; ++v)
                acc[j][v] += b[j] * av[v];
    }
    if (mr == MR) {
        for (int64_t j = 0; j < nr; ++j)
            for (int v = 0; v < NV; ++v)
                *reinterpret_cast<V*>(h + j * ldh + v * W) += acc[j][v];
        return;
    }
    double tile[NR][MR];
    for (int j = 0; j < NR; ++j)
        for (int v = 0; v < NV; ++v)
            *reinterpret_cast<V*>(tile[j] + v * W) = acc[j][v];
    for (int64_t j = 0; j < nr; ++j)
        for (int64_t i = 0; i < mr; ++i)
            h[j * ldh + i] += tile[j][i];
}

[[gnu::target("avx512f")]] void gramAvx512(int64_t kc, const double* a, const double* b, double* h, int64_t ldh,
                                           int64_t mr, int64_t nr)
{
    gramBody<16, 12, 8>(kc, a, b, h, ldh, mr, nr);
}

[[gnu::target("avx2,fma")]] void gramAvx2(int64_t kc, const double* a, const double* b, double* h, int64_t ldh,
                                          int64_t mr, int64_t nr)
{
    gramBody<8, 6, 4>(kc, a, b, h, ldh, mr, nr);
}

void gramBaseline(int64_t kc, const double* a, const double* b, double* h, int64_t ldh, int64_t mr, int64_t nr)
{
    gramBody<4, 4, 2>(kc, a, b, h, ldh, mr, nr);
}

// Columns 0 .. n of rows k0 .. k0 + kc of src (element (k, f) at src[k·ld + f]),
// in strips of `strip` columns, each strip k-major and zero-padded to `strip` wide.
void packStrips(const double* src, int64_t ld, int64_t k0, int64_t kc, int64_t n, int64_t strip, double* out)
{
    for (int64_t s = 0; s < n; s += strip) {
        const int64_t width = std::min(strip, n - s);
        for (int64_t k = 0; k < kc; ++k) {
            const double* row = src + (k0 + k) * ld + s;
            double* o = out + k * strip;
            std::copy(row, row + width, o);
            std::fill(o + width, o + strip, 0.0);
        }
        out += kc * strip;
    }
}

// The parallel products split C in multiples of every kernel's mr (rows) or nr (columns).
constexpr int64_t kRowsUnit = 16, kColumnsUnit = 12;

// Below this order the triangular inverse runs column by column.
constexpr int64_t kUnblockedInverse = 64;

// L ← L⁻¹ column by column from the last (the inverse's columns to the right
// are done when a column is reached): x = L(j+1:, j) becomes −X(j+1:, j+1:)·x / L(j, j).
void invertLowerUnblocked(double* l, int64_t n, int64_t ld)
{
    for (int64_t j = n - 1; j >= 0; --j) {
        double* x = l + j * ld;
        x[j] = 1.0 / x[j];
        const double scale = -x[j];
        for (int64_t i = n - 1; i > j; --i) { // descending: x(k < i) still holds L's values
            double sum = 0;
            for (int64_t k = j + 1; k <= i; ++k)
                sum += l[k * ld + i] * x[k];
            x[i] = sum * scale;
        }
    }
}

} // namespace

void addProduct(SimdLevel level, int64_t depth, const double* a, int64_t lda, int64_t m, const double* b,
                int64_t ldb, int64_t n, double* c, int64_t ldc, bool subtract, bool lowerOnly)
{
    if (depth <= 0 || m <= 0 || n <= 0)
        return;
    using Kernel = void (*)(int64_t, const double*, const double*, double*, int64_t, int64_t, int64_t);
    Kernel kernel = gramBaseline;
    int64_t mr = 4, nr = 4;
    if (level == SimdLevel::Avx512) {
        kernel = gramAvx512;
        mr = 16;
        nr = 12;
    } else if (level == SimdLevel::Avx2) {
        kernel = gramAvx2;
        mr = 8;
        nr = 6;
    }
    const int64_t aStrips = (m + mr - 1) / mr, bStrips = (n + nr - 1) / nr;
    const int64_t block = std::min(depth, kGramDepthBlock);
    std::vector<double> pa(size_t(aStrips * mr * block)), pb(size_t(bStrips * nr * block));
    for (int64_t k0 = 0; k0 < depth; k0 += kGramDepthBlock) {
        const int64_t kc = std::min(kGramDepthBlock, depth - k0);
        packStrips(a, lda, k0, kc, m, mr, pa.data());
        packStrips(b, ldb, k0, kc, n, nr, pb.data());
        if (subtract) // −(a·b) is exactly the negated product: C −= sum is C += (−a)·b, the same bits
            for (double& v : pa)
                v = -v;
        for (int64_t is = 0; is < aStrips; ++is) {
            const int64_t i0 = is * mr, rows = std::min(mr, m - i0);
            for (int64_t js = 0; js < bStrips; ++js) {
                const int64_t j0 = js * nr, cols = std::min(nr, n - j0);
                if (lowerOnly && j0 > i0 + rows - 1) // every element of the corner is above the diagonal
                    break;
                kernel(kc, pa.data() + is * mr * kc, pb.data() + js * nr * kc, c + j0 * ldc + i0, ldc, rows, cols);
            }
        }
    }
}

void addGramTile(SimdLevel level, const double* x, int64_t rows, int64_t ld, int64_t r0, int64_t rn, int64_t c0,
                 int64_t cn, double* h, int64_t ldh, bool lowerOnly)
{
    addProduct(level, rows, x + r0, ld, rn, x + c0, ld, cn, h + c0 * ldh + r0, ldh, false, lowerOnly);
}

void addProductParallel(SimdLevel level, int64_t depth, const double* a, int64_t lda, int64_t m, const double* b,
                        int64_t ldb, int64_t n, double* c, int64_t ldc, bool subtract)
{
    // A few tasks per thread along C's longer side: each task packs its own part of that side's
    // operand and all of the other, so the fewer tasks, the less is packed twice.
    const int64_t most = 4 * int64_t(tbb::this_task_arena::max_concurrency());
    const bool byRows = m >= n;
    const int64_t length = byRows ? m : n, unit = byRows ? kRowsUnit : kColumnsUnit;
    const int64_t units = (length + unit - 1) / unit;
    if (units == 0 || depth <= 0)
        return;
    const int64_t perTask = (units + std::min(units, most) - 1) / std::min(units, most) * unit;
    const int64_t tasks = (length + perTask - 1) / perTask;
    tbb::parallel_for(int64_t(0), tasks, [&](int64_t t) {
        const int64_t start = t * perTask, size = std::min(perTask, length - start);
        if (byRows)
            addProduct(level, depth, a + start, lda, size, b, ldb, n, c + start, ldc, subtract);
        else
            addProduct(level, depth, a, lda, m, b + start, ldb, size, c + start * ldc, ldc, subtract);
    });
}

void invertLowerTriangular(SimdLevel level, double* l, int64_t n, int64_t ld)
{
    if (n <= kUnblockedInverse) {
        invertLowerUnblocked(l, n, ld);
        return;
    }
    // [L11 0; L21 L22]⁻¹ = [X11 0; −X22·L21·X11 X22], X11 = L11⁻¹, X22 = L22⁻¹.
    const int64_t n1 = n / 2, n2 = n - n1;
    double* l11 = l;
    double* l21 = l + n1;
    double* l22 = l + n1 * ld + n1;
    tbb::parallel_invoke([&] { invertLowerTriangular(level, l11, n1, ld); },
                         [&] { invertLowerTriangular(level, l22, n2, ld); });
    // The products read whole blocks: X11ᵀ and X22 with their upper triangles as zeros.
    std::vector<double> x11t(size_t(n1 * n1), 0.0), x22(size_t(n2 * n2), 0.0), t(size_t(n2 * n1), 0.0);
    for (int64_t j = 0; j < n1; ++j)
        for (int64_t k = j; k < n1; ++k)
            x11t[size_t(k * n1 + j)] = l11[j * ld + k]; // (X11ᵀ)(j, k) at [k·n1 + j]: B of T = L21·X11
    for (int64_t j = 0; j < n2; ++j)
        std::copy(l22 + j * ld + j, l22 + j * ld + n2, x22.begin() + j * n2 + j);
    // T = L21·X11 (n2 × n1), then L21 ← −X22·T.
    addProductParallel(level, n1, l21, ld, n2, x11t.data(), n1, n1, t.data(), n2);
    std::vector<double> tt(size_t(n2 * n1));
    for (int64_t j = 0; j < n1; ++j)
        for (int64_t k = 0; k < n2; ++k)
            tt[size_t(k * n1 + j)] = t[size_t(j * n2 + k)]; // Tᵀ(j, k) at [k·n1 + j]
    for (int64_t j = 0; j < n1; ++j)
        std::fill(l21 + j * ld, l21 + j * ld + n2, 0.0);
    addProductParallel(level, n2, x22.data(), n2, n2, tt.data(), n1, n1, l21, ld, true);
}

} // namespace qs::gemm
