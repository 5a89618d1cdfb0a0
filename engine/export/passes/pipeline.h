#pragma once
// The QDQ clean-up passes in order, repeated until a whole round changes
// nothing: fold constant dequantizations through layout ops, move integer-only
// ops onto the integer tensor, remove DQ → Q pairs that cancel, canonicalize
// zero points, eliminate dead nodes.

#include <vector>

#include "export/qdq_graph.h"

namespace qs {

// One report per pass, its changes summed over the rounds. Throws Error when
// the passes do not settle within a bound on rounds (a pass undoing another).
std::vector<PassReport> runQdqPasses(QdqGraph& graph);

} // namespace qs
