#include "quantization/awq.h"

#include <algorithm>
#include <cmath>

#include "core/block_layout.h"
#include "core/error.h"
#include "quantization/input_hessian.h"

namespace qs {

namespace {

std::string who(std::string_view tensorName)
{
    return "tensor '" + std::string(tensorName) + "': awq: ";
}

// The index along `axis` of each element of a row-major tensor of `shape`.
std::vector<int64_t> indexAlong(const Shape& shape, int axis)
{
    int64_t inner = 1;
    for (size_t a = size_t(axis) + 1; a < shape.size(); ++a)
        inner *= shape[a];
    const int64_t length = shape[size_t(axis)];
    std::vector<int64_t> channel(size_t(shapeElementCount(shape)));
    for (size_t k = 0; k < channel.size(); ++k)
        channel[k] = (int64_t(k) / inner) % length;
    return channel;
}

} // namespace

AwqResult awqQuantize(const Tensor& weight, int channelAxis, int inputAxis, const WeightAlgorithm& algorithm,
                      const Eigen::MatrixXd& hessian, const Eigen::VectorXd& meanAbs, const GridRounding& roundOnGrid,
                      std::string_view tensorName, const CancellationToken& cancel)
{
    return awqQuantize(weight, channelAxis, inputAxis, algorithm, std::vector<Eigen::MatrixXd>{hessian}, meanAbs,
                       roundOnGrid, tensorName, cancel);
}

AwqResult awqQuantize(const Tensor& weight, int channelAxis, int inputAxis, const WeightAlgorithm& algorithm,
                      const std::vector<Eigen::MatrixXd>& hessians, const Eigen::VectorXd& meanAbs,
                      const GridRounding& roundOnGrid, std::string_view tensorName, const CancellationToken& cancel)
{
    const Tensor w = weight.toFloat32();
    const int rank = w.rank();
    if (rank < 2)
        throw Error(who(tensorName) + "needs a weight with input channels, not " + shapeToString(w.shape()));
    channelAxis = normalizeAxis(channelAxis, rank, "channel axis");
    inputAxis = normalizeAxis(inputAxis, rank, "input axis");
    const int firstOther = channelAxis == 0 ? 1 : 0;
    if (inputAxis != firstOther)
        throw Error(who(tensorName) + "the input channels (axis " + std::to_string(inputAxis) +
                    ") must come first among the axes the layer contracts");
    const int64_t outputs = w.shape()[size_t(channelAxis)];
    const int64_t features = outputs ? w.numel() / outputs : 0;
    const int64_t groups = int64_t(hessians.size());
    if (groups < 1 || outputs % groups != 0)
        throw Error(who(tensorName) + std::to_string(outputs) + " output channels cannot form " +
                    std::to_string(groups) + " groups");
    const int64_t groupOutputs = outputs / groups;
    // The layer's input channels: the weight's, in every group (group g's are g·I … g·I + I − 1).
    const int64_t groupInputs = w.shape()[size_t(inputAxis)], inputs = groupInputs * groups;
    for (const Eigen::MatrixXd& hessian : hessians)
        if (hessian.rows() != features || hessian.cols() != features)
            throw Error(who(tensorName) + "the calibration statistics cover " + std::to_string(hessian.rows()) +
                        " input features" + (groups > 1 ? " per group" : "") + ", the weight has " +
                        std::to_string(features));
    if (meanAbs.size() != features * groups)
        throw Error(who(tensorName) + "the calibration statistics cover " + std::to_string(meanAbs.size()) +
                    " input features, the weight has " + std::to_string(features) +
                    (groups > 1 ? " in each of " + std::to_string(groups) + " groups" : std::string()));
    for (const Eigen::MatrixXd& hessian : hessians)
        if (!hessian.allFinite())
            throw Error(who(tensorName) + "the calibration inputs hold NaN or Inf");
    if (!meanAbs.allFinite())
        throw Error(who(tensorName) + "the calibration inputs hold NaN or Inf");
    if (algorithm.awqGrid < 1)
        throw Error(who(tensorName) + "the grid of exponents is empty");

    // m_j: the mean |x| of input channel j, over the features it spans (Conv: its kernel positions).
    const int64_t perInput = groupInputs ? features / groupInputs : 0;
    std::vector<double> m(static_cast<size_t>(inputs), 0.0);
    for (int64_t j = 0; j < inputs; ++j) {
        double sum = 0;
        for (int64_t k = 0; k < perInput; ++k)
            sum += meanAbs(j * perInput + k);
        m[size_t(j)] = sum / double(perInput);
    }

    // Each element's input channel of the layer: its own along inputAxis, offset by its group's.
    std::vector<int64_t> channel = indexAlong(w.shape(), inputAxis);
    if (groups > 1) {
        const std::vector<int64_t> output = indexAlong(w.shape(), channelAxis);
        for (size_t k = 0; k < channel.size(); ++k)
            channel[k] += output[k] / groupOutputs * groupInputs;
    }
    const auto wv = w.values<float>();
    const Eigen::MatrixXd wRows = channelRows(w, channelAxis);
    // s as the weight's rank: [1, I, 1, …] along the input axis; with groups, the output axis too
    // ([O, I, 1, …]: output channel o divides by the s of its own group's input channels).
    Shape scaleShape(size_t(rank), 1);
    scaleShape[size_t(inputAxis)] = groupInputs;
    if (groups > 1)
        scaleShape[size_t(channelAxis)] = outputs;
    std::vector<int64_t> scaleChannel; // the input channel of each element of s
    {
        const int64_t n = shapeElementCount(scaleShape);
        const std::vector<int64_t> in = indexAlong(scaleShape, inputAxis), out = indexAlong(scaleShape, channelAxis);
        for (int64_t k = 0; k < n; ++k)
            scaleChannel.push_back(in[size_t(k)] + (groups > 1 ? out[size_t(k)] / groupOutputs * groupInputs : 0));
    }

    AwqResult best;
    best.losses.reserve(size_t(algorithm.awqGrid));
    for (int i = 0; i < algorithm.awqGrid; ++i) {
        cancel.check();
        const double alpha = double(i) / double(algorithm.awqGrid);
        std::vector<double> s(static_cast<size_t>(inputs));
        for (int64_t j = 0; j < inputs; ++j)
            s[size_t(j)] = std::max(std::pow(m[size_t(j)], alpha), 1e-4);
        const auto [lo, hi] = std::minmax_element(s.begin(), s.end());
        const double norm = std::sqrt(*lo * *hi);
        std::vector<float> s32(static_cast<size_t>(inputs));
        for (int64_t j = 0; j < inputs; ++j)
            s32[size_t(j)] = float(s[size_t(j)] / norm);

        Tensor scaled(DType::F32, w.shape());
        auto sv = scaled.mutableValues<float>();
        for (size_t k = 0; k < sv.size(); ++k)
            sv[k] = wv[k] * s32[size_t(channel[k])];
        auto [quantization, grid] = roundOnGrid(scaled);
        Tensor rounded(DType::F32, w.shape());
        {
            const auto gv = grid.values<float>();
            auto rv = rounded.mutableValues<float>();
            for (size_t k = 0; k < rv.size(); ++k)
                rv[k] = gv[k] / s32[size_t(channel[k])];
        }
        const Eigen::MatrixXd e = wRows - channelRows(rounded, channelAxis);
        double loss = 0;
        for (int64_t g = 0; g < groups; ++g) {
            const auto eg = e.middleRows(g * groupOutputs, groupOutputs);
            loss += ((eg * hessians[size_t(g)]).cwiseProduct(eg)).sum();
        }
        best.losses.push_back(loss);
        if (i == 0 || loss < best.losses[size_t(best.alphaIndex)]) {
            best.alphaIndex = i;
            best.alpha = alpha;
            best.quantization = std::move(quantization);
            best.grid = std::move(grid);
            best.rounded = std::move(rounded);
            best.scaled = std::move(scaled);
            std::vector<float> scales(scaleChannel.size());
            for (size_t k = 0; k < scales.size(); ++k)
                scales[k] = s32[size_t(scaleChannel[k])];
            best.inputScale = Tensor::fromVector(DType::F32, scaleShape, std::move(scales));
        }
    }
    return best;
}

} // namespace qs
