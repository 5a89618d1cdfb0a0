// A weight several layers read is one quantizer (graph/layer.h
// sharesWeightOf): found whether the readers name the same initializer or an
// Identity of it; rules that quantize it differently are an error naming both
// layers; the weight quantizer computes it once; the hook quantizes every read
// as soon as one reader is enabled; the QDQ export writes one DequantizeLinear
// that every reader reads, and runs to the simulation's numbers.
//
// The models are written here with ONNX's protobuf classes:
//   x [2, 4] -> MatMul(x, W) -> Relu -> MatMul(., R) -> y, where R is
//     "same_name":  W itself;
//     "identity":   Identity(W) (folded at load into another name for W's values);
//     "equal_copy": another initializer holding W's values (not shared: equal
//                   values are not the same tensor).
#include <QtTest>

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>

#include "export/onnx_qdq.h"
#include "io/onnx_loader.h"
#include "runtime/interpreter.h"
#include "runtime/quantization_hook.h"
#include "quantization/weight_quantizer.h"

using namespace qs;

namespace {

std::vector<float> randomValues(size_t n, uint32_t seed)
{
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 0.5f);
    std::vector<float> v(n);
    for (float& x : v)
        x = normal(rng);
    return v;
}

void addFloatInitializer(onnx::GraphProto& g, const std::string& name, const std::vector<int64_t>& dims,
                         const std::vector<float>& values)
{
    onnx::TensorProto& t = *g.add_initializer();
    t.set_name(name);
    t.set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims)
        t.add_dims(d);
    t.set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
}

void addNode(onnx::GraphProto& g, const std::string& op, const std::string& name, std::vector<std::string> inputs,
             const std::string& output)
{
    onnx::NodeProto& n = *g.add_node();
    n.set_op_type(op);
    n.set_name(name);
    for (auto& in : inputs)
        n.add_input(in);
    n.add_output(output);
}

void addValue(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>& list, const std::string& name)
{
    onnx::ValueInfoProto& v = *list.Add();
    v.set_name(name);
    auto& type = *v.mutable_type()->mutable_tensor_type();
    type.set_elem_type(onnx::TensorProto::FLOAT);
    type.mutable_shape()->add_dim()->set_dim_value(2);
    type.mutable_shape()->add_dim()->set_dim_value(4);
}

// Writes the model `kind` (see the file comment) to `file`.
void writeModel(const std::filesystem::path& file, const std::string& kind)
{
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.set_producer_name("tst_shared_weights");
    m.add_opset_import()->set_version(17);
    onnx::GraphProto& g = *m.mutable_graph();
    g.set_name(kind);
    addValue(*g.mutable_input(), "x");
    addValue(*g.mutable_output(), "y");
    const std::vector<float> w = randomValues(16, 7);
    addFloatInitializer(g, "W", {4, 4}, w);
    std::string second = "W";
    if (kind == "identity") {
        addNode(g, "Identity", "tie", {"W"}, "W_tied");
        second = "W_tied";
    } else if (kind == "equal_copy") {
        addFloatInitializer(g, "W_copy", {4, 4}, w);
        second = "W_copy";
    }
    addNode(g, "MatMul", "first/MatMul", {"x", "W"}, "h");
    addNode(g, "Relu", "relu", {"h"}, "r");
    addNode(g, "MatMul", "second/MatMul", {"r", second}, "y");
    std::ofstream out(file, std::ios::binary);
    QVERIFY(m.SerializeToOstream(&out));
}

RuleSet rules(const std::string& list)
{
    return RuleSet::fromJson(R"({"version": 1, "rules": )" + list + "}");
}

std::map<std::string, Tensor> inputs()
{
    return {{"x", Tensor::fromVector(DType::F32, {2, 4}, randomValues(8, 3))}};
}

Tensor runWith(const Model& model, const QuantizationPlan& plan, const WeightQuantizer& weights,
               std::optional<std::vector<bool>> enabled)
{
    QuantizationHook hook(model, plan, weights, {});
    hook.setEnabledLayers(std::move(enabled));
    RunOptions options;
    options.observer = &hook;
    return Interpreter(model).run(inputs(), options).at("y");
}

bool sameValues(const Tensor& a, const Tensor& b)
{
    const auto x = a.values<float>(), y = b.values<float>();
    return a.shape() == b.shape() && std::equal(x.begin(), x.end(), y.begin());
}

