// The full-integer LiteRT export (export/tflite.h) against real consumers:
// LiteRT.js (npm @litertjs/core, XNNPACK in WebAssembly, fixture
// `litert_install`) and, when Debian's Arm NN TfLite parser was found at
// configure time, Arm NN on its CpuRef backend (tests/armnn). Every CNN of the
// zoo the exporter writes is exported in ODML mode, loaded and run by each
// consumer on the zoo's evaluation rows, and compared with our float model
// and our ODML simulation (the exploration's fake-quant run, QuantizationHook).
// The zoo CNNs the exporter cannot write are refused with one Error naming
// the node. The flatbuffer writer itself: read back field by field, and a
// truncated file is an Error, not a crash.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>

#include <nlohmann/json.hpp>

#include "export/flatbuffer.h"
#include "export/tflite.h"
#include "export/tflite_integer.h"
#include "export/tflite_schema.h"
#include "graph/batch_norm_folding.h"
#include "graph/weight_layout.h"
#include "io/data_source.h"
#include "io/model_loader.h"
#include "io/npy.h"
#include "io/npz.h"
#include "quant/metrics.h"
#include "rules/ruleset.h"
#include "runtime/activation_calibration.h"
#include "runtime/interpreter.h"
#include "runtime/quantization_hook.h"
#include "session/evaluation.h"
#include "test_support.h"
#include "tflite_support.h"

using namespace qs;
namespace fs = std::filesystem;

namespace {

const fs::path kZoo = QUANTSCOPE_ZOO_DIR;
// int8 weights and static int8 activations everywhere; FULLY_CONNECTED per
// tensor, as the export writes it (so the simulation is the exported model's).
const char* kRules = R"({"version": 1, "rules": [
    {"module_path": ".*", "op_types": ["Gemm", "MatMul"], "weight_qtype": "int8", "act_qtype": "int8",
     "act_static_scale": true, "granularity": "per_tensor"},
    {"module_path": ".*", "weight_qtype": "int8", "act_qtype": "int8", "act_static_scale": true}]})";
constexpr int64_t kCalibBatches = 8; // the zoo's calibration rows, one per batch
constexpr int64_t kEvalRows = 4;

double sqnrDb(const Tensor& reference, const Tensor& measured)
{
    const auto r = reference.values<float>(), m = measured.values<float>();
    double signal = 0, noise = 0;
    for (size_t i = 0; i < r.size() && i < m.size(); ++i)
        signal += double(r[i]) * r[i], noise += (double(r[i]) - m[i]) * (double(r[i]) - m[i]);
    return noise == 0 ? 200.0 : 10.0 * std::log10(signal / noise);
}

// [N, C, H, W] → [N, H, W, C]; other ranks as they are.
Tensor toNhwc(const Tensor& x)
{
    if (x.rank() != 4)
        return x;
    const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
    Tensor out(DType::F32, {n, h, w, c});
    const auto src = x.values<float>();
    auto dst = out.mutableValues<float>();
    for (int64_t a = 0; a < n; ++a)
        for (int64_t k = 0; k < c; ++k)
            for (int64_t y = 0; y < h; ++y)
                for (int64_t z = 0; z < w; ++z)
                    dst[size_t(((a * h + y) * w + z) * c + k)] = src[size_t(((a * c + k) * h + y) * w + z)];
    return out;
}

// Runs a consumer (a program and its leading arguments) on `inputs`; its first output, or an empty
// tensor with `error` set.
Tensor runConsumer(const QString& program, QStringList arguments, const fs::path& model, const fs::path& work,
                   const std::vector<Tensor>& inputs, QString& error)
{
    fs::create_directories(work);
    arguments << QString::fromStdString(model.string()) << QString::fromStdString((work / "out").string());
    for (size_t k = 0; k < inputs.size(); ++k) {
        const fs::path file = work / ("input_" + std::to_string(k) + ".npy");
        writeNpy(file, inputs[k]);
        arguments << QString::fromStdString(file.string());
    }
    QProcess p;
    p.start(program, arguments);
    if (!p.waitForFinished(300000) || p.exitStatus() != QProcess::NormalExit || p.exitCode() != 0) {
        error = QString::fromUtf8(p.readAllStandardError()).right(2000);
        return {};
    }
    return readNpy(work / "out" / "output_0.npy").toFloat32();
}

struct Consumer {
    QString name, program;
    QStringList arguments;
};

std::vector<Consumer> consumers()
{
    std::vector<Consumer> list = {{"LiteRT.js", QUANTSCOPE_NODE, {QUANTSCOPE_LITERT_SCRIPT, QUANTSCOPE_LITERT_DIR}}};
#ifdef QUANTSCOPE_ARMNN_RUNNER
    list.push_back({"Arm NN", QUANTSCOPE_ARMNN_RUNNER, {QUANTSCOPE_ARMNN_BACKENDS}});
#endif
    return list;
}

} // namespace

class TestExportTflite : public QObject {
    Q_OBJECT
private:
    QTemporaryDir dir_;
    fs::path path(const std::string& name) const { return fs::path(dir_.path().toStdString()) / name; }

private slots:
    void initTestCase() { QVERIFY(dir_.isValid()); }

    void flatbufferReadsBack()
    {
        flatbuffer::Table child;
        child.scalar<int32_t>(1, -7);
        child.string(0, "conv");
        flatbuffer::Table root;
        root.scalar<uint8_t>(0, 9);
        root.scalar<int64_t>(5, int64_t(1) << 40);
        root.scalar<float>(2, 0.25f);
        root.vector(3, std::vector<int32_t>{1, 96, 96, 3});
        root.vector(4, std::vector<uint8_t>{1, 2, 3}, 16);
        root.table(6, child);
        root.tables(7, {child, child});
        const std::vector<uint8_t> bytes = flatbuffer::serialize(root, "TFL3");
        QCOMPARE(std::string(reinterpret_cast<const char*>(bytes.data()) + 4, 4), std::string("TFL3"));
        const flatbuffer::Reader reader(bytes, "test", "TFL3");
        const flatbuffer::TableView r = reader.root();
        QCOMPARE(r.scalar<uint8_t>(0, 0), uint8_t(9));
        QCOMPARE(r.scalar<int64_t>(5, 0), int64_t(1) << 40);
        QCOMPARE(r.scalar<float>(2, 0), 0.25f);
        QCOMPARE(r.scalar<int32_t>(1, 42), 42); // absent: the default
        QCOMPARE(r.vector<int32_t>(3), (std::vector<int32_t>{1, 96, 96, 3}));
        const std::span<const uint8_t> data = r.vectorBytes(4, 1);
        QCOMPARE(data.size(), size_t(3));
        QCOMPARE(size_t(data.data() - bytes.data()) % 16, size_t(0)); // force_align: 16
        QCOMPARE(r.table(6).string(0), std::string("conv"));
        QCOMPARE(r.table(6).scalar<int32_t>(1, 0), -7);
        QCOMPARE(r.vectorSize(7), size_t(2));
        QCOMPARE(r.tableAt(7, 1).string(0), std::string("conv"));
        // Cut anywhere, the reader reports the position instead of reading past the end.
        int errors = 0;
        for (size_t cut = 0; cut < bytes.size(); cut += 3) {
            const std::vector<uint8_t> shorter(bytes.begin(), bytes.begin() + std::ptrdiff_t(cut));
            try {
                const flatbuffer::Reader t(shorter, "cut", "TFL3");
                const flatbuffer::TableView v = t.root();
                (void)v.table(6).string(0);
                (void)v.tableAt(7, 1).string(0);
                (void)v.vectorBytes(4, 1);
            } catch (const Error&) {
                ++errors;
            }
        }
        QVERIFY(errors > 0);
    }

    void zooModels_data()
    {
        QTest::addColumn<QString>("model");
        for (const char* name : {"resnet18", "mobilenet_v2", "mobilenet_v3_small", "mnasnet", "efficientnet_b0",
                                 "squeezenet", "densenet_small", "detection_head", "regnet_y_400mf",
                                 "shufflenet_v2", "segmentation_head"})
            QTest::newRow(name) << QString(name);
    }

