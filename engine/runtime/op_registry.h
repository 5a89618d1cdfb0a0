#pragma once
// The op table of the interpreter: which (domain, op type, opset range) the
// runtime can run, and the kernel that runs it. The table (op_table.cpp) is the
// one source of truth for "supported ops"; everything else asks it.
//
// A kernel is a plain function over a KernelContext: it reads the node's
// attributes and input tensors, validates them, and writes every output the
// node asks for. Kernels live one file per op family under runtime/ops/.
// Adding an op = its kernel in a family file + one line in the table.

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <typeinfo>
#include <vector>

#include "core/cancellation.h"
#include "core/tensor.h"
#include "graph/model.h"
#include "runtime/ops/activation.h"
#include "runtime/output_extremes.h"

namespace qs {

struct NodeSubgraphs; // runtime/ops/control_flow.h
class NodeObserver;   // runtime/interpreter.h

// What a kernel derives from a constant input and keeps across runs (Conv's
// weights packed for its GEMM), one memo per node. An entry is valid while the
// input is the same tensor storage it was made from; a tensor a run has read
// is not written in place afterwards (the hooks swap in new tensors, or
// overwrite a value for its last reader, which no node reads again). Holds
// the last two sources, so float and fake-quant runs side by side do not
// evict each other. Entries are kept per type: a kernel may derive different
// values from one input (Conv packs its weights one way for a batch of
// planes, another for a few output positions). Thread-safe.
class KernelMemo {
public:
    // The value made by `make()` from `source`, made again only when `source`
    // is other storage than the memo's entries of type T.
    template <class T, class Make> std::shared_ptr<const T> get(const Tensor& source, Make make)
    {
        if (!source.storage())
            return make(); // nothing to tell one buffer from a later one at the same address
        {
            std::lock_guard lock(mutex_);
            for (Entry& e : entries_)
                if (e.type && *e.type == typeid(T) && e.data == source.rawData() && e.bytes == source.nbytes() &&
                    e.storage.lock() == source.storage())
                    return std::static_pointer_cast<const T>(e.value);
        }
        std::shared_ptr<const T> made = make();
        std::lock_guard lock(mutex_);
        entries_[next_] = {source.storage(), source.rawData(), source.nbytes(), &typeid(T), made};
        next_ = (next_ + 1) % entries_.size();
        return made;
    }

private:
    struct Entry {
        std::weak_ptr<const void> storage;
        const void* data = nullptr;
        size_t bytes = 0;
        const std::type_info* type = nullptr;
        std::shared_ptr<const void> value;
    };
    std::mutex mutex_;
    std::array<Entry, 2> entries_;
    size_t next_ = 0;
};

// Where a kernel may write output 0 instead of into a tensor of its own: its
// slice of a later Concat's output, which the interpreter allocated before
// the kernel ran. Image n (index n of axis 0) of an output of `shape` goes at
// data + n * imageStride, each image's elements contiguous and in order.
struct OutputPlacement {
    Shape shape;
    float* data = nullptr;
    int64_t imageStride = 0;
    std::shared_ptr<const void> storage; // what keeps `data` alive
};

// What a kernel sees of one node while it runs.
class KernelContext {
public:
    KernelContext(const Node& node, size_t nodeIndex, int64_t opset, std::span<const Tensor* const> inputs,
                  std::span<Tensor> outputs, const CancellationToken* cancel)
        : node_(node), nodeIndex_(nodeIndex), opset_(opset), inputs_(inputs), outputs_(outputs), cancel_(cancel)
    {
    }

    const Node& node() const { return node_; }
    size_t nodeIndex() const { return nodeIndex_; }
    // The opset of the node's domain the model imports.
    int64_t opset() const { return opset_; }

