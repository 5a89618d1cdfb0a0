// If, Loop and Scan in the interpreter, on models tests/data/onnx/
// make_control_flow_models.py writes with python3-onnx together with the
// outputs numpy computes for them: an If choosing between two Convs that read
// the outer graph's weights, a Loop with loop-carried state, a scan output and
// an If nested in its body, a PyTorch-style while loop, a Scan running a
// recurrent cell (with input/output axes and directions), and malformed models
// the interpreter must refuse with an Error naming the node. The layers inside
// the bodies are listed under their node, calibrated (over every iteration)
// and fake-quantized like the main graph's.
#include <QtTest>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>

#include "io/npy.h"
#include "io/onnx_loader.h"
#include "runtime/activation_calibration.h"
#include "runtime/interpreter.h"
#include "runtime/quantization_hook.h"
#include "quantization/weight_quantizer.h"
#include "test_support.h"

using namespace qs;
namespace fs = std::filesystem;

namespace {

// Counts the inputs the observer is shown for each op type.
class InputCountObserver : public NodeObserver {
public:
    std::map<std::string, size_t> inputs;
    void beforeNode(NodeEvent& event) override { inputs[event.node->opType] = event.inputs.size(); }
};

// Counts the nodes it is shown per (scope, op type).
class ScopeCounter : public NodeObserver {
public:
    explicit ScopeCounter(bool subgraphs) : subgraphs_(subgraphs) {}
    std::map<std::pair<size_t, std::string>, int> seen;
    void beforeNode(NodeEvent& event) override { ++seen[{event.scope, event.node->opType}]; }
    bool seesSubgraphs() const override { return subgraphs_; }

private:
    bool subgraphs_;
};

double sqnrDb(const Tensor& reference, const Tensor& measured)
{
    double signal = 0, noise = 0;
    const auto r = reference.values<float>(), m = measured.values<float>();
    for (size_t i = 0; i < r.size(); ++i) {
        signal += double(r[i]) * r[i];
        noise += (double(m[i]) - r[i]) * (double(m[i]) - r[i]);
    }
    return 10 * std::log10(signal / noise);
}

} // namespace

class TestControlFlow : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;

    fs::path path(const std::string& file) const { return fs::path(dir_.path().toStdString()) / file; }

    std::map<std::string, Tensor> inputsOf(const std::string& name, const Model& model) const
    {
        std::map<std::string, Tensor> inputs;
        for (size_t k = 0; k < model.inputs.size(); ++k)
            inputs[model.inputs[k].name] = readNpy(path(name + ".in." + std::to_string(k) + ".npy"));
        return inputs;
    }

    // Runs `name`.onnx on its inputs and compares every output with numpy's.
    void expectNumpyOutputs(const std::string& name, const std::string& modelFile = {})
    {
        const Model model = loadOnnx(path((modelFile.empty() ? name : modelFile) + ".onnx"));
        const Interpreter interpreter(model);
        const std::map<std::string, Tensor> outputs = interpreter.run(inputsOf(name, model));
        for (size_t k = 0; k < model.outputs.size(); ++k) {
            const Tensor expected = readNpy(path(name + ".out." + std::to_string(k) + ".npy"));
            const Tensor& actual = outputs.at(model.outputs[k].name);
            const QString what = QString::fromStdString(name + " output '" + model.outputs[k].name + "'");
            QVERIFY2(actual.shape() == expected.shape(),
                     qPrintable(what + ": shape " + QString::fromStdString(shapeToString(actual.shape())) + ", numpy " +
                                QString::fromStdString(shapeToString(expected.shape()))));
            QCOMPARE(actual.dtype(), expected.dtype());
            const auto a = actual.values<float>();
            const auto e = expected.values<float>();
            for (size_t i = 0; i < e.size(); ++i)
                QVERIFY2(std::abs(a[i] - e[i]) <= 1e-5f + 1e-5f * std::abs(e[i]),
                         qPrintable(what + QString(": element %1 is %2, numpy %3").arg(i).arg(a[i]).arg(e[i])));
        }
    }

    // The Error running (or building the interpreter for) `name`.onnx gives.
    QString errorOf(const std::string& name)
    {
        try {
            const Model model = loadOnnx(path(name + ".onnx"));
            const Interpreter interpreter(model);
            interpreter.run(inputsOf(name, model));
        } catch (const Error& e) {
            return QString::fromUtf8(e.what());
        }
        return {};
    }

