#include "runtime/ops/gemm_matmul.h"

#include <algorithm>
#include <memory>

#include <Eigen/Core>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include "core/half.h"
#include "gemm/sgemm.h"
#include "runtime/ops/quantize_linear.h"

namespace qs::ops {

namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMatrixMap = Eigen::Map<const RowMatrix>;
using MatrixMap = Eigen::Map<RowMatrix>;

// Gemm with at most this many rows runs as matrix-vector products.
constexpr int64_t kFewRows = 4;
// Up to this many rows a Gemm keeps its weights packed in the node's memo.
constexpr int64_t kPackedWeightRows = 256;

} // namespace

namespace {

// Y[:, j0, j0 + cols) = alpha * op(A) * op(B)[:, j0, j0 + cols) for a B kept in
// bf16 or fp16 (a language model's mapped weights): the columns widened into
// `strip` (as [cols, K] when transB, else [K, cols]), then the float product.
void multiplyHalfStrip(const KernelContext& ctx, const Tensor& A, bool transA, const Tensor& B, bool transB, int64_t M,
                       int64_t K, int64_t N, float alpha, int64_t j0, int64_t cols, std::vector<float>& strip, float* y)
{
    strip.resize(size_t(cols * K));
    const auto* bits = static_cast<const uint16_t*>(B.rawData());
    const bool bf16 = B.dtype() == DType::BF16;
    tbb::parallel_for(int64_t(0), transB ? cols : K, [&](int64_t r) {
        const uint16_t* from = transB ? bits + (j0 + r) * K : bits + r * N + j0;
        float* to = strip.data() + r * (transB ? K : cols);
        const int64_t n = transB ? K : cols;
        if (bf16)
            for (int64_t i = 0; i < n; ++i)
                to[i] = bf16ToFloat(from[i]);
        else
            for (int64_t i = 0; i < n; ++i)
                to[i] = fp16ToFloat(from[i]);
    });
    gemm::sgemm(transA, transB, M, cols, K, alpha, A.values<float>().data(), A.dim(1), strip.data(), transB ? K : cols,
                y + j0, N, ctx.cancellation());
}

// Columns of Y per widened strip of B: about 16 MiB of float32 at a time.
int64_t halfStripColumns(int64_t K, int64_t N)
{
    return std::clamp<int64_t>((int64_t(4) << 20) / std::max<int64_t>(K, 1) / 16 * 16, 16, std::max<int64_t>(N, 16));
}

} // namespace