    void zooModels()
    {
        QFETCH(QString, model);
        const std::string name = model.toStdString();
        const fs::path file = kZoo / (name + ".onnx");
        QVERIFY2(fs::exists(file), "the zoo is missing: run `ctest -R zoo_models`");
        const BatchNormFolding folding = foldBatchNorms(loadModel(file));
        const Model& m = folding.model;
        const QuantizationPlan plan = QuantizationPlan::build(m, RuleSet::fromJson(kRules), QuantizationMode::Odml);
        WeightQuantizer weights;
        weights.update(m, plan);
        const Interpreter interpreter(m);
        const fs::path calibFile = kZoo / (name + "_calib.npz");
        const fs::path out = path(name + ".tflite");
        TfliteOptions options;
        options.odml.maxBatches = kCalibBatches;
        // Arm NN's parser ignores a CONV_2D's groups (groupedConvolutionForms): RegNet's are split.
        if (name == "regnet_y_400mf")
            options.groupedConv = TfliteGroupedConv::Split;
        // Arm NN 20.08's parser takes TRANSPOSE_CONV with three inputs only: the bias is an ADD.
        if (name == "segmentation_head")
            options.transposeConvBias = TfliteTransposeConvBias::Add;
        TfliteSummary summary;
        try {
            auto calib = openDataSource(calibFile, {.batchSize = 1, .exactBatches = true}, &m);
            summary = exportTflite(interpreter, plan, weights, *calib, options, out);
        } catch (const Error& e) {
            QFAIL(e.what());
        }
        QCOMPARE(int64_t(fs::file_size(out)), summary.bytes);
        // What a reader of the file sees: the TFL3 model, int8 weights, the ops written.
        const TfliteContents contents = readTflite(out);
        QCOMPARE(contents.version, 3u);
        QCOMPARE(int64_t(contents.operatorCodes.size()), summary.operators);
        QVERIFY(summary.operatorsByType.at("QUANTIZE") >= 1);
        QCOMPARE(summary.operatorsByType.at("DEQUANTIZE"), int64_t(m.outputs.size()));

        // The simulation: the exploration's calibration of the same rows and its fake-quant run.
        auto calib = openDataSource(calibFile, {.batchSize = 1, .exactBatches = true}, &m);
        CalibrationOptions co;
        co.maxBatches = kCalibBatches;
        const ActivationStatistics statistics = calibrateActivations(interpreter, plan, *calib, co);
        const std::map<size_t, StaticActivation> statics = requiredStaticActivations(m, plan, &statistics);
        QuantizationHook hook(m, plan, weights, statics);

        // The integer simulation of the file as written (export/tflite_integer.h).
        const std::string fileBytes = test::readFile(out.string());
        const std::span bytes(reinterpret_cast<const uint8_t*>(fileBytes.data()), fileBytes.size());
        const TfliteIntegerExecutor integer = TfliteIntegerExecutor::fromBytes(bytes, out.string());
        const TfliteIntegerExecutor reference =
            TfliteIntegerExecutor::fromBytes(bytes, out.string(), TfliteArithmetic::Reference);
        const TfliteIntegerExecutor armnnSim =
            TfliteIntegerExecutor::fromBytes(bytes, out.string(), TfliteArithmetic::ArmnnReference);

        // Arm NN 20.08's parser drops RESIZE_BILINEAR's half_pixel_centers (the segmentation head's
        // upsampling): Arm NN computes asymmetric coordinates, as its simulation does, so it is not held
        // to LiteRT.js there.
        bool halfPixelResize = false;
        for (const TfliteProgram::Operation& op : TfliteProgram::read(bytes, out.string()).operations)
            halfPixelResize |= op.op == tflite::BuiltinOperator::ResizeBilinear && op.halfPixelCenters;

        const Tensor eval = NpzFile::open(kZoo / (name + "_eval.npz")).read("input").toFloat32();
        const std::string inputName = m.inputs.at(0).name, outputName = m.outputs.at(0).name;
        std::vector<float> floatAll, simAll, integerAll, referenceAll, armnnSimAll;
        std::map<QString, std::vector<float>> consumerAll;
        for (int64_t row = 0; row < kEvalRows; ++row) {
            const int64_t per = eval.numel() / eval.dim(0);
            Shape shape = eval.shape();
            shape[0] = 1;
            Tensor x(DType::F32, shape);
            std::memcpy(x.mutableValues<float>().data(), eval.values<float>().data() + row * per, size_t(per) * 4);
            // A 4-D output (the segmentation head's) is NHWC in the LiteRT model.
            const Tensor f = toNhwc(interpreter.run({{inputName, x}}).at(outputName));
            const Tensor s = toNhwc(interpreter.run({{inputName, x}}, {{}, &hook}).at(outputName));
            floatAll.insert(floatAll.end(), f.values<float>().begin(), f.values<float>().end());
            simAll.insert(simAll.end(), s.values<float>().begin(), s.values<float>().end());
            const Tensor q = integer.run({toNhwc(x)}).at(0);
            QCOMPARE(q.numel(), f.numel());
            integerAll.insert(integerAll.end(), q.values<float>().begin(), q.values<float>().end());
            const Tensor r = reference.run({toNhwc(x)}).at(0);
            referenceAll.insert(referenceAll.end(), r.values<float>().begin(), r.values<float>().end());
            const Tensor a = armnnSim.run({toNhwc(x)}).at(0);
            armnnSimAll.insert(armnnSimAll.end(), a.values<float>().begin(), a.values<float>().end());
            for (const Consumer& c : consumers()) {
                QString error;
                const Tensor y = runConsumer(c.program, c.arguments, out,
                                             path(name + "_" + c.name.toStdString() + "_" + std::to_string(row)),
                                             {toNhwc(x)}, error);
                QVERIFY2(!y.empty(), qPrintable(c.name + " did not run " + model + ": " + error));
                QCOMPARE(y.numel(), f.numel());
                consumerAll[c.name].insert(consumerAll[c.name].end(), y.values<float>().begin(),
                                           y.values<float>().end());
            }
        }
        auto tensorOf = [](const std::vector<float>& v) {
            return Tensor::fromVector(DType::F32, {int64_t(v.size())}, v);
        };
        // Arm NN 20.08 (Debian 12) fills the codes an int8 PAD adds with 0 rather than the zero point,
        // except where it folds the PAD into the CONV_2D reading it. Before a MAX_POOL_2D (ResNet's and
        // DenseNet's padded MaxPool after a ReLU, zero point -128) the code 0 won the maximum at the
        // borders, before a DEPTHWISE_CONV_2D (ShuffleNet's stride-2 ones) it stood for a non-zero value:
        // the export writes those borders with CONCATENATION, and a PAD only before a CONV_2D.
        for (size_t k = 0; k < contents.operatorCodes.size(); ++k) {
            if (contents.operatorCodes[k] != int32_t(tflite::BuiltinOperator::Pad) &&
                contents.operatorCodes[k] != int32_t(tflite::BuiltinOperator::PadV2))
                continue;
            for (size_t j = 0; j < contents.operatorCodes.size(); ++j)
                QVERIFY2(contents.operatorCodes[j] == int32_t(tflite::BuiltinOperator::Conv2D) ||
                             std::find(contents.operatorInputs[j].begin(), contents.operatorInputs[j].end(),
                                       contents.operatorOutputs[k].at(0)) == contents.operatorInputs[j].end(),
                         qPrintable(QString("a PAD feeds operator %1 (%2), not a CONV_2D")
                                        .arg(j)
                                        .arg(tfliteOperatorName(tflite::BuiltinOperator(contents.operatorCodes[j])))));
        }
        const Tensor floatOut = tensorOf(floatAll), simOut = tensorOf(simAll), integerOut = tensorOf(integerAll),
                     referenceOut = tensorOf(referenceAll), armnnSimOut = tensorOf(armnnSimAll);
        const double simVsFloat = sqnrDb(floatOut, simOut), integerVsFloat = sqnrDb(floatOut, integerOut);
        qInfo("%s: %lld bytes (float weights %lld bytes), %lld operators; fake-quant simulation vs float %.1f dB, "
              "integer simulation vs float %.2f dB (with Arm NN's arithmetic %.2f dB)",
              name.c_str(), static_cast<long long>(summary.bytes), static_cast<long long>(summary.floatWeightBytes),
              static_cast<long long>(summary.operators), simVsFloat, integerVsFloat, sqnrDb(floatOut, armnnSimOut));
        struct Agreement {
            QString consumer;
            double vsOwn, vsFakeQuant, vsInteger, vsReference, vsArmnn, vsFloat;
        };
        std::vector<Agreement> results;
        for (const auto& [consumer, values] : consumerAll) {
            const Tensor y = tensorOf(values);
            // Each consumer against the simulation of its own arithmetic: LiteRT.js runs XNNPACK,
            // Arm NN its CpuRef backend.
            const Tensor& own = consumer == "Arm NN" ? armnnSimOut : integerOut;
            const Agreement a{consumer,
                              sqnrDb(own, y),
                              sqnrDb(simOut, y),
                              sqnrDb(integerOut, y),
                              sqnrDb(referenceOut, y),
                              sqnrDb(armnnSimOut, y),
                              sqnrDb(floatOut, y)};
            qInfo("%s: %s vs the simulation of its arithmetic %.1f dB; vs the integer simulation with XNNPACK's "
                  "arithmetic %.1f dB, the reference kernels' %.1f dB, Arm NN's %.1f dB; vs fake-quant simulation "
                  "%.1f dB, vs float %.2f dB",
                  name.c_str(), qPrintable(consumer), a.vsOwn, a.vsInteger, a.vsReference, a.vsArmnn, a.vsFakeQuant,
                  a.vsFloat);
            results.push_back(a);
        }
        if (consumerAll.size() == 2) { // the two integer runtimes against each other
            const double between = sqnrDb(tensorOf(consumerAll.at("LiteRT.js")), tensorOf(consumerAll.at("Arm NN")));
            qInfo("%s: Arm NN vs LiteRT.js %.1f dB", name.c_str(), between);
            if (!halfPixelResize)
                QVERIFY2(between >= 30.0, qPrintable(QString("Arm NN vs LiteRT.js %1 dB").arg(between)));
        }
        for (const Agreement& a : results) {
            // The XNNPACK arithmetic is LiteRT.js's: 9 of 10 zoo models bit for bit (200 dB), MNASNet
            // 51.4 dB; Arm NN's arithmetic is CpuRef's (docs/export.md). The issue asks 40 dB.
            const double bound = a.consumer == "LiteRT.js" ? 45.0 : 40.0;
            QVERIFY2(a.vsOwn >= bound,
                     qPrintable(a.consumer + QString(" vs the simulation of its arithmetic %1 dB").arg(a.vsOwn)));
            QVERIFY2(a.vsOwn >= a.vsFakeQuant,
                     qPrintable(a.consumer + QString(" vs the simulation of its arithmetic %1 dB, vs fake-quant %2 dB")
                                                 .arg(a.vsOwn)
                                                 .arg(a.vsFakeQuant)));
            QVERIFY2(a.vsFloat >= 15.0, qPrintable(a.consumer + QString(" vs float %1 dB").arg(a.vsFloat)));
        }
        // TRANSPOSE_CONV's own bias input (the default, what LiteRT's converter writes): LiteRT.js
        // runs it, and our simulation of it is LiteRT.js's to the code.
        if (summary.operatorsByType.contains("TRANSPOSE_CONV")) {
            options.transposeConvBias = TfliteTransposeConvBias::Input;
            const fs::path withInput = path(name + "_bias_input.tflite");
            auto calibAgain = openDataSource(calibFile, {.batchSize = 1, .exactBatches = true}, &m);
            const TfliteSummary s2 = exportTflite(interpreter, plan, weights, *calibAgain, options, withInput);
            QCOMPARE(s2.operatorsByType.at("TRANSPOSE_CONV"), summary.operatorsByType.at("TRANSPOSE_CONV"));
            QCOMPARE(s2.operators, summary.operators - summary.operatorsByType.at("TRANSPOSE_CONV")); // no ADDs
            const std::string b2 = test::readFile(withInput.string());
            const TfliteIntegerExecutor integer2 = TfliteIntegerExecutor::fromBytes(
                std::span(reinterpret_cast<const uint8_t*>(b2.data()), b2.size()), withInput.string());
            std::vector<float> ours, lite;
            for (int64_t row = 0; row < kEvalRows; ++row) {
                const int64_t per = eval.numel() / eval.dim(0);
                Shape shape = eval.shape();
                shape[0] = 1;
                Tensor x(DType::F32, shape);
                std::memcpy(x.mutableValues<float>().data(), eval.values<float>().data() + row * per,
                            size_t(per) * 4);
                const Tensor q = integer2.run({toNhwc(x)}).at(0);
                ours.insert(ours.end(), q.values<float>().begin(), q.values<float>().end());
                QString error;
                const Tensor y = runConsumer(QUANTSCOPE_NODE, {QUANTSCOPE_LITERT_SCRIPT, QUANTSCOPE_LITERT_DIR},
                                             withInput, path(name + "_bias_input_" + std::to_string(row)),
                                             {toNhwc(x)}, error);
                QVERIFY2(!y.empty(), qPrintable("LiteRT.js did not run " + model + " with the bias input: " + error));
                lite.insert(lite.end(), y.values<float>().begin(), y.values<float>().end());
            }
            const double agreement = sqnrDb(tensorOf(ours), tensorOf(lite));
            const double vsFloat = sqnrDb(floatOut, tensorOf(lite));
            qInfo("%s with TRANSPOSE_CONV's bias input: %lld bytes; LiteRT.js vs integer simulation %.1f dB, vs float "
                  "%.2f dB",
                  name.c_str(), static_cast<long long>(s2.bytes), agreement, vsFloat);
            QVERIFY2(agreement >= 45.0, qPrintable(QString("LiteRT.js vs integer simulation %1 dB").arg(agreement)));
            QVERIFY2(vsFloat >= 15.0, qPrintable(QString("LiteRT.js vs float %1 dB").arg(vsFloat)));
        }
        // int8 weights (a quarter of float) and int32 biases, plus the graph (a few hundred bytes
        // per operator: RegNet's split groups make 1317 of them).
        QVERIFY2(double(summary.bytes) <
                     0.35 * double(summary.floatWeightBytes) + 65536.0 + 256.0 * double(summary.operators),
                 std::to_string(summary.bytes).c_str());
    }

