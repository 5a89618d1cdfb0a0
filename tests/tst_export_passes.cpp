// The QDQ clean-up passes (engine/export/passes): each rewrites what it should,
// leaves alone what it must not, and — checked by running the graph in the
// interpreter before and after — never changes a value the graph computes.

#include <QtTest>

#include <onnx/onnx_pb.h>

#include <cstring>
#include <random>

#include "core/error.h"
#include "export/passes/canonicalize_zero_points.h"
#include "export/passes/dead_nodes.h"
#include "export/passes/fold_dequantize_through_layout.h"
#include "export/passes/move_integer_ops.h"
#include "export/passes/pipeline.h"
#include "export/passes/remove_dequantize_quantize.h"
#include "export/qdq_graph.h"
#include "io/onnx_loader.h"
#include "runtime/interpreter.h"

using namespace qs;

namespace {

// A small graph under construction: one float input `x` of a fixed shape, outputs added by name.
struct GraphBuilder {
    onnx::ModelProto model;
    onnx::GraphProto& g;

    explicit GraphBuilder(const Shape& inputShape) : g(*model.mutable_graph())
    {
        model.set_ir_version(7);
        auto* o = model.add_opset_import();
        o->set_domain("");
        o->set_version(13);
        g.set_name("passes");
        input("x", inputShape);
    }
    void input(const std::string& name, const Shape& shape)
    {
        auto* v = g.add_input();
        v->set_name(name);
        auto* t = v->mutable_type()->mutable_tensor_type();
        t->set_elem_type(onnx::TensorProto::FLOAT);
        for (int64_t d : shape)
            t->mutable_shape()->add_dim()->set_dim_value(d);
    }
    void output(const std::string& name, int rank)
    {
        auto* v = g.add_output();
        v->set_name(name);
        auto* t = v->mutable_type()->mutable_tensor_type();
        t->set_elem_type(onnx::TensorProto::FLOAT);
        for (int i = 0; i < rank; ++i)
            t->mutable_shape()->add_dim();
    }
    onnx::NodeProto& node(const std::string& op, const std::string& name, std::vector<std::string> inputs,
                          std::vector<std::string> outputs)
    {
        auto* n = g.add_node();
        n->set_op_type(op);
        n->set_name(name);
        for (auto& i : inputs)
            n->add_input(i);
        for (auto& o : outputs)
            n->add_output(o);
        return *n;
    }
    void ints(const std::string& name, int32_t type, const Shape& dims, std::vector<int32_t> values)
    {
        *g.add_initializer() = integerTensorProto(name, IntegerTensor{type, dims, std::move(values)});
    }
    void floats(const std::string& name, const Shape& dims, std::vector<float> values)
    {
        *g.add_initializer() = floatTensorProto(name, dims, values);
    }
    void int64s(const std::string& name, const Shape& dims, std::vector<int64_t> values)
    {
        *g.add_initializer() = int64TensorProto(name, dims, values);
    }
};

std::vector<int32_t> randomCodes(size_t n, int lo, int hi, uint32_t seed)
{
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> d(lo, hi);
    std::vector<int32_t> v(n);
    for (auto& x : v)
        x = d(rng);
    return v;
}

Tensor randomInput(const Shape& shape, uint32_t seed)
{
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, 2.0f);
    std::vector<float> v(size_t(shapeElementCount(shape)));
    for (auto& x : v)
        x = d(rng);
    return Tensor::fromVector(DType::F32, shape, v);
}

std::map<std::string, Tensor> run(const onnx::ModelProto& model, const Tensor& x)
{
    const std::string bytes = model.SerializeAsString();
    Interpreter interpreter(loadOnnxBytes(std::as_bytes(std::span(bytes.data(), bytes.size())), "passes.onnx"));
    return interpreter.run({{"x", x}});
}

