#include "quantization/input_hessian.h"

#include <algorithm>
#include <vector>

#include <Eigen/Dense>
#include <tbb/parallel_for.h>

#include "core/block_layout.h"
#include "core/error.h"
#include "gemm/gram.h"

namespace qs {

namespace {

// Rows are added in chunks of this many, so a large batch costs a bounded buffer.
constexpr int64_t kChunkRows = 1024;

// XᵀX is accumulated in square tiles of this many features, each one task (addRows).
constexpr int64_t kHessianTile = 256;

std::vector<int64_t> intsOr(const Node& node, std::string_view name, std::vector<int64_t> fallback)
{
    const Attribute* a = node.attribute(name);
    return a && !a->ints.empty() ? a->ints : fallback;
}

[[noreturn]] void badInput(const QuantizableLayer& layer, const Tensor& input, const std::string& what)
{
    throw Error("layer '" + layer.modulePath + "': input " + shapeToString(input.shape()) + " " + what);
}

// im2col of a 1-D or 2-D Conv input [N, C, (H,) W]: one row per output position,
// features ordered (c, kh, kw) as the weight [O, C, (kh,) kw].
void addConvRows(const QuantizableLayer& layer, const Node& node, const Tensor& x, InputHessian& h)
{
    const Shape& w = layer.weightShape;
    const size_t spatial = w.size() - 2;
    if (x.rank() != int(w.size()) || x.shape()[1] != w[1] * layer.groups)
        badInput(layer, x,
                 "does not match the Conv weight " + shapeToString(w) +
                     (layer.groups != 1 ? " of " + std::to_string(layer.groups) + " groups" : std::string()));
    if (h.features() != x.shape()[1] * shapeElementCount(Shape(w.begin() + 2, w.end())))
        badInput(layer, x, "does not give the " + std::to_string(h.features()) + " features its statistics hold");
    // 1-D is 2-D with a height of 1.
    const int64_t n = x.shape()[0], c = x.shape()[1];
    const int64_t ih = spatial == 2 ? x.shape()[2] : 1, iw = x.shape().back();
    const int64_t kh = spatial == 2 ? w[2] : 1, kw = w.back();
    const std::vector<int64_t> strides = intsOr(node, "strides", std::vector<int64_t>(spatial, 1));
    const std::vector<int64_t> dilations = intsOr(node, "dilations", std::vector<int64_t>(spatial, 1));
    const std::vector<int64_t> pads = intsOr(node, "pads", std::vector<int64_t>(2 * spatial, 0));
    if (strides.size() != spatial || dilations.size() != spatial || pads.size() != 2 * spatial)
        badInput(layer, x, "comes with strides, dilations or pads of the wrong length");
    const int64_t sh = spatial == 2 ? strides[0] : 1, sw = strides.back();
    const int64_t dh = spatial == 2 ? dilations[0] : 1, dw = dilations.back();
    const int64_t pt = spatial == 2 ? pads[0] : 0, pl = spatial == 2 ? pads[1] : pads[0];
    const int64_t pb = spatial == 2 ? pads[2] : 0, pr = spatial == 2 ? pads[3] : pads[1];
    const int64_t oh = (ih + pt + pb - dh * (kh - 1) - 1) / sh + 1;
    const int64_t ow = (iw + pl + pr - dw * (kw - 1) - 1) / sw + 1;
    if (oh <= 0 || ow <= 0)
        badInput(layer, x, "is smaller than the Conv kernel");
    const Tensor xf = x.toFloat32();
    const auto v = xf.values<float>();
    const int64_t features = c * kh * kw;
    std::vector<double> chunk(size_t(kChunkRows * features));
    int64_t filled = 0;
    for (int64_t b = 0; b < n; ++b)
        for (int64_t y = 0; y < oh; ++y)
            for (int64_t xo = 0; xo < ow; ++xo) {
                double* row = chunk.data() + filled * features;
                for (int64_t ch = 0; ch < c; ++ch)
                    for (int64_t i = 0; i < kh; ++i) {
                        const int64_t yy = y * sh - pt + i * dh;
                        for (int64_t j = 0; j < kw; ++j) {
                            const int64_t xx = xo * sw - pl + j * dw;
                            const bool inside = yy >= 0 && yy < ih && xx >= 0 && xx < iw;
                            *row++ = inside ? double(v[size_t(((b * c + ch) * ih + yy) * iw + xx)]) : 0.0;
                        }
                    }
                if (++filled == kChunkRows) {
                    h.addRows(chunk.data(), filled);
                    filled = 0;
                }
            }
    if (filled)
        h.addRows(chunk.data(), filled);
}

} // namespace

InputHessian::InputHessian(int64_t features, bool withHessian, int64_t groups)
    : absSum_(Eigen::VectorXd::Zero(features)), sum1_(Eigen::VectorXd::Zero(features)), groups_(groups),
      withHessian_(withHessian)
{
    if (groups < 1 || features % groups != 0)
        throw Error("input statistics of " + std::to_string(features) + " features cannot form " +
                    std::to_string(groups) + " groups");
    if (withHessian)
        sums_.assign(size_t(groups), Eigen::MatrixXd::Zero(features / groups, features / groups));
}

void InputHessian::addRows(const double* rows, int64_t count)
{
    const int64_t features = sum1_.rows();
    const Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> x(rows, count,
                                                                                                     features);
    // Each group's X_gᵀX_g, lower triangle, in tiles of kHessianTile features, one task per tile of
    // each group (oneTBB), each on gemm's Gram kernels, which sum every element's products in the
    // same order however H is split: the result does not depend on the threads.
    const gemm::SimdLevel level = gemm::simdLevel();
    const int64_t perGroup = features / groups_;
    const int64_t tiles = (perGroup + kHessianTile - 1) / kHessianTile;
    const int64_t tilesPerGroup = tiles * (tiles + 1) / 2;
    auto addTile = [&](int64_t task) {
        const int64_t g = task / tilesPerGroup, t = task % tilesPerGroup;
        Eigen::MatrixXd& sum = sums_[size_t(g)];
        // Tile t of the lower triangle, row-major: row block i, column block j <= i.
        int64_t i = 0;
        while ((i + 1) * (i + 2) / 2 <= t)
            ++i;
        const int64_t j = t - i * (i + 1) / 2;
        const int64_t r0 = i * kHessianTile, c0 = j * kHessianTile;
        const int64_t rn = std::min(kHessianTile, perGroup - r0), cn = std::min(kHessianTile, perGroup - c0);
        // Group g's columns: the rows from its first feature on, `features` doubles apart.
        gemm::addGramTile(level, rows + g * perGroup, count, features, r0, rn, c0, cn, sum.data(), sum.rows(), i == j);
    };
    const int64_t taskCount = perGroup ? tilesPerGroup * groups_ : 0;
    if (withHessian_ && taskCount == 1) // (without: the means only)
        addTile(0);
    else if (withHessian_ && taskCount > 1)
        tbb::parallel_for(int64_t(0), taskCount, addTile);
    // Row by row, in order: the sums a reference adding the rows in order gets.
    for (int64_t r = 0; r < count; ++r) {
        absSum_ += x.row(r).transpose().cwiseAbs();
        sum1_ += x.row(r).transpose();
    }
    rows_ += count;
}

Eigen::MatrixXd InputHessian::hessian(int64_t group) const
{
    if (!withHessian_)
        throw Error("the calibration statistics hold the input means only, not a Hessian");
    if (group < 0 || group >= groups_)
        throw Error("the calibration statistics have " + std::to_string(groups_) + " groups, not a group " +
                    std::to_string(group));
    Eigen::MatrixXd h = sums_[size_t(group)].selfadjointView<Eigen::Lower>();
    if (rows_ > 0)
        h *= 2.0 / double(rows_);
    return h;
}

std::vector<Eigen::MatrixXd> InputHessian::hessians() const
{
    std::vector<Eigen::MatrixXd> out;
    out.reserve(size_t(groups_));
    for (int64_t g = 0; g < groups_; ++g)
        out.push_back(hessian(g));
    return out;
}

Eigen::VectorXd InputHessian::meanAbs() const
{
    return rows_ > 0 ? Eigen::VectorXd(absSum_ / double(rows_)) : Eigen::VectorXd(absSum_);
}

Eigen::VectorXd InputHessian::mean() const
{
    return rows_ > 0 ? Eigen::VectorXd(sum1_ / double(rows_)) : Eigen::VectorXd(sum1_);
}

int64_t contractionFeatures(const QuantizableLayer& layer)
{
    const int rank = int(layer.weightShape.size());
    const int64_t channels =
        rank ? layer.weightShape[size_t(normalizeAxis(layer.channelAxis, rank, "channel axis"))] : 1;
    return channels ? shapeElementCount(layer.weightShape) / channels : 0;
}

int64_t calibrationFeatures(const QuantizableLayer& layer)
{
    return contractionFeatures(layer) * calibrationGroups(layer);
}

int64_t calibrationGroups(const QuantizableLayer& layer)
{
    return layer.opType == "Conv" ? std::max<int64_t>(layer.groups, 1) : 1;
}

void accumulateLayerInput(const QuantizableLayer& layer, const Node& node, const Tensor& input, InputHessian& hessian)
{
    if (layer.opType == "Conv") {
        addConvRows(layer, node, input, hessian);
        return;
    }
    const int64_t features = hessian.features();
    Tensor x = input.toFloat32();
    if (layer.opType == "Gemm" && node.intAttribute("transA", 0) != 0) {
        if (x.rank() != 2)
            badInput(layer, x, "is not a matrix");
        x = x.permuted({1, 0});
    }
    if (x.rank() < 1 || x.shape().back() != features)
        badInput(layer, x, "does not end in the weight's " + std::to_string(features) + " input features");
    const auto v = x.values<float>();
    const int64_t rows = features ? int64_t(v.size()) / features : 0;
    std::vector<double> chunk(size_t(std::min(rows, kChunkRows) * features));
    for (int64_t start = 0; start < rows; start += kChunkRows) {
        const int64_t count = std::min(kChunkRows, rows - start);
        std::copy(v.begin() + ptrdiff_t(start * features), v.begin() + ptrdiff_t((start + count) * features),
                  chunk.begin());
        hessian.addRows(chunk.data(), count);
    }
}

std::vector<int> channelFirst(int rank, int channelAxis)
{
    std::vector<int> order{channelAxis};
    for (int a = 0; a < rank; ++a)
        if (a != channelAxis)
            order.push_back(a);
    return order;
}

void checkHessian(const Eigen::MatrixXd& hessian, int64_t features, const std::string& who)
{
    if (hessian.rows() != features || hessian.cols() != features)
        throw Error(who + "the Hessian is " + std::to_string(hessian.rows()) + "x" + std::to_string(hessian.cols()) +
                    ", the weight has " + std::to_string(features) + " input features");
    if (!hessian.allFinite())
        throw Error(who + "the Hessian of the calibration inputs holds NaN or Inf");
}

void checkGroupHessians(const std::vector<Eigen::MatrixXd>& hessians, int64_t rows, int64_t features,
                        const std::string& who)
{
    const int64_t groups = int64_t(hessians.size());
    if (groups < 1 || rows % groups != 0)
        throw Error(who + std::to_string(rows) + " output channels cannot form " + std::to_string(groups) +
                    " groups of Hessians");
    for (const Eigen::MatrixXd& h : hessians)
        checkHessian(h, features, who);
}

Eigen::MatrixXd channelRows(const Tensor& weight, int channelAxis)
{
    const Tensor m = weight.permuted(channelFirst(weight.rank(), channelAxis));
    const int64_t rows = weight.shape()[size_t(channelAxis)];
    const int64_t cols = rows ? weight.numel() / rows : 0;
    const auto v = m.values<float>();
    Eigen::MatrixXd out(rows, cols);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
            out(r, c) = double(v[size_t(r * cols + c)]);
    return out;
}

} // namespace qs
