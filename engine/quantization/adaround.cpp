#include "quantization/adaround.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include <tbb/parallel_for.h>

#include <Eigen/Dense>

#include "core/block_layout.h"
#include "core/error.h"
#include "numerics/qtype.h"
#include "quant/kernels.h"
#include "quant/reference.h"
#include "quantization/input_hessian.h"

namespace qs {

namespace {

std::string who(std::string_view tensorName)
{
    return "tensor '" + std::string(tensorName) + "': adaround: ";
}

// One block of rows: the weight, its grid (per element: scale, zero point, floor of
// W/s + z) and the learned V, all [rows, features].
struct RowBlock {
    Eigen::MatrixXd w, scale, zero, floor, v;
};

double rectifiedSigmoid(double v)
{
    const double s = 1.0 / (1.0 + std::exp(-v));
    return std::clamp(s * (kAdaroundZeta - kAdaroundGamma) + kAdaroundGamma, 0.0, 1.0);
}

// Runs the optimisation of one block in place on b.v.
void optimise(RowBlock& b, const Eigen::MatrixXd& m, double qmin, double qmax, const WeightAlgorithm& algorithm,
              const CancellationToken& cancel)
{
    const Eigen::Index rows = b.w.rows(), cols = b.w.cols();
    const int iterations = algorithm.adaroundIterations;
    const int warmup = int(kAdaroundWarmup * iterations);
    const double lambda = algorithm.adaroundLambda;
    const double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;
    Eigen::MatrixXd first = Eigen::MatrixXd::Zero(rows, cols), second = Eigen::MatrixXd::Zero(rows, cols);
    Eigen::MatrixXd h(rows, cols), dh(rows, cols), clipped(rows, cols), delta(rows, cols), g(rows, cols);
    double beta1Power = 1, beta2Power = 1;
    for (int t = 0; t < iterations; ++t) {
        if (t % 32 == 0)
            cancel.check();
        for (Eigen::Index c = 0; c < cols; ++c)
            for (Eigen::Index r = 0; r < rows; ++r) {
                const double s = 1.0 / (1.0 + std::exp(-b.v(r, c)));
                const double raw = s * (kAdaroundZeta - kAdaroundGamma) + kAdaroundGamma;
                h(r, c) = std::clamp(raw, 0.0, 1.0);
                dh(r, c) = raw >= 0 && raw <= 1 ? s * (1 - s) * (kAdaroundZeta - kAdaroundGamma) : 0.0;
                const double grid = b.floor(r, c) + h(r, c);
                clipped(r, c) = grid >= qmin && grid <= qmax ? 1.0 : 0.0;
                delta(r, c) = (std::clamp(grid, qmin, qmax) - b.zero(r, c)) * b.scale(r, c) - b.w(r, c);
            }
        // d/dW̃ Σ_rows ΔW·M·ΔWᵀ = 2·ΔW·M (M symmetric).
        g.noalias() = delta * m;
        const bool regularised = t >= warmup;
        double beta = 0;
        if (regularised) {
            const double progress = double(t - warmup) / double(std::max(1, iterations - warmup));
            beta = kAdaroundBetaEnd + (kAdaroundBetaStart - kAdaroundBetaEnd) * std::max(0.0, 1.0 - progress);
        }
        beta1Power *= beta1;
        beta2Power *= beta2;
        for (Eigen::Index c = 0; c < cols; ++c)
            for (Eigen::Index r = 0; r < rows; ++r) {
                double gradH = 2 * g(r, c) * b.scale(r, c) * clipped(r, c);
                if (regularised) {
                    const double u = 2 * h(r, c) - 1;
                    const double sign = u > 0 ? 1.0 : u < 0 ? -1.0 : 0.0;
                    gradH -= lambda * beta * std::pow(std::abs(u), beta - 1) * sign * 2;
                }
                const double grad = gradH * dh(r, c);
                first(r, c) = beta1 * first(r, c) + (1 - beta1) * grad;
                second(r, c) = beta2 * second(r, c) + (1 - beta2) * grad * grad;
                const double mHat = first(r, c) / (1 - beta1Power), vHat = second(r, c) / (1 - beta2Power);
                b.v(r, c) -= kAdaroundLearningRate * mHat / (std::sqrt(vHat) + epsilon);
            }
    }
}

// Σ_rows (Ŵ − W)·M·(Ŵ − W)ᵀ.
double outputError(const Eigen::MatrixXd& w, const Eigen::MatrixXd& rounded, const Eigen::MatrixXd& m)
{
    const Eigen::MatrixXd d = rounded - w;
    return (d * m).cwiseProduct(d).sum();
}

} // namespace

AdaroundResult adaroundQuantize(const Tensor& input, const QuantizationSpec& spec, const WeightAlgorithm& algorithm,
                                const Eigen::MatrixXd& hessian, std::string_view tensorName,
                                const CancellationToken& cancel)
{
    return adaroundQuantize(input, spec, algorithm, std::vector<Eigen::MatrixXd>{hessian}, tensorName, cancel);
}

AdaroundResult adaroundQuantize(const Tensor& input, const QuantizationSpec& spec, const WeightAlgorithm& algorithm,
                                const std::vector<Eigen::MatrixXd>& hessians, std::string_view tensorName,
                                const CancellationToken& cancel)
{
    if (qtypeInfo(spec.qtype).kind != QKind::Integer)
        throw Error(who(tensorName) + "rounds onto integer grids only, not " + std::string(qtypeName(spec.qtype)));
    const Tensor x = input.toFloat32();
    const int rank = x.rank();
    if (rank < 1)
        throw Error(who(tensorName) + "a scalar has no input features");
    const int channelAxis = normalizeAxis(spec.axis, rank, "channel axis");
    const std::vector<int> order = channelFirst(rank, channelAxis);
    const int64_t rows = x.shape()[size_t(channelAxis)];
    const int64_t cols = rows ? x.numel() / rows : 0;
    checkGroupHessians(hessians, rows, cols, who(tensorName));
    const int64_t groups = int64_t(hessians.size());
    const int64_t groupRows = rows / groups;

    AdaroundResult result;
    result.quantization = computeQuantization(x, spec, tensorName, cancel);
    const QuantParams& params = result.quantization.params;
    const Tensor rtn = fakeQuantize(x, params, Rounding::Nearest, 0, tensorName);

    // Each element's flat index in x, in matrix order [channel, features].
    Tensor index(DType::I64, x.shape());
    {
        auto iv = index.mutableValues<int64_t>();
        std::iota(iv.begin(), iv.end(), int64_t(0));
    }
    const Tensor matrixIndex = index.permuted(order);
    const auto flat = matrixIndex.values<int64_t>();
    const auto xv = x.values<float>();
    const auto rv = rtn.values<float>();
    const IntegerGrid grid = groupQuant(params, 0).grid;
    const double qmin = grid.qmin, qmax = grid.qmax;
    std::vector<Eigen::MatrixXd> ms; // E[x·xᵀ] per group
    for (const Eigen::MatrixXd& h : hessians)
        ms.push_back(0.5 * h);

    Eigen::MatrixXd w(rows, cols), nearest(rows, cols), chosen(rows, cols);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
            const int64_t i = flat[size_t(r * cols + c)];
            w(r, c) = double(xv[size_t(i)]);
            nearest(r, c) = double(rv[size_t(i)]);
        }

