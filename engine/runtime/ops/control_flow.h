#pragma once
// Control flow: If, Loop and Scan. Their bodies are subgraphs (ONNX GraphProto
// attributes), parsed once when the interpreter is built (prepareSubgraphs)
// into interpreters of their own. A subgraph may read values it does not
// define (outer scope): the names are collected through nested subgraphs too,
// the interpreter passes their values to the node after its own inputs, and
// each run hands them to the subgraph as extra graph inputs. A run's observer
// that sees subgraphs (NodeObserver::seesSubgraphs) is passed on to every run
// of a body, whose events carry the body's scope.
//
// Limits on untrusted models (each an Error naming the node):
// - a Loop runs at most kMaxLoopIterations iterations, whatever its trip count
//   says (a PyTorch while-loop states INT64_MAX and stops on its condition);
//   a negative trip count is refused;
// - the scan outputs of one Loop or Scan hold at most kMaxScanOutputBytes;
// - a body whose output count, or a scan output whose shape or type changes
//   between iterations, is refused;
// - a subgraph that does not parse, or uses ops the runtime lacks.
// Sequence- and optional-typed values (test_loop13_seq, test_if_seq) need
// sequences in the runtime, which it has not.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "graph/model.h"
#include "runtime/op_registry.h"

namespace qs {

class Interpreter;

inline constexpr int64_t kMaxLoopIterations = 10'000'000;
inline constexpr size_t kMaxScanOutputBytes = size_t(4) << 30;

// One subgraph attribute of a node, ready to run.
struct Subgraph {
    std::string attribute;                    // "then_branch", "else_branch", "body"
    std::unique_ptr<const Interpreter> graph; // its graph inputs: the formal inputs, then the outer-scope names
    size_t formalInputs = 0;                  // how many of its graph inputs the node binds itself
    std::vector<size_t> outerValues;          // for each outer-scope input: its index in NodeSubgraphs::outerNames
    Subgraph();
    Subgraph(Subgraph&&) noexcept;
    ~Subgraph();
};

// The subgraphs of one node and the outer-scope values they read, in the order
// the interpreter appends them to the node's inputs.
struct NodeSubgraphs {
    std::vector<Subgraph> graphs;
    std::vector<std::string> outerNames;
    const Subgraph* find(std::string_view attribute) const;
};

// Whether a node carries subgraph attributes.
bool hasSubgraphs(const Node& node);
// Parses every subgraph attribute of `node` (of `model`); an Error naming the
// node and the attribute when one does not parse or cannot run. The subgraph
// interpreters take scope numbers from `nextScope` on, in the order
// Model::subgraphs lists them (SubgraphScope).
std::unique_ptr<NodeSubgraphs> prepareSubgraphs(const Model& model, const Node& node, size_t nodeIndex,
                                                size_t& nextScope);

namespace ops {
void ifOp(KernelContext& ctx);
void loop(KernelContext& ctx);
void scan(KernelContext& ctx);
} // namespace ops

} // namespace qs
