// ONNX Runtime, a runtime nobody here wrote, loads every exported QDQ model of
// the test set and runs it to the outputs of our fake-quant simulation of the
// same rules. Printed per model: agreement with the simulation and SQNR
// against the float model.
//
// How close is close: weight-only models run DequantizeLinear then float ops,
// so ONNX Runtime matches the simulation to float rounding (its kernels sum in
// another order). With static activations ONNX Runtime fuses the QDQ groups
// into integer kernels (QLinearConv, QLinearMatMul) whose requantization may
// round a value one step differently from the simulation's float path; the
// outputs then agree far more closely with the simulation than with the float
// model, and the predicted class agrees. The same holds for int4 blocked weights,
// which ONNX Runtime runs as MatMulNBits (int8 activations inside).

#include <QtTest>

#include "export_onnx/export_cases.h"
#include "ort_support.h"

using namespace qs;
using namespace qs::test;

namespace {

// Rows whose largest output is at the same index.
double argmaxAgreement(const Tensor& a, const Tensor& b)
{
    const int64_t rows = a.dim(0), cols = a.numel() / rows;
    const auto x = a.values<float>(), y = b.values<float>();
    int64_t same = 0;
    for (int64_t r = 0; r < rows; ++r) {
        const auto ax = std::max_element(x.begin() + r * cols, x.begin() + (r + 1) * cols) - (x.begin() + r * cols);
        const auto ay = std::max_element(y.begin() + r * cols, y.begin() + (r + 1) * cols) - (y.begin() + r * cols);
        same += ax == ay;
    }
    return double(same) / double(rows);
}

} // namespace

class TestExportOnnxOrt : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;
    std::vector<ExportCase> cases_;

private slots:
    void initTestCase()
    {
        QVERIFY(dir_.isValid());
        cases_ = exportCasesIn(dir_);
    }

    void onnxRuntimeAgreesWithTheSimulation_data()
    {
        QTest::addColumn<int>("index");
        for (size_t i = 0; i < cases_.size(); ++i)
            QTest::newRow(cases_[i].name.c_str()) << int(i);
    }
    void onnxRuntimeAgreesWithTheSimulation()
    {
        QFETCH(int, index);
        const ExportCase& c = cases_[size_t(index)];
        const ExportedCase e = exportCase(c, dir_.path().toStdString());
        const auto outputs = runOnnxRuntime(e.out, e.inputs);
        const bool staticActivations = !e.activations.empty();
        for (const auto& [name, simulated] : e.simulated) {
            const Tensor& ort = outputs.at(name);
            QCOMPARE(ort.shape(), simulated.shape());
            const Tensor& reference = e.floatRun.at(name);
            const double err = relativeMaxError(ort, simulated);
            const double vsSimulation = sqnrDb(ort, simulated), vsFloat = sqnrDb(ort, reference);
            const double simulationVsFloat = sqnrDb(simulated, reference);
            qInfo("%s: %s opset %lld | ORT vs simulation: max rel err %.2e, SQNR %.1f dB | SQNR vs float: ORT %.1f dB, "
                  "simulation %.1f dB | %lld -> %lld weight bytes",
                  c.name.c_str(), name.c_str(), (long long)e.summary.opset, err, vsSimulation, vsFloat,
                  simulationVsFloat, (long long)e.summary.floatBytes, (long long)e.summary.quantizedBytes);
            // DequantizeLinear of int4 blocks → MatMul is fused into MatMulNBits, which by default
            // quantizes the activation to int8 as it multiplies: an approximation of its own.
            const bool nbits = e.summary.opset >= 21;
            if (!staticActivations && !nbits) {
                QVERIFY2(err <= 1e-4, (c.name + ": relative error " + std::to_string(err)).c_str());
            } else {
                // Far closer to the simulation than the quantization error itself, and the same classes.
                QVERIFY2(vsSimulation >= simulationVsFloat + 15,
                         (c.name + ": " + std::to_string(vsSimulation)).c_str());
                QVERIFY(argmaxAgreement(ort, simulated) >= 0.95);
            }
        }
    }
};

QTEST_APPLESS_MAIN(TestExportOnnxOrt)
#include "tst_export_onnx_ort.moc"
