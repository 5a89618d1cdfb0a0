// Weights wherever the exporter put them (io/constant_folding.h): Constant
// nodes at opsets 7, 9 and 11, Identity, Reshape, Unsqueeze, Cast from float16 and
// Transpose of constants are layers with the right weights; the interpreter runs
// such a model to exactly the outputs of the same network with plain
// initializers; the QDQ export of it runs to the simulation's numbers; a model
// without a layer says why, and an export of it writes nothing.

#include <QtTest>

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <fstream>

#include "export_onnx/export_cases.h"

using namespace qs;
using namespace qs::test;

namespace {

const QString kScript = QStringLiteral(QUANTSCOPE_TEST_DATA "/../constant_weights/make_models.py");

// Deterministic inputs in [-1, 1) for every graph input of `model`, with batch 2.
std::map<std::string, Tensor> inputsFor(const Model& model)
{
    std::map<std::string, Tensor> inputs;
    uint32_t state = 12345;
    for (const ValueInfo& v : model.inputs) {
        Shape shape;
        for (const Dim& d : *v.shape)
            shape.push_back(d.size.value_or(2));
        std::vector<float> values(size_t(shapeElementCount(shape)));
        for (float& x : values) {
            state = state * 1664525u + 1013904223u;
            x = float(state >> 8) / float(1 << 23) - 1.0f;
        }
        inputs[v.name] = Tensor::fromVector(DType::F32, shape, values);
    }
    return inputs;
}

bool sameValues(const Tensor& a, const Tensor& b)
{
    if (a.shape() != b.shape())
        return false;
    const Tensor fa = a.toFloat32(), fb = b.toFloat32();
    return std::equal(fa.values<float>().begin(), fa.values<float>().end(), fb.values<float>().begin());
}

int countOps(const Model& m, const std::string& op)
{
    int n = 0;
    for (const Node& node : m.nodes)
        n += node.opType == op;
    return n;
}

onnx::ModelProto readProto(const std::filesystem::path& file)
{
    onnx::ModelProto proto;
    std::ifstream in(file, std::ios::binary);
    if (!proto.ParseFromIstream(&in))
        throw Error(file.string() + ": not a model");
    return proto;
}

const RuleSet kInt8Weights =
    RuleSet::fromJson(R"({"version": 1, "rules": [{"weight_qtype": "int8", "weight_calibration": "minmax"}]})");

} // namespace

class TestConstantWeights : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;
    std::filesystem::path path(const std::string& name) const { return dir_.path().toStdString() + "/" + name; }

    void addModels()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<int>("layers");
        QTest::newRow("Constant nodes, opset 7, IR 3") << "cnn_opset7" << 2;
        QTest::newRow("Constant nodes, opset 9") << "cnn_opset9" << 2;
        QTest::newRow("Constant nodes, opset 11") << "cnn_opset11" << 2;
        QTest::newRow("Identity, Reshape, Unsqueeze, Cast fp16, Transpose") << "layouts" << 5;
        QTest::newRow("tied MatMul weight through Transpose and Identity") << "tied" << 2;
    }