void expectSameOutputs(const std::map<std::string, Tensor>& a, const std::map<std::string, Tensor>& b)
{
    QCOMPARE(a.size(), b.size());
    for (const auto& [name, t] : a) {
        const Tensor& u = b.at(name);
        QCOMPARE(t.shape(), u.shape());
        QCOMPARE(t.dtype(), u.dtype());
        QVERIFY2(std::memcmp(t.rawData(), u.rawData(), t.nbytes()) == 0, name.c_str());
    }
}

int countOps(const onnx::GraphProto& g, const std::string& op)
{
    int n = 0;
    for (const auto& node : g.node())
        n += node.op_type() == op;
    return n;
}

const onnx::NodeProto* findOp(const onnx::GraphProto& g, const std::string& op)
{
    for (const auto& node : g.node())
        if (node.op_type() == op)
            return &node;
    return nullptr;
}

} // namespace

class TestExportPasses : public QObject {
    Q_OBJECT

private slots:
    void foldsPerAxisWeightThroughTranspose()
    {
        // y = x · transpose(DQ(W)) with W [4, 6] int8 per output row (axis 0).
        GraphBuilder b({3, 6});
        b.ints("w_q", onnx::TensorProto::INT8, {4, 6}, randomCodes(24, -128, 127, 1));
        b.floats("w_scale", {4}, {0.5f, 0.25f, 0.125f, 2.0f});
        b.ints("w_zp", onnx::TensorProto::INT8, {4}, {0, 3, -2, 1});
        setIntAttribute(b.node("DequantizeLinear", "w_dq", {"w_q", "w_scale", "w_zp"}, {"w"}), "axis", 0);
        b.node("Transpose", "w_t", {"w"}, {"wt"});
        b.node("MatMul", "mm", {"x", "wt"}, {"y"});
        b.output("y", 2);
        const Tensor x = randomInput({3, 6}, 2);
        const auto before = run(b.model, x);

        QdqGraph graph(*b.model.mutable_graph());
        const PassReport r = foldDequantizeThroughLayout(graph);
        QCOMPARE(r.changes, int64_t(1));
        QCOMPARE(r.nodes, std::vector<std::string>{"w_t"});
        QCOMPARE(countOps(b.g, "Transpose"), 0);
        const onnx::NodeProto* dq = findOp(b.g, "DequantizeLinear");
        QVERIFY(dq);
        QCOMPARE(intAttribute(*dq, "axis", -1), int64_t(1)); // the channel axis moved with the transpose
        QCOMPARE(tensorDims(*graph.initializer(dq->input(0))), (Shape{6, 4}));
        eliminateDeadNodes(graph);
        QVERIFY(!graph.initializer("w_q")); // the old layout is gone
        expectSameOutputs(before, run(b.model, x));
    }