private slots:
    void initTestCase()
    {
        QVERIFY(dir_.isValid());
        QVERIFY(test::runPython(QUANTSCOPE_TEST_DATA "/onnx/make_control_flow_models.py", {dir_.path()}));
    }

    void ifRunsTheBranchItsConditionPicks()
    {
        // Both branches are Convs on the outer graph's input and initializers;
        // they differ in padding and dilation, so each answer tells them apart.
        expectNumpyOutputs("if_conv_then");
        expectNumpyOutputs("if_conv_else");
    }

    void loopCarriesStateAndStacksScanOutputs()
    {
        // Six iterations; the body's nested If reads the top graph's x.
        expectNumpyOutputs("loop_sum");
        // No iteration: the initial state, and an empty [0, 4] scan output.
        expectNumpyOutputs("loop_sum_zero", "loop_sum");
    }

    void whileLoopStopsOnItsCondition()
    {
        // M = INT64_MAX (as PyTorch exports a while loop): the condition ends it.
        expectNumpyOutputs("loop_while");
    }

    void scanRunsARecurrentCell()
    {
        expectNumpyOutputs("scan_rnn");
        // Batch-first input read backwards; outputs stacked on axis 1 and reversed on axis 0.
        expectNumpyOutputs("scan_rnn_axes");
    }

    void observersSeeTheNodesOwnInputs()
    {
        // The Loop's body reads x from the outer graph: the interpreter passes
        // it along, but an observer (calibration, fake-quant) sees M, cond and s0.
        const Model model = loadOnnx(path("loop_sum.onnx"));
        const Interpreter interpreter(model);
        InputCountObserver observer;
        RunOptions options;
        options.observer = &observer;
        const Tensor s = interpreter.run(inputsOf("loop_sum", model), options).at("s");
        QCOMPARE(observer.inputs.at("Loop"), size_t(3));
        QCOMPARE(test::bytesOf(s), test::bytesOf(readNpy(path("loop_sum.out.0.npy"))));
    }

    void bodyLayersAreListedUnderTheirNode()
    {
        // Both branches' Convs read the outer graph's W: one weight, one quantizer.
        const Model ifModel = loadOnnx(path("if_conv_then.onnx"));
        // Scopes follow the attributes' order in the file (onnx.helper writes them sorted: else_branch first).
        QCOMPARE(ifModel.subgraphs.size(), size_t(2));
        QCOMPARE(ifModel.layers.size(), size_t(2));
        QCOMPARE(ifModel.layers[0].modulePath, std::string("pick_conv/else_branch/else_conv"));
        QCOMPARE(ifModel.layers[1].modulePath, std::string("pick_conv/then_branch/then_conv"));
        QCOMPARE(ifModel.subgraphs[0].attribute, std::string("else_branch"));
        QCOMPARE(ifModel.layers[0].scope, size_t(1));
        QCOMPARE(ifModel.layers[1].scope, size_t(2));
        QCOMPARE(ifModel.layers[0].weightName, std::string("W"));
        QCOMPARE(ifModel.layers[1].sharesWeightOf, std::optional<size_t>(0));

        // The Scan body's MatMuls read Wx and Wh from outside; the nested If of
        // loop_sum is scope 2 and 3, after the Loop body (1), as the interpreter numbers them.
        const Model scanModel = loadOnnx(path("scan_rnn.onnx"));
        QCOMPARE(scanModel.layers.size(), size_t(2));
        for (const QuantizableLayer& l : scanModel.layers) {
            QVERIFY2(l.modulePath.starts_with("rnn_scan/body/"), l.modulePath.c_str());
            QCOMPARE(l.opType, std::string("MatMul"));
            QVERIFY(scanModel.initializer(l.weightName));
        }
        const Model loopModel = loadOnnx(path("loop_sum.onnx"));
        QCOMPARE(loopModel.subgraphs.size(), size_t(3));
        QCOMPARE(loopModel.subgraphs[1].parent, size_t(1));
        QCOMPARE(loopModel.subgraphs[1].modulePath, std::string("sum_loop/body/sign_if/else_branch"));
        QCOMPARE(loopModel.subgraphs[2].modulePath, std::string("sum_loop/body/sign_if/then_branch"));
    }

    void observersThatAskSeeSubgraphNodesWithTheirScope()
    {
        const Model model = loadOnnx(path("loop_sum.onnx"));
        const Interpreter interpreter(model);
        for (const bool subgraphs : {false, true}) {
            ScopeCounter counter(subgraphs);
            RunOptions options;
            options.observer = &counter;
            interpreter.run(inputsOf("loop_sum", model), options);
            const auto seen = [&](size_t scope, const char* op) { return counter.seen[std::make_pair(scope, op)]; };
            QCOMPARE(seen(0, "Loop"), 1);
            // Six iterations of the body (scope 1); the nested If's branches
            // (else_branch 2, then_branch 3, as Model::subgraphs lists them) alternate.
            QCOMPARE(seen(1, "Mod"), subgraphs ? 6 : 0);
            QCOMPARE(seen(2, "Neg"), subgraphs ? 3 : 0);
            QCOMPARE(seen(3, "Identity"), subgraphs ? 3 : 0);
            QCOMPARE(model.scopePath(2), std::string("sum_loop/body/sign_if/else_branch"));
        }
    }

    void bodyLayersAreCalibratedAndFakeQuantized()
    {
        const Model model = loadOnnx(path("scan_rnn.onnx"));
        const Interpreter interpreter(model);
        const QuantizationPlan plan = QuantizationPlan::build(
            model, RuleSet::fromJson(R"({"version": 1, "rules": [{"weight_qtype": "int8", "act_qtype": "int8",
                                         "act_static_scale": true}]})"));
        QCOMPARE(plan.layers().size(), size_t(2));
        QVERIFY(plan.forNode(model.layers[0].scope, *model.layers[0].node));
        QVERIFY(!plan.forNode(0, 0)); // the main graph's node 0 is the Scan itself

        // Calibration sees the body at every step: T = 5 observations per activation.
        ActivationCalibrator calibrator(interpreter, plan);
        const std::map<std::string, Tensor> floatOut = calibrator.observe(inputsOf("scan_rnn", model));
        const ActivationStatistics statistics = calibrator.finish();
        for (const LayerQuantization& lq : plan.layers()) {
            QVERIFY2(lq.activation->value.starts_with("rnn_scan/body/"), lq.activation->value.c_str());
            const Observer* observer = statistics.find(lq.activation->value);
            QVERIFY2(observer, lq.activation->value.c_str());
            QCOMPARE(observer->batches(), int64_t(5));
        }

        WeightQuantizer weights;
        QCOMPARE(weights.update(model, plan).size(), size_t(2));
        const std::map<size_t, StaticActivation> statics = staticActivations(plan, statistics);
        QuantizationHook hook(model, plan, weights, statics);
        RunOptions options;
        options.observer = &hook;
        // Weights alone: int8 per-channel on a 5-step cell stays close to float, but is not float.
        hook.setQuantizeActivations(false);
        const std::map<std::string, Tensor> weightOnly = interpreter.run(inputsOf("scan_rnn", model), options);
        const double weightSqnr = sqnrDb(floatOut.at("hs"), weightOnly.at("hs"));
        // With the activations: every step's x_t and h_in on one static int8 scale
        // (h0, the first h_in, is wider than the later tanh outputs the average range follows).
        hook.setQuantizeActivations(true);
        const std::map<std::string, Tensor> quantized = interpreter.run(inputsOf("scan_rnn", model), options);
        const double sqnr = sqnrDb(floatOut.at("hs"), quantized.at("hs"));
        qInfo("scan_rnn output SQNR: w8 %.1f dB, w8a8 %.1f dB", weightSqnr, sqnr);
        QVERIFY2(weightSqnr > 30 && weightSqnr < 80, qPrintable(QString::number(weightSqnr)));
        QVERIFY2(sqnr > 5 && sqnr < weightSqnr, qPrintable(QString::number(sqnr)));

        // With every layer disabled the hook changes nothing.
        hook.setEnabledLayers(std::vector<bool>(model.layers.size(), false));
        const std::map<std::string, Tensor> none = interpreter.run(inputsOf("scan_rnn", model), options);
        QCOMPARE(test::bytesOf(none.at("hs")), test::bytesOf(floatOut.at("hs")));
    }

    void malformedControlFlowIsAnErrorNamingTheNode()
    {
        const QString negative = errorOf("loop_sum_negative");
        QVERIFY2(negative.contains("'sum_loop' (Loop)") && negative.contains("trip count M is negative (-3)"),
                 qPrintable(negative));

        const QString count = errorOf("if_output_count");
        QVERIFY2(count.contains("'bad_if' (If)") && count.contains("then_branch has 2 outputs, 1 expected"),
                 qPrintable(count));

        const QString custom = errorOf("if_custom_op");
        QVERIFY2(custom.contains("node 'custom_if' (If), subgraph 'then_branch' uses ops the runtime lacks: "
                                 "com.example:Mystery"),
                 qPrintable(custom));

        const QString growing = errorOf("loop_growing_scan");
        QVERIFY2(growing.contains("'growing_loop' (Loop)") && growing.contains("scan output 0") &&
                     growing.contains("every iteration must give one shape"),
                 qPrintable(growing));
    }
};

QTEST_APPLESS_MAIN(TestControlFlow)
#include "tst_control_flow.moc"
