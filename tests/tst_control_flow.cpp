// If, Loop and Scan in the interpreter, on models tests/data/onnx/
// make_control_flow_models.py writes with python3-onnx together with the
// outputs numpy computes for them: an If choosing between two Convs that read
// the outer graph's weights, a Loop with loop-carried state, a scan output and
// an If nested in its body, a PyTorch-style while loop, a Scan running a
// recurrent cell (with input/output axes and directions), and malformed models
// the interpreter must refuse with an Error naming the node.
#include <QtTest>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>

#include "io/npy.h"
#include "io/onnx_loader.h"
#include "runtime/interpreter.h"
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
