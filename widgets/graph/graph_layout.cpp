#include "widgets/graph/graph_layout.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <utility>

#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>

#include "core/error.h"
#include "graph/model.h"
#include "graph/module_path.h"
#include "widgets/graph/repeated_blocks.h"

namespace qs {

namespace {

// Graphviz keeps global state (its context, error handlers, the cgraph
// allocators' dictionaries): one layout at a time in the whole process.
std::mutex& graphvizMutex()
{
    static std::mutex m;
    return m;
}

// The context loads the layout plugins once; it lives as long as the process.
GVC_t* graphvizContext()
{
    static GVC_t* gvc = gvContext();
    return gvc;
}

constexpr size_t kMaxShortName = 24;

// The trailing components of a path that fit in kMaxShortName characters (at
// least the last one, cut at the front when it alone is longer).
std::string shortPath(const std::string& path)
{
    const size_t last = path.rfind('/');
    size_t start = last == std::string::npos ? 0 : last + 1;
    while (start > 0) {
        const size_t before = start >= 2 ? path.rfind('/', start - 2) : std::string::npos;
        const size_t candidate = before == std::string::npos ? 0 : before + 1;
        if (path.size() - candidate > kMaxShortName)
            break;
        start = candidate;
    }
    std::string tail = path.substr(start);
    if (tail.size() > kMaxShortName)
        tail = "\u2026" + tail.substr(tail.size() - (kMaxShortName - 1));
    return tail;
}

// Points of a label line, about what the view's 9 pt font takes: dot places, the view draws.
double textWidth(std::string_view s)
{
    size_t chars = 0;
    for (const char c : s) // UTF-8: count lead bytes only
        chars += (static_cast<unsigned char>(c) & 0xc0) != 0x80;
    return 6.4 * double(chars);
}

// cgraph's API takes char* it does not modify.
char* cs(const char* s)
{
    return const_cast<char*>(s);
}

} // namespace

std::optional<size_t> GraphLayout::nodeOfLayer(size_t layer) const
{
    for (size_t i = 0; i < nodes.size(); ++i)
        if (nodes[i].layer == layer)
            return i;
    return std::nullopt;
}

GraphLayout layoutGraph(const Model& model, const std::vector<RepeatedRun>& runs, const std::set<size_t>& folded,
                        const CancellationToken& cancel, const ProgressCallback& progress)
{
    const auto started = std::chrono::steady_clock::now();
    const std::string file = model.sourcePath.filename().string();
    if (model.weightsOnly || model.nodes.empty())
        throw Error(file + " has no graph to draw (a checkpoint of named tensors: the Layers table lists its layers)");

    GraphLayout layout;
    layout.foldedRuns = folded;
    layout.nodeOfGraphNode.assign(model.nodes.size(), 0);

    // Layers by node (main graph only).
    std::vector<std::optional<size_t>> layerOfNode(model.nodes.size());
    for (size_t l = 0; l < model.layers.size(); ++l)
        if (model.layers[l].scope == 0 && model.layers[l].node && *model.layers[l].node < model.nodes.size())
            layerOfNode[*model.layers[l].node] = l;

    // Nodes: inputs, then graph nodes (a folded run once), then outputs.
    std::vector<std::optional<size_t>> runOfNode(model.nodes.size());
    for (const size_t r : folded) {
        if (r >= runs.size())
            throw Error("fold: run " + std::to_string(r) + " of " + std::to_string(runs.size()) + " does not exist");
        for (size_t n = runs[r].firstNode(); n < runs[r].endNode() && n < model.nodes.size(); ++n)
            runOfNode[n] = r;
    }
    size_t count = model.inputs.size() + model.outputs.size();
    for (size_t n = 0; n < model.nodes.size(); ++n)
        count += !runOfNode[n] || n == runs[*runOfNode[n]].firstNode();
    if (count > kMaxLayoutNodes)
        throw Error(file + ": the graph has " + std::to_string(count) +
                    " nodes to draw; the graph view lays out at most " + std::to_string(kMaxLayoutNodes) +
                    " (fold repeated blocks to draw fewer)");
    layout.nodes.reserve(count);

    std::unordered_map<std::string, size_t> producer; // value -> layout node
    for (const ValueInfo& in : model.inputs) {
        LayoutNode node;
        node.kind = LayoutNode::Kind::Input;
        node.opType = "input";
        node.name = in.name;
        node.shortName = shortPath(in.name);
        producer[in.name] = layout.nodes.size();
        layout.nodes.push_back(std::move(node));
    }
    for (size_t n = 0; n < model.nodes.size(); ++n) {
        const Node& g = model.nodes[n];
        if (runOfNode[n] && n != runs[*runOfNode[n]].firstNode()) {
            layout.nodeOfGraphNode[n] = layout.nodeOfGraphNode[runs[*runOfNode[n]].firstNode()];
        } else if (runOfNode[n]) {
            const RepeatedRun& run = runs[*runOfNode[n]];
            LayoutNode node;
            node.kind = LayoutNode::Kind::FoldedRun;
            node.opType = "\u00d7" + std::to_string(run.blocks.size()) + " blocks";
            node.name = run.family;
            node.shortName = run.label();
            node.run = *runOfNode[n];
            layout.nodeOfGraphNode[n] = layout.nodes.size();
            layout.nodes.push_back(std::move(node));
        } else {
            LayoutNode node;
            node.opType = g.opType;
            node.name = !g.name.empty() ? g.name : !g.outputs.empty() ? g.outputs.front() : g.opType;
            node.graphNode = n;
            node.layer = layerOfNode[n];
            std::string path =
                node.layer ? model.layers[*node.layer].modulePath : modulePathFromNodeName(g.name, g.opType);
            node.shortName = shortPath(path.empty() ? node.name : path);
            layout.nodeOfGraphNode[n] = layout.nodes.size();
            layout.nodes.push_back(std::move(node));
        }
        for (const std::string& out : g.outputs)
            if (!out.empty())
                producer[out] = layout.nodeOfGraphNode[n];
    }

    // Edges: one per (producer, consumer) pair.
    std::map<std::pair<size_t, size_t>, size_t> edgeIndex;
    auto addEdge = [&](const std::string& value, size_t to) {
        const auto p = producer.find(value);
        if (p == producer.end() || p->second == to)
            return;
        const auto [it, added] = edgeIndex.try_emplace({p->second, to}, layout.edges.size());
        if (added)
            layout.edges.push_back({p->second, to, {}, {}, {}});
        auto& values = layout.edges[it->second].values;
        if (std::find(values.begin(), values.end(), value) == values.end())
            values.push_back(value);
    };
    for (size_t n = 0; n < model.nodes.size(); ++n)
        for (const std::string& in : model.nodes[n].inputs)
            if (!in.empty())
                addEdge(in, layout.nodeOfGraphNode[n]);
    for (const ValueInfo& out : model.outputs) {
        LayoutNode node;
        node.kind = LayoutNode::Kind::Output;
        node.opType = "output";
        node.name = out.name;
        node.shortName = shortPath(out.name);
        layout.nodes.push_back(std::move(node));
        addEdge(out.name, layout.nodes.size() - 1);
    }
    for (LayoutNode& node : layout.nodes) {
        const bool io = node.kind == LayoutNode::Kind::Input || node.kind == LayoutNode::Kind::Output;
        node.width = std::max(54.0, std::max(textWidth(node.opType), textWidth(node.shortName)) + 14);
        // A layer's box has a third line: the value of the metric it is coloured by.
        node.height = io ? 26 : node.layer ? 46 : 34;
    }
    cancel.check();
    if (progress)
        progress(0.1, "laying out " + std::to_string(layout.nodes.size()) + " nodes");

    {
        std::lock_guard lock(graphvizMutex());
        GVC_t* gvc = graphvizContext();
        Agraph_t* g = agopen(cs("quantscope"), Agdirected, nullptr);
        agattr(g, AGRAPH, cs("rankdir"), cs("TB"));
        agattr(g, AGRAPH, cs("nodesep"), cs("0.25"));
        agattr(g, AGRAPH, cs("ranksep"), cs("0.3"));
        Agsym_t* shape = agattr(g, AGNODE, cs("shape"), cs("box"));
        Agsym_t* fixed = agattr(g, AGNODE, cs("fixedsize"), cs("true"));
        Agsym_t* label = agattr(g, AGNODE, cs("label"), cs(""));
        Agsym_t* width = agattr(g, AGNODE, cs("width"), cs("1"));
        Agsym_t* height = agattr(g, AGNODE, cs("height"), cs("0.5"));
        (void)shape, (void)fixed, (void)label;
        std::vector<Agnode_t*> gvNodes(layout.nodes.size());
        for (size_t i = 0; i < layout.nodes.size(); ++i) {
            const std::string id = "n" + std::to_string(i);
            gvNodes[i] = agnode(g, cs(id.c_str()), 1);
            agxset(gvNodes[i], width, cs(std::to_string(layout.nodes[i].width / 72.0).c_str()));
            agxset(gvNodes[i], height, cs(std::to_string(layout.nodes[i].height / 72.0).c_str()));
        }
        std::vector<Agedge_t*> gvEdges(layout.edges.size());
        for (size_t i = 0; i < layout.edges.size(); ++i)
            gvEdges[i] = agedge(g, gvNodes[layout.edges[i].from], gvNodes[layout.edges[i].to], nullptr, 1);

        if (gvLayout(gvc, g, "dot") != 0) {
            agclose(g);
            throw Error(file + ": Graphviz could not lay out the graph");
        }
        const boxf bb = GD_bb(g);
        auto point = [&](pointf p) { return LayoutPoint{p.x - bb.LL.x, bb.UR.y - p.y}; };
        layout.width = bb.UR.x - bb.LL.x;
        layout.height = bb.UR.y - bb.LL.y;
        for (size_t i = 0; i < layout.nodes.size(); ++i) {
            const LayoutPoint c = point(ND_coord(gvNodes[i]));
            layout.nodes[i].x = c.x;
            layout.nodes[i].y = c.y;
        }
        for (size_t i = 0; i < layout.edges.size(); ++i) {
            const splines* spl = ED_spl(gvEdges[i]);
            if (!spl || spl->size < 1)
                continue;
            const bezier& bz = spl->list[0];
            LayoutEdge& edge = layout.edges[i];
            edge.spline.reserve(bz.size);
            for (size_t k = 0; k < size_t(bz.size); ++k)
                edge.spline.push_back(point(bz.list[k]));
            if (bz.eflag)
                edge.arrowEnd = point(bz.ep);
        }
        gvFreeLayout(gvc, g);
        agclose(g);
    }
    cancel.check();
    layout.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (progress)
        progress(1.0, "laid out");
    return layout;
}

} // namespace qs