    // Blocks of kAdaroundBlockRows rows inside each group (a block never spans two groups: its rows
    // share the group's M).
    const int64_t blocksPerGroup = (groupRows + kAdaroundBlockRows - 1) / kAdaroundBlockRows;
    const int64_t blocks = blocksPerGroup * groups;
    std::vector<int64_t> flippedPerBlock(size_t(blocks), 0);
    tbb::parallel_for(int64_t(0), blocks, [&](int64_t k) {
        const int64_t group = k / blocksPerGroup, local = (k % blocksPerGroup) * kAdaroundBlockRows;
        const int64_t r0 = group * groupRows + local, count = std::min(kAdaroundBlockRows, groupRows - local);
        const Eigen::MatrixXd& m = ms[size_t(group)];
        RowBlock b{w.middleRows(r0, count), Eigen::MatrixXd(count, cols), Eigen::MatrixXd(count, cols),
                   Eigen::MatrixXd(count, cols), Eigen::MatrixXd(count, cols)};
        for (int64_t r = 0; r < count; ++r)
            for (int64_t c = 0; c < cols; ++c) {
                const int64_t i = flat[size_t((r0 + r) * cols + c)];
                const GroupQuant gq = groupQuant(params, params.layout.groupOf(i));
                // The grid value as the kernels compute it: x / s + z in float32.
                const float gridValue = xv[size_t(i)] / gq.scale + float(gq.zeroPoint);
                const double lower = std::floor(double(gridValue));
                b.scale(r, c) = double(gq.scale);
                b.zero(r, c) = double(gq.zeroPoint);
                b.floor(r, c) = lower;
                // h(V) = the fractional part: sigmoid(V) = (frac − γ) / (ζ − γ).
                const double p = (double(gridValue) - lower - kAdaroundGamma) / (kAdaroundZeta - kAdaroundGamma);
                b.v(r, c) = std::log(p) - std::log1p(-p);
            }
        optimise(b, m, qmin, qmax, algorithm, cancel);
        for (int64_t r = 0; r < count; ++r)
            for (int64_t c = 0; c < cols; ++c) {
                const double up = rectifiedSigmoid(b.v(r, c)) >= 0.5 ? 1.0 : 0.0;
                const double code = std::clamp(b.floor(r, c) + up, qmin, qmax);
                const float value = float(int32_t(code) - int32_t(b.zero(r, c))) * float(b.scale(r, c));
                chosen(r0 + r, c) = double(value);
                flippedPerBlock[size_t(k)] += value != float(nearest(r0 + r, c));
            }
    });
    cancel.check();
    result.flipped = std::accumulate(flippedPerBlock.begin(), flippedPerBlock.end(), int64_t(0));
    for (int64_t g = 0; g < groups; ++g) {
        const int64_t r0 = g * groupRows;
        result.rtnLoss += outputError(w.middleRows(r0, groupRows), nearest.middleRows(r0, groupRows), ms[size_t(g)]);
        result.loss += outputError(w.middleRows(r0, groupRows), chosen.middleRows(r0, groupRows), ms[size_t(g)]);
    }

    // Back to x's layout, then through the kernel: the tensor the exports quantize again.
    Tensor rounded(DType::F32, x.shape());
    auto out = rounded.mutableValues<float>();
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
            out[size_t(flat[size_t(r * cols + c)])] = float(chosen(r, c));
    result.rounded = fakeQuantize(rounded, params, Rounding::Nearest, 0, tensorName);
    return result;
}

} // namespace qs
