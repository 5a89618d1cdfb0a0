#pragma once
// A test helper for suites that build model variants: the same graph with some
// initializers replaced (a reference model with fake-quantized weights, a model
// with degenerate weights).

#include <map>
#include <string>

#include "graph/model.h"

namespace qs::test {

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
