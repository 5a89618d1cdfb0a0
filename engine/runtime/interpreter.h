#pragma once
// Runs a model IR in float: nodes in the model's (topological) order, each
// through its kernel from the op table (runtime/op_registry.h). Initializers are
// inputs like any other; every intermediate value is freed right after its last
// consumer has run (graph outputs are kept).

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/cancellation.h"
#include "core/tensor.h"
#include "graph/model.h"
#include "quant/scale.h"
#include "runtime/op_registry.h"

namespace qs {

// What a node observer is shown around one node.
struct NodeEvent {
    // The graph the node is in: 0 = the model's main graph, else the subgraph
    // (If/Loop/Scan body) of that number (Model::subgraphs; SubgraphScope says
    // how they are numbered). nodeIndex counts the nodes of that graph.
    size_t scope = 0;
    size_t nodeIndex = 0;
    const Node* node = nullptr;
    int64_t opset = 0;
    // The node's inputs; an absent optional input (empty name in node->inputs)
    // is an empty default Tensor. In beforeNode an observer may replace a
    // present input (a fake-quantized weight or activation): the kernel sees the
    // replacement, the stored value is unchanged.
    std::span<Tensor> inputs;
    // beforeNode only, one per input: nonzero where nothing reads that input's
    // value after this node and nothing else holds its storage (the run handed
    // the value itself over): the observer may then overwrite its elements in
    // place instead of allocating a replacement. Empty when there are none.
    std::span<const char> ownedInputs;
    // beforeNode only, one per input: the input value's smallest and largest
    // element, where the observer asked for them (wantsExtremesOf) and the
    // kernel that wrote the value gathered them; nullptr elsewhere (then the
    // observer reads the tensor). Only ever set for finite float32 values.
    std::span<const Range* const> inputExtremes;
    // afterNode only: what the kernel wrote (empty slots for unused outputs).
    std::span<Tensor> outputs;
    // Values held by the run at this moment, initializers not counted (a
    // check on the memory plan).
    size_t liveValues = 0;
};

// Called around every node of a run (calibration observers, quantization
// hooks). Without an observer a run pays nothing for this.
class NodeObserver {
public:
    virtual ~NodeObserver() = default;
    virtual void beforeNode(NodeEvent& event) { (void)event; }
    virtual void afterNode(NodeEvent& event) { (void)event; }
    // Whether the observer must see every node as the model states it. One that
    // returns false lets the run fold an activation into the Conv before it
    // (Conv -> Relu as one step): the Conv's events then show its inputs as
    // usual and, after it, the activated output; the activation node gets no
    // events. Observers of layer inputs only (calibration, fake-quant) allow it.
    virtual bool needsEveryNode() const { return true; }
    // Whether the observer is also shown the nodes of subgraphs (If branches,
    // Loop and Scan bodies, every iteration), with NodeEvent::scope set. One
    // that returns false (the default) sees the main graph's nodes only.
    virtual bool seesSubgraphs() const { return false; }
    // Whether the observer is shown this node (beforeNode and afterNode): one
    // that watches a few nodes (a plan's layers) answers false for the rest,
    // which then run as without an observer, their inputs not copied into an
    // event. Asked once per node per run; `scope` as NodeEvent::scope.
    virtual bool observesNode(size_t scope, size_t nodeIndex) const
    {
        (void)scope, (void)nodeIndex;
        return true;
    }
    // Whether beforeNode reads or replaces the tensors of NodeEvent::inputs,
    // and whether afterNode reads or replaces those of NodeEvent::outputs.
    // An observer that does neither for a node it is shown (a timer; the
    // fake-quant hook, which rewrites inputs only, for outputs) lets that node
    // run as without it: a Conv may still write its output straight into a
    // later Concat's output, and the Concat find it there. Such an event's
    // tensors are then views the observer must not read: the right shape,
    // their elements strided through the Concat's output.
    virtual bool readsInputs() const { return true; }
    virtual bool readsOutputs() const { return true; }
    // Whether a later beforeNode wants the extremes of value `value`
    // (NodeEvent::inputExtremes). Asked before the kernel that writes it runs
    // (for the value it writes as its first output); the kernel then gathers
    // them while its outputs are in cache, which costs far less than a pass
    // of the observer's own over the tensor.
    virtual bool wantsExtremesOf(std::string_view value) const
    {
        (void)value;
        return false;
    }
};

struct RunOptions {
    CancellationToken cancel;         // checked between nodes and by long kernels
    NodeObserver* observer = nullptr; // optional; not owned
};

class Interpreter {
public:
    // Plans the run. A model with ops the table lacks is an Error listing all
    // of them; so is a node input no node, initializer or graph input produces.
    // If, Loop and Scan nodes get their subgraphs parsed here, once; a
    // subgraph that does not parse or cannot run is an Error naming the node.
    explicit Interpreter(Model model);
    // A subgraph's interpreter (runtime/ops/control_flow.h): its events carry
    // scope `nextScope` (then incremented), and the subgraphs nested in it the
    // numbers after it, in the order Model::subgraphs gives them.
    Interpreter(Model model, size_t& nextScope);
    Interpreter(Interpreter&&) noexcept;
    ~Interpreter();

