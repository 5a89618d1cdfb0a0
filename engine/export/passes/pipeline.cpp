#include "export/passes/pipeline.h"

#include "core/error.h"
#include "export/passes/canonicalize_zero_points.h"
#include "export/passes/dead_nodes.h"
#include "export/passes/fold_dequantize_through_layout.h"
#include "export/passes/move_integer_ops.h"
#include "export/passes/remove_dequantize_quantize.h"

namespace qs {

std::vector<PassReport> runQdqPasses(QdqGraph& graph)
{
    using Pass = PassReport (*)(QdqGraph&);
    static constexpr Pass kPasses[] = {foldDequantizeThroughLayout, moveIntegerOps, removeDequantizeQuantizePairs,
                                       canonicalizeZeroPoints, eliminateDeadNodes};
    constexpr int kMaxRounds = 32;
    std::vector<PassReport> total;
    for (int round = 0; round < kMaxRounds; ++round) {
        bool changed = false;
        for (size_t p = 0; p < std::size(kPasses); ++p) {
            graph.sortTopologically();
            PassReport r = kPasses[p](graph);
            if (round == 0)
                total.push_back({r.pass, 0, {}});
            total[p].changes += r.changes;
            total[p].nodes.insert(total[p].nodes.end(), r.nodes.begin(), r.nodes.end());
            changed |= r.changes > 0;
        }
        if (!changed)
            return total;
    }
    throw Error("ONNX export: the graph passes did not settle after " + std::to_string(kMaxRounds) + " rounds");
}

} // namespace qs