    void foldsThroughReshapeSqueezeUnsqueezeAndKeepsAxisOnlyWhenItSurvives()
    {
        // Per-axis W [6, 2, 3] (axis 0) → Reshape [6, 6] keeps axis 0 → folded.
        GraphBuilder b({2, 6});
        b.ints("w_q", onnx::TensorProto::INT8, {6, 2, 3}, randomCodes(36, -128, 127, 3));
        b.floats("w_scale", {6}, {0.5f, 0.25f, 0.125f, 2.0f, 1.0f, 0.75f});
        setIntAttribute(b.node("DequantizeLinear", "w_dq", {"w_q", "w_scale"}, {"w"}), "axis", 0);
        b.int64s("shape66", {2}, {6, -1});
        b.node("Reshape", "w_reshape", {"w", "shape66"}, {"w66"});
        b.node("MatMul", "mm", {"x", "w66"}, {"y0"});
        // Per-tensor V [6] → Unsqueeze [1, 6] → Squeeze back... → Add: folded twice.
        b.ints("v_q", onnx::TensorProto::UINT8, {6}, randomCodes(6, 0, 255, 4));
        b.floats("v_scale", {}, {0.03f});
        b.ints("v_zp", onnx::TensorProto::UINT8, {}, {128});
        b.node("DequantizeLinear", "v_dq", {"v_q", "v_scale", "v_zp"}, {"v"});
        b.int64s("axes0", {1}, {0});
        b.node("Unsqueeze", "v_unsqueeze", {"v", "axes0"}, {"v1"});
        b.node("Squeeze", "v_squeeze", {"v1", "axes0"}, {"v2"});
        b.node("Add", "add", {"y0", "v2"}, {"y"});
        // Per-axis U [4, 6] along axis 1 → Reshape [24] merges the axis: not folded.
        b.ints("u_q", onnx::TensorProto::INT8, {4, 6}, randomCodes(24, -128, 127, 5));
        b.floats("u_scale", {6}, {1, 2, 3, 4, 5, 6});
        setIntAttribute(b.node("DequantizeLinear", "u_dq", {"u_q", "u_scale"}, {"u"}), "axis", 1);
        b.int64s("flat", {1}, {24});
        b.node("Reshape", "u_reshape", {"u", "flat"}, {"u24"});
        b.output("y", 2);
        b.output("u24", 1);
        const Tensor x = randomInput({2, 6}, 6);
        const auto before = run(b.model, x);

        QdqGraph graph(*b.model.mutable_graph());
        const PassReport r = foldDequantizeThroughLayout(graph);
        QCOMPARE(r.changes, int64_t(3));
        QVERIFY(std::find(r.nodes.begin(), r.nodes.end(), "u_reshape") == r.nodes.end());
        QCOMPARE(countOps(b.g, "Reshape"), 1);
        QCOMPARE(countOps(b.g, "Squeeze") + countOps(b.g, "Unsqueeze"), 0);
        eliminateDeadNodes(graph);
        expectSameOutputs(before, run(b.model, x));
    }

    void removesMatchingDequantizeQuantizeAndKeepsBranches()
    {
        // x → Q → DQ → Q (same) → DQ → Relu, and the first DQ also feeds Neg (a branch);
        // a second Q with another scale must stay.
        GraphBuilder b({5, 7});
        b.floats("s", {}, {0.05f});
        b.ints("zp", onnx::TensorProto::INT8, {}, {3});
        b.floats("s2", {}, {0.07f});
        b.node("QuantizeLinear", "q1", {"x", "s", "zp"}, {"xq"});
        b.node("DequantizeLinear", "dq1", {"xq", "s", "zp"}, {"xd"});
        b.node("QuantizeLinear", "q2", {"xd", "s", "zp"}, {"xq2"});
        b.node("DequantizeLinear", "dq2", {"xq2", "s", "zp"}, {"xd2"});
        b.node("Relu", "relu", {"xd2"}, {"y"});
        b.node("Neg", "branch", {"xd"}, {"z"});
        b.node("QuantizeLinear", "q3", {"xd", "s2", "zp"}, {"xq3"});
        b.node("DequantizeLinear", "dq3", {"xq3", "s2", "zp"}, {"w"});
        b.output("y", 2);
        b.output("z", 2);
        b.output("w", 2);
        const Tensor x = randomInput({5, 7}, 7);
        const auto before = run(b.model, x);

        QdqGraph graph(*b.model.mutable_graph());
        const PassReport r = removeDequantizeQuantizePairs(graph);
        QCOMPARE(r.nodes, std::vector<std::string>{"q2"});
        QCOMPARE(findOp(b.g, "Neg")->input(0), std::string("xd")); // the branch still reads the float value
        QCOMPARE(countOps(b.g, "QuantizeLinear"), 2);
        expectSameOutputs(before, run(b.model, x));
        QCOMPARE(removeDequantizeQuantizePairs(graph).changes, int64_t(0));
    }

