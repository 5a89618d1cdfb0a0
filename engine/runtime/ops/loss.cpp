// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss, computed in double
// and returned in the input's element type. Layout: scores [N, C, d1, ...],
// labels [N, d1, ...]; class axis 1.

#include "runtime/ops/loss.h"

#include <cmath>
#include <optional>

#include "runtime/tensor_cast.h"

namespace qs::ops {

namespace {

// The loss of log-probabilities `logProb` (double, [N, C, d...]) against labels.
Tensor nllLoss(const KernelContext& ctx, const Tensor& logProb, const Tensor& labelsIn, const Tensor* weightIn,
               DType outType)
{
    const std::string reduction = ctx.stringAttribute("reduction", "mean");
    const bool hasIgnore = ctx.hasAttribute("ignore_index");
    const int64_t ignoreIndex = ctx.intAttribute("ignore_index", 0);
    if (logProb.rank() < 2)
        ctx.fail("scores must have shape [N, C, ...]");
    const int64_t n = logProb.dim(0), c = logProb.dim(1);
    const int64_t inner = n * c == 0 ? 0 : logProb.numel() / (n * c);
    Shape labelShape = logProb.shape();
    labelShape.erase(labelShape.begin() + 1);
    if (labelsIn.shape() != labelShape)
        ctx.fail("labels of shape " + shapeToString(labelsIn.shape()) + " do not match scores of shape " +
                 shapeToString(logProb.shape()));
    const Tensor labels = castTensor(labelsIn, DType::I64);
    std::optional<Tensor> weight;
    if (weightIn) {
        if (weightIn->rank() != 1 || weightIn->dim(0) != c)
            ctx.fail("weights must have shape [C]");
        weight = castTensor(*weightIn, DType::F64);
    }
    Tensor loss(DType::F64, labelShape);
    double* l = loss.mutableValues<double>().data();
    const double* p = logProb.values<double>().data();
    double lossSum = 0.0, weightSum = 0.0;
    for (int64_t i = 0; i < n; ++i)
        for (int64_t k = 0; k < inner; ++k) {
            const int64_t at = i * inner + k;
            const int64_t t = labels.values<int64_t>()[size_t(at)];
            if (hasIgnore && t == ignoreIndex)
                continue;
            if (t < 0 || t >= c)
                ctx.fail("label " + std::to_string(t) + " is out of range for " + std::to_string(c) + " classes");
            const double w = weight ? weight->values<double>()[size_t(t)] : 1.0;
            l[at] = -p[(i * c + t) * inner + k] * w;
            lossSum += l[at];
            weightSum += w;
        }
    if (reduction == "none")
        return castTensor(loss, outType);
    double value;
    if (reduction == "sum")
        value = lossSum;
    else if (reduction == "mean")
        value = weightSum == 0.0 ? 0.0 : lossSum / weightSum;
    else
        ctx.fail("reduction must be none, sum or mean, got '" + reduction + "'");
    return castTensor(Tensor::fromVector(DType::F64, {}, std::vector<double>{value}), outType);
}

} // namespace

void negativeLogLikelihoodLoss(KernelContext& ctx)
{
    const Tensor& input = ctx.input(0);
    ctx.setOutput(0, nllLoss(ctx, castTensor(input, DType::F64), ctx.input(1), ctx.optionalInput(2), input.dtype()));
}

void softmaxCrossEntropyLoss(KernelContext& ctx)
{
    const Tensor& scores = ctx.input(0);
    if (scores.rank() < 2)
        ctx.fail("scores must have shape [N, C, ...]");
    Tensor logProb = castTensor(scores, DType::F64);
    if (logProb.rawData() == scores.rawData())
        logProb = logProb.clone();
    const int64_t n = scores.dim(0), c = scores.dim(1);
    const int64_t inner = n * c == 0 ? 0 : scores.numel() / (n * c);
    double* p = logProb.mutableValues<double>().data();
    for (int64_t i = 0; i < n; ++i)
        for (int64_t k = 0; k < inner; ++k) {
            double m = -INFINITY;
            for (int64_t j = 0; j < c; ++j)
                m = std::max(m, p[(i * c + j) * inner + k]);
            double s = 0.0;
            for (int64_t j = 0; j < c; ++j)
                s += std::exp(p[(i * c + j) * inner + k] - m);
            const double logSum = m + std::log(s);
            for (int64_t j = 0; j < c; ++j)
                p[(i * c + j) * inner + k] -= logSum;
        }
    ctx.setOutput(0, nllLoss(ctx, logProb, ctx.input(1), ctx.optionalInput(2), scores.dtype()));
    if (ctx.wantsOutput(1))
        ctx.setOutput(1, castTensor(logProb, scores.dtype()));
}

} // namespace qs::ops