void gemm(KernelContext& ctx)
{
    const Tensor& A = ctx.floatInput(0);
    const Tensor& Bt = ctx.input(1);
    const bool halfB = Bt.dtype() == DType::BF16 || Bt.dtype() == DType::F16;
    if (!halfB && Bt.dtype() != DType::F32)
        ctx.fail("input 1 must be float32, bfloat16 or float16, not " + std::string(dtypeName(Bt.dtype())));
    const Tensor* C = ctx.optionalInput(2);
    if (A.rank() != 2 || Bt.rank() != 2)
        ctx.fail("A " + shapeToString(A.shape()) + " and B " + shapeToString(Bt.shape()) + " must be matrices");
    const bool transA = ctx.intAttribute("transA", 0) != 0, transB = ctx.intAttribute("transB", 0) != 0;
    const float alpha = ctx.floatAttribute("alpha", 1.0f), beta = ctx.floatAttribute("beta", 1.0f);
    const int64_t M = transA ? A.dim(1) : A.dim(0), K = transA ? A.dim(0) : A.dim(1);
    const int64_t N = transB ? Bt.dim(0) : Bt.dim(1), KB = transB ? Bt.dim(1) : Bt.dim(0);
    if (K != KB)
        ctx.fail("A " + shapeToString(A.shape()) + " and B " + shapeToString(Bt.shape()) +
                 " disagree on the inner dimension (transA " + std::to_string(transA) + ", transB " +
                 std::to_string(transB) + ")");
    Tensor Y = Tensor::uninitialized(DType::F32, {M, N}); // every element is written below
    MatrixMap y(Y.mutableValues<float>().data(), M, N);
    ConstMatrixMap a(A.values<float>().data(), A.dim(0), A.dim(1));

    // C broadcasts unidirectionally to [M, N]: [], [1], [N], [1, N], [M, 1], [M, N].
    int64_t cRows = 1, cCols = 1;
    if (C) {
        if (C->dtype() != DType::F32)
            ctx.fail("C must be float32");
        const Shape& s = C->shape();
        if (s.size() > 2)
            ctx.fail("C " + shapeToString(s) + " must have at most two dimensions");
        cCols = s.empty() ? 1 : s.back();
        cRows = s.size() == 2 ? s[0] : 1;
        if ((cRows != 1 && cRows != M) || (cCols != 1 && cCols != N))
            ctx.fail("C " + shapeToString(s) + " does not broadcast to [" + std::to_string(M) + ", " +
                     std::to_string(N) + "]");
    }
    auto addC = [&](int64_t r0, int64_t rows, int64_t c0, int64_t cols) {
        if (!C || beta == 0.0f)
            return;
        const float* c = C->values<float>().data();
        for (int64_t i = r0; i < r0 + rows; ++i)
            for (int64_t j = c0; j < c0 + cols; ++j)
                y(i, j) += beta * c[(cRows == 1 ? 0 : i * cCols) + (cCols == 1 ? 0 : j)];
    };
    if (halfB) {
        // Never the whole weight in float32: a strip of columns at a time.
        std::vector<float> strip;
        const int64_t width = halfStripColumns(K, N);
        for (int64_t j0 = 0; j0 < N; j0 += width) {
            ctx.checkCancelled();
            multiplyHalfStrip(ctx, A, transA, Bt, transB, M, K, N, alpha, j0, std::min(width, N - j0), strip,
                              Y.mutableValues<float>().data());
        }
        addC(0, M, 0, N);
        ctx.setOutput(0, std::move(Y));
        return;
    }
    ConstMatrixMap b(Bt.values<float>().data(), Bt.dim(0), Bt.dim(1));
    const gemm::SimdLevel level = gemm::simdLevel();
    if ((M <= kFewRows || (M <= kPackedWeightRows && 2 * M <= K)) && !transA && K > 0 &&
        level != gemm::SimdLevel::None) {
        // B^T packed once per weight tensor (kept in the node's memo) as the rows
        // of the product Y^T = B^T A^T, instead of gemm::sgemm packing B on every
        // call. Tasks of whole strips and at least 2^17 multiply-adds (fewer cost
        // more to hand out than to run), about eight per thread. It pays for that
        // with Y^T's transposition (M·N values) where sgemm packs B (K·N), so with
        // more than K/2 rows sgemm wins: 128 × 128 by 128 × 128, one node, fastest
        // of 300, 0.073 ms here against 0.049 (64 rows: 0.030 against 0.026; 256:
        // 0.141 against 0.089; 32 rows even, 0.014–0.018 either way).
        auto pack = [&] {
            return std::make_shared<const gemm::PackedMatrix>(level, Bt.values<float>().data(), 1, N, K, 0,
                                                              transB ? K : 1, transB ? 1 : N, gemm::Subnormals::Flush);
        };
        const std::shared_ptr<const gemm::PackedMatrix> packed =
            ctx.memo() ? ctx.memo()->get<gemm::PackedMatrix>(Bt, pack) : pack();
        const int64_t strips = (N + packed->mr() - 1) / packed->mr();
        const int64_t tasks =
            std::clamp<int64_t>(M * K * N >> 17, 1, 8 * int64_t(std::max(1, tbb::this_task_arena::max_concurrency())));
        const int64_t perTask = (strips + tasks - 1) / tasks;
        float* yp = Y.mutableValues<float>().data();
        if (M <= kFewRows) {
            // A few rows (a small batch through a classifier layer): each strip
            // of B^T read once for all of A's rows, written straight into Y.
            tbb::parallel_for(int64_t(0), (strips + perTask - 1) / perTask, [&](int64_t task) {
                const int64_t r0 = task * perTask * packed->mr(), r1 = std::min(N, r0 + perTask * packed->mr());
                packed->multiplyFewColumns(0, A.values<float>().data(), 1, K, M, yp + r0, 1, N, r0, r1);
                if (alpha != 1.0f)
                    for (int64_t i = 0; i < M; ++i)
                        for (int64_t j = r0; j < r1; ++j)
                            yp[i * N + j] *= alpha;
                addC(0, M, r0, r1 - r0);
            });
            ctx.setOutput(0, std::move(Y));
            return;
        }
        // More rows (a batch through a linear layer): A^T as the product's
        // columns, into Y^T, then transposed. Each element is the same k-ordered
        // sum as sgemm's.
        std::vector<float> transposed(size_t(N * M)); // Y^T
        tbb::parallel_for(int64_t(0), (strips + perTask - 1) / perTask, [&](int64_t task) {
            ctx.checkCancelled();
            const int64_t r0 = task * perTask * packed->mr(), r1 = std::min(N, r0 + perTask * packed->mr());
            packed->multiply(0, A.values<float>().data(), 1, K, M, transposed.data() + r0 * M, M, r0, r1);
            for (int64_t i = 0; i < M; ++i)
                for (int64_t j = r0; j < r1; ++j) {
                    const float sum = transposed[size_t(j * M + i)];
                    yp[i * N + j] = alpha == 1.0f ? sum : sum * alpha;
                }
            addC(0, M, r0, r1 - r0);
        });
        ctx.setOutput(0, std::move(Y));
        return;
    }
    if (M <= kFewRows && !transA && M * K * N >= (int64_t(1) << 17)) {
        // The same without AVX2: one matrix-vector product per row over blocks of
        // B's columns that stay in L2 for all rows, instead of a GEMM that would
        // copy (pack) all of B for two rows.
        const int64_t block = std::max<int64_t>(16, (int64_t(1) << 16) / std::max<int64_t>(K, 1));
        tbb::parallel_for(int64_t(0), (N + block - 1) / block, [&](int64_t task) {
            const int64_t j0 = task * block, cols = std::min(N, j0 + block) - j0;
            for (int64_t i = 0; i < M; ++i) {
                if (transB)
                    y.row(i).segment(j0, cols).noalias() =
                        alpha * (b.middleRows(j0, cols) * a.row(i).transpose()).transpose();
                else
                    y.row(i).segment(j0, cols).noalias() = alpha * (a.row(i) * b.middleCols(j0, cols));
            }
            addC(0, M, j0, cols);
        });
        ctx.setOutput(0, std::move(Y));
        return;
    }
    gemm::sgemm(transA, transB, M, N, K, alpha, A.values<float>().data(), A.dim(1), Bt.values<float>().data(),
                Bt.dim(1), Y.mutableValues<float>().data(), N, ctx.cancellation());
    addC(0, M, 0, N);
    ctx.setOutput(0, std::move(Y));
}

