// SmoothQuant (quantization/smoothing.h) through the session.
//
// Against an independent NumPy SmoothQuant written from the paper
// (tests/smooth/smoothquant_reference.py) on the two small models it writes —
// LayerNorm -> q, k, v (one shared s) with a Relu -> p that must be skipped, and
// Gemm(transB) -> Gemm -> MatMul + Add -> MatMul (1/s folded into Gemm rows,
// Gemm columns, MatMul columns and a bias Add; the first Gemm skipped, its input
// is a graph input), and an RMSNorm written out as ops -> gate, up (one s, into
// the RMSNorm's weight) -> SiLU(gate)·up -> down (its s into up's columns): the scales and every smoothed tensor, at α
// 0.5 and 0.75; the smoothed float model computes the loaded one's outputs; the calibration is two-phase (the
// statistics are of the smoothed model), cached, cancellable; the exports hold the smoothed tensors.
//
// And the issue's target on the transformer block tests/smooth/make_transformer_block.py
// writes into the build tree (LLM-like outlier channels): w8a8 with static
// per-tensor activations, smooth_alpha 0.5 lifts the output SQNR by >= 3 dB over
// no smoothing (figures in docs/algorithms.md).

#include <QtTest>

#include <cmath>

#include <nlohmann/json.hpp>

#include "algorithm_support.h"
#include "export/checkpoint.h"
#include "export/checkpoint_reader.h"
#include "export/onnx_qdq.h"
#include "export/qdq_graph.h"
#include "io/npy.h"
#include "io/npz.h"
#include "io/onnx_loader.h"
#include "ort_support.h"
#include "rules/ruleset.h"
#include "runtime/quantization_hook.h"
#include "session/exploration.h"
#include "test_support.h"

using namespace qs;
using namespace qs::test;

namespace {

const QString kReference = QStringLiteral(QUANTSCOPE_TEST_DATA "/../smooth/smoothquant_reference.py");
const char* const kBlock = QUANTSCOPE_SMOOTH_DIR "/block.onnx";
const char* const kBlockCalib = QUANTSCOPE_SMOOTH_DIR "/block_calib.npz";
const char* const kBlockEval = QUANTSCOPE_SMOOTH_DIR "/block_eval.npz";

std::string smoothRules(double alpha, const std::string& extra = "")
{
    return R"({"version":1,"rules":[{"op_types":["MatMul","Gemm"],"weight_qtype":"int8","act_qtype":"int8",)"
           R"("smooth_alpha":)" +
           std::to_string(alpha) + extra + "}]}";
}

std::string pathsOf(const Model& m, const std::vector<size_t>& layers)
{
    std::string s;
    for (size_t l : layers)
        s += (s.empty() ? "" : ",") + m.layers[l].modulePath;
    return s;
}

} // namespace

class TestSmoothQuant : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;
    std::filesystem::path folder_;

    Exploration open(const std::string& model, const std::string& rules)
    {
        Exploration e;
        e.setModel(loadExplorationModel(folder_ / (model + ".onnx")));
        e.setRules(RuleSet::fromJson(rules));
        DataConfig calib;
        calib.path = folder_ / (model + "_calib.npz");
        e.setCalibrationData(calib);
        return e;
    }