private slots:
    void initTestCase()
    {
        QVERIFY(dir_.isValid());
        QVERIFY(runPython(kScript, {dir_.path()}));
    }

    void layersHaveTheWeightsTheFileComputes_data() { addModels(); }
    void layersHaveTheWeightsTheFileComputes()
    {
        QFETCH(QString, name);
        QFETCH(int, layers);
        const Model folded = loadOnnx(path(name.toStdString() + ".onnx"));
        const Model plain = loadOnnx(path(name.toStdString() + "_plain.onnx"));
        QCOMPARE(int(plain.layers.size()), layers);
        QCOMPARE(int(folded.layers.size()), layers);
        for (size_t i = 0; i < folded.layers.size(); ++i) {
            const QuantizableLayer& a = folded.layers[i];
            const QuantizableLayer& b = plain.layers[i];
            QCOMPARE(a.opType, b.opType);
            QCOMPARE(a.weightShape, b.weightShape);
            QCOMPARE(a.weightDType, DType::F32);
            QCOMPARE(a.channelAxis, b.channelAxis);
            QCOMPARE(folded.nodes[*a.node].name, plain.nodes[*b.node].name);
            QVERIFY2(sameValues(*folded.initializer(a.weightName), *plain.initializer(b.weightName)),
                     a.modulePath.c_str());
        }
        // The folded nodes are gone, and with them the constants only they read.
        for (const char* op : {"Constant", "Identity", "Cast", "Reshape", "Transpose", "Unsqueeze"})
            QCOMPARE(countOps(folded, op), 0);
        QCOMPARE(folded.nodes.size(), plain.nodes.size());
        QCOMPARE(folded.parameterCount(), plain.parameterCount());
        for (const std::string& w : folded.warnings)
            QVERIFY2(w.find("no quantizable layer") == std::string::npos, w.c_str());
    }

    void interpreterRunsAsWithPlainInitializers_data() { addModels(); }
    void interpreterRunsAsWithPlainInitializers()
    {
        QFETCH(QString, name);
        const Model folded = loadOnnx(path(name.toStdString() + ".onnx"));
        const Model plain = loadOnnx(path(name.toStdString() + "_plain.onnx"));
        const auto inputs = inputsFor(plain);
        const auto a = Interpreter(folded).run(inputs);
        const auto b = Interpreter(plain).run(inputs);
        QCOMPARE(a.size(), size_t(1));
        QVERIFY(sameValues(a.at("y"), b.at("y")));
    }

    void qdqExportRunsToTheSimulation_data() { addModels(); }
    void qdqExportRunsToTheSimulation()
    {
        QFETCH(QString, name);
        QFETCH(int, layers);
        const Model model = loadOnnx(path(name.toStdString() + ".onnx"));
        const QuantizationPlan plan = QuantizationPlan::build(model, kInt8Weights);
        WeightQuantizer weights;
        weights.update(model, plan);
        QVERIFY(weights.problems().empty());
        const std::filesystem::path out = path(name.toStdString() + "_qdq.onnx");
        const OnnxExportSummary summary = exportOnnxQdq(model, plan, weights, {}, out);
        QVERIFY(summary.opset >= 13);
        QVERIFY(summary.checked);

        // Every weight is quantized once in the file, as in the simulation: a
        // weight two layers read (tied, through Identity) is one DequantizeLinear.
        const onnx::ModelProto written = readProto(out);
        int dequantize = 0;
        for (const auto& node : written.graph().node()) {
            dequantize += node.op_type() == "DequantizeLinear";
            QVERIFY2(node.op_type() != "Constant", node.name().c_str());
        }
        const int shared = int(std::ranges::count_if(model.layers, [](const QuantizableLayer& l) { return l.sharesWeightOf.has_value(); }));
        QCOMPARE(shared, name == "tied" ? 1 : 0);
        QCOMPARE(dequantize, layers - shared);

        const Interpreter floatRun(model);
        const auto inputs = inputsFor(model);
        QuantizationHook hook(model, plan, weights, {});
        RunOptions run;
        run.observer = &hook;
        const Tensor simulated = floatRun.run(inputs, run).at("y");
        const Tensor exported = Interpreter(loadOnnx(out)).run(inputs).at("y");
        const double err = relativeMaxError(exported, simulated);
        QVERIFY2(err <= 1e-5, ("relative error " + std::to_string(err)).c_str());
        // Quantization changed the output: the comparison above could not pass on a float copy.
        QVERIFY(relativeMaxError(simulated, floatRun.run(inputs).at("y")) > 1e-5);
        qInfo("%s: opset %lld -> %lld, QDQ vs simulation %.2g", qPrintable(name), (long long)summary.sourceOpset,
              (long long)summary.opset, err);
    }

    void modelWithoutLayersSaysWhyAndExportsNothing()
    {
        const Model model = loadOnnx(path("no_layers.onnx"));
        QVERIFY(model.layers.empty());
        std::string warning;
        for (const std::string& w : model.warnings)
            if (w.find("no quantizable layer") != std::string::npos)
                warning = w;
        QVERIFY2(warning.find("node 'conv' (Conv") != std::string::npos, warning.c_str());
        QVERIFY2(warning.find("'w', a graph input") != std::string::npos, warning.c_str());

        const QuantizationPlan plan = QuantizationPlan::build(model, kInt8Weights);
        WeightQuantizer weights;
        weights.update(model, plan);
        const std::filesystem::path out = path("no_layers_qdq.onnx");
        try {
            exportOnnxQdq(model, plan, weights, {}, out);
            QFAIL("a QDQ export without a quantized layer was written");
        } catch (const Error& e) {
            QVERIFY2(std::string(e.what()).find("float copy") != std::string::npos, e.what());
        }
        QVERIFY(!std::filesystem::exists(out));
    }

    void cliQuantizeWithoutLayersFailsAndWritesNothing()
    {
        const std::string rules = path("int8.json");
        writeFile(rules, R"({"version": 1, "rules": [{"weight_qtype": "int8"}]})");
        const std::string out = path("cli_no_layers_qdq.onnx");
        const CliRun r = runCli({"quantize", QString::fromStdString(path("no_layers.onnx")), "--rules",
                                 QString::fromStdString(rules), "--export-onnx", QString::fromStdString(out)});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("no quantizable layer found") && r.err.contains("node 'conv' (Conv"),
                 qPrintable(r.err));
        QVERIFY2(r.err.contains("nothing was written"), qPrintable(r.err));
        QVERIFY(!std::filesystem::exists(out));
    }

    void refusedConstantsNameTheNode_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<QString>("expected");
        QTest::newRow("sparse_value") << "sparse_constant"
                                      << "node 'w_sparse' (Constant, #0): sparse_value constants are not supported";
        QTest::newRow("Reshape to another size") << "bad_reshape"
                                                 << "node 'w_reshape' (Reshape, #2): cannot reshape [6]";
    }
    void refusedConstantsNameTheNode()
    {
        QFETCH(QString, name);
        QFETCH(QString, expected);
        const std::string file = path(name.toStdString() + ".onnx");
        try {
            loadOnnx(file);
            QFAIL("loaded");
        } catch (const Error& e) {
            const std::string message = e.what();
            QVERIFY2(message.starts_with(file + ": "), e.what());
            QVERIFY2(message.find(expected.toStdString()) != std::string::npos, e.what());
        }
    }
};

QTEST_GUILESS_MAIN(TestConstantWeights)
#include "tst_constant_weights.moc"