namespace {

// The batches of an N-D product under NumPy rules: every batch's A and B
// matrix offsets, the matrix sizes and the result's shape.
struct BatchedProduct {
    int64_t M = 0, K = 0, N = 0, batches = 0;
    Shape outputShape;
    std::vector<int64_t> aOffset, bOffset; // in elements, per batch
};

BatchedProduct planBatches(const KernelContext& ctx, const Shape& aShape, const Shape& bShape)
{
    if (aShape.empty() || bShape.empty())
        ctx.fail("operands must have at least one dimension");
    // 1-D operands become a row (A) or a column (B) and lose that axis again in the result.
    Shape a = aShape, b = bShape;
    if (a.size() == 1)
        a.insert(a.begin(), 1);
    if (b.size() == 1)
        b.push_back(1);
    BatchedProduct plan;
    plan.M = a[a.size() - 2];
    plan.K = a.back();
    plan.N = b.back();
    if (b[b.size() - 2] != plan.K)
        ctx.fail("A " + shapeToString(aShape) + " and B " + shapeToString(bShape) + " disagree on the inner dimension");
    const size_t batchRank = std::max(a.size(), b.size()) - 2;
    Shape batch(batchRank), aBatch(batchRank, 1), bBatch(batchRank, 1);
    std::copy(a.begin(), a.end() - 2, aBatch.end() - (a.size() - 2));
    std::copy(b.begin(), b.end() - 2, bBatch.end() - (b.size() - 2));
    for (size_t d = 0; d < batchRank; ++d) {
        if (aBatch[d] != bBatch[d] && aBatch[d] != 1 && bBatch[d] != 1)
            ctx.fail("batch dimensions of A " + shapeToString(aShape) + " and B " + shapeToString(bShape) +
                     " do not broadcast");
        batch[d] = aBatch[d] == 1 ? bBatch[d] : aBatch[d];
    }
    plan.batches = shapeElementCount(batch);
    plan.outputShape = batch;
    if (aShape.size() > 1)
        plan.outputShape.push_back(plan.M);
    if (bShape.size() > 1)
        plan.outputShape.push_back(plan.N);
    std::vector<int64_t> idx(batchRank, 0);
    for (int64_t t = 0; t < plan.batches; ++t) {
        int64_t ao = 0, bo = 0;
        for (size_t d = 0; d < batchRank; ++d) {
            ao = ao * aBatch[d] + (aBatch[d] == 1 ? 0 : idx[d]);
            bo = bo * bBatch[d] + (bBatch[d] == 1 ? 0 : idx[d]);
        }
        plan.aOffset.push_back(ao * plan.M * plan.K);
        plan.bOffset.push_back(bo * plan.K * plan.N);
        for (size_t d = batchRank; d-- > 0;) {
            if (++idx[d] < batch[d])
                break;
            idx[d] = 0;
        }
    }
    return plan;
}

// An 8-bit operand minus its zero point, as int32. The zero point is a scalar
// or one value per row (A) or per column (B).
std::vector<int32_t> centred(const KernelContext& ctx, const Tensor& t, const Tensor* zp, int64_t rows, int64_t cols,
                             bool perRow, const char* name)
{
    auto read = [&](const Tensor& v, size_t i) -> int32_t {
        return v.dtype() == DType::U8 ? int32_t(v.values<uint8_t>()[i]) : int32_t(v.values<int8_t>()[i]);
    };
    if (t.dtype() != DType::U8 && t.dtype() != DType::I8)
        ctx.fail(std::string(name) + " must be int8 or uint8, not " + std::string(dtypeName(t.dtype())));
    const int64_t perAxis = perRow ? rows : cols;
    if (zp && (zp->dtype() != t.dtype() || (zp->numel() != 1 && zp->numel() != perAxis)))
        ctx.fail(std::string(name) + "'s zero point " + shapeToString(zp->shape()) + " must be a scalar or hold " +
                 std::to_string(perAxis) + " values of " + std::string(dtypeName(t.dtype())));
    std::vector<int32_t> out(size_t(t.numel()));
    for (size_t i = 0; i < out.size(); ++i) {
        const int64_t inMatrix = int64_t(i) % (rows * cols);
        const int64_t axisIndex = perRow ? inMatrix / cols : inMatrix % cols;
        out[i] = read(t, i) - (zp ? read(*zp, zp->numel() == 1 ? 0 : size_t(axisIndex)) : 0);
    }
    return out;
}

} // namespace

