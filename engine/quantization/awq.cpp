#include "quantization/awq.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <tuple>
#include <unordered_map>

#include <tbb/parallel_for.h>

#include "core/block_layout.h"
#include "core/error.h"
#include "numerics/qtype.h"
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

// One row's part of a weight group: features [begin, end) of row `row`.
struct Segment {
    int64_t group, row, begin, end;
};

// The search of a clipping ratio per group on the scaled weight `scaled` (W·s),
// in place on `best`: for each ratio, every group clamped by it and rounded on
// the grid, and each group's loss e_G·H_GG·e_Gᵀ summed over its rows. A grouped
// Conv's rows take their own Conv group's Hessian (`hessians`, one per Conv group,
// the rows split into equal parts in order).
void searchClipping(AwqResult& best, const Eigen::MatrixXd& wRows, int channelAxis, const std::vector<int64_t>& channel,
                    const std::vector<float>& s32, const std::vector<Eigen::MatrixXd>& hessians,
                    const AwqClipGroups& groups, const GridRounding& roundOnGrid, std::string_view tensorName,
                    const CancellationToken& cancel)
{
    const Tensor& scaled = best.scaled;
    const auto sv = scaled.values<float>();
    const size_t n = sv.size();
    if (groups.groupOf.size() != n || groups.count < 1)
        throw Error(who(tensorName) + "the clipping groups cover " + std::to_string(groups.groupOf.size()) +
                    " elements, the weight has " + std::to_string(n));
    const int64_t rows = wRows.rows(), features = wRows.cols();
    const int64_t convGroupRows = rows / int64_t(hessians.size());

    // Each element's row and feature: the weight with its channel axis first, row-major, is [rows, features].
    std::vector<int64_t> rowOf(n), featureOf(n);
    {
        std::vector<int64_t> iota(n);
        std::iota(iota.begin(), iota.end(), int64_t(0));
        const Tensor own = Tensor::fromVector(DType::I64, scaled.shape(), iota);
        const Tensor first = own.permuted(channelFirst(scaled.rank(), channelAxis));
        const auto fv = first.values<int64_t>();
        for (size_t p = 0; p < n; ++p) {
            rowOf[size_t(fv[p])] = int64_t(p) / features;
            featureOf[size_t(fv[p])] = int64_t(p) % features;
        }
    }
    // Each group's range and its segments (a group's features in a row must be a contiguous range).
    const size_t count = size_t(groups.count);
    std::vector<float> lo(count, INFINITY), hi(count, -INFINITY);
    std::unordered_map<int64_t, size_t> segmentOf;
    std::vector<Segment> segments;
    std::vector<int64_t> members;
    for (size_t k = 0; k < n; ++k) {
        const int64_t g = groups.groupOf[k];
        if (g < 0 || g >= groups.count)
            throw Error(who(tensorName) + "a clipping group index is out of range");
        const float v = groups.symmetric ? std::abs(sv[k]) : sv[k];
        lo[size_t(g)] = std::min(lo[size_t(g)], v);
        hi[size_t(g)] = std::max(hi[size_t(g)], v);
        const auto [it, added] = segmentOf.try_emplace(g * rows + rowOf[k], segments.size());
        if (added) {
            segments.push_back({g, rowOf[k], featureOf[k], featureOf[k] + 1});
            members.push_back(0);
        }
        Segment& seg = segments[it->second];
        seg.begin = std::min(seg.begin, featureOf[k]);
        seg.end = std::max(seg.end, featureOf[k] + 1);
        ++members[it->second];
    }
    // The segments by Conv group and feature range, so that each range's rows take one matrix product.
    std::map<std::tuple<int64_t, int64_t, int64_t>, std::vector<size_t>> byRange;
    for (size_t i = 0; i < segments.size(); ++i) {
        if (members[i] != segments[i].end - segments[i].begin)
            throw Error(who(tensorName) + "the clipping search takes groups that are ranges of input features in "
                                          "each row (per tensor, per channel, tiles along the input)");
        byRange[{segments[i].row / convGroupRows, segments[i].begin, segments[i].end}].push_back(i);
    }

    // The bounds of ratio r for group g.
    auto bounds = [&](int i, size_t g) {
        const double r = awqClipRatio(i);
        if (groups.symmetric) {
            const float b = float(r * double(hi[g]));
            return std::pair(-b, b);
        }
        return std::pair(float(r * double(lo[g])), float(r * double(hi[g])));
    };
    // W·s clamped group by group by ratio index[g], rounded on the grid, and divided by s again.
    auto clampAndRound = [&](auto&& indexOf) {
        Tensor clipped(DType::F32, scaled.shape());
        auto cv = clipped.mutableValues<float>();
        for (size_t k = 0; k < n; ++k) {
            const size_t g = size_t(groups.groupOf[k]);
            const auto [a, b] = bounds(indexOf(g), g);
            cv[k] = std::clamp(sv[k], a, b);
        }
        auto [quantization, grid] = roundOnGrid(clipped);
        Tensor rounded(DType::F32, scaled.shape());
        const auto gv = grid.values<float>();
        auto rv = rounded.mutableValues<float>();
        for (size_t k = 0; k < n; ++k)
            rv[k] = gv[k] / s32[size_t(channel[k])];
        return std::tuple(std::move(quantization), std::move(grid), std::move(rounded), std::move(clipped));
    };

    std::vector<std::vector<double>> losses(static_cast<size_t>(kAwqClipRatios));
    tbb::parallel_for(0, kAwqClipRatios, [&](int i) {
        if (cancel.isCancelled())
            return;
        const auto [quantization, grid, rounded, clipped] = clampAndRound([i](size_t) { return i; });
        const Eigen::MatrixXd e = wRows - channelRows(rounded, channelAxis);
        std::vector<double> loss(count, 0.0);
        for (const auto& [range, list] : byRange) {
            const auto& [convGroup, begin, end] = range;
            const int64_t length = end - begin;
            const Eigen::MatrixXd& hessian = hessians[size_t(convGroup)];
            Eigen::MatrixXd part(Eigen::Index(list.size()), length);
            for (size_t j = 0; j < list.size(); ++j)
                part.row(Eigen::Index(j)) = e.row(segments[list[j]].row).segment(begin, length);
            const Eigen::VectorXd quadratic =
                ((part * hessian.block(begin, begin, length, length)).cwiseProduct(part)).rowwise().sum();
            for (size_t j = 0; j < list.size(); ++j)
                loss[size_t(segments[list[j]].group)] += quadratic(Eigen::Index(j));
        }
        losses[size_t(i)] = std::move(loss);
    });
    cancel.check();

    best.clipIndex.assign(count, 0);
    for (size_t g = 0; g < count; ++g)
        for (int i = 1; i < kAwqClipRatios; ++i)
            if (losses[size_t(i)][g] < losses[size_t(best.clipIndex[g])][g])
                best.clipIndex[g] = i;
    auto [quantization, grid, rounded, clipped] = clampAndRound([&](size_t g) { return best.clipIndex[g]; });
    best.quantization = std::move(quantization);
    best.grid = std::move(grid);
    best.rounded = std::move(rounded);
    best.clipped = std::move(clipped);
}

} // namespace

