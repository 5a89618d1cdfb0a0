#pragma once
// A rule's `algorithm`: how a layer's weights are rounded onto the grid its
// scales define (docs/algorithms.md). Written like a calibration method string:
//   rtn                       round to nearest, each weight on its own (default)
//   gptq[,damp[,act_order]]   GPTQ (Frantar et al. 2022): rounds the layer's input
//                             columns one at a time and spreads each rounding error
//                             over the columns not yet rounded, weighted by the
//                             inverse Hessian 2·XᵀX of the layer's calibration inputs.
//                             damp: fraction of mean(diag H) added to the diagonal
//                             (default 0.01); act_order: 1 rounds the columns in
//                             descending diag(H) (default), 0 in their own order.
//   awq[,grid[,clip]]         AWQ (Lin et al. 2023): scales the weight's input
//                             channel j by s_j = mean|x_j|^α before rounding and
//                             divides the rounded weight by s_j again, α the best of
//                             `grid` points i/grid, i = 0..grid-1 (default 20), on the
//                             layer's output error over its calibration inputs; clip = 1
//                             (default) then shrinks each group's range by the best of
//                             20 ratios 1 - i/40 on the group's own output error, 0 does not.
//   adaround[,iters[,lambda]] AdaRound (Nagel et al. 2020): learns, per weight, whether
//                             it rounds up or down, minimising the layer's output error
//                             on its calibration inputs plus lambda times an annealed
//                             regulariser that drives each choice to 0 or 1 (iters
//                             default 1000 Adam steps, lambda default 0.01).

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace qs {

enum class WeightAlgorithmKind : uint8_t { Rtn, Gptq, Awq, Adaround };

struct WeightAlgorithmInfo {
    WeightAlgorithmKind kind;
    std::string_view name;    // "gptq"
    std::string_view syntax;  // "gptq[,damp[,act_order]]"
    std::string_view summary; // one line for docs and tooltips
};
// The single table of algorithms, in the order docs and the GUI list them.
std::span<const WeightAlgorithmInfo> allWeightAlgorithms();

struct WeightAlgorithm {
    WeightAlgorithmKind kind = WeightAlgorithmKind::Rtn;
    double dampening = 0.01;       // gptq: fraction of mean(diag H) added to H's diagonal, in (0, 1]
    bool actOrder = true;          // gptq: columns in descending diag(H) order
    int awqGrid = 20;              // awq: α is searched over i/awqGrid, i = 0..awqGrid-1, in [1, 1000]
    bool awqClip = true;           // awq: search a clipping ratio per weight group after the scales
    int adaroundIterations = 1000; // adaround: Adam steps, in [1, 100000]
    double adaroundLambda = 0.01;  // adaround: weight of the rounding regulariser, in [0, 1000]

    // Parses "rtn", "gptq", "gptq,0.05", "gptq,0.01,0", "awq", "awq,10", "awq,20,0", "adaround", "adaround,500,0.1";
    // throws Error quoting the text and saying what to write.
    static WeightAlgorithm parse(std::string_view text);
    // Canonical text that parse() reads back to the same algorithm.
    std::string toString() const;
    // The algorithm's name without its options: "rtn", "gptq", "awq", "adaround".
    std::string_view name() const;
    // Whether the algorithm reads the layer's calibration inputs (everything but rtn).
    bool needsCalibration() const { return kind != WeightAlgorithmKind::Rtn; }

    bool operator==(const WeightAlgorithm&) const = default;
};

} // namespace qs