    // Inputs: the node's input list; an absent optional input (empty name, or
    // beyond the list) has no tensor.
    size_t inputCount() const { return inputs_.size(); }
    bool hasInput(size_t i) const { return i < inputs_.size() && inputs_[i] != nullptr; }
    // The input tensor; an Error naming the node when it is absent.
    const Tensor& input(size_t i) const;
    // The input tensor, or nullptr when absent.
    const Tensor* optionalInput(size_t i) const { return hasInput(i) ? inputs_[i] : nullptr; }
    // The input tensor; an Error naming the node when it is absent or not float32.
    const Tensor& floatInput(size_t i) const;

    // Outputs: one slot per output of the node; an empty output name means the
    // graph does not use it (the kernel may skip computing it).
    size_t outputCount() const { return outputs_.size(); }
    bool wantsOutput(size_t i) const { return i < outputs_.size() && !node_.outputs[i].empty(); }
    void setOutput(size_t i, Tensor tensor);

    // Typed attribute getters. Absent -> the fallback (or an Error for the
    // required forms); present with another kind -> an Error naming the node and
    // the attribute.
    const Attribute* attribute(std::string_view name) const { return node_.attribute(name); }
    bool hasAttribute(std::string_view name) const { return node_.attribute(name) != nullptr; }
    int64_t intAttribute(std::string_view name, int64_t fallback) const;
    int64_t requiredIntAttribute(std::string_view name) const;
    float floatAttribute(std::string_view name, float fallback) const;
    std::string stringAttribute(std::string_view name, std::string_view fallback) const;
    std::vector<int64_t> intsAttribute(std::string_view name, std::vector<int64_t> fallback = {}) const;
    std::optional<std::vector<int64_t>> optionalIntsAttribute(std::string_view name) const;
    std::vector<float> floatsAttribute(std::string_view name, std::vector<float> fallback = {}) const;
    std::optional<Tensor> tensorAttribute(std::string_view name) const;

    // The activation the interpreter folded into this node (Conv -> Relu), which
    // the kernel applies to its output; nullptr when none was.
    const FusedActivation* fusedActivation() const { return fused_; }
    void setFusedActivation(const FusedActivation* fused) { fused_ = fused; }
    // The value of a residual Add the interpreter folded into this node: the
    // kernel adds it to its output (before the activation). A kernel that cannot
    // (the shapes differ, so the Add broadcasts) calls declineFusion() and
    // applies neither; the interpreter then runs the folded nodes itself.
    const Tensor* fusedAddend() const { return addend_; }
    void setFusedAddend(const Tensor* addend) { addend_ = addend; }
    void declineFusion() { declined_ = true; }
    bool fusionDeclined() const { return declined_; }
    // Where the kernel adds the elements of output 0 as its tasks write them
    // (OutputExtremes::addRows, after any folded activation), or nullptr: a
    // reader of that value wants its extremes. A kernel that does not add them
    // (or adds only some) leaves the reader to compute them itself.
    OutputExtremes* outputExtremes() const { return extremes_; }
    void setOutputExtremes(OutputExtremes* extremes) { extremes_ = extremes; }
    // Where the kernel may write output 0 (OutputPlacement), or nullptr. A
    // kernel that writes there (only when its output has exactly the
    // placement's shape) calls setPlacedOutput() instead of setOutput(0, ...).
    const OutputPlacement* outputPlacement() const { return placement_; }
    void setOutputPlacement(const OutputPlacement* placement) { placement_ = placement; }
    // Output 0 is what the kernel wrote at the placement: a tensor of its
    // shape borrowed at its data. Its elements are strided when imageStride
    // is more than an image: only the Concat that owns the buffer reads it,
    // knowing it is already in place.
    void setPlacedOutput();
    bool wrotePlacedOutput() const { return placedOutput_; }
    // Concat: its output, allocated by the interpreter, and per input whether
    // that input's producer already wrote it there (nonzero); the kernel
    // copies the others. nullptr: the kernel allocates its output.
    const Tensor* assembledOutput() const { return assembled_; }
    std::span<const char> inputsInPlace() const { return inPlace_; }
    void setAssembledOutput(const Tensor* output, std::span<const char> inPlace)
    {
        assembled_ = output;
        inPlace_ = inPlace;
    }
    // The node's memo across runs, or nullptr (then the kernel derives afresh).
    KernelMemo* memo() const { return memo_; }
    void setMemo(KernelMemo* memo) { memo_ = memo; }
    // If, Loop, Scan: the node's subgraphs, parsed when the interpreter was
    // built; their outer-scope values follow the node's own inputs. nullptr
    // for every other node.
    const NodeSubgraphs* subgraphs() const { return subgraphs_; }
    void setSubgraphs(const NodeSubgraphs* subgraphs) { subgraphs_ = subgraphs; }
    // The run's observer when it sees subgraphs (NodeObserver::seesSubgraphs):
    // what If, Loop and Scan pass on to the runs of their bodies; else nullptr.
    NodeObserver* subgraphObserver() const { return subgraphObserver_; }
    void setSubgraphObserver(NodeObserver* observer) { subgraphObserver_ = observer; }

