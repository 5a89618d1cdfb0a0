// ODML mode on real models: BatchNormalization folding (graph/
// batch_norm_folding.h) keeps a model's outputs — ours after folding against
// ours and ONNX Runtime before — and gives the weights the formula gives; the
// folded model converts; every torchvision CNN of the zoo (tests/zoo, fixture
// `zoo_models`) and a torchvision ResNet-18 exported with its batch norms
// convert in ODML mode with w8a8 rules, with no op refused.
#include <QtTest>

#include <cmath>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "export/odml.h"
#include "graph/batch_norm_folding.h"
#include "io/data_source.h"
#include "io/model_loader.h"
#include "ort_support.h"
#include "rules/ruleset.h"
#include "runtime/interpreter.h"
#include "test_support.h"

using namespace qs;
namespace fs = std::filesystem;

namespace {

const fs::path kZoo = QUANTSCOPE_ZOO_DIR;
const char* kW8A8 =
    R"({"version": 1, "rules": [{"module_path": ".*", "weight_qtype": "int8", "act_qtype": "int8",
        "act_static_scale": true}]})";

Tensor randomTensor(Shape shape, uint32_t seed)
{
    Tensor t(DType::F32, std::move(shape));
    uint32_t state = seed;
    for (float& v : t.mutableValues<float>()) {
        state = state * 1664525u + 1013904223u;
        v = float(state >> 8) / float(1u << 24) * 4.0f - 2.0f;
    }
    return t;
}

// ||a − b|| / ||b||
double relativeL2(const Tensor& a, const Tensor& b)
{
    double noise = 0, signal = 0;
    const auto x = a.values<float>(), y = b.values<float>();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i)
        noise += (double(x[i]) - y[i]) * (double(x[i]) - y[i]), signal += double(y[i]) * y[i];
    return std::sqrt(noise / std::max(signal, 1e-30));
}

std::vector<float> floats(const Model& m, const std::string& name)
{
    const Tensor* t = m.initializer(name);
    if (!t)
        throw Error("no initializer '" + name + "'");
    const Tensor f = t->toFloat32();
    return {f.values<float>().begin(), f.values<float>().end()};
}

// γ/√(var+ε) of a BatchNormalization named `bn` (the generator's parameter names).
std::vector<double> factors(const Model& m, const std::string& bn, double eps)
{
    const std::vector<float> gamma = floats(m, bn + ".weight"), var = floats(m, bn + ".running_var");
    std::vector<double> f(gamma.size());
    for (size_t c = 0; c < f.size(); ++c)
        f[c] = gamma[c] / std::sqrt(double(var[c]) + eps);
    return f;
}

struct OdmlRun {
    OdmlSummary summary;
    nlohmann::json doc;
    BatchNormFolding folding;
};

OdmlRun convert(const fs::path& modelFile, const fs::path& calibFile, const fs::path& out)
{
    OdmlRun run;
    run.folding = foldBatchNorms(loadModel(modelFile));
    const Model& model = run.folding.model;
    const QuantizationPlan plan = QuantizationPlan::build(model, RuleSet::fromJson(kW8A8), QuantizationMode::Odml);
    WeightQuantizer weights;
    weights.update(model, plan);
    const Interpreter interpreter(model);
    // The zoo's models take batches of 1; two batches are enough for ranges here.
    auto data = openDataSource(calibFile, {.batchSize = 1, .exactBatches = true}, &model);
    OdmlOptions options;
    options.maxBatches = 2;
    run.summary = exportOdml(interpreter, plan, weights, *data, options, out);
    std::ifstream in(out);
    run.doc = nlohmann::json::parse(in);
    return run;
}

} // namespace

class TestOdmlModels : public QObject {
    Q_OBJECT
private:
    QTemporaryDir dir_;
    fs::path path(const std::string& name) const { return fs::path(dir_.path().toStdString()) / name; }

private slots:
    void initTestCase()
    {
        QVERIFY(dir_.isValid());
        QVERIFY(test::runPython(QUANTSCOPE_TEST_DATA "/onnx/make_batch_norm_models.py", {dir_.path()}, 300000));
    }

