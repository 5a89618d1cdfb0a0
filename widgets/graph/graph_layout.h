#pragma once
// The layout of a model's graph for the graph view, computed by Graphviz's dot
// (top to bottom). Qt-free and GUI-free: plain positions, sizes and edge
// splines in points, y growing downwards, so it runs as a job on a worker and
// a test can check it without a window.
//
// One layout node per node of the main graph (an If/Loop/Scan node stands for
// its subgraphs), one per graph input and output; one edge per (producer,
// consumer) pair, listing the values it carries. Initializers (weights,
// constants) are not drawn: they belong to the node that reads them. A folded
// run of repeated blocks (repeated_blocks.h) is one node; edges into and out of
// it are merged, edges inside it dropped.
//
// Graphviz is not thread-safe: every layout in the process is serialised by
// one mutex. dot cannot be interrupted; cancellation is checked before and
// after it. A graph of more than kMaxLayoutNodes nodes is refused with an
// Error saying so (docs/user-guide.md gives the limit and the measured times).

#include <cstddef>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/cancellation.h"

namespace qs {

class Model;

// Layouts above this many nodes (after folding) are refused rather than left to run for minutes.
inline constexpr size_t kMaxLayoutNodes = 5000;

struct LayoutPoint {
    double x = 0, y = 0;
};

struct LayoutNode {
    enum class Kind { Op, Input, Output, FoldedRun };
    Kind kind = Kind::Op;
    std::string opType;    // Op: the op type; FoldedRun: "×N blocks"; Input/Output: "input"/"output"
    std::string name;      // Op: the node's name (or its first output); Input/Output: the value; FoldedRun: the family
    std::string shortName; // the second line of the label
    std::optional<size_t> graphNode; // Op: index into Model::nodes
    std::optional<size_t> layer;     // Op of a quantizable layer: index into Model::layers
    std::optional<size_t> run;       // FoldedRun: index into the runs the layout was given
    double x = 0, y = 0;             // centre
    double width = 0, height = 0;
};

struct LayoutEdge {
    size_t from = 0, to = 0;         // layout node indices
    std::vector<std::string> values; // the values it carries (one, usually)
    // dot's cubic B-spline control points (1 + 3k points), from `from` to `to`;
    // the arrow head ends at `arrowEnd` when dot drew one.
    std::vector<LayoutPoint> spline;
    std::optional<LayoutPoint> arrowEnd;
};

struct GraphLayout {
    std::vector<LayoutNode> nodes;
    std::vector<LayoutEdge> edges;
    double width = 0, height = 0; // the bounding box, from (0, 0)
    // Model node -> layout node (the folded node for a node inside a folded run).
    std::vector<size_t> nodeOfGraphNode;
    std::set<size_t> foldedRuns; // which runs (indices into the runs given) are folded
    double seconds = 0;          // wall time of the whole layout
    // The layout node of a quantizable layer, when it is drawn on its own.
    std::optional<size_t> nodeOfLayer(size_t layer) const;
};

struct RepeatedRun;

// Lays out the main graph of `model`, folding `runs[i]` for each i in `folded`.
// Throws Error for a model without a graph (weights only), for more than
// kMaxLayoutNodes nodes, or when Graphviz fails; Cancelled when cancelled.
GraphLayout layoutGraph(const Model& model, const std::vector<RepeatedRun>& runs, const std::set<size_t>& folded,
                        const CancellationToken& cancel = {}, const ProgressCallback& progress = {});

} // namespace qs