    // "node 'conv1' (Conv)" or, for an unnamed node, "node #3 (Conv)".
    std::string describe() const;
    // Throws Error("<describe()>: <problem>").
    [[noreturn]] void fail(const std::string& problem) const;
    // The run's cancellation token (nullptr: none), for helpers that check it themselves.
    const CancellationToken* cancellation() const { return cancel_; }
    // Throws Cancelled when the run was cancelled; long kernels call it between chunks.
    void checkCancelled() const
    {
        if (cancel_)
            cancel_->check();
    }

private:
    const Attribute* typedAttribute(std::string_view name, Attribute::Kind kind, const char* kindName) const;

    const Node& node_;
    size_t nodeIndex_;
    int64_t opset_;
    std::span<const Tensor* const> inputs_;
    std::span<Tensor> outputs_;
    const CancellationToken* cancel_;
    const FusedActivation* fused_ = nullptr;
    const Tensor* addend_ = nullptr;
    bool declined_ = false;
    KernelMemo* memo_ = nullptr;
    OutputExtremes* extremes_ = nullptr;
    const OutputPlacement* placement_ = nullptr;
    bool placedOutput_ = false;
    const Tensor* assembled_ = nullptr;
    std::span<const char> inPlace_;
    const NodeSubgraphs* subgraphs_ = nullptr;
    NodeObserver* subgraphObserver_ = nullptr;
};

using Kernel = void (*)(KernelContext&);

// The newest opset the table claims to know; `untilOpset` of an open range.
inline constexpr int kLatestOpset = 21;

// One line of the op table: `kernel` runs `opType` of `domain` ("" = ai.onnx)
// for opsets sinceOpset..untilOpset inclusive.
struct OpKernelEntry {
    std::string_view domain;
    std::string_view opType;
    int sinceOpset;
    int untilOpset;
    Kernel kernel;
    // Whether the kernel adds what it writes to KernelContext::outputExtremes:
    // the run asks the observer about its output only then.
    bool gathersExtremes = false;
    // For kernels that can write output 0 into an OutputPlacement: output 0's
    // shape from the node's inputs (an Error where they do not fit). The run
    // then lets the kernel write straight into a later Concat's output.
    Shape (*placedOutputShape)(const KernelContext& ctx) = nullptr;
};

// Every line of the table.
std::span<const OpKernelEntry> opKernelTable();
// The kernel for an op at an opset, or nullptr. "ai.onnx" is the same domain as "".
const OpKernelEntry* findOpKernel(std::string_view domain, std::string_view opType, int64_t opset);
// The opset a model imports for a domain ("" and "ai.onnx" are one domain);
// an Error naming the domain when the model does not import it.
int64_t modelOpset(const Model& model, std::string_view domain);
// Op types of the model the table cannot run at the model's opset, each once,
// sorted: "Foo" for the default domain, "com.microsoft:Bar" for others, with
// " (opset N)" added when the table knows the op at other opsets only.
std::vector<std::string> unsupportedOps(const Model& model);

} // namespace qs
