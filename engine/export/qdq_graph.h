#pragma once
// An ONNX graph being rewritten by the QDQ exporter and its passes: the
// GraphProto itself (no copy into another representation, so every attribute,
// value_info and subgraph the passes do not touch is written back as read),
// plus indexes of which node produces and which nodes read each value, and the
// small readers and writers of constant tensors the passes need.
//
// Indexes go stale when nodes are added or removed: call reindex() (or
// sortTopologically(), which reindexes) before asking again.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/tensor.h"

namespace qs {

// What one pass (or the exporter) changed: a count and the nodes it touched.
struct PassReport {
    std::string pass;               // "fold_dequantize_through_layout", ...
    int64_t changes = 0;            // rewrites made
    std::vector<std::string> nodes; // names of the nodes rewritten, added or removed
};

class QdqGraph {
public:
    explicit QdqGraph(onnx::GraphProto& graph);

    onnx::GraphProto& proto() { return graph_; }
    const onnx::GraphProto& proto() const { return graph_; }

    void reindex();
    // Orders the nodes so every value is produced before it is read (stable:
    // nodes already in order keep their order). Throws Error on a cycle.
    void sortTopologically();

    // Index of the node producing `value`, or none (graph input, initializer, unknown).
    std::optional<int> producer(const std::string& value) const;
    // Indices of the nodes reading `value` (a node reading it twice appears once).
    const std::vector<int>& consumers(const std::string& value) const;
    bool isGraphOutput(const std::string& value) const { return outputs_.contains(value); }
    bool isGraphInput(const std::string& value) const { return inputs_.contains(value); }

    onnx::TensorProto* initializer(const std::string& name);
    void addInitializer(onnx::TensorProto tensor); // reindexes the initializers only
    // Removes initializers no node reads and that are no graph output; returns their names.
    std::vector<std::string> removeUnusedInitializers();

    // A name no value, node or initializer of the graph uses yet: `base`, or `base_1`, `base_2` ...
    // Names handed out are remembered until the next reindex().
    std::string uniqueName(const std::string& base);

    // Removes the nodes at `indices` and reindexes.
    void removeNodes(std::vector<int> indices);

private:
    onnx::GraphProto& graph_;
    std::unordered_map<std::string, int> producer_;
    std::unordered_map<std::string, std::vector<int>> consumers_;
    std::unordered_map<std::string, int> initializers_;
    std::unordered_set<std::string> inputs_, outputs_, names_;
};

// ---- node attributes ----
const onnx::AttributeProto* findAttribute(const onnx::NodeProto& node, std::string_view name);
int64_t intAttribute(const onnx::NodeProto& node, std::string_view name, int64_t fallback);
void setIntAttribute(onnx::NodeProto& node, const std::string& name, int64_t value);
void removeAttribute(onnx::NodeProto& node, std::string_view name);

// ---- constant tensors ----
// An integer tensor of an ONNX element type (INT8, UINT8, INT16, UINT16,
// INT32, INT4 = 22, UINT4 = 21), values widened to int32.
struct IntegerTensor {
    int32_t elementType = onnx::TensorProto::INT8;
    Shape dims;
    std::vector<int32_t> values;
};

inline constexpr int32_t kOnnxUInt4 = 21; // TensorProto.UINT4 (ONNX 1.16; libonnx 1.12 predates it)
inline constexpr int32_t kOnnxInt4 = 22;  // TensorProto.INT4

// The element type's integer range, or none for a type that is not one of the above.
std::optional<std::pair<int32_t, int32_t>> integerElementRange(int32_t elementType);

// Reads raw_data or the typed field; none for another element type, external
// data or a byte count that does not match the dims.
std::optional<IntegerTensor> readIntegerTensor(const onnx::TensorProto& proto);
std::optional<std::vector<float>> readFloatTensor(const onnx::TensorProto& proto);   // FLOAT only
std::optional<std::vector<int64_t>> readInt64Tensor(const onnx::TensorProto& proto); // INT64 only
// Writes raw_data (4-bit types packed two to a byte, low nibble first).
onnx::TensorProto integerTensorProto(const std::string& name, const IntegerTensor& tensor);
onnx::TensorProto floatTensorProto(const std::string& name, const Shape& dims, const std::vector<float>& values);
onnx::TensorProto int64TensorProto(const std::string& name, const Shape& dims, const std::vector<int64_t>& values);
Shape tensorDims(const onnx::TensorProto& proto);

// ---- QuantizeLinear / DequantizeLinear parameters ----
// The constant parameters of a QuantizeLinear or DequantizeLinear node: its
// scale and zero point initializers, axis and block size. None when the scale
// or zero point is not a constant initializer of a type read above.
struct QdqParams {
    std::string scaleName, zeroPointName; // zeroPointName empty when absent
    Shape scaleDims;
    std::vector<float> scales;
    std::optional<IntegerTensor> zeroPoint;
    int64_t axis = 1; // as written (ONNX default 1)
    int64_t blockSize = 0;
    bool perTensor() const { return scales.size() == 1 && scaleDims.size() <= 1 && blockSize == 0; }
};
std::optional<QdqParams> constantQdqParams(QdqGraph& graph, const onnx::NodeProto& node);
// The integer element type a DequantizeLinear reads (its zero point's, or its
// input's when that is an initializer, a QuantizeLinear's output or declared),
// or a QuantizeLinear writes (its zero point's, UINT8 without one).
std::optional<int32_t> quantizedElementType(QdqGraph& graph, const onnx::NodeProto& node);
// Same scales, zero points (values and type) and, unless per tensor, axis and block size.
bool sameQuantization(const QdqParams& a, int32_t typeA, const QdqParams& b, int32_t typeB);

} // namespace qs