    void canonicalizesZeroPointsExactly()
    {
        // A constant int8 weight with zp −128 becomes uint8 with no zero point; an
        // activation Q/DQ int8 zp −128 becomes uint8 0 (the DQ drops it); an int8 zp 0
        // Q keeps its zero point, its DQ drops it.
        GraphBuilder b({3, 4});
        b.ints("w_q", onnx::TensorProto::INT8, {4, 2}, randomCodes(8, -128, 127, 8));
        b.floats("w_s", {}, {0.02f});
        b.ints("w_zp", onnx::TensorProto::INT8, {}, {-128});
        b.node("DequantizeLinear", "w_dq", {"w_q", "w_s", "w_zp"}, {"w"});
        b.floats("a_s", {}, {0.04f});
        b.ints("a_zp", onnx::TensorProto::INT8, {}, {-128});
        b.node("QuantizeLinear", "a_q", {"x", "a_s", "a_zp"}, {"aq"});
        b.node("DequantizeLinear", "a_dq", {"aq", "a_s", "a_zp"}, {"a"});
        b.node("MatMul", "mm", {"a", "w"}, {"y"});
        b.ints("c_zp", onnx::TensorProto::INT8, {}, {0});
        b.node("QuantizeLinear", "c_q", {"x", "a_s", "c_zp"}, {"cq"});
        b.node("DequantizeLinear", "c_dq", {"cq", "a_s", "c_zp"}, {"c"});
        b.output("y", 2);
        b.output("c", 2);
        const Tensor x = randomInput({3, 4}, 9);
        const auto before = run(b.model, x);

        QdqGraph graph(*b.model.mutable_graph());
        const PassReport r = canonicalizeZeroPoints(graph);
        QVERIFY(r.changes >= 5);
        for (const auto& node : b.g.node()) {
            if (node.op_type() == "QuantizeLinear") // kept: it sets the type (and ONNX Runtime needs it)
                QCOMPARE(node.input_size(), 3);
            else if (node.op_type() == "DequantizeLinear")
                QCOMPARE(node.input_size(), 2);
        }
        QCOMPARE(graph.initializer(findOp(b.g, "QuantizeLinear")->input(2))->data_type(),
                 int32_t(onnx::TensorProto::UINT8)); // a_q: int8 −128 became uint8 0
        QCOMPARE(graph.initializer(findOp(b.g, "DequantizeLinear")->input(0))->data_type(),
                 int32_t(onnx::TensorProto::UINT8));
        eliminateDeadNodes(graph);
        expectSameOutputs(before, run(b.model, x));
    }

    void movesIntegerOnlyOpsOntoTheIntegers()
    {
        // x → Q → DQ → Reshape → Flatten → Q (same) → DQ → Relu: after the pipeline the
        // reshapes move integers and one Q → DQ pair is left.
        GraphBuilder b({2, 3, 4});
        b.floats("s", {}, {0.1f});
        b.ints("zp", onnx::TensorProto::UINT8, {}, {100});
        b.int64s("shape", {2}, {6, 4});
        b.node("QuantizeLinear", "q1", {"x", "s", "zp"}, {"xq"});
        b.node("DequantizeLinear", "dq1", {"xq", "s", "zp"}, {"xd"});
        b.node("Reshape", "reshape", {"xd", "shape"}, {"r"});
        b.node("Flatten", "flatten", {"r"}, {"f"});
        b.node("QuantizeLinear", "q2", {"f", "s", "zp"}, {"fq"});
        b.node("DequantizeLinear", "dq2", {"fq", "s", "zp"}, {"fd"});
        b.node("Relu", "relu", {"fd"}, {"y"});
        b.output("y", 2);
        const Tensor x = randomInput({2, 3, 4}, 10);
        const auto before = run(b.model, x);

        QdqGraph graph(*b.model.mutable_graph());
        // Once reshape moved, flatten sits between a DQ and a Q too and moves in the same run.
        QCOMPARE(moveIntegerOps(graph).nodes, (std::vector<std::string>{"reshape", "flatten"}));
        const auto reports = runQdqPasses(graph);
        QCOMPARE(reports.size(), size_t(5));
        QCOMPARE(countOps(b.g, "QuantizeLinear"), 1);
        QCOMPARE(countOps(b.g, "DequantizeLinear"), 1);
        const auto& nodes = b.g.node();
        QCOMPARE(nodes.Get(0).op_type(), std::string("QuantizeLinear"));
        QCOMPARE(nodes.Get(1).op_type(), std::string("Reshape"));
        QCOMPARE(nodes.Get(2).op_type(), std::string("Flatten"));
        QCOMPARE(nodes.Get(3).op_type(), std::string("DequantizeLinear"));
        expectSameOutputs(before, run(b.model, x));
        // A fixed point: another run changes nothing.
        for (const auto& r : runQdqPasses(graph))
            QCOMPARE(r.changes, int64_t(0));
    }