    // The CLI: --export-tflite writes the file and its report entry; without --mode odml it is a usage error.
    void cliExports()
    {
        const QString model = QString::fromStdString((kZoo / "mnasnet.onnx").string());
        const QString calib = QString::fromStdString((kZoo / "mnasnet_calib.npz").string());
        const fs::path rules = path("rules.json"), out = path("cli.tflite"), report = path("report.json");
        test::writeFile(rules.string(), kRules);
        const test::CliRun run =
            test::runCli({"quantize", model, "--rules", QString::fromStdString(rules.string()), "--mode", "odml",
                          "--calib", calib, "--max-batches", "2", "--export-tflite",
                          QString::fromStdString(out.string()), "--report", QString::fromStdString(report.string())},
                         300000);
        QVERIFY2(run.exitCode == 0, run.err.constData());
        const TfliteContents contents = readTflite(out);
        const auto doc = nlohmann::json::parse(test::readFile(report.string()));
        const auto& t = doc.at("exports").at("tflite");
        QCOMPARE(t.at("bytes").get<int64_t>(), int64_t(fs::file_size(out)));
        QCOMPARE(t.at("operators").get<size_t>(), contents.operatorCodes.size());
        QCOMPARE(t.at("batches").get<int64_t>(), int64_t(2));
        QCOMPARE(t.at("io").get<std::string>(), std::string("float"));
        QCOMPARE(t.at("grouped_conv").get<std::string>(), std::string("native"));
        QCOMPARE(t.at("transpose_conv_bias").get<std::string>(), std::string("input"));
        // --tflite-io int8: int8 edges, no QUANTIZE/DEQUANTIZE; a tflite flag without the export is
        // a usage error.
        const fs::path int8Out = path("cli_int8.tflite"), int8Report = path("report_int8.json");
        const test::CliRun int8Run = test::runCli(
            {"quantize", model, "--rules", QString::fromStdString(rules.string()), "--mode", "odml", "--calib", calib,
             "--max-batches", "2", "--export-tflite", QString::fromStdString(int8Out.string()), "--tflite-io", "int8",
             "--report", QString::fromStdString(int8Report.string())},
            300000);
        QVERIFY2(int8Run.exitCode == 0, int8Run.err.constData());
        const TfliteContents int8Contents = readTflite(int8Out);
        QCOMPARE(int8Contents.tensors.at(size_t(int8Contents.inputs.at(0))).type, int(tflite::TensorType::Int8));
        QCOMPARE(int8Contents.tensors.at(size_t(int8Contents.outputs.at(0))).type, int(tflite::TensorType::Int8));
        QCOMPARE(nlohmann::json::parse(test::readFile(int8Report.string()))
                     .at("exports")
                     .at("tflite")
                     .at("io")
                     .get<std::string>(),
                 std::string("int8"));
        const test::CliRun stray = test::runCli(
            {"quantize", model, "--rules", QString::fromStdString(rules.string()), "--tflite-grouped-conv", "split"});
        QVERIFY(stray.exitCode != 0 && stray.err.contains("--tflite-grouped-conv applies to --export-tflite"));
        const test::CliRun ptq =
            test::runCli({"quantize", model, "--rules", QString::fromStdString(rules.string()), "--calib", calib,
                          "--export-tflite", QString::fromStdString(path("ptq.tflite").string())});
        QVERIFY(ptq.exitCode != 0 && ptq.err.contains("--export-tflite needs --mode odml"));
        QVERIFY(!fs::exists(path("ptq.tflite")));
    }

    // ODML mode's evaluation reports the integer program's outputs: the CLI's output SQNR against
    // float is LiteRT.js's on the file it exports, within 0.3 dB; the fake-quant figures are kept.
    // Each consumer's arithmetic (--tflite-arithmetic: xnnpack for LiteRT.js, armnn for Arm NN).
    void cliOutputFiguresAreTheIntegerProgram_data()
    {
        QTest::addColumn<QString>("consumer");
        QTest::addColumn<QString>("arithmetic");
        QTest::newRow("LiteRT.js") << QString("LiteRT.js") << QString("xnnpack");
#ifdef QUANTSCOPE_ARMNN_RUNNER
        QTest::newRow("Arm NN") << QString("Arm NN") << QString("armnn");
#endif
    }

    void cliOutputFiguresAreTheIntegerProgram()
    {
        QFETCH(QString, consumer);
        QFETCH(QString, arithmetic);
        const std::string tag = arithmetic.toStdString();
        const fs::path model = kZoo / "mnasnet.onnx", calib = kZoo / "mnasnet_calib.npz",
                       evalFile = kZoo / "mnasnet_eval.npz";
        const fs::path rules = path("eval_rules.json"), out = path("eval_" + tag + ".tflite"),
                       report = path("eval_report_" + tag + ".json");
        test::writeFile(rules.string(), kRules);
        constexpr int64_t kBatches = 4; // the model's batch is 1: 4 calibration rows, 4 evaluation rows
        QStringList arguments = {"quantize", QString::fromStdString(model.string()), "--rules",
                                 QString::fromStdString(rules.string()), "--mode", "odml", "--calib",
                                 QString::fromStdString(calib.string()), "--eval",
                                 QString::fromStdString(evalFile.string()), "--max-batches", QString::number(kBatches),
                                 "--export-tflite", QString::fromStdString(out.string()), "--report",
                                 QString::fromStdString(report.string())};
        if (arithmetic != "xnnpack") // the default
            arguments << "--tflite-arithmetic" << arithmetic;
        const test::CliRun run = test::runCli(arguments, 600000);
        QVERIFY2(run.exitCode == 0, run.err.constData());
        QVERIFY2(run.out.contains("output figures: the integer program of the LiteRT export"), run.out.constData());
        QCOMPARE(run.out.contains(", armnn arithmetic"), arithmetic == "armnn");
        const auto doc = nlohmann::json::parse(test::readFile(report.string()));
        QCOMPARE(doc.at("output_simulation").get<std::string>(), std::string("integer"));
        QCOMPARE(doc.at("output_simulation_arithmetic").get<std::string>(), tag);
        const double cliSqnr = doc.at("outputs").at(0).at("sqnr_db").get<double>();
        const double fakeQuantSqnr = doc.at("fake_quant_outputs").at(0).at("sqnr_db").get<double>();

        // LiteRT.js on the exported file, the same rows, against our float model.
        const BatchNormFolding folding = foldBatchNorms(loadModel(model));
        const Interpreter interpreter(folding.model);
        const Tensor eval = NpzFile::open(evalFile).read("input").toFloat32();
        std::vector<float> floatAll, liteAll;
        for (int64_t row = 0; row < kBatches; ++row) {
            const int64_t per = eval.numel() / eval.dim(0);
            Shape shape = eval.shape();
            shape[0] = 1;
            Tensor x(DType::F32, shape);
            std::memcpy(x.mutableValues<float>().data(), eval.values<float>().data() + row * per, size_t(per) * 4);
            const Tensor f = interpreter.run({{folding.model.inputs.at(0).name, x}}).at(folding.model.outputs.at(0).name);
            floatAll.insert(floatAll.end(), f.values<float>().begin(), f.values<float>().end());
            QString error;
            const std::vector<Consumer> all = consumers();
            const auto c = std::ranges::find(all, consumer, &Consumer::name);
            const Tensor y = runConsumer(c->program, c->arguments, out, path("eval_" + tag + "_" + std::to_string(row)),
                                         {toNhwc(x)}, error);
            QVERIFY2(!y.empty(), qPrintable(error));
            liteAll.insert(liteAll.end(), y.values<float>().begin(), y.values<float>().end());
        }
        const double liteSqnr = sqnrDb(Tensor::fromVector(DType::F32, {int64_t(floatAll.size())}, floatAll),
                                       Tensor::fromVector(DType::F32, {int64_t(liteAll.size())}, liteAll));
        qInfo("mnasnet: CLI output SQNR %.2f dB (integer program, %s arithmetic), %s %.2f dB, fake-quant %.2f dB",
              cliSqnr, tag.c_str(), qPrintable(consumer), liteSqnr, fakeQuantSqnr);
        QVERIFY2(std::fabs(cliSqnr - liteSqnr) <= 0.3,
                 qPrintable(QString("CLI %1 dB, %2 %3 dB").arg(cliSqnr).arg(consumer).arg(liteSqnr)));
    }