    // Runs the model on `inputs` (every graph input by name); returns every
    // graph output by name. Missing or unknown inputs and inputs whose dtype
    // or fixed dimensions contradict the model are Errors naming the input.
    std::map<std::string, Tensor> run(std::map<std::string, Tensor> inputs, const RunOptions& options = {}) const;

    // Runs node `nodeIndex`'s kernel alone on `inputs`, one per node input in
    // order (an absent optional input: an empty Tensor); returns one tensor per
    // node output (empty for outputs the node leaves unnamed). What the
    // isolated per-layer analysis calls with a layer's float inputs replaced.
    // A wrong input count is an Error naming the node.
    std::vector<Tensor> runNode(size_t nodeIndex, std::span<const Tensor> inputs,
                                const CancellationToken& cancel = {}) const;

    const Model& model() const { return model_; }
    // The scope this interpreter's nodes report (0 for a model's own interpreter).
    size_t scope() const { return scope_; }
    // For each node, the values freed right after it (by name): the memory plan.
    std::vector<std::vector<std::string>> freedAfterEachNode() const;

private:
    struct PlannedNode {
        const OpKernelEntry* kernel = nullptr;
        int64_t opset = 0;
        std::vector<int> inputs;  // value ids, -1 = absent; then the outer-scope values of its subgraphs
        std::vector<int> outputs; // value ids, -1 = absent
        std::vector<int> freeAfter;
        // Fusion (runs whose observer allows it): a Conv adds value `addend`
        // (a residual Add), applies `fused`, and writes the result as value
        // `fusedOutput`; the nodes it absorbed (`foldedAway`) are skipped.
        std::optional<FusedActivation> fused;
        int addend = -1;
        int fusedOutput = -1;
        std::vector<size_t> absorbed;
        bool foldedAway = false;
        const NodeSubgraphs* subgraphs = nullptr; // If, Loop, Scan
        // Placement (runs that fold): this node writes its (folded) output as
        // input `placedSlot` of assembly `placedIn`'s Concat; a Concat with
        // `assembles` >= 0 finds those inputs already in its output.
        int placedIn = -1;
        size_t placedSlot = 0;
        int assembles = -1;
    };
    // A Concat some of whose inputs their producers can write straight into
    // its output: the Concat's node, and per input the producer that can (-1: none).
    struct Assembly {
        size_t concat = 0;
        std::vector<int> writers;
    };

    // Folds into a Conv whose output has no other reader: an Add of that output
    // and a value computed before the Conv, then a Relu, LeakyRelu, Clip
    // (constant bounds), HardSigmoid or HardSwish.
    void planFusion();
    // Lets a Conv write its output straight into the output of the Concat
    // that is its only reader, as the slice the Concat would copy it to
    // (squeezenet's fire modules, inception branches, dense blocks), in runs
    // that fold and for nodes no observer reads the tensors of. The Concat's
    // output is allocated when the first producer runs at which every input's
    // shape is known: from the values present and, for producers yet to run,
    // from their inputs (placedOutputShape). Producers that run before that
    // write tensors of their own, which the Concat copies as usual.
    void planPlacement();
    // How many times each value is read: once per node input that names it,
    // once more for a graph output (the caller reads it).
    std::vector<int> readerCounts() const;
    // The constructors' work: takes scope number `nextScope` (then increments it).
    void build(size_t& nextScope);

    Model model_;
    size_t scope_ = 0;
    std::vector<std::string> valueNames_;
    std::vector<PlannedNode> plan_;
    std::vector<Assembly> assemblies_;
    std::vector<int> initializerIds_;
    // The initializers as the nodes read them: the model's tensors (sharing
    // their storage), half-precision ones that a node reads other than as a
    // Gemm's B widened to float32 when the model asks for it
    // (Model::widenHalfInitializers).
    std::vector<Tensor> initializerValues_;
    std::vector<int> graphInputIds_;
    std::vector<int> graphOutputIds_;
    // One per node: what kernels keep across runs (packed weights).
    std::unique_ptr<KernelMemo[]> memos_;
    // The parsed subgraphs of the nodes that have them (none in most models).
    std::vector<std::unique_ptr<NodeSubgraphs>> subgraphs_;
};

} // namespace qs
