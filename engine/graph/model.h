#pragma once
// The model IR every loader produces and the rules, the runtime and the
// exporters share: a graph of nodes over named values, the constant tensors
// (initializers) the nodes read, and the quantizable layers found in it.
//
// A checkpoint without a graph (safetensors, npz, a generic HDF5 tree) is a
// weights-only Model: no nodes, only named tensors and the layers inferred from
// their names and shapes (graph/layers.h).

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/tensor.h"
#include "graph/layer.h"

namespace qs {

// One dimension of a value's shape: a fixed size, a symbolic name ("batch",
// "seq_len") or unknown.
struct Dim {
    std::optional<int64_t> size; // set for a fixed dimension
    std::string symbol;          // set for a named symbolic dimension (size unset)

    static Dim fixed(int64_t n) { return {n, {}}; }
    static Dim named(std::string name) { return {std::nullopt, std::move(name)}; }
    static Dim unknown() { return {}; }
    bool isFixed() const { return size.has_value(); }
    bool isSymbolic() const { return !size && !symbol.empty(); }
    // "3", "batch" or "?"
    std::string toString() const;
    bool operator==(const Dim&) const = default;
};

// A graph input, output or intermediate value as the file declares it.
struct ValueInfo {
    std::string name;
    std::optional<DType> dtype; // unset when the element type is not a tensor DType
    std::string typeName;       // the file's element type: "float32", "string", "float8e4m3fn", "sequence" ...
    std::optional<std::vector<Dim>> shape; // unset when even the rank is unknown
    // "float32[batch, 3, 224, 224]", "float32[?]" (rank unknown), "string"
    std::string toString() const;
};

// A node attribute. ONNX's attribute kinds; a subgraph (If/Loop/Scan bodies) is
// kept as its serialized GraphProto bytes: the loader parses it once more into
// Model::subgraphs (where its layers are found), the interpreter when it is
// built (runtime/ops/control_flow.h).
struct Attribute {
    enum class Kind : uint8_t { Int, Float, String, Ints, Floats, Strings, Tensor, Graph, Other };
    std::string name;
    Kind kind = Kind::Int;
    int64_t i = 0;
    float f = 0.0f;
    std::string s; // String: the value; Graph: the serialized subgraph; Other: what the kind was
    std::vector<int64_t> ints;
    std::vector<float> floats;
    std::vector<std::string> strings;
    qs::Tensor tensor; // Tensor: the value (owned)
};

struct Node {
    std::string name;                 // as in the file; may be empty
    std::string opType;               // "Conv", "MatMul", ...
    std::string domain;               // "" for the default ONNX domain ("ai.onnx"), else e.g. "com.microsoft"
    std::vector<std::string> inputs;  // value names in order; "" = an absent optional input
    std::vector<std::string> outputs; // value names in order; "" = an absent optional output
    std::vector<Attribute> attributes;