    // --tflite-transpose-conv-bias reaches the ODML output figures as it reaches the file: with
    // --tflite-arithmetic armnn the segmentation head's TRANSPOSE_CONV must be written with its bias
    // as an ADD (Arm NN 20.08 takes three inputs), else the Arm NN simulation refuses it and the
    // figures stay the fake-quant ones, the note naming the operator. With `add`, the reported
    // output SQNR is Arm NN's on the exported file.
    void cliTransposeConvBiasReachesTheArmnnFigures()
    {
        const fs::path model = kZoo / "segmentation_head.onnx", calib = kZoo / "segmentation_head_calib.npz",
                       evalFile = kZoo / "segmentation_head_eval.npz";
        const fs::path rules = path("tc_rules.json");
        test::writeFile(rules.string(), kRules);
        constexpr int64_t kBatches = 4;
        auto quantize = [&](const QString& bias) {
            const fs::path out = path("tc_" + bias.toStdString() + ".tflite"),
                           report = path("tc_report_" + bias.toStdString() + ".json");
            const test::CliRun run = test::runCli({"quantize",
                                                   QString::fromStdString(model.string()),
                                                   "--rules",
                                                   QString::fromStdString(rules.string()),
                                                   "--mode",
                                                   "odml",
                                                   "--calib",
                                                   QString::fromStdString(calib.string()),
                                                   "--eval",
                                                   QString::fromStdString(evalFile.string()),
                                                   "--max-batches",
                                                   QString::number(kBatches),
                                                   "--export-tflite",
                                                   QString::fromStdString(out.string()),
                                                   "--tflite-transpose-conv-bias",
                                                   bias,
                                                   "--tflite-arithmetic",
                                                   "armnn",
                                                   "--report",
                                                   QString::fromStdString(report.string())},
                                                  600000);
            if (run.exitCode != 0)
                qWarning("%s", run.err.constData());
            return std::pair{out, nlohmann::json::parse(test::readFile(report.string()))};
        };
        const auto [inputFile, inputDoc] = quantize("input");
        QCOMPARE(inputDoc.at("output_simulation").get<std::string>(), std::string("fake_quant"));
        const std::string note = inputDoc.at("output_simulation_note").get<std::string>();
        QVERIFY2(note.find("(TRANSPOSE_CONV)") != std::string::npos, note.c_str());

        const auto [addFile, addDoc] = quantize("add");
        QCOMPARE(addDoc.at("output_simulation").get<std::string>(), std::string("integer"));
        QCOMPARE(addDoc.at("output_simulation_arithmetic").get<std::string>(), std::string("armnn"));
        QCOMPARE(addDoc.at("exports").at("tflite").at("transpose_conv_bias").get<std::string>(), std::string("add"));
        const double cliSqnr = addDoc.at("outputs").at(0).at("sqnr_db").get<double>();
#ifdef QUANTSCOPE_ARMNN_RUNNER
        const BatchNormFolding folding = foldBatchNorms(loadModel(model));
        const Interpreter interpreter(folding.model);
        const Tensor eval = NpzFile::open(evalFile).read("input").toFloat32();
        std::vector<float> floatAll, armnnAll;
        for (int64_t row = 0; row < kBatches; ++row) {
            const int64_t per = eval.numel() / eval.dim(0);
            Shape shape = eval.shape();
            shape[0] = 1;
            Tensor x(DType::F32, shape);
            std::memcpy(x.mutableValues<float>().data(), eval.values<float>().data() + row * per, size_t(per) * 4);
            const Tensor f = toNhwc(interpreter.run(
                                                   {{ folding.model.inputs.at(0).name,
                                                      x }})
                                        .at(folding.model.outputs.at(0).name));
            floatAll.insert(floatAll.end(), f.values<float>().begin(), f.values<float>().end());
            QString error;
            const Tensor y = runConsumer(QUANTSCOPE_ARMNN_RUNNER, {QUANTSCOPE_ARMNN_BACKENDS}, addFile,
                                         path("tc_armnn_" + std::to_string(row)), {toNhwc(x)}, error);
            QVERIFY2(!y.empty(), qPrintable(error));
            armnnAll.insert(armnnAll.end(), y.values<float>().begin(), y.values<float>().end());
        }
        const double armnnSqnr = sqnrDb(Tensor::fromVector(DType::F32, {int64_t(floatAll.size())}, floatAll),
                                        Tensor::fromVector(DType::F32, {int64_t(armnnAll.size())}, armnnAll));
        qInfo("segmentation_head: CLI output SQNR %.2f dB (armnn arithmetic, bias as ADD), Arm NN %.2f dB", cliSqnr,
              armnnSqnr);
        QVERIFY2(std::fabs(cliSqnr - armnnSqnr) <= 0.3,
                 qPrintable(QString("CLI %1 dB, Arm NN %2 dB").arg(cliSqnr).arg(armnnSqnr)));
#else
        Q_UNUSED(cliSqnr);
#endif
    }

    // A model the exporter refuses keeps the fake-quant output figures, and the report says why once:
    // the segmentation head with its Resize made cubic (python3's onnx writes the copy).
    void refusedModelKeepsFakeQuantFigures()
    {
        const fs::path model = path("segmentation_head_cubic.onnx"), data = kZoo / "segmentation_head_calib.npz";
        QProcess python;
        python.start(QUANTSCOPE_PYTHON,
                     {"-c",
                      "import onnx, sys\n"
                      "m = onnx.load(sys.argv[1])\n"
                      "for n in m.graph.node:\n"
                      "    for a in n.attribute:\n"
                      "        if n.op_type == 'Resize' and a.name == 'mode': a.s = b'cubic'\n"
                      "onnx.save(m, sys.argv[2])\n",
                      QString::fromStdString((kZoo / "segmentation_head.onnx").string()),
                      QString::fromStdString(model.string())});
        QVERIFY(python.waitForFinished(60000) && python.exitCode() == 0);
        const fs::path rules = path("refused_rules.json"), report = path("refused_report.json");
        test::writeFile(rules.string(), kRules);
        const test::CliRun run = test::runCli(
            {"quantize", QString::fromStdString(model.string()), "--rules", QString::fromStdString(rules.string()),
             "--mode", "odml", "--calib", QString::fromStdString(data.string()), "--eval",
             QString::fromStdString(data.string()), "--max-batches", "1", "--report",
             QString::fromStdString(report.string())},
            600000);
        QVERIFY2(run.exitCode == 0, run.err.constData());
        const auto doc = nlohmann::json::parse(test::readFile(report.string()));
        QCOMPARE(doc.at("output_simulation").get<std::string>(), std::string("fake_quant"));
        const std::string note = doc.at("output_simulation_note").get<std::string>();
        QVERIFY2(note.find("(Resize): Resize mode 'cubic' has no LiteRT op") != std::string::npos, note.c_str());
        QCOMPARE(run.out.count("the LiteRT export cannot write"), 1);
    }

    // A grouped convolution written natively (one CONV_2D whose filter holds a group's channels) and
    // split (SLICE + CONV_2D per group + CONCATENATION) gives the same codes in the integer
    // simulation; LiteRT.js runs the native form. Arm NN 20.08's parser ignores the groups of the
    // native form (it computes something else: measured 21 dB from LiteRT.js on RegNet), hence the
    // split form for it.
    void groupedConvolutionForms()
    {
        const BatchNormFolding folding = foldBatchNorms(loadModel(kZoo / "regnet_y_400mf.onnx"));
        const Model& m = folding.model;
        const QuantizationPlan plan = QuantizationPlan::build(m, RuleSet::fromJson(kRules), QuantizationMode::Odml);
        WeightQuantizer weights;
        weights.update(m, plan);
        const Interpreter interpreter(m);
        std::map<TfliteGroupedConv, TfliteContents> contents;
        std::map<TfliteGroupedConv, std::string> bytes;
        for (TfliteGroupedConv form : {TfliteGroupedConv::Native, TfliteGroupedConv::Split}) {
            auto calib = openDataSource(kZoo / "regnet_y_400mf_calib.npz", {.batchSize = 1, .exactBatches = true}, &m);
            TfliteOptions options;
            options.odml.maxBatches = 2;
            options.groupedConv = form;
            const fs::path out = path(form == TfliteGroupedConv::Split ? "regnet_split.tflite" : "regnet_native.tflite");
            exportTflite(interpreter, plan, weights, *calib, options, out);
            contents[form] = readTflite(out);
            bytes[form] = test::readFile(out.string());
        }
        // The native file has CONV_2Ds whose filter is shallower than their input; the split one none.
        auto grouped = [](const TfliteContents& c) {
            int64_t n = 0;
            for (size_t k = 0; k < c.operatorCodes.size(); ++k)
                if (c.operatorCodes[k] == int32_t(tflite::BuiltinOperator::Conv2D)) {
                    const auto& x = c.tensors.at(size_t(c.operatorInputs[k].at(0)));
                    const auto& w = c.tensors.at(size_t(c.operatorInputs[k].at(1)));
                    n += w.shape.at(3) != x.shape.at(3);
                }
            return n;
        };
        QVERIFY(grouped(contents[TfliteGroupedConv::Native]) > 0);
        QCOMPARE(grouped(contents[TfliteGroupedConv::Split]), int64_t(0));
        auto executor = [&](TfliteGroupedConv form) {
            const std::string& b = bytes[form];
            return TfliteIntegerExecutor::fromBytes(std::span(reinterpret_cast<const uint8_t*>(b.data()), b.size()),
                                                    "regnet");
        };
        const TfliteIntegerExecutor native = executor(TfliteGroupedConv::Native);
        const TfliteIntegerExecutor split = executor(TfliteGroupedConv::Split);
        const Tensor eval = NpzFile::open(kZoo / "regnet_y_400mf_eval.npz").read("input").toFloat32();
        Shape shape = eval.shape();
        shape[0] = 1;
        Tensor x(DType::F32, shape);
        std::memcpy(x.mutableValues<float>().data(), eval.values<float>().data(), size_t(x.numel()) * 4);
        const Tensor a = native.run({toNhwc(x)}).at(0), b = split.run({toNhwc(x)}).at(0);
        QCOMPARE(a.numel(), b.numel());
        QVERIFY(std::equal(a.values<float>().begin(), a.values<float>().end(), b.values<float>().begin()));
        QString error;
        const Tensor lite = runConsumer(QUANTSCOPE_NODE, {QUANTSCOPE_LITERT_SCRIPT, QUANTSCOPE_LITERT_DIR},
                                        path("regnet_native.tflite"), path("regnet_native_litert"), {toNhwc(x)}, error);
        QVERIFY2(!lite.empty(), qPrintable(error));
        const double agreement = sqnrDb(a, lite);
        qInfo("regnet_y_400mf, native grouped CONV_2D: LiteRT.js vs integer simulation %.1f dB", agreement);
        QVERIFY2(agreement >= 30.0, qPrintable(QString::number(agreement)));
    }