    void foldingKeepsTheOutputs()
    {
        const Model original = loadModel(path("batch_norm.onnx"));
        const BatchNormFolding f = foldBatchNorms(original);
        std::vector<std::pair<std::string, std::string>> folded;
        for (const FoldedBatchNorm& b : f.folded)
            folded.push_back({b.batchNorm, b.into});
        const std::vector<std::pair<std::string, std::string>> expected = {
            {"bn1", "conv1"}, {"bn2", "dw"}, {"bn3", "up"}, {"bn6", "fc"}};
        QCOMPARE(folded, expected);
        QCOMPARE(int(f.decomposed.size()), 2); // bn4 (its conv's output is read by the Add too), bn5 (after Concat)
        QCOMPARE(f.decomposed[0].batchNorm, std::string("bn4"));
        QCOMPARE(f.decomposed[1].batchNorm, std::string("bn5"));
        QVERIFY(f.kept.empty());
        for (const Node& n : f.model.nodes)
            QVERIFY2(n.opType != "BatchNormalization", n.name.c_str());
        // The same layers, under the same paths; the outputs keep their names.
        QCOMPARE(f.model.layers.size(), original.layers.size());
        for (size_t l = 0; l < original.layers.size(); ++l)
            QCOMPARE(f.model.layers[l].modulePath, original.layers[l].modulePath);

        const std::map<std::string, Tensor> inputs = {{"x", randomTensor({2, 3, 8, 8}, 5)}};
        const Tensor ours = Interpreter(original).run(inputs).at("y");
        const Tensor oursFolded = Interpreter(f.model).run(inputs).at("y");
        const Tensor ort = runOnnxRuntime(path("batch_norm.onnx"), inputs).at("y");
        const double toOurs = relativeL2(oursFolded, ours), toOrt = relativeL2(oursFolded, ort);
        qInfo("batch_norm: folded vs unfolded %.2e, folded vs ONNX Runtime %.2e (relative L2)", toOurs, toOrt);
        QVERIFY2(toOurs <= 1e-5, std::to_string(toOurs).c_str());
        QVERIFY2(toOrt <= 1e-5, std::to_string(toOrt).c_str());
    }

    void foldedWeightsAreTheFormula()
    {
        const Model original = loadModel(path("batch_norm.onnx"));
        const Model folded = foldBatchNorms(original).model;
        auto close = [](double a, double b) { return std::fabs(a - b) <= 1e-6 * std::max(1.0, std::fabs(b)); };
        // Conv: W'[c] = W[c]·f[c], b' = (b − mean)·f + β. Only conv1 read its weight: same name.
        {
            const std::vector<double> f = factors(original, "bn1", 1e-5);
            const std::vector<float> w = floats(original, "conv1.weight"), w2 = floats(folded, "conv1.weight");
            const std::vector<float> b = floats(original, "conv1.bias"), b2 = floats(folded, "conv1.bias");
            const std::vector<float> mean = floats(original, "bn1.running_mean"), beta = floats(original, "bn1.bias");
            for (size_t i = 0; i < w.size(); ++i)
                QVERIFY2(close(w2[i], w[i] * f[i / 27]), std::to_string(i).c_str());
            for (size_t c = 0; c < 4; ++c)
                QVERIFY(close(b2[c], (b[c] - mean[c]) * f[c] + beta[c]));
        }
        // Depthwise Conv without a bias (ε 1e-3): a bias −mean·f + β is added.
        {
            const std::vector<double> f = factors(original, "bn2", 1e-3);
            const Node* dw = nullptr;
            for (const Node& n : folded.nodes)
                dw = n.name == "dw" ? &n : dw;
            QVERIFY(dw && dw->inputs.size() == 3);
            const std::vector<float> b2 = floats(folded, dw->inputs[2]);
            const std::vector<float> mean = floats(original, "bn2.running_mean"), beta = floats(original, "bn2.bias");
            for (size_t c = 0; c < 4; ++c)
                QVERIFY(close(b2[c], -mean[c] * f[c] + beta[c]));
        }
        // ConvTranspose, group 2, W [4, 2, 2, 2]: W[i, j] scales by f[(i / 2)·2 + j].
        {
            const std::vector<double> f = factors(original, "bn3", 1e-5);
            const std::vector<float> w = floats(original, "up.weight"), w2 = floats(folded, "up.weight");
            for (size_t i = 0; i < 4; ++i)
                for (size_t j = 0; j < 2; ++j)
                    for (size_t k = 0; k < 4; ++k) {
                        const size_t at = (i * 2 + j) * 4 + k;
                        QVERIFY(close(w2[at], w[at] * f[(i / 2) * 2 + j]));
                    }
        }
        // Gemm (transB, beta 0.5): row n of B scales by f[n]; C' = (0.5·C − mean)·f + β, beta becomes 1.
        {
            const std::vector<double> f = factors(original, "bn6", 1e-5);
            const std::vector<float> w = floats(original, "fc.weight"), w2 = floats(folded, "fc.weight");
            const std::vector<float> b = floats(original, "fc.bias"), b2 = floats(folded, "fc.bias");
            const std::vector<float> mean = floats(original, "bn6.running_mean"), beta = floats(original, "bn6.bias");
            for (size_t i = 0; i < w.size(); ++i)
                QVERIFY(close(w2[i], w[i] * f[i / 8]));
            for (size_t n = 0; n < 5; ++n)
                QVERIFY(close(b2[n], (0.5 * b[n] - mean[n]) * f[n] + beta[n]));
        }
    }

