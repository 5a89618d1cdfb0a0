#include "runtime/ops/conv.h"

#include <Eigen/Core>
#include <algorithm>
#include <bit>
#include <memory>
#include <optional>
#include <tuple>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>
#include <vector>

#include "core/scratch.h"
#include "gemm/packed_columns.h"
#include "gemm/sgemm.h"
#include "runtime/ops/conv_plan.h"
#include "runtime/ops/depthwise_conv.h"
#include "runtime/ops/im2col.h"
#include "runtime/ops/sub_plane_conv.h"

namespace qs::ops {

namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMatrixMap = Eigen::Map<const RowMatrix>;
using StridedMatrixMap = Eigen::Map<RowMatrix, 0, Eigen::OuterStride<>>;

// positionRowsConv: the depth (input channels x window) at least.
constexpr int64_t kPositionRowsMinDepth = 64;
// fewPositionsConv (1 x 1 windows): output channels per output position, and weights, at least.
constexpr int64_t kFewPositionsChannelsPerPosition = 16;
constexpr int64_t kFewPositionsMinWeights = int64_t(1) << 12;
// ... and from kFewPositionsLargeWeights when the batch has more than kFewPositionsRows positions.
constexpr int64_t kFewPositionsRows = 16;
constexpr int64_t kFewPositionsLargeWeights = int64_t(1) << 18;
// A pointwise product's task when its output channels are split: multiply-adds at least.
constexpr int64_t kPointwiseMinTaskMacs = int64_t(1) << 15;

// Rows per task when a pointwise product's `rows` output channels are split
// into about `wanted` blocks: whole micro-kernel strips of mr rows, each block
// at least kPointwiseMinTaskMacs multiply-adds (macsPerRow per row).
int64_t pointwiseRowBlock(int64_t rows, int64_t mr, int64_t macsPerRow, int64_t wanted)
{
    const int64_t minRows = (kPointwiseMinTaskMacs / std::max<int64_t>(1, macsPerRow) + mr - 1) / mr * mr;
    return std::max({mr, minRows, (rows + wanted - 1) / wanted / mr * mr});
}

} // namespace

// (As a store epilogue: 16 -> 96 channels on 48 x 48 with ReLU6, 2 threads,
// fastest of 2000 to 5000 runs: 0.048 -> 0.035 ms.)
std::optional<gemm::Epilogue> storeEpilogue(const float* bias, const float* addend,
                                            const FusedActivation* activation)
{
    gemm::Epilogue e;
    e.bias = bias;
    e.addend = addend;
    if (activation && activation->kind == FusedActivation::Kind::Relu) {
        e.clamp = gemm::Epilogue::Clamp::Relu;
    } else if (activation && activation->kind == FusedActivation::Kind::Clip) {
        e.clamp = gemm::Epilogue::Clamp::Clip;
        e.lo = activation->a;
        e.hi = activation->b;
    } else if (activation) {
        return std::nullopt;
    }
    return e;
}

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

