#pragma once
// Test helpers for suites that build models: nodes of a small graph, and model
// variants, the same graph with some initializers replaced (a reference model
// with fake-quantized weights, a model with degenerate weights).

#include <map>
#include <string>
#include <vector>

#include "graph/model.h"

namespace qs::test {

// A node of one output, as a graph built in a test states it.
inline Node graphNode(std::string name, std::string op, std::vector<std::string> inputs, std::string output)
{
    Node n;
    n.name = std::move(name);
    n.opType = std::move(op);
    n.inputs = std::move(inputs);
    n.outputs = {std::move(output)};
    return n;
}

// `m` with the initializers named in `replaced` swapped for the given tensors.
inline Model withInitializers(const Model& m, const std::map<std::string, Tensor>& replaced)
{
    Model out;
    out.sourcePath = m.sourcePath;
    out.format = m.format;
    out.irVersion = m.irVersion;
    out.opsetImports = m.opsetImports;
    out.inputs = m.inputs;
    out.outputs = m.outputs;
    out.valueInfos = m.valueInfos;
    out.nodes = m.nodes;
    out.layers = m.layers;
    for (const NamedTensor& t : m.initializers()) {
        auto it = replaced.find(t.name);
        out.addInitializer(t.name, it == replaced.end() ? t.tensor : it->second);
    }
    return out;
}

} // namespace qs::test
