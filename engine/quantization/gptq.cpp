#include "quantization/gptq.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include <Eigen/Cholesky>
#include <Eigen/Dense>
#include <tbb/parallel_for.h>

#include "core/block_layout.h"
#include "core/error.h"
#include "gemm/gram.h"
#include "numerics/qtype.h"
#include "quant/kernels.h"
#include "quant/reference.h"
#include "quantization/input_hessian.h"
#include "quantization/inverse_hessian.h"

namespace qs {

namespace {

std::string who(std::string_view tensorName)
{
    return "tensor '" + std::string(tensorName) + "': gptq: ";
}

} // namespace

GptqResult gptqQuantize(const Tensor& input, const QuantizationSpec& spec, const WeightAlgorithm& algorithm,
                        const Eigen::MatrixXd& hessian, std::string_view tensorName, const CancellationToken& cancel)
{
    return gptqQuantize(input, spec, algorithm, std::vector<Eigen::MatrixXd>{hessian}, tensorName, cancel);
}

GptqResult gptqQuantize(const Tensor& input, const QuantizationSpec& spec, const WeightAlgorithm& algorithm,
                        const std::vector<Eigen::MatrixXd>& hessians, std::string_view tensorName,
                        const CancellationToken& cancel)
{
    if (qtypeInfo(spec.qtype).kind != QKind::Integer)
        throw Error(who(tensorName) + "rounds onto integer grids only, not " + std::string(qtypeName(spec.qtype)));
    const Tensor x = input.toFloat32();
    const int rank = x.rank();
    if (rank < 1)
        throw Error(who(tensorName) + "a scalar has no input columns");
    const int channelAxis = normalizeAxis(spec.axis, rank, "channel axis");
    const bool tiled = spec.granularity == Granularity::PerChannel && spec.tileSize.has_value();
    if (tiled && (rank != 2 || channelAxis != 0))
        throw Error(who(tensorName) + "tiles need a 2-D weight [out, in] (got " + shapeToString(x.shape()) + ")");

    // M = x with the channel axis first, as rows; the other axes, in order, are the columns.
    const std::vector<int> order = channelFirst(rank, channelAxis);
    const Tensor m = x.permuted(order);
    const int64_t rows = x.shape()[size_t(channelAxis)];
    const int64_t cols = rows ? x.numel() / rows : 0;
    checkGroupHessians(hessians, rows, cols, who(tensorName));
    const int64_t groups = int64_t(hessians.size());
    const int64_t groupRows = rows / groups;

    // Scales: per-tensor and per-channel from the whole float weight (every group's rows); tiles are
    // replaced as they are reached, group by group (a tile's scales are its rows' own).
    GptqResult result;
    result.quantization = computeQuantization(x, spec, tensorName);
    QuantParams& params = result.quantization.params;
    const int64_t tile = tiled ? resolveTileSize(*spec.tileSize, cols) : cols;
    const int64_t tilesPerRow = tiled ? (cols + tile - 1) / tile : 1;
    const bool perTensor = spec.granularity == Granularity::PerTensor;
    auto groupOf = [&](int64_t row, int64_t col) -> int64_t {
        if (perTensor)
            return 0;
        return tiled ? row * tilesPerRow + col / tile : row;
    };
    QuantizationSpec rowSpec = spec;
    rowSpec.granularity = Granularity::PerChannel;
    rowSpec.axis = 0;
    rowSpec.tileSize.reset();
    const bool asymmetric = !params.zeroPoints.empty();
    const auto mv = m.values<float>();
    Tensor rounded(DType::F32, m.shape()); // the fake-quantized values, m's layout
    auto rv = rounded.mutableValues<float>();

    // One group's rows [r0, r0 + groupRows) against its Hessian: Algorithm 1 on that block of rows.
    auto roundGroup = [&](int64_t group) {
        const Eigen::MatrixXd& hessian = hessians[size_t(group)];
        const int64_t r0 = group * groupRows;
        const std::string where = groups > 1 ? " (group " + std::to_string(group) + ")" : std::string();
        Eigen::MatrixXd w(groupRows, cols);
        for (int64_t r = 0; r < groupRows; ++r)
            for (int64_t c = 0; c < cols; ++c)
                w(r, c) = double(mv[size_t((r0 + r) * cols + c)]);
        // A dead input (its feature is always 0, so its row and column of H are 0) gets H_ii = 1 and zero weights.
        auto diagonal = [&](int64_t c) { return hessian(c, c) == 0 ? 1.0 : hessian(c, c); };
        for (int64_t c = 0; c < cols; ++c)
            if (hessian(c, c) == 0)
                w.col(c).setZero();
        std::vector<int64_t> perm(static_cast<size_t>(cols));
        std::iota(perm.begin(), perm.end(), 0);
        if (algorithm.actOrder)
            std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) { return diagonal(a) > diagonal(b); });
        double mean = 0;
        for (int64_t c = 0; c < cols; ++c)
            mean += diagonal(c);
        const double damp = algorithm.dampening * mean / double(std::max<int64_t>(cols, 1));
        Eigen::MatrixXd wp(groupRows, cols);
        for (int64_t j = 0; j < cols; ++j)
            wp.col(j) = w.col(perm[size_t(j)]);
        w.resize(0, 0);