void matMul(KernelContext& ctx)
{
    const Tensor& A = ctx.floatInput(0);
    const Tensor& B = ctx.floatInput(1);
    BatchedProduct plan = planBatches(ctx, A.shape(), B.shape());
    // One B for every batch and A's batches one after the other (a linear layer
    // on [batch, sequence, features]): a single product with batches * M rows,
    // which splits into tasks better and calls the kernel once.
    bool stacked = plan.batches > 1;
    for (int64_t t = 0; stacked && t < plan.batches; ++t)
        stacked = plan.bOffset[size_t(t)] == 0 && plan.aOffset[size_t(t)] == t * plan.M * plan.K;
    if (stacked) {
        plan.M *= plan.batches;
        plan.batches = 1;
        plan.aOffset.assign(1, 0);
        plan.bOffset.assign(1, 0);
    }
    const int64_t M = plan.M, K = plan.K, N = plan.N, batches = plan.batches;
    Tensor Y = Tensor::uninitialized(DType::F32, plan.outputShape); // sgemm writes every element
    const float* pa = A.values<float>().data();
    const float* pb = B.values<float>().data();
    float* py = Y.mutableValues<float>().data();
    auto product = [&](int64_t t) {
        ctx.checkCancelled();
        gemm::sgemm(false, false, M, N, K, 1.0f, pa + plan.aOffset[size_t(t)], K, pb + plan.bOffset[size_t(t)], N,
                    py + t * M * N, N, ctx.cancellation());
    };
    // A few small products (attention heads of a short sequence) finish in less
    // time than waking a worker thread takes; one large product splits itself.
    if (batches == 1 || batches * M * K * N < (int64_t(1) << 18))
        for (int64_t t = 0; t < batches; ++t)
            product(t);
    else
        tbb::parallel_for(int64_t(0), batches, product);
    ctx.setOutput(0, std::move(Y));
}