Shape convOutputShape(const KernelContext& ctx)
{
    return planConv(ctx, ctx.floatInput(0), ctx.floatInput(1)).outputShape;
}

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
    const float* x = X.values<float>().data();
    const float* w = Wt.values<float>().data();
    const float* bias = B ? B->values<float>().data() : nullptr;

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
    // The output: a tensor of its own, or the slice of a later Concat's
    // output the run placed it in (never with a residual Add folded in).
    const OutputPlacement* placement = ctx.outputPlacement();
    if (placement && (ctx.fusedAddend() || placement->shape != plan.outputShape))
        placement = nullptr;
    Tensor Y = placement ? Tensor() : Tensor::uninitialized(DType::F32, plan.outputShape);
    const ConvOutput y = placement ? ConvOutput{placement->data, placement->imageStride}
                                   : ConvOutput{Y.mutableValues<float>().data(), M * P};
    auto setOutput = [&] {
        if (placement)
            ctx.setPlacedOutput();
        else
            ctx.setOutput(0, std::move(Y));
    };
    OutputExtremes* extremes = ctx.outputExtremes(); // each task adds what it wrote
    // Depthwise convs: a Relu or Clip clamps the sums as they are stored (an
    // epilogue without bias or addend).
    const std::optional<gemm::Epilogue> clamp =
        activation ? storeEpilogue(nullptr, nullptr, activation) : std::nullopt;
    // Depthwise with enough channels to fill a vector, on small planes, or on
    // planes up to 64 x 64 outputs with strides (the per-channel path splits
    // those into strided sub-planes, which costs more than interleaving
    // channels: 72 channels of 56 x 56 at stride 2 took 177 us per batch of
    // two, 85 us interleaved). kChannelBlock channels per task.
    const bool strided = g.strides[0] * g.strides[1] > 1;
    if (Cg == 1 && Mg == 1 && kernel.size() == 2 && group >= kChannelBlock / 2 &&
        (P <= 256 || (strided && P <= 4096))) {
        auto interleave = [&] { return std::make_shared<const DepthwiseBlockTaps>(w, group, kernelSize); };
        const std::shared_ptr<const DepthwiseBlockTaps> taps =
            ctx.memo() ? ctx.memo()->get<DepthwiseBlockTaps>(Wt, interleave) : interleave();
        const int64_t OW = g.output[1];
        forEachChannelBlockPart(N, group, g, [&](int64_t n, int64_t c0, int64_t channels, int64_t oh0, int64_t oh1) {
            float* yc = y.image(n) + c0 * P;
            depthwiseBlock(x + (n * C + c0) * inSpatial, channels, taps->block(c0 / kChannelBlock),
                           bias ? bias + c0 : nullptr, g, oh0, oh1, yc, clamp ? &*clamp : nullptr);
            if (activation && !clamp)
                for (int64_t c = 0; c < channels; ++c)
                    activation->apply(yc + c * P + oh0 * OW, (oh1 - oh0) * OW);
            if (extremes)
                extremes->addRows(yc + oh0 * OW, channels, (oh1 - oh0) * OW, P);
        });
        setOutput();
        return;
    }
    if (Cg == 1 && Mg == 1 && kernel.size() == 2) {
        const DepthwisePlanes planes(g);
        tbb::parallel_for(int64_t(0), N * group, [&](int64_t ng) {
            const int64_t c = ng % group;
            float* yc = y.image(ng / group) + c * P;
            depthwise2d(x + ng * inSpatial, w + c * kernelSize, bias ? bias[c] : 0.0f, planes, yc,
                        clamp ? &*clamp : nullptr);
            if (activation && !clamp)
                activation->apply(yc, P);
            if (extremes)
                extremes->add(yc, P);
        });
        setOutput();
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
        (kConvTasksPerThread * tbb::this_task_arena::max_concurrency() + N * group - 1) / (N * group);
    const int64_t chunk = std::max<int64_t>(
        64, std::min((int64_t(1) << 18) / std::max<int64_t>(K, 1), (P + wantedChunks - 1) / wantedChunks));
    const int64_t chunks = (P + chunk - 1) / chunk;
    const gemm::SimdLevel level = gemm::simdLevel();
    // A 2-D window wider than 1 x 1, group 1: positions as the product's rows,
    // output channels as its vectors, read straight from the input's
    // sub-planes. Against the paths with positions in the vectors (the
    // implicit GEMM, one column matrix for the batch), fastest of 200 runs,
    // 2 threads, AVX-512: 3 x 3 convs 64 -> 256 on 5 x 5 0.057 -> 0.037 ms,
    // 256 -> 256 on 6 x 6 0.231 -> 0.141, 128 -> 128 on 14 x 14 0.298 ->
    // 0.205, 64 -> 128 on 16 x 16 at batch 8 1.42 -> 0.83, 64 -> 64 on
    // 24 x 24 0.155 -> 0.144; 512 -> 512 on 3 x 3 against fewPositionsConv
    // 0.26 -> 0.21 (batch 2: 0.52 -> 0.34). Never slower by more than the
    // noise but for 64 -> 128 at stride 2 from 48 x 48 at batch 8 (2.67 ->
    // 2.81 ms). 1 x 1 windows stay on their paths, which read the input as
    // its own column matrix (squeezenet's 512 -> 64 on 5 x 5: 0.013 ms
    // there, 0.032 here). Nor do stems (3 -> 64 at stride 2 from 96 x 96, a
    // depth of 27: 0.044 -> 0.050 ms) or convs with fewer output channels
    // than a strip (16 -> 16 on 48 x 48: 0.046 -> 0.066) gain.
    if (level != gemm::SimdLevel::None && kernel.size() == 2 && group == 1 && kernelSize > 1 &&
        K >= kPositionRowsMinDepth && M >= (level == gemm::SimdLevel::Avx512 ? 32 : 16)) {
        auto pack = [&] {
            return std::make_shared<const gemm::PackedColumnMatrix>(level, w, K, M, 1, K, gemm::Subnormals::Flush);
        };
        const std::shared_ptr<const gemm::PackedColumnMatrix> weights =
            ctx.memo() ? ctx.memo()->get<gemm::PackedColumnMatrix>(Wt, pack) : pack();
        positionRowsConv(ctx, *weights, x, bias, addend, activation, N, C, g, y);
        setOutput();
        return;
    }
    // 1 x 1 windows with at least 16 output channels per output position of
    // the batch (and weights of at least 16 KiB): the product runs transposed
    // on the weights packed as its columns, the positions as its rows. (First
    // measured with 2 threads, fastest of 200: 3 x 3 conv 512 -> 512 on 3 x 3
    // at batch 1 0.40 -> 0.24 ms, batch 2 0.62 -> 0.47; 1 x 1 conv 320 -> 1280
    // on 3 x 3 at batch 1 0.083 -> 0.036 ms, batch 8 0.35 -> 0.24. It then
    // also took weights only from 1 MiB: below, its column matrix and its
    // channel-by-channel finish cost more than they saved. Since one image's
    // input is packed as it is and the channels finish in one pass, smaller
    // weights gain too, fastest of 5000 runs, 1 and 2 threads: 960 -> 160 on
    // 3 x 3 0.041 -> 0.023 and 0.036 -> 0.019 ms, 576 -> 160 0.025 -> 0.013,
    // 128 -> 256 0.0093 -> 0.0069. With fewer channels per position it loses:
    // 32 -> 192 on 12 x 12 0.016 -> 0.032.)
    // Several images of planes narrower than a micro-kernel strip take one
    // product over the batch below instead, from twice kFewPositionsRows
    // positions on (320 -> 1280 on 3 x 3, 2 threads: batch 2 0.079 against
    // 0.097 ms here, batch 4 0.151 against 0.131 there, batch 8 0.302 against 0.240).
    const bool batchedPointwise = level != gemm::SimdLevel::None && pointwise && group == 1 && N > 1 &&
                                  P < (level == gemm::SimdLevel::Avx512 ? 32 : 16);
    if (level != gemm::SimdLevel::None && kernel.size() == 2 && group == 1 &&
        N * P * kFewPositionsChannelsPerPosition <= M && !(batchedPointwise && N * P > 2 * kFewPositionsRows) &&
        M * K >= (N * P <= kFewPositionsRows ? kFewPositionsMinWeights : kFewPositionsLargeWeights)) {
        auto pack = [&] {
            return std::make_shared<const gemm::PackedColumnMatrix>(level, w, K, M, 1, K, gemm::Subnormals::Flush);
        };
        const std::shared_ptr<const gemm::PackedColumnMatrix> weights =
            ctx.memo() ? ctx.memo()->get<gemm::PackedColumnMatrix>(Wt, pack) : pack();
        fewPositionsConv(ctx, *weights, x, bias, addend, activation, N, C, M, g, y);
        setOutput();
        return;
    }
    // Packed once per weight tensor and kept in the node's memo across runs.
    std::shared_ptr<const gemm::PackedMatrix> packed;
    if (level != gemm::SimdLevel::None) {
        auto pack = [&] {
            return std::make_shared<const gemm::PackedMatrix>(level, w, group, Mg, K, Mg * K, K, 1,
                                                              gemm::Subnormals::Flush);
        };
        packed = ctx.memo() ? ctx.memo()->get<gemm::PackedMatrix>(Wt, pack) : pack();
    }
    // Implicit GEMM for 2-D windows; a strided 1x1 conv would copy all of its
    // input to read a quarter of it, so it stays on the column matrix.
    if (packed && kernel.size() == 2 && kernelSize > 1) {
        implicitGemmConv(ctx, *packed, x, bias, addend, activation, N, C, group, Mg, g, y);
        setOutput();
        return;
    }
    // Bias and fused activation on a chunk's outputs while they are still in cache.
    // The same while the product stores its tiles, where the activation is one it applies.
    auto groupEpilogue = [&](int64_t gi, const StridedMatrixMap& yg) {
        return storeEpilogue(bias ? bias + gi * Mg : nullptr, addend ? addend + (yg.data() - y.data) : nullptr,
                             activation);
    };
    auto epilogue = [&](int64_t gi, StridedMatrixMap& yg, int64_t width) {
        finishRows(yg.data(), Mg, width, P, bias ? bias + gi * Mg : nullptr, addend ? addend + (yg.data() - y.data) : nullptr,
                   activation);
    };
    // Pointwise on planes narrower than a micro-kernel strip, several images:
    // one product over the batch's N * P columns into a scratch C, each
    // image's outputs then copied out and finished. (Image by image, a 3 x 3
    // plane at batch 8 made eight products of 9 columns, each padded to a
    // vector and each reading all the weights: 160 -> 960 channels, 2
    // threads, fastest of 2000 runs, 0.379 -> 0.106 ms; 960 -> 160 0.167 ->
    // 0.139; 960 -> 320 0.304 -> 0.231.)
    if (packed && batchedPointwise) {
        const int64_t width = N * P;
        gemm::PackedColumns batch{nullptr, K, width, std::countr_zero(uint64_t(packed->nr())),
                                  std::countr_zero(uint64_t(gemm::kDepthBlock))};
        const std::unique_ptr<float[]> columns(new float[size_t(K * batch.paddedWidth())]);
        batch.data = columns.get();
        const int64_t depthPieces = (K + 63) / 64;
        tbb::parallel_for(int64_t(0), depthPieces, [&](int64_t piece) {
            for (int64_t k = piece * 64; k < std::min(K, piece * 64 + 64); ++k) {
                for (int64_t n = 0; n < N; ++n)
                    batch.copy(k, n * P, n * P + P, x + (n * C + k) * P, 1);
                if (width < batch.paddedWidth())
                    batch.fill(k, width, batch.paddedWidth());
            }
        });
        const int64_t rowBlock = pointwiseRowBlock(M, packed->mr(), K * width,
                                                   kConvTasksPerThread * tbb::this_task_arena::max_concurrency());
        const int64_t rowBlocks = (M + rowBlock - 1) / rowBlock;
        const std::unique_ptr<float[]> sums(new float[size_t(M * width)]);
        tbb::parallel_for(int64_t(0), rowBlocks, [&](int64_t block) {
            ctx.checkCancelled();
            const int64_t r0 = block * rowBlock, r1 = std::min(M, r0 + rowBlock);
            packed->multiplyPacked(0, columns.get(), width, sums.get() + r0 * width, width, r0, r1);
            for (int64_t n = 0; n < N; ++n) {
                float* yn = y.image(n) + r0 * P;
                for (int64_t m = r0; m < r1; ++m)
                    std::copy(sums.get() + m * width + n * P, sums.get() + m * width + n * P + P, yn + (m - r0) * P);
                finishRows(yn, r1 - r0, P, P, bias ? bias + r0 : nullptr, addend ? addend + (yn - y.data) : nullptr,
                           activation);
                if (extremes)
                    extremes->addRows(yn, r1 - r0, P, P);
            }
        });
        setOutput();
        return;
    }
    // A pointwise product with fewer (batch, group, chunk) tasks than the
    // threads want (small planes at batch 1: 960 -> 160 on 3 x 3 was one task,
    // so one thread ran it while the other waited) packs each of those column
    // matrices once and splits the output channels into blocks of whole
    // micro-kernel strips, each at least kPointwiseMinTaskMacs multiply-adds.
    // Each output is the same dot product either way.
    const int64_t pairs = N * group * chunks;
    if (packed && pointwise && pairs < wantedChunks * N * group) {
        const int64_t rowBlock = pointwiseRowBlock(Mg, packed->mr(), K * std::min(P, chunk),
                                                   (wantedChunks * N * group + pairs - 1) / pairs);
        const int64_t rowBlocks = (Mg + rowBlock - 1) / rowBlock;
        if (rowBlocks > 1) {
            const int nrShift = std::countr_zero(uint64_t(packed->nr())),
                      depthShift = std::countr_zero(uint64_t(gemm::kDepthBlock));
            const int64_t pairSize = K * ((std::min(P, chunk) + packed->nr() - 1) / packed->nr() * packed->nr());
            const std::unique_ptr<float[]> columns(new float[size_t(pairs * pairSize)]);
            auto pairOf = [&](int64_t pair) {
                const int64_t ng = pair / chunks, p0 = pair % chunks * chunk, p1 = std::min(P, p0 + chunk);
                return std::tuple{ng / group, ng % group, p0, p1};
            };
            // Packed in tasks of 32 KiB at least: on the calling thread alone,
            // the packing of a 16 -> 96 conv on 48 x 48 kept the other thread waiting.
            const int64_t kBlock = std::max<int64_t>(1, (int64_t(1) << 13) / std::min(P, chunk));
            const int64_t kBlocks = (K + kBlock - 1) / kBlock;
            tbb::parallel_for(int64_t(0), pairs * kBlocks, [&](int64_t task) {
                const int64_t pair = task / kBlocks, k0 = task % kBlocks * kBlock, k1 = std::min(K, k0 + kBlock);
                const auto [n, gi, p0, p1] = pairOf(pair);
                const gemm::PackedColumns into{columns.get() + pair * pairSize, K, p1 - p0, nrShift, depthShift};
                const float* xg = x + (n * C + gi * Cg) * inSpatial + p0;
                for (int64_t k = k0; k < k1; ++k) {
                    into.copy(k, 0, p1 - p0, xg + k * P, 1);
                    into.fill(k, p1 - p0, into.paddedWidth());
                }
            });
            tbb::parallel_for(int64_t(0), pairs * rowBlocks, [&](int64_t task) {
                ctx.checkCancelled();
                const int64_t pair = task / rowBlocks, r0 = task % rowBlocks * rowBlock, r1 = std::min(Mg, r0 + rowBlock);
                const auto [n, gi, p0, p1] = pairOf(pair);
                float* yr = y.image(n) + (gi * Mg + r0) * P + p0;
                const float* rowBias = bias ? bias + gi * Mg + r0 : nullptr;
                const float* rowAddend = addend ? addend + (yr - y.data) : nullptr;
                const auto stored = storeEpilogue(rowBias, rowAddend, activation);
                packed->multiplyPacked(gi, columns.get() + pair * pairSize, p1 - p0, yr, P, r0, r1,
                                       stored ? &*stored : nullptr);
                if (!stored)
                    finishRows(yr, r1 - r0, p1 - p0, P, rowBias, rowAddend, activation);
                if (extremes)
                    extremes->addRows(yr, r1 - r0, p1 - p0, P);
            });
            setOutput();
            return;
        }
    }
    tbb::parallel_for(int64_t(0), N * group * chunks, [&](int64_t task) {
        ctx.checkCancelled();
        const int64_t ng = task / chunks, p0 = (task % chunks) * chunk, p1 = std::min(P, p0 + chunk);
        const int64_t n = ng / group, gi = ng % group;
        const float* xg = x + (n * C + gi * Cg) * inSpatial;
        ConstMatrixMap wg(w + gi * Mg * K, Mg, K);
        StridedMatrixMap yg(y.image(n) + gi * Mg * P + p0, Mg, p1 - p0, Eigen::OuterStride<>(P));
        // The column matrix [K, p1 - p0] (row stride `ldcol`): the input itself for a pointwise conv.
        thread_local std::vector<float> buffer;
        if (packed && !pointwise && kernel.size() == 2) {
            // The column matrix goes straight into the GEMM's packed layout.
            gemm::PackedColumns into{nullptr, K, p1 - p0, std::countr_zero(uint64_t(packed->nr())),
                                     std::countr_zero(uint64_t(gemm::kDepthBlock))};
            growScratch(buffer, size_t(K * into.paddedWidth()));
            into.data = buffer.data();
            im2col2d(xg, Cg, g, p0, p1, into);
            into.padLastStrip();
            const auto stored = groupEpilogue(gi, yg);
            packed->multiplyPacked(gi, buffer.data(), p1 - p0, yg.data(), P, 0, -1, stored ? &*stored : nullptr);
            if (!stored)
                epilogue(gi, yg, p1 - p0);
            if (extremes)
                extremes->addRows(yg.data(), Mg, p1 - p0, P);
            return;
        }
        const float* col = xg + p0;
        int64_t ldcol = P;
        if (!pointwise) {
            growScratch(buffer, size_t(K * (p1 - p0)));
            if (kernel.size() == 2)
                im2col2d(xg, Cg, g, p0, p1, RowMajorColumns<float>{buffer.data(), p1 - p0});
            else
                im2col(xg, Cg, g, p0, p1, buffer.data());
            col = buffer.data();
            ldcol = p1 - p0;
        }
        if (packed) {
            const auto stored = groupEpilogue(gi, yg);
            packed->multiply(gi, col, ldcol, 1, p1 - p0, yg.data(), P, 0, -1, stored ? &*stored : nullptr);
            if (!stored)
                epilogue(gi, yg, p1 - p0);
        } else {
            yg.noalias() =
                wg * Eigen::Map<const RowMatrix, 0, Eigen::OuterStride<>>(col, K, p1 - p0, Eigen::OuterStride<>(ldcol));
            epilogue(gi, yg, p1 - p0);
        }
        if (extremes)
            extremes->addRows(yg.data(), Mg, p1 - p0, P);
    });
    setOutput();
}

} // namespace qs::ops