AwqClipGroups awqClipGroups(const Shape& ownShape, const std::vector<int>& axes, const QuantizationSpec& spec,
                            std::string_view tensorName)
{
    if (qtypeInfo(spec.qtype).kind != QKind::Integer)
        throw Error(who(tensorName) + "clipping rounds onto an integer grid, and " +
                    std::string(qtypeName(spec.qtype)) + " is not an integer type");
    if (spec.method.kind != CalibrationKind::AbsMax && spec.method.kind != CalibrationKind::MinMax)
        throw Error(who(tensorName) +
                    "the clipping search shrinks the range absmax and minmax take from the weight, "
                    "and weight_calibration " +
                    spec.method.toString() +
                    " chooses its own range; use absmax or minmax, or turn clipping off (awq,20,0)");
    if (!axes.empty() && axes.size() != ownShape.size())
        throw Error(who(tensorName) + "the axis order does not match the weight's rank");
    Shape shape = ownShape;
    for (size_t i = 0; i < axes.size(); ++i)
        shape[i] = ownShape[size_t(axes[i])];
    const BlockLayout layout = layoutFor(shape, spec);
    std::vector<int64_t> ids(size_t(shapeElementCount(shape)));
    for (size_t k = 0; k < ids.size(); ++k)
        ids[k] = layout.groupOf(int64_t(k));
    Tensor t = Tensor::fromVector(DType::I64, shape, ids);
    if (!axes.empty())
        t = t.permuted(inversePermutation(axes));
    const auto tv = t.values<int64_t>();
    AwqClipGroups g;
    g.groupOf.assign(tv.begin(), tv.end());
    g.count = layout.groupCount();
    g.symmetric = spec.method.resolveSymmetric(spec.symmetric);
    return g;
}

AwqResult awqQuantize(const Tensor& weight, int channelAxis, int inputAxis, const WeightAlgorithm& algorithm,
                      const Eigen::MatrixXd& hessian, const Eigen::VectorXd& meanAbs, const GridRounding& roundOnGrid,
                      std::string_view tensorName, const CancellationToken& cancel, const AwqClipGroups* clipGroups)
{
    return awqQuantize(weight, channelAxis, inputAxis, algorithm, std::vector<Eigen::MatrixXd>{hessian}, meanAbs,
                       roundOnGrid, tensorName, cancel, clipGroups);
}

AwqResult awqQuantize(const Tensor& weight, int channelAxis, int inputAxis, const WeightAlgorithm& algorithm,
                      const std::vector<Eigen::MatrixXd>& hessians, const Eigen::VectorXd& meanAbs,
                      const GridRounding& roundOnGrid, std::string_view tensorName, const CancellationToken& cancel,
                      const AwqClipGroups* clipGroups)
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
    if (algorithm.awqClip && !clipGroups)
        throw Error(who(tensorName) + "the clipping search needs the weight's groups");

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
    std::vector<float> bestS;
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
            bestS = s32;
        }
    }
    if (algorithm.awqClip)
        searchClipping(best, wRows, channelAxis, channel, bestS, hessians, *clipGroups, roundOnGrid, tensorName,
                       cancel);
    else
        best.clipped = best.scaled;
    return best;
}

} // namespace qs
