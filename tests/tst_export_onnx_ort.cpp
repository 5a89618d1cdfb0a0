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

#include <onnx/onnx_pb.h>

#include <fstream>

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

    // int4 weights in tiles along K, written both ways: as DequantizeLinear
    // (which ONNX Runtime's own optimizer fuses into MatMulNBits with
    // accuracy_level 4, int8 activations) and as our com.microsoft.MatMulNBits
    // (accuracy_level 0, float activations). ONNX Runtime's SQNR against the
    // float model must be the simulation's within 0.5 dB, the MatMulNBits form
    // closer still, and its file no larger but for the padding of a short last block.
    void matMulNBitsAgreesWithTheSimulation_data()
    {
        QTest::addColumn<QString>("rule");
        for (const int tile : {32, 128}) {
            const QString t = QString::number(tile);
            QTest::addRow("int4 symmetric, tile %d", tile) << "{\"weight_qtype\": \"int4\", \"tile_size\": " + t + "}";
            QTest::addRow("int4 asymmetric, tile %d", tile) << "{\"weight_qtype\": \"int4\", \"weight_calibration\": "
                                                               "\"minmax\", \"symmetric\": false, \"tile_size\": " +
                                                                   t + "}";
            QTest::addRow("uint4 asymmetric, tile %d", tile) << "{\"weight_qtype\": \"uint4\", \"weight_calibration\": "
                                                                "\"minmax\", \"symmetric\": false, \"tile_size\": " +
                                                                    t + "}";
        }
    }
    void matMulNBitsAgreesWithTheSimulation()
    {
        QFETCH(QString, rule);
        const std::filesystem::path dir = dir_.path().toStdString();
        const ExportCase c{"llm_block", dir / "llm_block.onnx", "[" + rule.toStdString() + "]",
                           dir / "llm_block_inputs.npz", 16};
        const std::string label = QTest::currentDataTag();
        double sqnr[2] = {}, vsSimulation[2] = {};
        uintmax_t bytes[2] = {};
        double simulated = 0, level4Sqnr = 0, level4VsSimulation = 0;
        for (const Int4Form form : {Int4Form::Dequantize, Int4Form::MatMulNBits}) {
            OnnxExportOptions options;
            options.int4Form = form;
            const std::filesystem::path formDir = dir / (std::string(int4FormName(form)) + "_" + label);
            std::filesystem::create_directories(formDir);
            const ExportedCase e = exportCase(c, formDir, options);
            const bool nbits = form == Int4Form::MatMulNBits;
            QCOMPARE(e.summary.matMulNBits, nbits ? int64_t(3) : int64_t(0)); // up (MatMul), down (Gemm), head (MatMul)
            if (nbits && !e.summary.warnings.empty())
                QFAIL(e.summary.warnings.front().c_str());
            const Tensor ort = runOnnxRuntime(e.out, e.inputs).at("y");
            const Tensor& sim = e.simulated.at("y");
            QCOMPARE(ort.shape(), sim.shape());
            sqnr[nbits] = sqnrDb(ort, e.floatRun.at("y"));
            vsSimulation[nbits] = sqnrDb(ort, sim);
            simulated = sqnrDb(sim, e.floatRun.at("y"));
            bytes[nbits] = std::filesystem::file_size(e.out);
            if (nbits) { // the same file at accuracy_level 4: ONNX Runtime quantizes A to int8 per block
                onnx::ModelProto m;
                std::ifstream in(e.out, std::ios::binary);
                QVERIFY(m.ParseFromIstream(&in));
                for (onnx::NodeProto& node : *m.mutable_graph()->mutable_node())
                    if (node.op_type() == "MatMulNBits")
                        setIntAttribute(node, "accuracy_level", 4);
                const std::filesystem::path level4 = formDir / "accuracy_level_4.onnx";
                std::ofstream(level4, std::ios::binary) << m.SerializeAsString();
                const Tensor ort4 = runOnnxRuntime(level4, e.inputs).at("y");
                level4Sqnr = sqnrDb(ort4, e.floatRun.at("y"));
                level4VsSimulation = sqnrDb(ort4, sim);
            }
        }
        qInfo("llm_block, %s: SQNR vs float: simulation %.2f dB | ORT DequantizeLinear %.2f dB (vs simulation %.1f "
              "dB), %llu bytes | ORT MatMulNBits %.2f dB (vs simulation %.1f dB), %llu bytes",
              label.c_str(), simulated, sqnr[0], vsSimulation[0], (unsigned long long)bytes[0], sqnr[1],
              vsSimulation[1], (unsigned long long)bytes[1]);
        qInfo("llm_block, %s: MatMulNBits at accuracy_level 4: SQNR vs float %.2f dB, vs simulation %.1f dB",
              label.c_str(), level4Sqnr, level4VsSimulation);
        for (int f = 0; f < 2; ++f)
            QVERIFY2(
                std::abs(sqnr[f] - simulated) <= 0.5,
                (label + ": ORT " + std::to_string(sqnr[f]) + " dB, simulation " + std::to_string(simulated)).c_str());
        // Float activations: the simulation to float rounding, far closer than int8 activations get.
        QVERIFY2(vsSimulation[1] >= 80, std::to_string(vsSimulation[1]).c_str());
        // No larger, but for the codes MatMulNBits pads a short last block with (down's K = 320 in tiles of 128).
        int64_t padding = 0;
        const int64_t tile = rule.section(QStringLiteral("\"tile_size\": "), 1).chopped(1).toLongLong();
        for (const auto& [K, N] : {std::pair<int64_t, int64_t>{256, 320}, {320, 256}, {256, 64}})
            padding += N * ((K + tile - 1) / tile * tile - K) / 2;
        QVERIFY2(
            int64_t(bytes[1]) <= int64_t(bytes[0]) + padding,
            (std::to_string(bytes[1]) + " > " + std::to_string(bytes[0]) + " + " + std::to_string(padding)).c_str());
    }

    // ONNX Runtime fuses QDQ groups into integer kernels chosen by the CPU. On
    // x86 CPUs with AVX2 but without VNNI its u8s8 kernels add pairs of 8-bit
    // products in 16 bits, which saturate; its s8s8 path converts and saturates
    // too. The default export writes every 8-bit quantization as uint8 (u8u8
    // kernels, exact there), and this test shows why on such a CPU: qemu's user
    // emulation of a Haswell (AVX2, no AVX-512, no VNNI) runs ONNX Runtime on a
    // Conv built so that nearly every code is at the top of its range.
    void unsignedEightBitIsExactOnAvx2CpusWithoutVnni_data()
    {
        QTest::addColumn<QString>("actQtype");
        QTest::newRow("uint8 activations") << "uint8";
        QTest::newRow("int8 activations") << "int8";
    }
    void unsignedEightBitIsExactOnAvx2CpusWithoutVnni()
    {
        QFETCH(QString, actQtype);
        const QString qemu = QStandardPaths::findExecutable(QStringLiteral("qemu-x86_64"));
        QVERIFY2(!qemu.isEmpty(), "qemu-x86_64 is missing: install Debian's qemu-user (packaging/install-deps.sh)");
        const OnnxRuntimeRun haswell{{qemu, QStringLiteral("-cpu"), QStringLiteral("Haswell")}};
        const std::filesystem::path dir = dir_.path().toStdString();
        const ExportCase c{"saturating_conv_" + actQtype.left(4).toStdString(), dir / "saturating_conv.onnx",
                           "[{\"weight_qtype\": \"int8\", \"act_qtype\": \"" + actQtype.toStdString() +
                               "\", \"act_calibration\": \"minmax\", \"act_static_scale\": true}]",
                           dir / "saturating_conv_inputs.npz", 16};
        double errors[2] = {};
        for (const EightBitForm form : {EightBitForm::Unsigned, EightBitForm::AsRules}) {
            OnnxExportOptions options;
            options.eightBitForm = form;
            const std::filesystem::path formDir = dir / eightBitFormName(form);
            std::filesystem::create_directories(formDir);
            const ExportedCase e = exportCase(c, formDir, options);
            QCOMPARE(e.summary.signedEightBit > 0, form == EightBitForm::AsRules);
            const Tensor& simulated = e.simulated.at("y");
            const double err = relativeMaxError(runOnnxRuntime(e.out, e.inputs, haswell).at("y"), simulated);
            const double native = relativeMaxError(runOnnxRuntime(e.out, e.inputs).at("y"), simulated);
            qInfo("%s, %s form: ORT vs simulation, max rel err %.2e on an emulated Haswell, %.2e on this CPU",
                  c.name.c_str(), eightBitFormName(form), err, native);
            errors[form == EightBitForm::Unsigned ? 0 : 1] = err;
        }
        // Unsigned: the requantization's rounding at most (one output code of 255).
        QVERIFY2(errors[0] <= 0.01, std::to_string(errors[0]).c_str());
        // As the rules say: saturated sums, far from the simulation.
        QVERIFY2(errors[1] >= 0.1, std::to_string(errors[1]).c_str());
    }
};

QTEST_APPLESS_MAIN(TestExportOnnxOrt)
#include "tst_export_onnx_ort.moc"