namespace {

// (A - a_zero_point) x (B - b_zero_point) summed exactly in int32, with its plan.
Tensor integerProduct(const KernelContext& ctx, size_t a, size_t aZero, size_t b, size_t bZero, BatchedProduct& plan)
{
    const Tensor& A = ctx.input(a);
    const Tensor& B = ctx.input(b);
    plan = planBatches(ctx, A.shape(), B.shape());
    const int64_t M = plan.M, K = plan.K, N = plan.N;
    const std::vector<int32_t> ac = centred(ctx, A, ctx.optionalInput(aZero), M, K, true, "A");
    const std::vector<int32_t> bc = centred(ctx, B, ctx.optionalInput(bZero), K, N, false, "B");
    using IntMatrix = Eigen::Matrix<int32_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    Tensor Y(DType::I32, plan.outputShape);
    int32_t* y = Y.mutableValues<int32_t>().data();
    tbb::parallel_for(int64_t(0), plan.batches, [&](int64_t t) {
        Eigen::Map<const IntMatrix> am(ac.data() + plan.aOffset[size_t(t)], M, K);
        Eigen::Map<const IntMatrix> bm(bc.data() + plan.bOffset[size_t(t)], K, N);
        Eigen::Map<IntMatrix>(y + t * M * N, M, N).noalias() = am * bm;
    });
    return Y;
}

// A float32 scale with one value or `count` values.
std::span<const float> scaleValues(const KernelContext& ctx, size_t i, int64_t count, const char* name)
{
    const Tensor& t = ctx.input(i);
    if (t.dtype() != DType::F32 || (t.numel() != 1 && t.numel() != count))
        ctx.fail(std::string(name) + " " + shapeToString(t.shape()) + " must be float32 with 1 or " +
                 std::to_string(count) + " values");
    return t.values<float>();
}

} // namespace

void matMulInteger(KernelContext& ctx)
{
    BatchedProduct plan;
    ctx.setOutput(0, integerProduct(ctx, 0, 2, 1, 3, plan));
}

void qLinearMatMul(KernelContext& ctx)
{
    BatchedProduct plan;
    const Tensor acc = integerProduct(ctx, 0, 2, 3, 5, plan);
    const auto aScale = scaleValues(ctx, 1, plan.M, "a_scale");
    const auto bScale = scaleValues(ctx, 4, plan.N, "b_scale");
    const auto yScale = scaleValues(ctx, 6, 1, "y_scale");
    const int64_t M = plan.M, N = plan.N;
    // The real product's scale over the output's, in float as the op's reference computes it.
    auto multiplier = [&](int64_t e) {
        const int64_t j = e % N, i = (e / N) % M;
        return aScale[aScale.size() == 1 ? 0 : size_t(i)] * bScale[bScale.size() == 1 ? 0 : size_t(j)] / yScale[0];
    };
    ctx.setOutput(0, requantize(ctx, acc, multiplier, ctx.optionalInput(7)));
}

} // namespace qs::ops
