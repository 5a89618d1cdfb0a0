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

// The input channel of each element of a row-major tensor of `shape`.
std::vector<int64_t> inputChannelOf(const Shape& shape, int inputAxis)
{
    int64_t inner = 1;
    for (size_t a = size_t(inputAxis) + 1; a < shape.size(); ++a)
        inner *= shape[a];
    const int64_t length = shape[size_t(inputAxis)];
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
    const int64_t inputs = w.shape()[size_t(inputAxis)];
    if (hessian.rows() != features || hessian.cols() != features || meanAbs.size() != features)
        throw Error(who(tensorName) + "the calibration statistics cover " + std::to_string(meanAbs.size()) +
                    " input features, the weight has " + std::to_string(features));
    if (!hessian.allFinite() || !meanAbs.allFinite())
        throw Error(who(tensorName) + "the calibration inputs hold NaN or Inf");
    if (algorithm.awqGrid < 1)
        throw Error(who(tensorName) + "the grid of exponents is empty");

    // m_j: the mean |x| of input channel j, over the features it spans (Conv: its kernel positions).
    const int64_t perInput = inputs ? features / inputs : 0;
    std::vector<double> m(static_cast<size_t>(inputs), 0.0);
    for (int64_t j = 0; j < inputs; ++j) {
        double sum = 0;
        for (int64_t k = 0; k < perInput; ++k)
            sum += meanAbs(j * perInput + k);
        m[size_t(j)] = sum / double(perInput);
    }

    const std::vector<int64_t> channel = inputChannelOf(w.shape(), inputAxis);
    const auto wv = w.values<float>();
    const Eigen::MatrixXd wRows = channelRows(w, channelAxis);
    Shape scaleShape(size_t(rank), 1);
    scaleShape[size_t(inputAxis)] = inputs;

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
        const double loss = ((e * hessian).cwiseProduct(e)).sum();
        best.losses.push_back(loss);
        if (i == 0 || loss < best.losses[size_t(best.alphaIndex)]) {
            best.alphaIndex = i;
            best.alpha = alpha;
            best.quantization = std::move(quantization);
            best.grid = std::move(grid);
            best.rounded = std::move(rounded);
            best.scaled = std::move(scaled);
            best.inputScale = Tensor::fromVector(DType::F32, scaleShape, s32);
        }
    }
    return best;
}

} // namespace qs