        // H⁻¹ = L·Lᵀ (quantization/inverse_hessian.h). U = Lᵀ is read from L's lower triangle
        // (U(i, j) = L(j, i)), never copied.
        Eigen::MatrixXd l;
        {
            Eigen::MatrixXd hp(cols, cols); // H in processing order, dampened
            for (int64_t j = 0; j < cols; ++j)
                for (int64_t i = 0; i < cols; ++i)
                    hp(i, j) = i == j ? diagonal(perm[size_t(j)]) + damp : hessian(perm[size_t(i)], perm[size_t(j)]);
            std::optional<Eigen::MatrixXd> factor = choleskyOfInverse(hp);
            if (!factor)
                throw Error(who(tensorName) + "the dampened Hessian" + where +
                            " is not positive definite; raise the dampening (the first option of gptq, e.g. gptq,0.1)");
            l = std::move(*factor);
        }

        std::vector<char> tileReached(size_t(tilesPerRow), 0);
        std::vector<int64_t> position(static_cast<size_t>(cols)); // natural column -> processing position
        for (int64_t j = 0; j < cols; ++j)
            position[size_t(perm[size_t(j)])] = j;

        Eigen::MatrixXd q(groupRows, cols); // the fake-quantized values, processing order
        for (int64_t i1 = 0; i1 < cols; i1 += kGptqBlockSize) {
            cancel.check();
            const int64_t i2 = std::min(cols, i1 + kGptqBlockSize), count = i2 - i1;
            Eigen::MatrixXd w1 = wp.middleCols(i1, count);
            Eigen::MatrixXd err1(groupRows, count);
            for (int64_t i = 0; i < count; ++i) {
                const int64_t col = perm[size_t(i1 + i)];
                if (tiled && !tileReached[size_t(col / tile)]) {
                    // The tile's scales from its columns as the blocks before left them.
                    const int64_t t = col / tile, begin = t * tile, len = std::min(tile, cols - begin);
                    Tensor part(DType::F32, {groupRows, len});
                    auto pv = part.mutableValues<float>();
                    for (int64_t r = 0; r < groupRows; ++r)
                        for (int64_t c = 0; c < len; ++c)
                            pv[size_t(r * len + c)] = float(wp(r, position[size_t(begin + c)]));
                    const TensorQuantization tq = computeQuantization(part, rowSpec, tensorName);
                    for (int64_t r = 0; r < groupRows; ++r) {
                        const size_t g = size_t((r0 + r) * tilesPerRow + t);
                        params.scales[g] = tq.params.scales[size_t(r)];
                        if (asymmetric)
                            params.zeroPoints[g] = tq.params.zeroPoints[size_t(r)];
                        result.quantization.ranges[g] = tq.ranges[size_t(r)];
                    }
                    tileReached[size_t(t)] = 1;
                }
                const double d = l(i1 + i, i1 + i);
                for (int64_t r = 0; r < groupRows; ++r) {
                    const GroupQuant gq = groupQuant(params, groupOf(r0 + r, col));
                    const double value = double(referenceFakeQuantizeValue(gq, float(w1(r, i))));
                    q(r, i1 + i) = value;
                    err1(r, i) = (w1(r, i) - value) / d;
                }
                w1.rightCols(count - i).noalias() -= err1.col(i) * l.col(i1 + i).segment(i1 + i, count - i).transpose();
            }
            if (i2 < cols)
                // wp(:, i2:) −= err1 · L(i2:, i1:i2)ᵀ, on gemm's vector kernels (Eigen's are SSE2 here).
                gemm::addProductParallel(gemm::simdLevel(), count, err1.data(), groupRows, groupRows,
                                         l.data() + i1 * cols + i2, cols, cols - i2, wp.data() + i2 * groupRows,
                                         groupRows, true);
        }
        for (int64_t r = 0; r < groupRows; ++r)
            for (int64_t j = 0; j < cols; ++j)
                rv[size_t((r0 + r) * cols + perm[size_t(j)])] = float(q(r, j));
    };
    // The groups are independent problems (their rows, their Hessians, their tiles' scales), each
    // computed by one task in a fixed order: the same result for any number of threads.
    if (groups == 1)
        roundGroup(0);
    else
        tbb::parallel_for(int64_t(0), groups, roundGroup);
    cancel.check();
    if (tiled)
        result.quantization.saturation = saturationRanges(params);

    // Back to x's layout, then through the kernel: the tensor the exports quantize again.
    const Tensor back = rounded.permuted(inversePermutation(order));
    result.rounded = fakeQuantize(back, params, Rounding::Nearest, 0, tensorName);
    return result;
}

} // namespace qs