    void doesNotMoveOpsWhoseReaderIsNotAQuantize()
    {
        GraphBuilder b({2, 3});
        b.floats("s", {}, {0.1f});
        b.ints("zp", onnx::TensorProto::UINT8, {}, {100});
        b.node("QuantizeLinear", "q1", {"x", "s", "zp"}, {"xq"});
        b.node("DequantizeLinear", "dq1", {"xq", "s", "zp"}, {"xd"});
        b.node("Transpose", "t", {"xd"}, {"xt"});
        b.node("Relu", "relu", {"xt"}, {"y"});
        b.output("y", 2);
        QdqGraph graph(*b.model.mutable_graph());
        QCOMPARE(moveIntegerOps(graph).changes, int64_t(0));
    }

    void eliminatesDeadNodesAndInitializers()
    {
        GraphBuilder b({2, 2});
        b.floats("unused", {2}, {1, 2});
        b.floats("k", {2}, {3, 4});
        b.node("Mul", "dead1", {"x", "k"}, {"d1"});
        b.node("Neg", "dead2", {"d1"}, {"d2"});
        b.node("Relu", "live", {"x"}, {"y"});
        b.output("y", 2);
        QdqGraph graph(*b.model.mutable_graph());
        const PassReport r = eliminateDeadNodes(graph);
        QCOMPARE(r.changes, int64_t(4)); // two nodes, two initializers
        QCOMPARE(b.g.node_size(), 1);
        QCOMPARE(b.g.initializer_size(), 0);
        QCOMPARE(eliminateDeadNodes(graph).changes, int64_t(0));
    }

    void integerTensorsRoundTripIncludingPackedInt4()
    {
        for (int32_t type : {int32_t(onnx::TensorProto::INT8), int32_t(onnx::TensorProto::UINT8),
                             int32_t(onnx::TensorProto::INT16), kOnnxInt4, kOnnxUInt4}) {
            const auto range = integerElementRange(type);
            QVERIFY(range);
            const IntegerTensor t{
                type,
                {7},
                randomCodes(7, std::max(range->first, -40000), std::min(range->second, 40000), uint32_t(type))};
            const auto back = readIntegerTensor(integerTensorProto("t", t));
            QVERIFY(back);
            QCOMPARE(back->values, t.values);
            QCOMPARE(back->dims, t.dims);
        }
        // int4: two codes a byte, the first in the low nibble.
        const auto packed = integerTensorProto("p", IntegerTensor{kOnnxInt4, {3}, {-1, 2, 7}});
        QCOMPARE(packed.raw_data().size(), size_t(2));
        QCOMPARE(uint8_t(packed.raw_data()[0]), uint8_t(0x2f));
        QCOMPARE(uint8_t(packed.raw_data()[1]), uint8_t(0x07));
        QVERIFY_THROWS_EXCEPTION(Error, integerTensorProto("bad", IntegerTensor{kOnnxInt4, {1}, {8}}));
    }
};

QTEST_APPLESS_MAIN(TestExportPasses)
#include "tst_export_passes.moc"