const char* kInt4 = R"([{"weight_qtype": "int4"}])";

} // namespace

class TestSharedWeights : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;
    std::filesystem::path path(const std::string& name) const { return dir_.path().toStdString() + "/" + name; }
    Model load(const std::string& kind)
    {
        const std::filesystem::path file = path(kind + ".onnx");
        if (!std::filesystem::exists(file))
            writeModel(file, kind);
        return loadOnnx(file);
    }

private slots:
    void initTestCase() { QVERIFY(dir_.isValid()); }

    void sharedWeightsAreFound_data()
    {
        QTest::addColumn<QString>("kind");
        QTest::addColumn<bool>("shared");
        QTest::newRow("same initializer") << "same_name" << true;
        QTest::newRow("through Identity") << "identity" << true;
        QTest::newRow("an equal copy is not shared") << "equal_copy" << false;
    }
    void sharedWeightsAreFound()
    {
        QFETCH(QString, kind);
        QFETCH(bool, shared);
        const Model model = load(kind.toStdString());
        QCOMPARE(model.layers.size(), size_t(2));
        QVERIFY(!model.layers[0].sharesWeightOf);
        QCOMPARE(model.layers[1].sharesWeightOf.has_value(), shared);
        if (shared)
            QCOMPARE(*model.layers[1].sharesWeightOf, size_t(0));
    }

    void rulesThatDisagreeNameBothLayers_data()
    {
        QTest::addColumn<QString>("rulesJson");
        QTest::addColumn<QString>("expected");
        QTest::newRow("different qtypes") << R"([{"module_path": "first.*", "weight_qtype": "int8"},
                                                {"weight_qtype": "int4"}])"
                                          << "as int8 per_channel absmax (rule 0) in the first and as int4 "
                                             "per_channel absmax (rule 1) in the second";
        QTest::newRow("one left float by no rule") << R"([{"module_path": "first.*", "weight_qtype": "int8"}])"
                                                   << "as float (no rule matches it) in the second";
        QTest::newRow("one left float by a rule without weight_qtype")
            << R"([{"module_path": "second.*"}, {"weight_qtype": "int8"}])"
            << "as float (rule 0 sets no weight_qtype) in the second";
        QTest::newRow("different granularity") << R"([{"module_path": "first.*", "weight_qtype": "int8"},
                                                     {"weight_qtype": "int8", "granularity": "per_tensor"}])"
                                               << "int8 per_tensor absmax (rule 1)";
    }
    void rulesThatDisagreeNameBothLayers()
    {
        QFETCH(QString, rulesJson);
        QFETCH(QString, expected);
        for (const char* kind : {"same_name", "identity"}) {
            const Model model = load(kind);
            try {
                QuantizationPlan::build(model, rules(rulesJson.toStdString()));
                QFAIL("rules that quantize a shared weight differently were accepted");
            } catch (const Error& e) {
                const std::string why = e.what();
                QVERIFY2(why.find("layers 'first' and 'second' read the same weight 'W") != std::string::npos,
                         why.c_str());
                QVERIFY2(why.find(expected.toStdString()) != std::string::npos, why.c_str());
            }
        }
        // The same rules are fine where the two weights are separate tensors.
        const Model copies = load("equal_copy");
        QCOMPARE(QuantizationPlan::build(copies, rules(rulesJson.toStdString())).layers().empty(), false);
    }

    // A sensitivity run with an algorithm switched on (QuantizationPlan::withAlgorithm) rounds a
    // shared weight once: both readers take the algorithm, or both keep their rule's rounding.
    void bothReadersOfASharedWeightTakeTheAlgorithm()
    {
        for (const char* kind : {"same_name", "identity"}) {
            const Model model = load(kind);
            const QuantizationPlan plan = QuantizationPlan::build(model, rules(kInt4));
            std::vector<KeptRounding> kept;
            const QuantizationPlan gptq = plan.withAlgorithm(model, WeightAlgorithm::parse("gptq"), &kept);
            QVERIFY(kept.empty());
            QCOMPARE(gptq.layers().size(), size_t(2));
            for (const LayerQuantization& lq : gptq.layers())
                QCOMPARE(lq.weightAlgorithm.kind, WeightAlgorithmKind::Gptq);
            for (const LayerQuantization& lq : plan.layers()) // the plan it was made from is unchanged
                QCOMPARE(lq.weightAlgorithm.kind, WeightAlgorithmKind::Rtn);
            const QuantizationPlan fp8 = QuantizationPlan::build(model, rules(R"([{"weight_qtype": "fp8_e4m3"}])"));
            kept.clear();
            const QuantizationPlan fp8Gptq = fp8.withAlgorithm(model, WeightAlgorithm::parse("gptq"), &kept);
            for (const LayerQuantization& lq : fp8Gptq.layers())
                QCOMPARE(lq.weightAlgorithm.kind, WeightAlgorithmKind::Rtn);
            QCOMPARE(kept.size(), size_t(2));
            QVERIFY(kept[0].reason.find("integer grid") != std::string::npos);
        }
    }

    void weightIsQuantizedOnceAndEveryReadReadsIt()
    {
        for (const char* kind : {"same_name", "identity"}) {
            const Model model = load(kind);
            const QuantizationPlan plan = QuantizationPlan::build(model, rules(kInt4));
            WeightQuantizer weights;
            const std::vector<size_t> recomputed = weights.update(model, plan);
            QCOMPARE(recomputed, (std::vector<size_t>{0, 1}));
            QVERIFY(weights.find(0));
            QCOMPARE(weights.find(1).get(), weights.find(0).get()); // one result, not two equal ones
            QCOMPARE(weights.update(model, plan), std::vector<size_t>{});

            // One reader enabled quantizes the weight for both (its activation is not quantized here).
            const Tensor all = runWith(model, plan, weights, std::nullopt);
            const Tensor firstOnly = runWith(model, plan, weights, std::vector<bool>{true, false});
            const Tensor secondOnly = runWith(model, plan, weights, std::vector<bool>{false, true});
            const Tensor none = runWith(model, plan, weights, std::vector<bool>{false, false});
            QVERIFY(sameValues(firstOnly, all));
            QVERIFY(sameValues(secondOnly, all));
            QVERIFY(!sameValues(none, all)); // int4 changed the output: the checks above are not vacuous
        }
    }

    void qdqExportWritesOneDequantizeLinear_data()
    {
        QTest::addColumn<QString>("kind");
        QTest::addColumn<int>("dequantize");
        QTest::newRow("same initializer") << "same_name" << 1;
        QTest::newRow("through Identity") << "identity" << 1;
        QTest::newRow("an equal copy is two tensors") << "equal_copy" << 2;
    }
    void qdqExportWritesOneDequantizeLinear()
    {
        QFETCH(QString, kind);
        QFETCH(int, dequantize);
        const Model model = load(kind.toStdString());
        const QuantizationPlan plan = QuantizationPlan::build(model, rules(kInt4));
        WeightQuantizer weights;
        weights.update(model, plan);
        const std::filesystem::path out = path(kind.toStdString() + "_qdq.onnx");
        exportOnnxQdq(model, plan, weights, {}, out);

        onnx::ModelProto written;
        std::ifstream in(out, std::ios::binary);
        QVERIFY(written.ParseFromIstream(&in));
        int dq = 0;
        std::string dqOutput;
        for (const auto& node : written.graph().node())
            if (node.op_type() == "DequantizeLinear") {
                ++dq;
                dqOutput = node.output(0);
            }
        QCOMPARE(dq, dequantize);
        if (dequantize == 1) {
            int readers = 0;
            for (const auto& node : written.graph().node())
                readers += node.op_type() == "MatMul" && node.input(1) == dqOutput;
            QCOMPARE(readers, 2);
            // No float copy of the weight is left behind.
            for (const auto& t : written.graph().initializer())
                QVERIFY2(t.data_type() != onnx::TensorProto::FLOAT || t.dims_size() != 2, t.name().c_str());
        }
        const Tensor simulated = runWith(model, plan, weights, std::nullopt);
        const Tensor exported = Interpreter(loadOnnx(out)).run(inputs()).at("y");
        const auto e = exported.values<float>(), s = simulated.values<float>();
        QCOMPARE(e.size(), s.size());
        for (size_t i = 0; i < e.size(); ++i)
            QVERIFY2(std::abs(e[i] - s[i]) <= 1e-5f * (1.0f + std::abs(s[i])), std::to_string(i).c_str());
    }
};

QTEST_GUILESS_MAIN(TestSharedWeights)
#include "tst_shared_weights.moc"
