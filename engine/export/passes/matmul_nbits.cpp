#include "export/passes/matmul_nbits.h"

#include <optional>

namespace qs {

namespace {

constexpr int32_t kBits = 4;
constexpr int32_t kDefaultZeroPoint = 8; // MatMulNBits' zero point when the input is absent (4 bits)

std::string nodeLabel(const onnx::NodeProto& node)
{
    return "node '" + node.name() + "' (" + node.op_type() + ")";
}

float floatAttribute(const onnx::NodeProto& node, std::string_view name, float fallback)
{
    const onnx::AttributeProto* a = findAttribute(node, name);
    return a ? a->f() : fallback;
}

// How one reader of the weight becomes MatMulNBits, or why it cannot.
struct Reader {
    int node = 0;
    int kAxis = 0;    // the weight's contraction axis for this reader
    std::string bias; // a Gemm's C as a float [N] initializer name; empty: none
    std::string problem;
};

Reader readerOf(QdqGraph& graph, int index, const std::string& weight, const Shape& dims)
{
    const onnx::NodeProto& node = graph.proto().node(index);
    Reader r{index, 0, {}, {}};
    const bool weightIsB = node.input_size() >= 2 && node.input(1) == weight && node.input(0) != weight;
    if (!node.domain().empty() || (node.op_type() != "MatMul" && node.op_type() != "Gemm")) {
        r.problem = "read by " + nodeLabel(node) + "; MatMulNBits replaces MatMul and Gemm only";
        return r;
    }
    if (!weightIsB) {
        r.problem = nodeLabel(node) + " reads it as its first operand (MatMulNBits quantizes B)";
        return r;
    }
    if (node.op_type() == "MatMul")
        return r;
    if (intAttribute(node, "transA", 0) != 0 || floatAttribute(node, "alpha", 1.0f) != 1.0f) {
        r.problem = nodeLabel(node) + " has transA or alpha != 1";
        return r;
    }
    r.kAxis = intAttribute(node, "transB", 0) != 0 ? 1 : 0;
    if (node.input_size() > 2 && !node.input(2).empty()) {
        const int64_t n = dims[size_t(1 - r.kAxis)];
        const onnx::TensorProto* c = graph.initializer(node.input(2));
        const Shape cDims = c ? tensorDims(*c) : Shape{};
        const bool vector = cDims == Shape{n} || cDims == Shape{1, n};
        if (!c || c->data_type() != onnx::TensorProto::FLOAT || !vector || floatAttribute(node, "beta", 1.0f) != 1.0f) {
            r.problem = nodeLabel(node) + ": its C is not a constant float [N] bias with beta = 1";
            return r;
        }
        r.bias = node.input(2);
    }
    return r;
}

} // namespace

MatMulNBitsResult useMatMulNBits(QdqGraph& graph)
{
    MatMulNBitsResult result;
    result.report.pass = "use_matmul_nbits";
    std::vector<int> removed;
    const int nodeCount = graph.proto().node_size();
    for (int i = 0; i < nodeCount; ++i) {
        const onnx::NodeProto& dq = graph.proto().node(i);
        if (!dq.domain().empty() || dq.op_type() != "DequantizeLinear" || dq.output_size() != 1)
            continue;
        const onnx::TensorProto* codesProto = graph.initializer(dq.input(0));
        if (!codesProto || (codesProto->data_type() != kOnnxInt4 && codesProto->data_type() != kOnnxUInt4))
            continue;
        const std::string weight = dq.output(0);
        auto fallback = [&](const std::string& reason) { result.fallbacks.push_back({weight, reason}); };
        const std::optional<IntegerTensor> codes = readIntegerTensor(*codesProto);
        const std::optional<QdqParams> p = constantQdqParams(graph, dq);
        if (!codes || !p) {
            fallback("its codes, scale or zero point are not constant tensors");
            continue;
        }
        if (codes->dims.size() != 2) {
            fallback("the weight " + shapeToString(codes->dims) + " is not a matrix");
            continue;
        }
        if (p->blockSize == 0) {
            fallback("it is quantized per tensor or per channel; MatMulNBits needs blocks (tile_size) along K");
            continue;
        }
        if (p->blockSize < 16 || (p->blockSize & (p->blockSize - 1)) != 0) {
            fallback("its block size " + std::to_string(p->blockSize) +
                     " is not a power of two >= 16, as MatMulNBits needs");
            continue;
        }
        if (graph.isGraphOutput(weight) || graph.consumers(weight).empty()) {
            fallback("the dequantized weight is a graph output or unread");
            continue;
        }
        const int axis = int(p->axis < 0 ? p->axis + 2 : p->axis);
        std::vector<Reader> readers;
        std::string problem;
        for (int c : graph.consumers(weight)) {
            Reader r = readerOf(graph, c, weight, codes->dims);
            if (r.problem.empty() && r.kAxis != axis)
                r.problem = nodeLabel(graph.proto().node(c)) + " contracts the axis across the blocks (blocks along N)";
            if (!r.problem.empty()) {
                problem = r.problem;
                break;
            }
            readers.push_back(std::move(r));
        }
        if (!problem.empty()) {
            fallback(problem);
            continue;
        }

        const int64_t K = codes->dims[size_t(axis)], N = codes->dims[size_t(1 - axis)];
        const int64_t block = p->blockSize, blocks = (K + block - 1) / block, blob = block * kBits / 8;
        if (int64_t(p->scales.size()) != N * blocks ||
            (p->zeroPoint && int64_t(p->zeroPoint->values.size()) != N * blocks)) {
            fallback("its scales do not have one value per block");
            continue;
        }
        const int32_t offset = codes->elementType == kOnnxInt4 ? 8 : 0; // int4 q -> uint4 q + 8
        // Element (n, k) of B = Wᵀ, and block (n, b) of the scale grid, in the weight's own layout.
        auto code = [&](int64_t n, int64_t k) {
            return codes->values[size_t(axis == 0 ? k * N + n : n * K + k)] + offset;
        };
        auto group = [&](int64_t n, int64_t b) { return size_t(axis == 0 ? b * N + n : n * blocks + b); };
        auto zero = [&](int64_t n, int64_t b) {
            return (p->zeroPoint ? p->zeroPoint->values[group(n, b)] : 0) + offset;
        };

        IntegerTensor packed{
            onnx::TensorProto::UINT8, {N, blocks, blob}, std::vector<int32_t>(size_t(N * blocks * blob))};
        std::vector<float> scales(size_t(N * blocks));
        const int64_t zeroBytes = (blocks + 1) / 2;
        IntegerTensor zeros{onnx::TensorProto::UINT8, {N * zeroBytes}, std::vector<int32_t>(size_t(N * zeroBytes))};
        bool defaultZeros = true;
        for (int64_t n = 0; n < N; ++n)
            for (int64_t b = 0; b < blocks; ++b) {
                const int32_t z = zero(n, b);
                defaultZeros &= z == kDefaultZeroPoint;
                scales[size_t(n * blocks + b)] = p->scales[group(n, b)];
                zeros.values[size_t(n * zeroBytes + b / 2)] |= z << (b % 2 * 4);
                for (int64_t j = 0; j < blob; ++j) {
                    const int64_t k = b * block + 2 * j;
                    const int32_t lo = k < K ? code(n, k) : z, hi = k + 1 < K ? code(n, k + 1) : z;
                    packed.values[size_t((n * blocks + b) * blob + j)] = lo | hi << 4;
                }
            }

        const std::string bName = graph.uniqueName(weight + "_nbits");
        const std::string scaleName = graph.uniqueName(weight + "_nbits_scales");
        const std::string zeroName = defaultZeros ? std::string() : graph.uniqueName(weight + "_nbits_zero_points");
        graph.addInitializer(integerTensorProto(bName, packed));
        graph.addInitializer(floatTensorProto(scaleName, {N * blocks}, scales));
        if (!defaultZeros)
            graph.addInitializer(integerTensorProto(zeroName, zeros));
        result.bytesBefore +=
            (K * N * kBits + 7) / 8 + N * blocks * 4 + (p->zeroPoint ? (N * blocks * kBits + 7) / 8 : 0);
        result.bytesAfter += N * blocks * blob + N * blocks * 4 + (defaultZeros ? 0 : N * zeroBytes);

        for (const Reader& r : readers) {
            onnx::NodeProto& node = *graph.proto().mutable_node(r.node);
            std::string bias = r.bias;
            if (!bias.empty() && tensorDims(*graph.initializer(bias)).size() != 1) { // [1, N] -> [N]
                const auto values = readFloatTensor(*graph.initializer(bias));
                const std::string flat = graph.uniqueName(bias + "_nbits_bias");
                graph.addInitializer(floatTensorProto(flat, {N}, *values));
                bias = flat;
            }
            const std::string a = node.input(0);
            node.clear_input();
            for (const std::string& in : {a, bName, scaleName})
                node.add_input(in);
            if (!zeroName.empty() || !bias.empty())
                node.add_input(zeroName);
            if (!bias.empty()) {
                node.add_input(""); // g_idx
                node.add_input(bias);
            }
            node.set_op_type("MatMulNBits");
            node.set_domain(kMicrosoftDomain);
            node.clear_attribute();
            setIntAttribute(node, "K", K);
            setIntAttribute(node, "N", N);
            setIntAttribute(node, "bits", kBits);
            setIntAttribute(node, "block_size", block);
            setIntAttribute(node, "accuracy_level", 0);
            result.report.nodes.push_back(node.name());
            ++result.report.changes;
        }
        removed.push_back(i);
    }
    graph.removeNodes(removed);
    graph.removeUnusedInitializers();
    return result;
}

} // namespace qs