    // TfliteOptions::int8Io: the model's edges stay int8, with no QUANTIZE or DEQUANTIZE, on the
    // input's and output's calibrated parameters.
    void int8InputsAndOutputs()
    {
        const BatchNormFolding folding = foldBatchNorms(loadModel(kZoo / "mnasnet.onnx"));
        const Model& m = folding.model;
        const QuantizationPlan plan = QuantizationPlan::build(m, RuleSet::fromJson(kRules), QuantizationMode::Odml);
        WeightQuantizer weights;
        weights.update(m, plan);
        const Interpreter interpreter(m);
        auto calib = openDataSource(kZoo / "mnasnet_calib.npz", {.batchSize = 1, .exactBatches = true}, &m);
        TfliteOptions options;
        options.odml.maxBatches = 2;
        options.int8Io = true;
        const TfliteSummary summary = exportTflite(interpreter, plan, weights, *calib, options, path("int8io.tflite"));
        QVERIFY(!summary.operatorsByType.contains("QUANTIZE") && !summary.operatorsByType.contains("DEQUANTIZE"));
        const TfliteContents c = readTflite(path("int8io.tflite"));
        QCOMPARE(c.inputs.size(), size_t(1));
        QCOMPARE(c.outputs.size(), size_t(1));
        const auto& in = c.tensors.at(size_t(c.inputs[0]));
        const auto& out = c.tensors.at(size_t(c.outputs[0]));
        QCOMPARE(in.type, int(tflite::TensorType::Int8));
        QCOMPARE(out.type, int(tflite::TensorType::Int8));
        QCOMPARE(in.shape, (std::vector<int32_t>{1, 96, 96, 3}));
        QCOMPARE(in.scales.size(), size_t(1));
        QVERIFY(in.scales[0] > 0 && out.scales.size() == 1);
    }