    const Attribute* attribute(std::string_view attributeName) const;
    // The Int attribute's value, or `fallback` when absent. A present attribute of
    // another kind is an Error naming the node and the attribute.
    int64_t intAttribute(std::string_view attributeName, int64_t fallback) const;
};

// An op type as the runtime looks it up: domain and op type.
struct OpTypeUse {
    std::string domain;
    std::string opType;
    size_t count = 0; // nodes of this type
};

struct NamedTensor {
    std::string name;
    qs::Tensor tensor;
};

class Model;

// A subgraph (an If branch, a Loop or Scan body) of a graph model: a scope of
// its own, numbered in preorder (the main graph is scope 0; walking each
// graph's nodes in order and each node's subgraph attributes in order, a
// subgraph gets the next number before the subgraphs nested in it). The
// interpreter numbers the subgraph interpreters it builds the same way
// (NodeEvent::scope), so a layer is (QuantizableLayer::scope, node).
struct SubgraphScope {
    size_t parent = 0;      // the scope of the graph holding the node
    size_t node = 0;        // that node's index in its graph
    std::string attribute;  // "then_branch", "else_branch", "body"
    std::string modulePath; // "<node's path>/<attribute>": what its layers' paths start with
    // The subgraph as a model (io/onnx_subgraph.h): constants folded, its
    // graph inputs the formal inputs, then the names it reads from outside.
    std::shared_ptr<const Model> graph;
    size_t formalInputs = 0;
};

class Model {
public:
    std::filesystem::path sourcePath;
    std::string format;                          // "onnx", "safetensors", "keras-h5", "hdf5", "npz"
    std::string producer;                        // e.g. "pytorch 2.1.0"; empty when the file does not say
    int64_t irVersion = 0;                       // ONNX IR version; 0 for other formats
    std::map<std::string, int64_t> opsetImports; // domain ("" = ai.onnx) -> opset version
    std::vector<ValueInfo> inputs;               // graph inputs that are not initializers
    std::vector<ValueInfo> outputs;              // graph outputs
    std::vector<ValueInfo> valueInfos;           // intermediate values with declared or inferred types
    std::vector<Node> nodes;                     // in topological order
    std::map<std::string, std::string> metadata; // producer-defined key/value pairs
    std::vector<std::string> warnings;           // things the user should know (e.g. shape inference failed)
    bool weightsOnly = false;                    // a checkpoint: no nodes, layers inferred from tensor names
    // The graph computes in float32 over weights stored as float16/bfloat16 (a
    // Hugging Face folder), as the reference implementation upcasts them: a
    // Gemm widens its B a strip at a time, and the runtime widens the other
    // half-precision initializers (embeddings, norms, biases) once when it is
    // built. Off for ONNX, whose fp16 graphs compute in fp16.
    bool widenHalfInitializers = false;
    std::vector<QuantizableLayer> layers;        // what rules match, in node (or tensor) order; subgraphs' last
    // Scopes 1, 2, ... (If/Loop/Scan bodies, nested ones included): subgraphs[scope - 1].
    std::vector<SubgraphScope> subgraphs;

    // The graph of scope `scope`: this model for 0, else its subgraph's model.
    // An Error for a scope the model does not have.
    const Model& scopeGraph(size_t scope) const;
    // A scope's module path prefix: "" for 0, "If_0/then_branch" for a subgraph.
    std::string scopePath(size_t scope) const;

    // Initializers (weights and other constants). Their storage is owned by the
    // tensor or borrowed from a mapping the tensor keeps alive.
    // Adds a tensor; a second tensor with the same name is an Error naming it.
    void addInitializer(std::string name, qs::Tensor tensor);
    const std::vector<NamedTensor>& initializers() const { return initializers_; }
    // The initializer called `name`, or nullptr.
    const qs::Tensor* initializer(std::string_view name) const;
    bool isInitializer(std::string_view name) const { return initializer(name) != nullptr; }
    // Removes the initializers named in `names` (others keep their order); returns how many were removed.
    size_t removeInitializers(const std::unordered_set<std::string>& names);
    // Gives the initializer called `name` new values (the same name and place;
    // what cross-layer equalization does to a layer's weight and bias). An Error
    // naming it when the model has no such initializer.
    void replaceInitializer(std::string_view name, qs::Tensor tensor);
    // Whether `name` was given new values by replaceInitializer: writers that
    // copy the source file's graph (the ONNX export) write such a tensor from here.
    bool isReplacedInitializer(std::string_view name) const { return replaced_.contains(std::string(name)); }
    // A subgraph layer's weight is also an initializer of the main model, under
    // the name its layer's weightName gives (`<scope path>/<name>` for a tensor
    // of the subgraph itself): every reader of weights by name finds it there.
    // Such aliases are no tensor of the main ONNX graph; exporters skip them.
    void addSubgraphWeight(std::string name, qs::Tensor tensor);
    bool isSubgraphWeight(std::string_view name) const { return subgraphWeights_.contains(std::string(name)); }

    // Distinct (domain, op type) pairs of the nodes, sorted by domain then op type.
    std::vector<OpTypeUse> opTypes() const;
    // Sum of the parameter counts of all initializers.
    int64_t parameterCount() const;

private:
    std::vector<NamedTensor> initializers_;
    std::unordered_map<std::string, size_t> initializerIndex_;
    std::unordered_set<std::string> subgraphWeights_;
    std::unordered_set<std::string> replaced_;
};

} // namespace qs
