#pragma once
// ONNX subgraphs (If branches, Loop and Scan bodies) as models of their own,
// and the layers inside them.
//
// A subgraph may read values it does not define (outer scope). As a model, its
// graph inputs are its own (formal) inputs, then those outer-scope names (also
// the ones its nested subgraphs read), each once, in the order first read. It
// is loaded as the main graph is, constant folding included, without the
// checker (which ran on the whole model) and without shape inference.
//
// The layers of a subgraph (graph/weight_layout.h finds them as in a main
// graph) are listed in the main model after its own, in scope order
// (SubgraphScope): module path `<node's path>/<attribute>/<path inside>`, the
// node's path being what its name gives (graph/module_path.h) or else
// `<op type>_<n>` (the n-th such node without a readable name in its graph):
// `If_0/then_branch/conv`, `Loop_0/body/step_matmul`; nested subgraphs nest.
// A weight may be a tensor of the subgraph (an initializer or a folded
// Constant), added to the main model as `<scope path>/<name>`
// (Model::addSubgraphWeight), or a constant of an enclosing graph read from the
// outer scope, which keeps that graph's name for it (so a layer of the main
// graph reading the same tensor shares it).

#include <cstddef>
#include <string>

#include "graph/model.h"

namespace qs {

struct OnnxSubgraph {
    Model model;
    size_t formalInputs = 0; // model.inputs[formalInputs...] are the outer-scope names
};

// Parses a subgraph attribute's serialized GraphProto (`bytes`) of a node of
// `parent` (whose opsets, IR version and folder it takes). Errors start with
// `where`: one that does not parse, an initializer named like a value read
// from outside or like one of its inputs.
OnnxSubgraph loadOnnxSubgraph(const Model& parent, const std::string& bytes, const std::string& where);

// Fills model.subgraphs (every subgraph attribute of every node, nested ones
// too, in scope order) and appends their layers to model.layers, making every
// path unique and marking shared weights again. A subgraph that does not
// parse is left out with a warning on model.warnings naming the node (the
// interpreter refuses to run the model then, with the same error).
void loadSubgraphLayers(Model& model);

} // namespace qs