    // Each operator the integer simulation runs, alone between a QUANTIZE and a DEQUANTIZE, on
    // random inputs: LiteRT.js's codes against the simulation's. XNNPACK requantizes in float where
    // the reference kernels use fixed point, so a code may differ by one near a rounding tie.
    void integerOperatorsAgainstLiteRt()
    {
        using tflite::BuiltinOperator;
        using tflite::BuiltinOptions;
        std::mt19937 rng(22);
        std::uniform_int_distribution<int> code(-127, 127);
        std::uniform_real_distribution<float> uniform(0.5f, 1.5f);
        auto codes = [&](size_t n) {
            std::vector<int8_t> c(n);
            for (int8_t& v : c)
                v = int8_t(code(rng));
            return c;
        };
        struct Case {
            const char* name;
            std::vector<int32_t> input;
            std::function<std::pair<int32_t, float>(test::TinyTflite&, int32_t)> build; // output tensor, scale
        };
        auto pool = [](int filter, int stride, tflite::Padding padding) {
            flatbuffer::Table o;
            o.scalar<int8_t>(tflite::pool2d::padding, int8_t(padding));
            o.scalar<int32_t>(tflite::pool2d::stride_w, stride);
            o.scalar<int32_t>(tflite::pool2d::stride_h, stride);
            o.scalar<int32_t>(tflite::pool2d::filter_width, filter);
            o.scalar<int32_t>(tflite::pool2d::filter_height, filter);
            return o;
        };
        auto activation = [](int field, tflite::Activation a) {
            flatbuffer::Table o;
            o.scalar<int8_t>(field, int8_t(a));
            return o;
        };
        const std::vector<Case> cases = {
            {"CONV_2D 3x3 SAME stride 2 RELU6", {1, 9, 9, 4}, [&](test::TinyTflite& m, int32_t x) {
                 std::vector<float> scales(6);
                 for (float& v : scales)
                     v = 0.004f * uniform(rng);
                 const int32_t w = m.int8PerChannel("w", {6, 3, 3, 4}, scales, 0, codes(6 * 36));
                 std::vector<int32_t> bias(6);
                 std::vector<float> bs;
                 for (size_t c = 0; c < 6; ++c)
                     bias[c] = code(rng) * 40, bs.push_back(0.05f * scales[c]);
                 const int32_t b = m.int32("b", {6}, bias, bs);
                 const int32_t y = m.int8("y", {1, 5, 5, 6}, 0.03f, -100);
                 flatbuffer::Table o;
                 o.scalar<int8_t>(tflite::conv2d::padding, int8_t(tflite::Padding::Same));
                 o.scalar<int32_t>(tflite::conv2d::stride_w, 2);
                 o.scalar<int32_t>(tflite::conv2d::stride_h, 2);
                 o.scalar<int8_t>(tflite::conv2d::fused_activation_function, int8_t(tflite::Activation::Relu6));
                 m.op(BuiltinOperator::Conv2D, {x, w, b}, {y}, BuiltinOptions::Conv2DOptions, o);
                 return std::pair{y, 0.03f};
             }},
            {"CONV_2D 3x3 SAME in 2 groups", {1, 7, 7, 8}, [&](test::TinyTflite& m, int32_t x) {
                 // The filter holds 4 of the input's 8 channels: outputs 0-5 read channels 0-3, 6-11 read 4-7.
                 std::vector<float> scales(12);
                 for (float& v : scales)
                     v = 0.005f * uniform(rng);
                 const int32_t w = m.int8PerChannel("w", {12, 3, 3, 4}, scales, 0, codes(12 * 36));
                 std::vector<int32_t> bias(12);
                 std::vector<float> bs;
                 for (size_t c = 0; c < 12; ++c)
                     bias[c] = code(rng) * 30, bs.push_back(0.05f * scales[c]);
                 const int32_t b = m.int32("b", {12}, bias, bs);
                 const int32_t y = m.int8("y", {1, 7, 7, 12}, 0.03f, 4);
                 flatbuffer::Table o;
                 o.scalar<int8_t>(tflite::conv2d::padding, int8_t(tflite::Padding::Same));
                 o.scalar<int32_t>(tflite::conv2d::stride_w, 1);
                 o.scalar<int32_t>(tflite::conv2d::stride_h, 1);
                 m.op(BuiltinOperator::Conv2D, {x, w, b}, {y}, BuiltinOptions::Conv2DOptions, o);
                 return std::pair{y, 0.03f};
             }},
            {"DEPTHWISE_CONV_2D 3x3 SAME", {1, 9, 9, 4}, [&](test::TinyTflite& m, int32_t x) {
                 std::vector<float> scales(4);
                 for (float& v : scales)
                     v = 0.01f * uniform(rng);
                 const int32_t w = m.int8PerChannel("w", {1, 3, 3, 4}, scales, 3, codes(36));
                 std::vector<float> bs;
                 for (float v : scales)
                     bs.push_back(0.05f * v);
                 const int32_t b = m.int32("b", {4}, {100, -50, 0, 7}, bs);
                 const int32_t y = m.int8("y", {1, 9, 9, 4}, 0.04f, 5);
                 flatbuffer::Table o;
                 o.scalar<int8_t>(tflite::depthwise::padding, int8_t(tflite::Padding::Same));
                 o.scalar<int32_t>(tflite::depthwise::stride_w, 1);
                 o.scalar<int32_t>(tflite::depthwise::stride_h, 1);
                 o.scalar<int32_t>(tflite::depthwise::depth_multiplier, 1);
                 m.op(BuiltinOperator::DepthwiseConv2D, {x, w, b}, {y}, BuiltinOptions::DepthwiseConv2DOptions, o);
                 return std::pair{y, 0.04f};
             }},
            {"FULLY_CONNECTED", {1, 16}, [&](test::TinyTflite& m, int32_t x) {
                 const int32_t w = m.int8("w", {8, 16}, 0.01f, 0, codes(128));
                 std::vector<int32_t> bias(8);
                 for (int32_t& v : bias)
                     v = code(rng) * 10;
                 const int32_t b = m.int32("b", {8}, bias, {0.05f * 0.01f});
                 const int32_t y = m.int8("y", {1, 8}, 0.05f, -3);
                 m.op(BuiltinOperator::FullyConnected, {x, w, b}, {y}, BuiltinOptions::FullyConnectedOptions,
                      activation(tflite::fully_connected::fused_activation_function, tflite::Activation::None));
                 return std::pair{y, 0.05f};
             }},
            {"ADD of a per-channel constant", {1, 5, 5, 4}, [&](test::TinyTflite& m, int32_t x) {
                 const int32_t c = m.int8("c", {4}, 0.02f, 1, codes(4));
                 const int32_t y = m.int8("y", {1, 5, 5, 4}, 0.07f, -9);
                 m.op(BuiltinOperator::Add, {x, c}, {y}, BuiltinOptions::AddOptions,
                      activation(tflite::add_mul::fused_activation_function, tflite::Activation::None));
                 return std::pair{y, 0.07f};
             }},
            {"MUL by a per-channel constant", {1, 5, 5, 4}, [&](test::TinyTflite& m, int32_t x) {
                 const int32_t c = m.int8("c", {4}, 0.01f, 0, codes(4));
                 const int32_t y = m.int8("y", {1, 5, 5, 4}, 0.03f, 2);
                 m.op(BuiltinOperator::Mul, {x, c}, {y}, BuiltinOptions::MulOptions,
                      activation(tflite::add_mul::fused_activation_function, tflite::Activation::None));
                 return std::pair{y, 0.03f};
             }},
            {"AVERAGE_POOL_2D 3x3 SAME stride 2", {1, 9, 9, 4}, [&](test::TinyTflite& m, int32_t x) {
                 const int32_t y = m.int8("y", {1, 5, 5, 4}, 0.05f, 3);
                 m.op(BuiltinOperator::AveragePool2D, {x}, {y}, BuiltinOptions::Pool2DOptions,
                      pool(3, 2, tflite::Padding::Same));
                 return std::pair{y, 0.05f};
             }},
            {"MAX_POOL_2D 2x2", {1, 8, 8, 4}, [&](test::TinyTflite& m, int32_t x) {
                 const int32_t y = m.int8("y", {1, 4, 4, 4}, 0.05f, 3);
                 m.op(BuiltinOperator::MaxPool2D, {x}, {y}, BuiltinOptions::Pool2DOptions,
                      pool(2, 2, tflite::Padding::Valid));
                 return std::pair{y, 0.05f};
             }},
            {"MEAN over H, W", {1, 7, 7, 64}, [&](test::TinyTflite& m, int32_t x) {
                 const int32_t axes = m.int32("axes", {2}, {1, 2});
                 const int32_t y = m.int8("y", {1, 1, 1, 64}, 0.01f, -4);
                 flatbuffer::Table o;
                 o.scalar<bool>(tflite::reducer::keep_dims, true);
                 m.op(BuiltinOperator::Mean, {x, axes}, {y}, BuiltinOptions::ReducerOptions, o);
                 return std::pair{y, 0.01f};
             }},
            {"LOGISTIC", {1, 4, 4, 8}, [&](test::TinyTflite& m, int32_t x) {
                 const int32_t y = m.int8("y", {1, 4, 4, 8}, 1.0f / 256.0f, -128);
                 m.op(BuiltinOperator::Logistic, {x}, {y});
                 return std::pair{y, 1.0f / 256.0f};
             }},
            {"HARD_SWISH", {1, 4, 4, 8}, [&](test::TinyTflite& m, int32_t x) {
                 const int32_t y = m.int8("y", {1, 4, 4, 8}, 0.04f, -60);
                 m.op(BuiltinOperator::HardSwish, {x}, {y}, BuiltinOptions::HardSwishOptions, {});
                 return std::pair{y, 0.04f};
             }},
            {"SOFTMAX", {1, 16}, [&](test::TinyTflite& m, int32_t x) {
                 const int32_t y = m.int8("y", {1, 16}, 1.0f / 256.0f, -128);
                 flatbuffer::Table o;
                 o.scalar<float>(tflite::softmax::beta, 1.0f);
                 m.op(BuiltinOperator::Softmax, {x}, {y}, BuiltinOptions::SoftmaxOptions, o);
                 return std::pair{y, 1.0f / 256.0f};
             }},
            {"QUANTIZE int8 to int8, CONCATENATION", {1, 3, 3, 4}, [&](test::TinyTflite& m, int32_t x) {
                 const int32_t r = m.int8("r", {1, 3, 3, 4}, 0.09f, 7);
                 m.op(BuiltinOperator::Quantize, {x}, {r});
                 const int32_t y = m.int8("y", {1, 3, 3, 8}, 0.09f, 7);
                 flatbuffer::Table o;
                 o.scalar<int32_t>(tflite::concatenation::axis, 3);
                 m.op(BuiltinOperator::Concatenation, {r, r}, {y}, BuiltinOptions::ConcatenationOptions, o);
                 return std::pair{y, 0.09f};
             }},
            {"PAD, TRANSPOSE, RESIZE_NEAREST_NEIGHBOR", {1, 3, 3, 4}, [&](test::TinyTflite& m, int32_t x) {
                 const int32_t pads = m.int32("pads", {4, 2}, {0, 0, 1, 0, 0, 2, 0, 0});
                 const int32_t p = m.int8("p", {1, 4, 5, 4}, 0.05f, 3);
                 m.op(BuiltinOperator::Pad, {x, pads}, {p}, BuiltinOptions::PadOptions, {});
                 const int32_t size = m.int32("size", {2}, {8, 10});
                 const int32_t r = m.int8("r", {1, 8, 10, 4}, 0.05f, 3);
                 flatbuffer::Table ro;
                 ro.scalar<bool>(tflite::resize_nearest::align_corners, false);
                 ro.scalar<bool>(tflite::resize_nearest::half_pixel_centers, false);
                 m.op(BuiltinOperator::ResizeNearestNeighbor, {p, size}, {r},
                      BuiltinOptions::ResizeNearestNeighborOptions, ro);
                 const int32_t perm = m.int32("perm", {4}, {0, 3, 1, 2});
                 const int32_t y = m.int8("y", {1, 4, 8, 10}, 0.05f, 3);
                 m.op(BuiltinOperator::Transpose, {r, perm}, {y}, BuiltinOptions::TransposeOptions, {});
                 return std::pair{y, 0.05f};
             }},
            {"SLICE of channels 2-5 and rows 1-3", {1, 5, 4, 8}, [&](test::TinyTflite& m, int32_t x) {
                 const int32_t begin = m.int32("begin", {4}, {0, 1, 0, 2});
                 const int32_t size = m.int32("size", {4}, {1, 3, 4, 4});
                 const int32_t y = m.int8("y", {1, 3, 4, 4}, 0.05f, 3);
                 m.op(BuiltinOperator::Slice, {x, begin, size}, {y}, BuiltinOptions::SliceOptions, {});
                 return std::pair{y, 0.05f};
             }},
            {"TRANSPOSE_CONV 3x3 SAME stride 2 with bias", {1, 5, 5, 4}, [&](test::TinyTflite& m, int32_t x) {
                 std::vector<float> scales(6);
                 for (float& v : scales)
                     v = 0.004f * uniform(rng);
                 const int32_t w = m.int8PerChannel("w", {6, 3, 3, 4}, scales, 0, codes(6 * 36));
                 std::vector<int32_t> bias(6);
                 std::vector<float> bs;
                 for (size_t c = 0; c < 6; ++c)
                     bias[c] = code(rng) * 40, bs.push_back(0.05f * scales[c]);
                 const int32_t b = m.int32("b", {6}, bias, bs);
                 const int32_t shape = m.int32("shape", {4}, {1, 10, 10, 6});
                 const int32_t y = m.int8("y", {1, 10, 10, 6}, 0.04f, -10);
                 flatbuffer::Table o;
                 o.scalar<int8_t>(tflite::transpose_conv::padding, int8_t(tflite::Padding::Same));
                 o.scalar<int32_t>(tflite::transpose_conv::stride_w, 2);
                 o.scalar<int32_t>(tflite::transpose_conv::stride_h, 2);
                 m.op(BuiltinOperator::TransposeConv, {shape, w, x, b}, {y}, BuiltinOptions::TransposeConvOptions, o);
                 return std::pair{y, 0.04f};
             }},
            {"TRANSPOSE_CONV 2x2 VALID stride 2, no bias", {1, 4, 4, 8}, [&](test::TinyTflite& m, int32_t x) {
                 std::vector<float> scales(5);
                 for (float& v : scales)
                     v = 0.003f * uniform(rng);
                 const int32_t w = m.int8PerChannel("w", {5, 2, 2, 8}, scales, 0, codes(5 * 32));
                 const int32_t shape = m.int32("shape", {4}, {1, 8, 8, 5});
                 const int32_t y = m.int8("y", {1, 8, 8, 5}, 0.05f, 4);
                 flatbuffer::Table o;
                 o.scalar<int8_t>(tflite::transpose_conv::padding, int8_t(tflite::Padding::Valid));
                 o.scalar<int32_t>(tflite::transpose_conv::stride_w, 2);
                 o.scalar<int32_t>(tflite::transpose_conv::stride_h, 2);
                 m.op(BuiltinOperator::TransposeConv, {shape, w, x}, {y}, BuiltinOptions::TransposeConvOptions, o);
                 return std::pair{y, 0.05f};
             }},
            {"RESIZE_BILINEAR half-pixel centers 5x6 to 10x12", {1, 5, 6, 4}, [&](test::TinyTflite& m, int32_t x) {
                 const int32_t size = m.int32("size", {2}, {10, 12});
                 const int32_t y = m.int8("y", {1, 10, 12, 4}, 0.05f, 3);
                 flatbuffer::Table o;
                 o.scalar<bool>(tflite::resize_bilinear::half_pixel_centers, true);
                 m.op(BuiltinOperator::ResizeBilinear, {x, size}, {y}, BuiltinOptions::ResizeBilinearOptions, o);
                 return std::pair{y, 0.05f};
             }},
            {"RESIZE_BILINEAR align_corners 4x5 to 7x9", {1, 4, 5, 3}, [&](test::TinyTflite& m, int32_t x) {
                 const int32_t size = m.int32("size", {2}, {7, 9});
                 const int32_t y = m.int8("y", {1, 7, 9, 3}, 0.05f, 3);
                 flatbuffer::Table o;
                 o.scalar<bool>(tflite::resize_bilinear::align_corners, true);
                 m.op(BuiltinOperator::ResizeBilinear, {x, size}, {y}, BuiltinOptions::ResizeBilinearOptions, o);
                 return std::pair{y, 0.05f};
             }},
            {"RESIZE_BILINEAR asymmetric 5x6 to 8x9", {1, 5, 6, 3}, [&](test::TinyTflite& m, int32_t x) {
                 const int32_t size = m.int32("size", {2}, {8, 9});
                 const int32_t y = m.int8("y", {1, 8, 9, 3}, 0.05f, 3);
                 m.op(BuiltinOperator::ResizeBilinear, {x, size}, {y}, BuiltinOptions::ResizeBilinearOptions, {});
                 return std::pair{y, 0.05f};
             }},
            {"SUB of a per-channel constant", {1, 5, 5, 4}, [&](test::TinyTflite& m, int32_t x) {
                 const int32_t c = m.int8("c", {4}, 0.02f, 1, codes(4));
                 const int32_t y = m.int8("y", {1, 5, 5, 4}, 0.07f, -9);
                 m.op(BuiltinOperator::Sub, {x, c}, {y}, BuiltinOptions::SubOptions,
                      activation(tflite::add_mul::fused_activation_function, tflite::Activation::None));
                 return std::pair{y, 0.07f};
             }},
            {"SUB from a constant, RELU", {1, 5, 5, 4}, [&](test::TinyTflite& m, int32_t x) {
                 const int32_t c = m.int8("c", {1, 1, 1, 4}, 0.03f, -2, codes(4));
                 const int32_t y = m.int8("y", {1, 5, 5, 4}, 0.04f, -128);
                 m.op(BuiltinOperator::Sub, {c, x}, {y}, BuiltinOptions::SubOptions,
                      activation(tflite::add_mul::fused_activation_function, tflite::Activation::Relu));
                 return std::pair{y, 0.04f};
             }},
            {"STRIDED_SLICE rows 1, 3, 5 and channels 2, 5, 8", {1, 7, 6, 9}, [&](test::TinyTflite& m, int32_t x) {
                 const int32_t begin = m.int32("begin", {4}, {0, 1, 0, 2});
                 const int32_t end = m.int32("end", {4}, {1, 7, 6, 9});
                 const int32_t strides = m.int32("strides", {4}, {1, 2, 1, 3});
                 const int32_t y = m.int8("y", {1, 3, 6, 3}, 0.05f, 3);
                 m.op(BuiltinOperator::StridedSlice, {x, begin, end, strides}, {y}, BuiltinOptions::StridedSliceOptions,
                      {});
                 return std::pair{y, 0.05f};
             }},
            // The input's zero point is 3, so negative values exist: the padding must be the lowest
            // code, not the zero point, for the maximum to ignore it.
            {"PADV2 with -128, MAX_POOL_2D 3x3 stride 2", {1, 8, 8, 4}, [&](test::TinyTflite& m, int32_t x) {
                 const int32_t pads = m.int32("pads", {4, 2}, {0, 0, 1, 1, 1, 1, 0, 0});
                 const int32_t value = m.int8("value", {1}, 0.05f, 3, {-128});
                 const int32_t p = m.int8("p", {1, 10, 10, 4}, 0.05f, 3);
                 m.op(BuiltinOperator::PadV2, {x, pads, value}, {p}, BuiltinOptions::PadV2Options, {});
                 const int32_t y = m.int8("y", {1, 4, 4, 4}, 0.05f, 3);
                 m.op(BuiltinOperator::MaxPool2D, {p}, {y}, BuiltinOptions::Pool2DOptions,
                      pool(3, 2, tflite::Padding::Valid));
                 return std::pair{y, 0.05f};
             }},
            // The export's form of a MaxPool's explicit padding (Arm NN 20.08 has no PADV2): the border
            // as constants of -128 concatenated along the rows, then the columns.
            {"CONCATENATION of -128 borders, MAX_POOL_2D 3x3 stride 2", {1, 8, 8, 4},
             [&](test::TinyTflite& m, int32_t x) {
                 const int32_t top = m.int8("top", {1, 1, 8, 4}, 0.05f, 3, std::vector<int8_t>(32, -128));
                 const int32_t rows = m.int8("rows", {1, 10, 8, 4}, 0.05f, 3);
                 flatbuffer::Table ro;
                 ro.scalar<int32_t>(tflite::concatenation::axis, 1);
                 m.op(BuiltinOperator::Concatenation, {top, x, top}, {rows}, BuiltinOptions::ConcatenationOptions, ro);
                 const int32_t left = m.int8("left", {1, 10, 1, 4}, 0.05f, 3, std::vector<int8_t>(40, -128));
                 const int32_t p = m.int8("p", {1, 10, 10, 4}, 0.05f, 3);
                 flatbuffer::Table co;
                 co.scalar<int32_t>(tflite::concatenation::axis, 2);
                 m.op(BuiltinOperator::Concatenation, {left, rows, left}, {p}, BuiltinOptions::ConcatenationOptions, co);
                 const int32_t y = m.int8("y", {1, 4, 4, 4}, 0.05f, 3);
                 m.op(BuiltinOperator::MaxPool2D, {p}, {y}, BuiltinOptions::Pool2DOptions,
                      pool(3, 2, tflite::Padding::Valid));
                 return std::pair{y, 0.05f};
             }},
        };
        for (const Case& c : cases) {
            test::TinyTflite m;
            const int32_t f = m.float32("input", c.input);
            const int32_t x = m.int8("x", c.input, 0.05f, 3);
            m.op(BuiltinOperator::Quantize, {f}, {x});
            const auto [y, scale] = c.build(m, x);
            const int32_t g = m.float32("output", m.shape(y));
            m.op(BuiltinOperator::Dequantize, {y}, {g});
            m.inputs = {f}, m.outputs = {g};
            const std::vector<uint8_t> bytes = m.serialize();
            const TfliteIntegerExecutor probe = TfliteIntegerExecutor::fromBytes(bytes, c.name);
            const TfliteIntegerExecutor reference =
                TfliteIntegerExecutor::fromBytes(bytes, c.name, TfliteArithmetic::Reference);
            Shape inShape(c.input.begin(), c.input.end());
            Tensor in(DType::F32, inShape);
            std::normal_distribution<float> normal(0.0f, 2.0f);
            for (float& v : in.mutableValues<float>())
                v = normal(rng);
            const fs::path file = path(std::string("op_") + std::to_string(&c - cases.data()) + ".tflite");
            test::writeFile(file.string(), std::string(bytes.begin(), bytes.end()));
            QString error;
            const Tensor consumer = runConsumer(QUANTSCOPE_NODE, {QUANTSCOPE_LITERT_SCRIPT, QUANTSCOPE_LITERT_DIR}, file,
                                                path(file.stem().string()), {in}, error);
            QVERIFY2(!consumer.empty(), qPrintable(QString(c.name) + ": " + error));
            const Tensor ours = probe.run({in}).at(0), referenceOut = reference.run({in}).at(0);
            QCOMPARE(consumer.numel(), ours.numel());
            struct Agreement {
                int maxDiff = 0;
                int64_t exact = 0;
            };
            auto agreement = [&](const Tensor& t) {
                Agreement r;
                const auto a = consumer.values<float>(), b = t.values<float>();
                for (size_t k = 0; k < a.size(); ++k) {
                    const int d = int(std::lround(std::fabs(double(a[k]) - double(b[k])) / double(scale)));
                    r.maxDiff = std::max(r.maxDiff, d);
                    r.exact += d == 0;
                }
                return r;
            };
            const Agreement xnnpack = agreement(ours), referenceAgreement = agreement(referenceOut);
            qInfo("%s: %lld of %lld codes equal to LiteRT.js's with XNNPACK's arithmetic, %lld with the reference "
                  "kernels' (largest difference %d)",
                  c.name, static_cast<long long>(xnnpack.exact), static_cast<long long>(consumer.numel()),
                  static_cast<long long>(referenceAgreement.exact), referenceAgreement.maxDiff);
            // The default arithmetic is the delegate's LiteRT.js runs: every code equal.
            QVERIFY2(xnnpack.exact == consumer.numel(), c.name);
            // The reference kernels requantize through fixed-point multipliers where XNNPACK uses a
            // float scale: a code apart near rounding ties (MEAN: 56 of 64 codes equal when measured;
            // RESIZE_BILINEAR, whose reference places its taps in 10 fractional bits where XNNPACK
            // weighs them in 11: 166 of 189 with align_corners, 460 of 480 with half-pixel centers;
            // everywhere else at least 97 %).
            QVERIFY2(referenceAgreement.maxDiff <= 1, c.name);
            const bool loose =
                std::string(c.name).starts_with("MEAN") || std::string(c.name).starts_with("RESIZE_BIL");
            QVERIFY2(double(referenceAgreement.exact) >= (loose ? 0.75 : 0.9) * double(consumer.numel()), c.name);
#ifdef QUANTSCOPE_ARMNN_RUNNER
            // Arm NN's CpuRef against the simulation of its arithmetic (TfliteArithmetic::ArmnnReference).
            // Three cases are what Arm NN 20.08 cannot run as written (no PADV2; a grouped CONV_2D's
            // groups ignored; a TRANSPOSE_CONV with a bias input, which its parser rejects): the
            // simulation refuses them, naming the operator.
            const std::string name = c.name;
            if (name.starts_with("PADV2") || name.find("groups") != std::string::npos ||
                name.starts_with("TRANSPOSE_CONV 3x3 SAME stride 2 with bias")) {
                const std::string op = name.starts_with("PADV2")            ? "(PADV2)"
                                       : name.starts_with("TRANSPOSE_CONV") ? "(TRANSPOSE_CONV)"
                                                                            : "(CONV_2D)";
                try {
                    TfliteIntegerExecutor::fromBytes(bytes, c.name, TfliteArithmetic::ArmnnReference);
                    QFAIL(qPrintable(QString(c.name) + ": the Arm NN simulation ran what Arm NN cannot"));
                } catch (const Error& e) {
                    QVERIFY2(std::string(e.what()).find(op) != std::string::npos, e.what());
                }
                continue;
            }
            const TfliteIntegerExecutor armnnSim =
                TfliteIntegerExecutor::fromBytes(bytes, c.name, TfliteArithmetic::ArmnnReference);
            const Tensor armnn = runConsumer(QUANTSCOPE_ARMNN_RUNNER, {QUANTSCOPE_ARMNN_BACKENDS}, file,
                                             path(file.stem().string() + "_armnn"), {in}, error);
            QVERIFY2(!armnn.empty(), qPrintable(QString(c.name) + ": " + error));
            QCOMPARE(armnn.numel(), ours.numel());
            const Tensor armnnOurs = armnnSim.run({in}).at(0);
            int64_t armnnExact = 0;
            int armnnMaxDiff = 0;
            for (size_t k = 0; k < size_t(armnn.numel()); ++k) {
                const double a = armnn.values<float>()[k], b = armnnOurs.values<float>()[k];
                const int d = int(std::lround(std::fabs(a - b) / double(scale)));
                armnnMaxDiff = std::max(armnnMaxDiff, d);
                armnnExact += d == 0;
            }
            qInfo("%s: %lld of %lld codes equal to Arm NN's with its arithmetic simulated (largest difference %d)",
                  c.name, static_cast<long long>(armnnExact), static_cast<long long>(armnn.numel()), armnnMaxDiff);
            // The simulation sums in CpuRef's float order, so no code differs, not even near a tie (the
            // PAD case: its added codes are 0, not the zero point 3, as Arm NN 20.08 writes them; the
            // half-pixel RESIZE_BILINEAR: Arm NN's asymmetric coordinates, the file's flag unread).
            QVERIFY2(armnnExact == armnn.numel(), c.name);
            if (name.starts_with("RESIZE_BILINEAR half-pixel")) { // the fault is Arm NN's, not a no-op
                int64_t apart = 0;
                for (size_t k = 0; k < size_t(armnn.numel()); ++k)
                    apart += armnn.values<float>()[k] != consumer.values<float>()[k];
                qInfo("%s: %lld of %lld codes of Arm NN differ from LiteRT.js's", c.name, static_cast<long long>(apart),
                      static_cast<long long>(armnn.numel()));
                QVERIFY2(apart > 0, c.name);
            }
#endif
        }
    }