    void foldedModelConverts()
    {
        OdmlRun run;
        try {
            run = convert(path("batch_norm.onnx"), path("batch_norm_calib.npz"), path("batch_norm.json"));
        } catch (const Error& e) {
            QFAIL(e.what());
        }
        // The folded conv1 weight is what is annotated: absmax of W·f per channel / 127.
        const Model& model = run.folding.model;
        const std::vector<float> w = floats(model, "conv1.weight");
        const nlohmann::json* point = nullptr;
        for (const nlohmann::json& p : run.doc.at("quantization_points"))
            point = p.at("tensor") == "conv1.weight" ? &p : point;
        QVERIFY(point);
        for (size_t c = 0; c < 4; ++c) {
            float absmax = 0;
            for (size_t k = 0; k < 27; ++k)
                absmax = std::max(absmax, std::fabs(w[c * 27 + k]));
            QCOMPARE(point->at("scale")[c].get<float>(), absmax / 127.0f);
        }
        // conv1's Relu is fused into it; the decomposed batch norms are a Mul and an Add
        // with their own scales and per-tensor constants.
        std::map<std::string, nlohmann::json> ops;
        for (const nlohmann::json& op : run.doc.at("ops"))
            ops[op.at("node")] = op;
        QCOMPARE(ops.at("relu1").at("scheme"), "fused");
        QCOMPARE(ops.at("relu1").at("fused_into"), "conv1");
        QCOMPARE(ops.at("bn5/Mul").at("scheme"), "own_scale");
        QCOMPARE(ops.at("bn5/Add").at("scheme"), "own_scale");
        QCOMPARE(run.summary.constants, int64_t(4));
    }

    void zooCnnsConvert_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QString>("calib");
        for (const char* name : {"resnet18", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "shufflenet_v2",
                                 "squeezenet", "densenet_small", "regnet_y_400mf", "mnasnet", "segmentation_head"})
            QTest::newRow(name) << QString::fromStdString((kZoo / (std::string(name) + ".onnx")).string())
                                << QString::fromStdString((kZoo / (std::string(name) + "_calib.npz")).string());
        QTest::newRow("resnet18_bn") << QString::fromStdString(path("resnet18_bn.onnx").string())
                                     << QString::fromStdString(path("resnet18_bn_calib.npz").string());
    }

    void zooCnnsConvert()
    {
        QFETCH(QString, model);
        QFETCH(QString, calib);
        QVERIFY2(fs::exists(model.toStdString()), "the zoo is missing: run `ctest -R zoo_models`");
        OdmlRun run;
        try {
            run =
                convert(model.toStdString(), calib.toStdString(), path(QTest::currentDataTag() + std::string(".json")));
        } catch (const Error& e) {
            QFAIL(e.what());
        }
        std::string schemes;
        for (const auto& [scheme, n] : run.summary.opsByScheme)
            schemes += " " + scheme + " " + std::to_string(n);
        qInfo("%s: %zu BatchNormalization folded, %zu as Mul+Add, %zu kept; ops:%s; points: %lld activations, %lld "
              "weights, %lld biases, %lld constants",
              QTest::currentDataTag(), run.folding.folded.size(), run.folding.decomposed.size(),
              run.folding.kept.size(), schemes.c_str(), static_cast<long long>(run.summary.activations),
              static_cast<long long>(run.summary.weights), static_cast<long long>(run.summary.biases),
              static_cast<long long>(run.summary.constants));
        QCOMPARE(run.summary.ops, int64_t(run.folding.model.nodes.size()));
        QCOMPARE(run.summary.weights, int64_t(run.folding.model.layers.size()));
        if (QString(QTest::currentDataTag()) == "resnet18_bn") {
            QCOMPARE(int(run.folding.folded.size()), 20); // every BN follows a conv
            QVERIFY(run.folding.decomposed.empty());
        }
        // Every value an op writes has a point unless it is fused away or not quantized.
        std::set<std::string> pointed;
        for (const nlohmann::json& p : run.doc.at("quantization_points"))
            pointed.insert(p.at("tensor").get<std::string>());
        std::set<std::string> fusedAway;
        for (const nlohmann::json& op : run.doc.at("ops"))
            if (op.at("scheme") == "fused")
                for (const Node& n : run.folding.model.nodes)
                    if (n.name == op.at("fused_into"))
                        fusedAway.insert(n.outputs.front());
        for (size_t i = 0; i < run.folding.model.nodes.size(); ++i) {
            const Node& n = run.folding.model.nodes[i];
            if (run.doc.at("ops")[i].at("scheme") == "not_quantized")
                continue;
            QVERIFY2(pointed.contains(n.outputs.front()) || fusedAway.contains(n.outputs.front()), n.name.c_str());
        }
    }
};

QTEST_GUILESS_MAIN(TestOdmlModels)
#include "tst_odml_models.moc"
