#pragma once
// The Hessian GPTQ needs of one layer, H = 2·XᵀX / n, accumulated while the
// calibration run streams the layer's inputs (runtime/activation_calibration.h):
// X holds one row per input vector the weight contracts with — MatMul and Gemm:
// the rows of the data input; Conv: the im2col patches (input channel major,
// then kernel rows and columns, the order of the weight's [O, I, k...] axes).
// Memory: features² doubles per layer (in × in), whatever the data size.
// Beside H it keeps Σ|x| per feature, for AWQ's activation scales (quantization/awq.h),
// and Σx per feature, for bias correction (quantization/bias_correction.h).
// A grouped Conv (depthwise included) contracts each output channel with its own
// group's inputs only, so its accumulator holds the im2col features of every
// input channel (C·k…, group after group) and one Hessian per group: H_g over
// group g's (C/G)·k… features, the diagonal blocks of the whole Hessian (the
// blocks across groups are never read, so never summed). Memory: G·F_g² doubles,
// F_g = (C/G)·k…, i.e. (C·k…)·F_g, which is at most what one group's worth of an
// ungrouped Conv would cost (a depthwise 3×3 Conv of 64 channels: 64 9×9 blocks,
// 41 KiB). The groups' blocks are summed in parallel (oneTBB), each tile of each
// block one call of gemm's Gram kernels: the same bits whatever the thread count.

#include <cstdint>
#include <map>
#include <memory>

#include <string>
#include <vector>

#include <Eigen/Core>

#include "core/tensor.h"
#include "graph/layer.h"
#include "graph/model.h"

namespace qs {

class InputHessian {
public:
    // `withHessian` false keeps only the sums of x and |x| per feature. `groups`
    // (≥ 1, dividing `features`): the features are that many groups of equal size,
    // each with its own Hessian (a grouped Conv's). Throws Error otherwise.
    explicit InputHessian(int64_t features, bool withHessian = true, int64_t groups = 1);
    int64_t features() const { return int64_t(sum1_.rows()); }
    int64_t groups() const { return groups_; }
    int64_t groupFeatures() const { return features() / groups_; }
    bool hasHessian() const { return withHessian_; }
    int64_t rows() const { return rows_; }
    // Adds `count` rows of features() doubles each, row-major.
    void addRows(const double* rows, int64_t count);
    // 2·X_gᵀX_g / n over every row added (zero when none was), X_g the columns of
    // group `group` (0 … groups() − 1; with one group, the whole). Throws Error when
    // only the means were kept or the group is out of range.
    Eigen::MatrixXd hessian(int64_t group = 0) const;
    // hessian(g) for every group, in order.
    std::vector<Eigen::MatrixXd> hessians() const;
    // mean |x| of each feature over every row added (zero when none was).
    Eigen::VectorXd meanAbs() const;
    // mean x of each feature over every row added (zero when none was).
    Eigen::VectorXd mean() const;

private:
    std::vector<Eigen::MatrixXd> sums_; // X_gᵀX_g per group, lower triangles kept current
    Eigen::VectorXd absSum_;            // Σ|x| per feature
    Eigen::VectorXd sum1_;              // Σx per feature
    int64_t rows_ = 0;
    int64_t groups_ = 1;
    bool withHessian_ = true;
};

// Per plan layer, its Hessian (layers whose algorithm reads calibration inputs).
using LayerHessians = std::map<size_t, std::shared_ptr<const InputHessian>>;

// The number of input features the weight of `layer` contracts: its element
// count over its output channels.
int64_t contractionFeatures(const QuantizableLayer& layer);

// The number of features the calibration accumulator of `layer` holds:
// contractionFeatures, times the groups of a grouped Conv (the features of
// every group, group after group).
int64_t calibrationFeatures(const QuantizableLayer& layer);

// The groups of the calibration accumulator of `layer`: a Conv's groups, else 1.
int64_t calibrationGroups(const QuantizableLayer& layer);

// Adds the rows of `input` (the node's data input, any float dtype) as layer
// `layer` at node `node` contracts them. Throws Error naming the layer for an
// input whose shape the layer cannot contract.
void accumulateLayerInput(const QuantizableLayer& layer, const Node& node, const Tensor& input, InputHessian& hessian);

// A float32 weight as a matrix [O, F]: its channel axis (in range) first, the other axes in
// order as the columns — the Hessian's feature order.
Eigen::MatrixXd channelRows(const Tensor& weight, int channelAxis);

// The axis permutation channelRows uses: `channelAxis` (in range) first, the others in order.
std::vector<int> channelFirst(int rank, int channelAxis);

// Throws Error, its message starting with `who`, unless `hessian` is a finite
// matrix of `features` × `features`.
void checkHessian(const Eigen::MatrixXd& hessian, int64_t features, const std::string& who);

// Throws Error, its message starting with `who`, unless `hessians` is one or
// more finite `features` × `features` matrices whose count divides `rows` (the
// weight's output channels: group g's rows are the g-th of equal parts).
void checkGroupHessians(const std::vector<Eigen::MatrixXd>& hessians, int64_t rows, int64_t features,
                        const std::string& who);

} // namespace qs
