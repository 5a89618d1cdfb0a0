#include "quantization/bias_correction.h"

#include "core/block_layout.h"
#include "core/error.h"
#include "quantization/input_hessian.h"

namespace qs {

namespace {

std::string who(std::string_view tensorName)
{
    return "tensor '" + std::string(tensorName) + "': bias_correction: ";
}

} // namespace

Eigen::VectorXd biasCorrection(const Tensor& weight, const Tensor& rounded, int channelAxis,
                               const Eigen::VectorXd& featureMeans, std::string_view tensorName, int64_t groups)
{
    if (weight.shape() != rounded.shape())
        throw Error(who(tensorName) + "the rounded weight " + shapeToString(rounded.shape()) + " is not the weight's " +
                    shapeToString(weight.shape()));
    const int rank = weight.rank();
    if (rank < 1)
        throw Error(who(tensorName) + "a scalar weight has no output channels");
    channelAxis = normalizeAxis(channelAxis, rank, "channel axis");
    const std::vector<int> order = channelFirst(rank, channelAxis);
    const int64_t rows = weight.shape()[size_t(channelAxis)];
    const int64_t cols = rows ? weight.numel() / rows : 0;
    if (groups < 1 || rows % groups != 0)
        throw Error(who(tensorName) + std::to_string(rows) + " output channels cannot form " + std::to_string(groups) +
                    " groups");
    if (featureMeans.size() != cols * groups)
        throw Error(who(tensorName) + "the calibration means cover " + std::to_string(featureMeans.size()) +
                    " input features, the weight has " + std::to_string(cols) +
                    (groups > 1 ? " in each of " + std::to_string(groups) + " groups" : std::string()));
    if (!featureMeans.allFinite())
        throw Error(who(tensorName) + "the calibration inputs hold NaN or Inf");
    const Tensor w = weight.toFloat32().permuted(order);
    const Tensor q = rounded.toFloat32().permuted(order);
    const auto wv = w.values<float>(), qv = q.values<float>();
    Eigen::VectorXd delta(rows);
    const int64_t rowsPerGroup = rows / groups;
    for (int64_t r = 0; r < rows; ++r) {
        const int64_t first = (r / rowsPerGroup) * cols; // this row's group's first feature
        double sum = 0;
        for (int64_t c = 0; c < cols; ++c) {
            const size_t k = size_t(r * cols + c);
            sum += (double(wv[k]) - double(qv[k])) * featureMeans(first + c);
        }
        delta(r) = sum;
    }
    return delta;
}

Tensor correctedBias(const Tensor* bias, const Eigen::VectorXd& correction, std::string_view tensorName)
{
    const int64_t n = correction.size();
    Tensor out(DType::F32, {n});
    auto o = out.mutableValues<float>();
    if (bias && bias->numel() != n)
        throw Error(who(tensorName) + "the layer's bias has " + std::to_string(bias->numel()) +
                    " elements, not one per " + "output channel (" + std::to_string(n) + ")");
    const Tensor b = bias ? bias->toFloat32() : Tensor();
    for (int64_t i = 0; i < n; ++i)
        o[size_t(i)] = float((bias ? double(b.values<float>()[size_t(i)]) : 0.0) + correction(i));
    return out;
}

} // namespace qs