    // The writer's SUB and STRIDED_SLICE on zoo models edited to use them: the detection head with
    // its two FPN Adds made Subs (SUB of two activations), the segmentation head with every second
    // row and column of its output taken by a Slice with steps (axes 2, 3: NHWC axes 1, 2). LiteRT.js
    // runs each file as the integer simulation does, and both are near the edited float model.
    void editedModelsRunInLiteRt_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QString>("op");
        QTest::newRow("SUB") << "detection_head" << "SUB";
        QTest::newRow("STRIDED_SLICE") << "segmentation_head" << "STRIDED_SLICE";
    }

    void editedModelsRunInLiteRt()
    {
        QFETCH(QString, model);
        QFETCH(QString, op);
        const std::string name = model.toStdString();
        const BatchNormFolding folding = foldBatchNorms(loadModel(kZoo / (name + ".onnx")));
        Model m = folding.model;
        if (op == "SUB") {
            for (Node& n : m.nodes)
                if (n.opType == "Add")
                    n.opType = "Sub";
        } else {
            auto ints = [](std::vector<int64_t> v) {
                return Tensor::fromVector(DType::I64, {int64_t(v.size())}, std::move(v));
            };
            m.addInitializer("strided/starts", ints({1, 0}));
            m.addInitializer("strided/ends", ints({32, 32}));
            m.addInitializer("strided/axes", ints({2, 3}));
            m.addInitializer("strided/steps", ints({2, 3}));
            Node slice;
            slice.name = "/strided/Slice";
            slice.opType = "Slice";
            slice.inputs = {m.outputs.at(0).name, "strided/starts", "strided/ends", "strided/axes", "strided/steps"};
            slice.outputs = {"strided_output"};
            m.nodes.push_back(slice);
            m.outputs.at(0).name = "strided_output";
        }
        m.layers = findGraphLayers(m);
        const QuantizationPlan plan = QuantizationPlan::build(m, RuleSet::fromJson(kRules), QuantizationMode::Odml);
        WeightQuantizer weights;
        weights.update(m, plan);
        const Interpreter interpreter(m);
        auto calib = openDataSource(kZoo / (name + "_calib.npz"), {.batchSize = 1, .exactBatches = true}, &m);
        TfliteOptions options;
        options.odml.maxBatches = kCalibBatches;
        const fs::path out = path("edited_" + op.toStdString() + ".tflite");
        TfliteSummary summary;
        try {
            summary = exportTflite(interpreter, plan, weights, *calib, options, out);
        } catch (const Error& e) {
            QFAIL(e.what());
        }
        QCOMPARE(summary.operatorsByType[op.toStdString()], op == "SUB" ? int64_t(2) : int64_t(1));
        const std::string bytes = test::readFile(out.string());
        const TfliteIntegerExecutor integer = TfliteIntegerExecutor::fromBytes(
            std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), out.string());
        const Tensor eval = NpzFile::open(kZoo / (name + "_eval.npz")).read("input").toFloat32();
        std::vector<float> floatAll, ours, lite;
        for (int64_t row = 0; row < 2; ++row) {
            const int64_t per = eval.numel() / eval.dim(0);
            Shape shape = eval.shape();
            shape[0] = 1;
            Tensor x(DType::F32, shape);
            std::memcpy(x.mutableValues<float>().data(), eval.values<float>().data() + row * per, size_t(per) * 4);
            const Tensor f = toNhwc(interpreter.run({{m.inputs.at(0).name, x}}).at(m.outputs.at(0).name));
            floatAll.insert(floatAll.end(), f.values<float>().begin(), f.values<float>().end());
            const Tensor q = integer.run({toNhwc(x)}).at(0);
            QCOMPARE(q.numel(), f.numel());
            ours.insert(ours.end(), q.values<float>().begin(), q.values<float>().end());
            QString error;
            const Tensor y = runConsumer(QUANTSCOPE_NODE, {QUANTSCOPE_LITERT_SCRIPT, QUANTSCOPE_LITERT_DIR}, out,
                                         path("edited_" + op.toStdString() + "_" + std::to_string(row)), {toNhwc(x)},
                                         error);
            QVERIFY2(!y.empty(), qPrintable("LiteRT.js: " + error));
            QCOMPARE(y.numel(), f.numel());
            lite.insert(lite.end(), y.values<float>().begin(), y.values<float>().end());
        }
        auto tensorOf = [](const std::vector<float>& v) {
            return Tensor::fromVector(DType::F32, {int64_t(v.size())}, v);
        };
        const double agreement = sqnrDb(tensorOf(ours), tensorOf(lite)),
                     vsFloat = sqnrDb(tensorOf(floatAll), tensorOf(lite));
        qInfo("%s with %s: LiteRT.js vs integer simulation %.1f dB, vs float %.2f dB", name.c_str(),
              qPrintable(op), agreement, vsFloat);
        QVERIFY2(agreement >= 45.0, qPrintable(QString("LiteRT.js vs integer simulation %1 dB").arg(agreement)));
        QVERIFY2(vsFloat >= 25.0, qPrintable(QString("LiteRT.js vs float %1 dB").arg(vsFloat)));
    }

    // What neither the ODML scheme nor the writer can put into LiteRT is refused with one Error naming
    // the node, and nothing is written. `edit` sets one attribute of one node of the zoo model
    // first (op type:attribute=value): a Resize mode or coordinate mapping LiteRT has no flag for.
    void unsupportedModelsAreRefused_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QString>("edit");
        QTest::addColumn<QString>("expected");
        QTest::newRow("If") << "if_branch" << "" << "node 'If_0' (If)";
        QTest::newRow("cubic Resize") << "segmentation_head" << "Resize:mode=cubic"
                                      << "node '/Resize' (Resize): Resize mode 'cubic' has no LiteRT op";
        QTest::newRow("half_pixel_symmetric Resize")
            << "segmentation_head" << "Resize:coordinate_transformation_mode=half_pixel_symmetric"
            << "node '/Resize' (Resize): coordinate_transformation_mode 'half_pixel_symmetric' has no LiteRT "
               "equivalent";
    }

    void unsupportedModelsAreRefused()
    {
        QFETCH(QString, model);
        QFETCH(QString, edit);
        QFETCH(QString, expected);
        const std::string name = model.toStdString();
        const BatchNormFolding folding = foldBatchNorms(loadModel(kZoo / (name + ".onnx")));
        Model m = folding.model;
        if (!edit.isEmpty()) {
            const QStringList parts = edit.split(QRegularExpression("[:=]"));
            bool edited = false;
            for (Node& n : m.nodes)
                for (Attribute& a : n.attributes)
                    if (n.opType == parts[0].toStdString() && a.name == parts[1].toStdString())
                        a.s = parts[2].toStdString(), edited = true;
            QVERIFY(edited);
        }
        const QuantizationPlan plan = QuantizationPlan::build(m, RuleSet::fromJson(kRules), QuantizationMode::Odml);
        WeightQuantizer weights;
        weights.update(m, plan);
        const Interpreter interpreter(m);
        auto calib = openDataSource(kZoo / (name + "_calib.npz"), {.batchSize = 1, .exactBatches = true}, &m);
        TfliteOptions options;
        options.odml.maxBatches = 1;
        // Not the zoo row's file name: zooModels wrote that one.
        const fs::path out = path("refused_" + QString(QTest::currentDataTag()).replace(' ', '_').toStdString() +
                                  ".tflite");
        const QString error = test::errorOf([&] { exportTflite(interpreter, plan, weights, *calib, options, out); });
        QVERIFY2(error.contains(expected), qPrintable(error));
        QVERIFY(!fs::exists(out)); // nothing written
    }
};

QTEST_GUILESS_MAIN(TestExportTflite)
#include "tst_export_tflite.moc"