private slots:
    void initTestCase()
    {
        QVERIFY(dir_.isValid());
        folder_ = dir_.path().toStdString();
        QVERIFY(runPython(kReference, {dir_.path()}));
    }

    void scalesAndTensorsMatchTheNumpyReference_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<double>("alpha");
        QTest::addColumn<QStringList>("groups"); // the layers sharing each s, model order
        QTest::addColumn<QString>("producers");  // the op each 1/s went into
        QTest::addColumn<QString>("skipped");    // the layer not smoothed
        QTest::addColumn<QString>("skipReason"); // a word its reason must hold
        for (const double alpha : {0.5, 0.75}) {
            const QString a = QString::number(alpha);
            QTest::newRow(qPrintable("layernorm q/k/v, alpha " + a))
                << "ln_qkv" << alpha << QStringList{"q,k,v"} << "LayerNormalization"
                << "p"
                << "Relu";
            QTest::newRow(qPrintable("rmsnorm gate/up, silu product, down, alpha " + a))
                << "rms_mlp" << alpha << QStringList{"gate,up", "down"} << "Mul,Mul of MatMul"
                << ""
                << "";
            QTest::newRow(qPrintable("gemm, gemm, matmul + add, matmul, alpha " + a))
                << "linear_chain" << alpha << QStringList{"fc2", "fc3", "fc4"} << "Gemm,Gemm,MatMul + Add"
                << "fc1"
                << "graph input";
        }
    }
    void scalesAndTensorsMatchTheNumpyReference()
    {
        QFETCH(QString, model);
        QFETCH(double, alpha);
        QFETCH(QStringList, groups);
        QFETCH(QString, producers);
        QFETCH(QString, skipped);
        QFETCH(QString, skipReason);
        const std::string name = model.toStdString();
        const std::string prefix = name + "_a" + std::to_string(int(std::lround(alpha * 100)));
        Exploration e = open(name, smoothRules(alpha));
        QVERIFY(e.smoothingPending());
        e.calibrate(KeptHistograms::AsPlanNeeds);
        QVERIFY(!e.smoothingPending());
        const auto sq = e.smoothing();
        QVERIFY(sq);
        const Model& loaded = *e.loaded().model;
        QCOMPARE(int(sq->inputs.size()), int(groups.size()));
        QStringList ops;
        for (int k = 0; k < groups.size(); ++k) {
            const SmoothedInput& in = sq->inputs[size_t(k)];
            QCOMPARE(QString::fromStdString(pathsOf(loaded, in.layers)), groups[k]);
            ops << QString::fromStdString(in.producerOp);
            const Tensor ref = readNpy(folder_ / (prefix + "_scales_" + std::to_string(k) + ".npy"));
            QCOMPARE(size_t(ref.numel()), in.scales.size());
            const double worst = maxRelativeDifference(in.scales, ref.values<double>());
            qInfo("%s alpha %.2f, %s: %zu scales in [%.4g, %.4g], max relative difference to NumPy %.2e", name.c_str(),
                  alpha, qPrintable(groups[k]), in.scales.size(), *std::min_element(in.scales.begin(), in.scales.end()),
                  *std::max_element(in.scales.begin(), in.scales.end()), worst);
            QVERIFY(worst < 1e-6);
            QVERIFY(std::any_of(in.scales.begin(), in.scales.end(), [](double s) { return std::abs(s - 1) > 0.1; }));
        }
        QCOMPARE(ops.join(','), producers);
        QCOMPARE(int(sq->skipped.size()), skipped.isEmpty() ? 0 : 1);
        if (!skipped.isEmpty()) {
            QCOMPARE(QString::fromStdString(loaded.layers[sq->skipped[0].layer].modulePath), skipped);
            QVERIFY2(sq->skipped[0].reason.find(skipReason.toStdString()) != std::string::npos,
                     sq->skipped[0].reason.c_str());
        }
        // ... and the session shows it as a note on the layer.
        QCOMPARE(std::count_if(e.warnings().begin(), e.warnings().end(),
                               [](const ExplorationWarning& w) {
                                   return w.field == "smooth_alpha" && w.kind == ExplorationWarning::Kind::LayerNote;
                               }),
                 skipped.isEmpty() ? 0 : 1);
        // Every tensor the reference rewrote, and only those, is rewritten in the session's model.
        int compared = 0;
        for (const NamedTensor& t : e.model().initializers()) {
            const auto file = folder_ / (prefix + "__" + t.name + ".npy");
            const Tensor* original = loaded.initializer(t.name);
            if (!std::filesystem::exists(file)) {
                QVERIFY2(bytesOf(t.tensor) == bytesOf(*original), t.name.c_str());
                continue;
            }
            const Tensor ref = readNpy(file);
            QCOMPARE(t.tensor.shape(), ref.shape());
            const double d = relativeToRange(t.tensor, ref);
            QVERIFY2(d < 1e-6, (t.name + ": " + std::to_string(d)).c_str());
            QVERIFY(relativeToRange(*original, ref) > 1e-3); // it did change
            ++compared;
        }
        QCOMPARE(compared, name == "ln_qkv" ? 5 : name == "rms_mlp" ? 4 : 6);
    }

    void theSmoothedModelComputesTheSameFunction_data()
    {
        QTest::addColumn<QString>("model");
        QTest::newRow("layernorm q/k/v") << "ln_qkv";
        QTest::newRow("linear chain") << "linear_chain";
        QTest::newRow("rmsnorm gate/up, down") << "rms_mlp";
    }
    void theSmoothedModelComputesTheSameFunction()
    {
        QFETCH(QString, model);
        const std::string name = model.toStdString();
        Exploration e = open(name, smoothRules(0.5));
        e.calibrate(KeptHistograms::AsPlanNeeds);
        QVERIFY(e.interpreter() != e.loaded().interpreter);
        const std::map<std::string, Tensor> x{{"x", NpzFile::open(folder_ / (name + "_calib.npz")).read("x")}};
        const auto original = e.loaded().interpreter->run(x);
        const auto smoothed = e.interpreter()->run(x);
        for (const auto& [output, y] : original) {
            const double d = relativeToRange(smoothed.at(output), y);
            qInfo("%s output %s: smoothed vs loaded float model, max |difference| / max |y| = %.2e", name.c_str(),
                  output.c_str(), d);
            QVERIFY(d < 1e-5);
        }
    }

    void calibrationIsTwoPhaseCachedAndCancellable()
    {
        Exploration e = open("ln_qkv", smoothRules(0.5, R"(, "act_static_scale": true)"));
        QVERIFY(e.needsCalibration() && e.weightsNeedCalibration());
        QVERIFY(e.modelPtr() == e.loaded().model); // nothing smoothed before calibration
        DataConfig eval;
        eval.path = folder_ / "ln_qkv_calib.npz";
        e.setEvaluationData(eval);
        QVERIFY_THROWS_EXCEPTION(Error, e.evaluationJob());

        // Cancelled in phase 1: nothing changes.
        CancellationToken cancel;
        cancel.cancel();
        QVERIFY_THROWS_EXCEPTION(Cancelled, e.calibrate(KeptHistograms::AsPlanNeeds, cancel));
        QVERIFY(e.smoothingPending() && !e.statistics());

        std::vector<std::string> steps;
        const CalibrationResult r = e.calibrate(KeptHistograms::AsPlanNeeds, {},
                                                [&](double, std::string_view step) { steps.emplace_back(step); });
        QVERIFY(r.smoothing);
        QVERIFY(steps.front().find("smoothing statistics") != std::string::npos);
        QVERIFY(steps.back().find("calibrating") != std::string::npos);
        // Phase 2 observed the smoothed model: a calibration of it gives these statistics exactly.
        const auto data = e.snapshot().openData(*e.calibrationData());
        const ActivationStatistics again = calibrateActivations(*e.interpreter(), *e.plan(), *data);
        const ActivationStatistics ofLoaded = calibrateActivations(*e.loaded().interpreter, *e.plan(), *data);
        QCOMPARE(e.statistics()->find("h")->averageAbsMax(0), again.find("h")->averageAbsMax(0));
        qInfo("max |h|: %.4g on the loaded model, %.4g smoothed", ofLoaded.find("h")->averageAbsMax(0),
              again.find("h")->averageAbsMax(0));
        QVERIFY(again.find("h")->averageAbsMax(0) < 0.5 * ofLoaded.find("h")->averageAbsMax(0));

        // Same targets (another weight type): the smoothed model stays and phase 1 is skipped.
        const auto smoothedModel = e.modelPtr();
        e.setRules(RuleSet::fromJson(smoothRules(0.5, R"(, "act_static_scale": true, "granularity": "per_tensor")")));
        QVERIFY(!e.smoothingPending());
        QVERIFY(e.modelPtr() == smoothedModel);
        QVERIFY(!e.calibrate(KeptHistograms::AsPlanNeeds).smoothing);
        QVERIFY(e.modelPtr() == smoothedModel);
        e.updateWeights();
        QVERIFY(e.weightsCurrent());
        QVERIFY_THROWS_NO_EXCEPTION(e.evaluate());

        // Another alpha: back to the float model until calibration smooths it again.
        e.setRules(RuleSet::fromJson(smoothRules(0.75, R"(, "act_static_scale": true)")));
        QVERIFY(e.smoothingPending());
        QVERIFY(e.modelPtr() == e.loaded().model);
        QVERIFY(!e.statistics());
        e.calibrate(KeptHistograms::AsPlanNeeds);
        QVERIFY(e.modelPtr() != e.loaded().model && e.modelPtr() != smoothedModel);
        // Other calibration data: the smoothing is recomputed by the next calibration.
        DataConfig fewer = *e.calibrationData();
        fewer.batchSize = 4;
        fewer.maxBatches = 1;
        e.setCalibrationData(fewer);
        QVERIFY(e.smoothingPending());
        QVERIFY(e.calibrate(KeptHistograms::AsPlanNeeds).smoothing);
        // No smooth_alpha: the loaded model.
        e.setRules(RuleSet::fromJson(R"({"version":1,"rules":[{"weight_qtype":"int8","act_qtype":"int8"}]})"));
        QVERIFY(!e.smoothing());
        QVERIFY(e.modelPtr() == e.loaded().model);
    }

    void smoothingRunsOnTheEqualizedModel()
    {
        // equalize pairs fc1 -> fc2 -> fc3 of the linear chain first; smoothing then rescales that model.
        Exploration e = open("linear_chain", smoothRules(0.5, R"(, "equalize": true)"));
        QVERIFY(e.equalization() && !e.equalization()->pairs.empty());
        const auto equalized = e.modelPtr();
        QVERIFY(equalized != e.loaded().model);
        e.calibrate(KeptHistograms::AsPlanNeeds);
        QVERIFY(e.smoothing() && e.smoothing()->inputs.size() == 3);
        QVERIFY(e.modelPtr() != equalized);
        // The smoothed weight of fc2 is the equalized one times s (rows), divided by the next s (columns).
        const Tensor& w2 = *e.model().initializer("w2");
        const Tensor& w2Equalized = *equalized->initializer("w2");
        const std::vector<double>& s2 = e.smoothing()->inputs[0].scales;
        const std::vector<double>& s3 = e.smoothing()->inputs[1].scales;
        double worst = 0;
        for (int64_t j = 0; j < w2.shape()[0]; ++j)
            for (int64_t n = 0; n < w2.shape()[1]; ++n) {
                const size_t i = size_t(j * w2.shape()[1] + n);
                const double expected = double(w2Equalized.values<float>()[i]) * s2[size_t(j)] / s3[size_t(n)];
                worst = std::max(worst, std::abs(double(w2.values<float>()[i]) - expected) / std::abs(expected));
            }
        QVERIFY2(worst < 1e-6, std::to_string(worst).c_str());
        const std::map<std::string, Tensor> x{{"x", NpzFile::open(folder_ / "linear_chain_calib.npz").read("x")}};
        const Tensor y = e.loaded().interpreter->run(x).at("out");
        const double d = relativeToRange(e.interpreter()->run(x).at("out"), y);
        qInfo("equalized + smoothed float model vs loaded: max |difference| / max |y| = %.2e", d);
        QVERIFY(d < 1e-5);
    }

    void exportsHoldTheSmoothedTensors()
    {
        Exploration e = open("ln_qkv", smoothRules(0.5, R"(, "act_static_scale": true)"));
        e.calibrate(KeptHistograms::AsPlanNeeds);
        e.updateWeights();
        QVERIFY(e.weights()->problems().empty());
        const Model& model = e.model();
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const std::filesystem::path folder = dir.path().toStdString();
        exportCheckpoint(model, *e.plan(), *e.weights(), e.rules(), folder / "w.safetensors");
        const QuantizedCheckpoint checkpoint = QuantizedCheckpoint::open(folder / "w.safetensors");
        const std::map<size_t, StaticActivation> statics = staticActivations(*e.plan(), *e.statistics());
        exportOnnxQdq(model, *e.plan(), *e.weights(), statics, folder / "q.onnx");
        const onnx::ModelProto qdq = readProto(folder / "q.onnx");
        for (const char* name : {"ln_scale", "ln_bias"}) {
            const Tensor& smoothed = *model.initializer(name);
            QVERIFY(bytesOf(smoothed) != bytesOf(*e.loaded().model->initializer(name)));
            QCOMPARE(bytesOf(checkpoint.stored(name)), bytesOf(smoothed));
            const auto written = readFloatTensor(initializerOf(qdq, name));
            QVERIFY(written);
            const auto v = smoothed.values<float>();
            QVERIFY(std::equal(v.begin(), v.end(), written->begin(), written->end()));
        }
        // The exported QDQ model, run by our interpreter, gives the simulation's outputs.
        const std::map<std::string, Tensor> x{{"x", NpzFile::open(folder_ / "ln_qkv_calib.npz").read("x")}};
        QuantizationHook hook(model, *e.plan(), *e.weights(), statics);
        RunOptions options;
        options.observer = &hook;
        const auto simulated = Interpreter(model).run(x, options);
        const auto exported = Interpreter(loadOnnx(folder / "q.onnx")).run(x);
        for (const auto& [output, y] : simulated) {
            const double d = relativeToRange(exported.at(output), y);
            qInfo("output %s: exported QDQ model vs simulation, max |difference| / max |y| = %.2e", output.c_str(), d);
            QVERIFY(d < 1e-5);
        }
    }

    // The smoothed transformer block's QDQ export, run by our interpreter, gives the simulation's outputs
    // exactly; ONNX Runtime runs it too, to within what its int8 kernels differ on this block.
    void theBlocksQdqExportRunsAsSimulated()
    {
        Exploration e;
        e.setModel(loadExplorationModel(kBlock));
        e.setRules(RuleSet::fromJson(smoothRules(0.5, R"(, "act_static_scale": true)")));
        e.setCalibrationData(file(kBlockCalib));
        e.calibrate(KeptHistograms::AsPlanNeeds);
        e.updateWeights();
        QVERIFY(e.weights()->problems().empty());
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const std::filesystem::path exported = std::filesystem::path(dir.path().toStdString()) / "block_q.onnx";
        const std::map<size_t, StaticActivation> statics = staticActivations(*e.plan(), *e.statistics());
        exportOnnxQdq(e.model(), *e.plan(), *e.weights(), statics, exported);
        const std::map<std::string, Tensor> x{{"x", NpzFile::open(kBlockEval).read("x")}};
        QuantizationHook hook(e.model(), *e.plan(), *e.weights(), statics);
        RunOptions options;
        options.observer = &hook;
        const Tensor simulated = Interpreter(e.model()).run(x, options).at("out");
        const Tensor floatRun = e.loaded().interpreter->run(x).at("out");
        const double ours = relativeToRange(Interpreter(loadOnnx(exported)).run(x).at("out"), simulated);
        const double ort = relativeToRange(runOnnxRuntime(exported, x).at("out"), simulated);
        const double moved = relativeToRange(floatRun, simulated);
        qInfo("smoothed block, exported QDQ vs simulation: max |difference| / max |y| ours %.2e, ONNX Runtime %.2e "
              "(quantization moved the outputs by %.2e)",
              ours, ort, moved);
        QVERIFY(ours <= 1e-5);
        // ONNX Runtime's int8 kernels differ from the simulation on this block by 4.1e-3 of the output
        // range, and by 5.2e-3 on the same block without smoothing (measured by hand): not smoothing's.
        QVERIFY(ort <= 1e-2);
        QVERIFY(moved > 1e-2);
    }

    void theCliSmoothsAndReportsIt()
    {
        const std::string rules = (folder_ / "smooth.json").string(), report = (folder_ / "report.json").string();
        writeFile(rules, smoothRules(0.5));
        const QString model = QString::fromStdString((folder_ / "ln_qkv.onnx").string());
        const QString calib = QString::fromStdString((folder_ / "ln_qkv_calib.npz").string());
        // Without calibration data: one error naming the field.
        CliRun r = runCli({"quantize", model, "--rules", QString::fromStdString(rules)});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("sets smooth_alpha (layer 'q')") && r.err.contains("--calib"), r.err.constData());
        r = runCli({"quantize", model, "--rules", QString::fromStdString(rules), "--calib", calib, "--report",
                    QString::fromStdString(report)});
        QCOMPARE(r.exitCode, 0);
        QVERIFY2(r.err.contains("smooth_alpha 0.5: q, k, v (1/s into LayerNormalization '/ln/LayerNormalization'): "
                                "16 channels"),
                 r.err.constData());
        QVERIFY2(r.err.contains("warning: layer 'p': not smoothed: "), r.err.constData());
        const auto j = nlohmann::json::parse(readFile(report));
        QCOMPARE(j["smoothing"]["inputs"].size(), size_t(1));
        QCOMPARE(j["smoothing"]["inputs"][0]["layers"], nlohmann::json({"q", "k", "v"}));
        QCOMPARE(j["smoothing"]["inputs"][0]["producer_op"].get<std::string>(), std::string("LayerNormalization"));
        QCOMPARE(j["smoothing"]["skipped"][0]["layer"].get<std::string>(), std::string("p"));
        // The same scales as the session's.
        Exploration e = open("ln_qkv", smoothRules(0.5));
        e.calibrate(KeptHistograms::AsPlanNeeds);
        const std::vector<double>& s = e.smoothing()->inputs[0].scales;
        QCOMPARE(j["smoothing"]["inputs"][0]["max_scale"].get<double>(), *std::max_element(s.begin(), s.end()));
    }

    void weightOnlyRulesSmoothNothing()
    {
        // SmoothQuant eases activation quantization: a layer whose input stays float is skipped, and saying so.
        Exploration e = open("ln_qkv", R"({"version":1,"rules":[{"weight_qtype":"int8","smooth_alpha":0.5}]})");
        QVERIFY(e.smoothing());
        QVERIFY(e.smoothing()->inputs.empty());
        QCOMPARE(e.smoothing()->skipped.size(), size_t(4));
        for (const SkippedSmoothing& k : e.smoothing()->skipped)
            QVERIFY2(k.reason.find("input activation is not quantized") != std::string::npos, k.reason.c_str());
        QVERIFY(!e.needsCalibration() && !e.smoothingPending());
        QVERIFY(e.modelPtr() == e.loaded().model);
    }

    void aBadAlphaIsARuleError()
    {
        for (const char* alpha : {"1.5", "-0.1", "\"half\""}) {
            try {
                RuleSet::fromJson(std::string(R"({"version":1,"rules":[{"smooth_alpha":)") + alpha + "}]}");
                QFAIL(alpha);
            } catch (const Error& e) {
                QVERIFY2(std::string(e.what()).find("rule 0, field \"smooth_alpha\"") != std::string::npos, e.what());
            }
        }
    }

    // The issue's target: w8a8 (int8 weights per channel, int8 activations with
    // static per-tensor scales) on a transformer block with outlier channels.
    void smoothingLiftsTheTransformerBlocksSqnr()
    {
        const auto rules = [](double alpha) {
            std::string r = R"({"version":1,"rules":[{"op_types":["MatMul","Gemm"],"weight_qtype":"int8",)"
                            R"("act_qtype":"int8","act_static_scale":true)";
            if (alpha > 0)
                r += R"(,"smooth_alpha":)" + std::to_string(alpha);
            return RuleSet::fromJson(r + "}]}");
        };
        std::map<double, double> sqnr;
        for (const double alpha : {0.0, 0.25, 0.5, 0.75})
            sqnr[alpha] = run(rules(alpha), kBlock, kBlockCalib, kBlockEval).outputSqnrDb;
        qInfo("transformer block, w8a8 per-tensor activations: output SQNR %.2f dB without smoothing; smooth_alpha "
              "0.25: %.2f dB, 0.5: %.2f dB, 0.75: %.2f dB",
              sqnr[0.0], sqnr[0.25], sqnr[0.5], sqnr[0.75]);
        // The issue's target (measured: +3.26 dB; the margin over it is thin on this fixture, see
        // docs/algorithms.md for how the gain depends on the injected outlier factor), and every alpha of
        // the sweep helps (measured +2.37 and +2.98 dB).
        QVERIFY2(sqnr[0.5] >= sqnr[0.0] + 3.0, "smooth_alpha 0.5 must lift the output SQNR by >= 3 dB");
        QVERIFY(sqnr[0.25] >= sqnr[0.0] + 2.0);
        QVERIFY(sqnr[0.75] >= sqnr[0.0] + 2.0);

        // Which layers were smoothed: q/k/v share LN1's s, fc1 takes LN2's; head takes LNf's; o and fc2 are skipped.
        Exploration e;
        e.setModel(loadExplorationModel(kBlock));
        e.setRules(rules(0.5));
        QVERIFY(e.smoothing());
        QCOMPARE(int(e.smoothing()->inputs.size()), 3);
        QCOMPARE(QString::fromStdString(pathsOf(e.model(), e.smoothing()->inputs[0].layers)), QStringLiteral("q,k,v"));
        QCOMPARE(int(e.smoothing()->skipped.size()), 2);
        for (const SkippedSmoothing& k : e.smoothing()->skipped)
            qInfo("not smoothed: %s: %s", e.model().layers[k.layer].modulePath.c_str(), k.reason.c_str());
    }
};

QTEST_GUILESS_MAIN(TestSmoothQuant)
#include "tst_smoothquant.moc"
