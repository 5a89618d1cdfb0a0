// Cross-layer equalization (quantization/equalization.h) checked against an
// independent NumPy equalization written from the paper
// (tests/equalize/cle_reference.py), on two small ONNX models the script
// writes: Conv -> Relu -> depthwise Conv -> Relu -> Conv 1x1 -> Clip -> Conv 1x1
// (a 3-layer chain with a depthwise pair, and a pair through ReLU6 that must be
// skipped) and Gemm(transB) -> Relu -> Gemm -> MatMul (a pair with nothing
// between). Through the session: the scales and the equalized weights and
// biases equal the reference's, the equalized float model computes what the
// loaded one does, and rules without equalize leave the model as loaded.
// High-bias absorption (quantization/high_bias_absorption.h) against its own
// NumPy reference (tests/equalize/high_bias_absorption_reference.py) on two
// more models: the same pairs absorb, with the same c per channel and the same
// biases, and the absorbed model computes what the loaded one does on the
// calibration data.

#include <QtTest>

#include <cmath>

#include <nlohmann/json.hpp>

#include "io/npy.h"
#include "rules/ruleset.h"
#include "session/exploration.h"
#include "test_support.h"

using namespace qs;
using namespace qs::test;

namespace {

const QString kReference = QStringLiteral(QUANTSCOPE_TEST_DATA "/../equalize/cle_reference.py");
const QString kAbsorptionReference =
    QStringLiteral(QUANTSCOPE_TEST_DATA "/../equalize/high_bias_absorption_reference.py");
constexpr const char* kAbsorbRules =
    R"({"version":1,"rules":[{"weight_qtype":"int8","equalize":true,"high_bias_absorption":true}]})";

} // namespace

class TestEqualization : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;
    std::filesystem::path folder_;

    Exploration open(const std::string& model, const char* rules)
    {
        Exploration e;
        e.setModel(loadExplorationModel(folder_ / (model + ".onnx")));
        e.setRules(RuleSet::fromJson(rules));
        return e;
    }

private slots:
    void initTestCase()
    {
        QVERIFY(dir_.isValid());
        folder_ = dir_.path().toStdString();
        QVERIFY(runPython(kReference, {dir_.path()}));
        QVERIFY(runPython(kAbsorptionReference, {dir_.path()}));
    }

    Exploration openCalibrated(const std::string& model, const char* rules)
    {
        Exploration e = open(model, rules);
        DataConfig calib;
        calib.path = folder_ / (model + "_calib.npz");
        calib.batchSize = 8;
        e.setCalibrationData(calib);
        return e;
    }

    void scalesAndWeightsMatchTheNumpyReference_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QStringList>("pairs"); // "first>second" module paths, model order
        QTest::newRow("conv chain with a depthwise pair") << "conv_chain" << QStringList{"conv1>dw", "dw>pw"};
        QTest::newRow("gemm, gemm, matmul") << "linear_chain" << QStringList{"fc1>fc2", "fc2>fc3"};
    }
    void scalesAndWeightsMatchTheNumpyReference()
    {
        QFETCH(QString, model);
        QFETCH(QStringList, pairs);
        const std::string name = model.toStdString();
        const Exploration e = open(name, R"({"version":1,"rules":[{"weight_qtype":"int8","equalize":true}]})");
        const auto eq = e.equalization();
        QVERIFY(eq);
        QCOMPARE(int(eq->pairs.size()), int(pairs.size()));
        const int64_t refSweeps = readNpy(folder_ / (name + "_sweeps.npy")).values<int64_t>()[0];
        QCOMPARE(int64_t(eq->sweeps), refSweeps);
        const Model& loaded = *e.loaded().model;
        for (int k = 0; k < pairs.size(); ++k) {
            const EqualizedPair& p = eq->pairs[size_t(k)];
            QCOMPARE(
                QString::fromStdString(loaded.layers[p.first].modulePath + ">" + loaded.layers[p.second].modulePath),
                pairs[k]);
            const Tensor ref = readNpy(folder_ / (name + "_scales_" + std::to_string(k) + ".npy"));
            QCOMPARE(size_t(ref.numel()), p.scales.size());
            const double worst = maxRelativeDifference(p.scales, ref.values<double>());
            qInfo("%s pair %s: %zu scales in [%.3f, %.3f], %d sweeps, max relative difference to NumPy %.2e",
                  name.c_str(), qPrintable(pairs[k]), p.scales.size(),
                  *std::min_element(p.scales.begin(), p.scales.end()),
                  *std::max_element(p.scales.begin(), p.scales.end()), eq->sweeps, worst);
            QVERIFY(worst < 1e-6);
            // Not the trivial answer: the channels were uneven.
            QVERIFY(std::any_of(p.scales.begin(), p.scales.end(), [](double s) { return std::abs(s - 1) > 0.1; }));
        }
        // Every tensor the reference rewrote, and only those, is rewritten in the session's model.
        int compared = 0;
        for (const NamedTensor& t : e.model().initializers()) {
            const auto file = folder_ / (name + "__" + t.name + ".npy");
            const Tensor* original = loaded.initializer(t.name);
            if (!std::filesystem::exists(file)) {
                QVERIFY2(t.tensor.rawData() == original->rawData() || relativeToRange(t.tensor, *original) == 0,
                         t.name.c_str());
                continue;
            }
            const Tensor ref = readNpy(file);
            QCOMPARE(t.tensor.shape(), ref.shape());
            const double d = relativeToRange(t.tensor, ref);
            QVERIFY2(d < 1e-6, (t.name + ": " + std::to_string(d)).c_str());
            QVERIFY(relativeToRange(*original, ref) > 1e-3); // it did change
            ++compared;
        }
        QCOMPARE(compared, name == "conv_chain" ? 5 : 5);
    }

    void theEqualizedModelComputesTheSameFunction_data()
    {
        QTest::addColumn<QString>("model");
        QTest::newRow("conv chain") << "conv_chain";
        QTest::newRow("linear chain") << "linear_chain";
    }
    void theEqualizedModelComputesTheSameFunction()
    {
        QFETCH(QString, model);
        const std::string name = model.toStdString();
        const Exploration e = open(name, R"({"version":1,"rules":[{"equalize":true}]})");
        QVERIFY(e.equalization() && !e.equalization()->pairs.empty());
        QVERIFY(e.interpreter() != e.loaded().interpreter);
        const Tensor x = readNpy(folder_ / (name + "_x.npy"));
        const auto original = e.loaded().interpreter->run({{"x", x}});
        const auto equalized = e.interpreter()->run({{"x", x}});
        const Tensor& y = original.begin()->second;
        const double d = relativeToRange(equalized.begin()->second, y);
        qInfo("%s: output of the equalized model vs the loaded one: max |difference| / max |y| = %.2e", name.c_str(),
              d);
        QVERIFY(d < 1e-5);
    }

    void skippedPairsSayWhy()
    {
        const Exploration e = open("conv_chain", R"({"version":1,"rules":[{"equalize":true}]})");
        const auto eq = e.equalization();
        QVERIFY(eq);
        const Model& m = e.model();
        bool clip = false, output = false;
        for (const SkippedPair& p : eq->skipped) {
            const std::string& path = m.layers[p.first].modulePath;
            if (path == "pw") {
                clip = p.reason.find("Clip") != std::string::npos;
                QVERIFY2(clip, p.reason.c_str());
            }
            if (path == "head")
                output = p.reason.find("graph output") != std::string::npos;
        }
        QVERIFY(clip);
        QVERIFY(output);
        // ... and the session shows each as a note on the layer.
        int notes = 0;
        for (const ExplorationWarning& w : e.warnings())
            if (w.field == "equalize" && w.kind == ExplorationWarning::Kind::LayerNote)
                ++notes;
        QCOMPARE(notes, 2);
    }

    void highBiasAbsorptionMatchesTheNumpyReference_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QStringList>("pairs");  // "first>second" module paths that absorb, model order
        QTest::addColumn<QStringList>("biases"); // every bias the reference rewrote
        QTest::newRow("conv, depthwise, 1x1, padded conv")
            << "absorb_conv" << QStringList{"conv1>dw", "dw>pw"} << QStringList{"conv1.bias", "dw.bias", "pw.bias"};
        QTest::newRow("gemm, gemm, matmul")
            << "absorb_linear" << QStringList{"fc1>fc2"} << QStringList{"fc1.bias", "fc2.bias"};
    }
    void highBiasAbsorptionMatchesTheNumpyReference()
    {
        QFETCH(QString, model);
        QFETCH(QStringList, pairs);
        QFETCH(QStringList, biases);
        const std::string name = model.toStdString();
        Exploration e = openCalibrated(name, kAbsorbRules);
        QVERIFY(e.absorption());
        QVERIFY(e.absorptionPending());
        QVERIFY(e.weightsNeedCalibration());
        const auto equalized = e.modelPtr(); // before calibration: the equalized model
        QVERIFY(equalized != e.loaded().model);
        const CalibrationResult r = e.calibrate(KeptHistograms::AsPlanNeeds);
        QVERIFY(r.absorption);
        QVERIFY(!e.absorptionPending());
        const auto hb = e.absorption();
        QCOMPARE(int(hb->pairs.size()), int(pairs.size()));
        const Model& m = e.model();
        int positive = 0;
        for (int k = 0; k < pairs.size(); ++k) {
            const AbsorptionPair& p = hb->pairs[size_t(k)];
            QCOMPARE(QString::fromStdString(m.layers[p.first].modulePath + ">" + m.layers[p.second].modulePath),
                     pairs[k]);
            const Tensor ref = readNpy(folder_ / (name + "_c_" + std::to_string(k) + ".npy"));
            const auto c = ref.values<double>();
            QCOMPARE(p.absorbed.size(), c.size());
            double largest = 0, worst = 0;
            for (size_t i = 0; i < c.size(); ++i) {
                largest = std::max(largest, c[i]);
                worst = std::max(worst, std::abs(p.absorbed[i] - c[i]));
                positive += p.absorbed[i] > 0;
                QCOMPARE(p.absorbed[i] > 0, c[i] > 0); // the same channels absorb
            }
            qInfo("%s pair %s: c > 0 in %lld of %zu channels, up to %.3f; max |engine - NumPy| %.2e", name.c_str(),
                  qPrintable(pairs[k]),
                  static_cast<long long>(std::count_if(c.begin(), c.end(), [](double v) { return v > 0; })), c.size(),
                  largest, worst);
            QVERIFY(largest > 0.5);
            QVERIFY(worst <= 1e-5 * largest);
        }
        QVERIFY(positive >= 4);
        // The biases the reference rewrote are the session's; every other tensor is the equalized model's.
        for (const NamedTensor& t : m.initializers()) {
            const Tensor* before = equalized->initializer(t.name);
            if (!biases.contains(QString::fromStdString(t.name))) {
                QVERIFY2(relativeToRange(t.tensor, *before) == 0, t.name.c_str());
                continue;
            }
            const Tensor ref = readNpy(folder_ / (name + "__" + t.name + ".npy"));
            const double d = relativeToRange(t.tensor, ref);
            QVERIFY2(d < 1e-5, (t.name + ": " + std::to_string(d)).c_str());
            QVERIFY(relativeToRange(*before, ref) > 1e-3); // it did change
        }
        // On the calibration data the absorbed model computes what the loaded one does.
        const Tensor x = readNpy(folder_ / (name + "_calib_x.npy"));
        const auto original = e.loaded().interpreter->run({{"x", x}});
        const auto absorbed = e.interpreter()->run({{"x", x}});
        const double d = relativeToRange(absorbed.begin()->second, original.begin()->second);
        qInfo("%s: output of the absorbed model vs the loaded one on the calibration data: max |difference| / max "
              "|y| = %.2e",
              name.c_str(), d);
        QVERIFY(d < 1e-5);
        // A rule edit that keeps the pairs keeps the absorbed model; one without absorption goes back.
        e.setRules(RuleSet::fromJson(
            R"({"version":1,"rules":[{"weight_qtype":"int4","equalize":true,"high_bias_absorption":true}]})"));
        QVERIFY(!e.absorptionPending());
        QVERIFY(e.modelPtr().get() == &m);
        e.setRules(RuleSet::fromJson(R"({"version":1,"rules":[{"weight_qtype":"int8","equalize":true}]})"));
        QVERIFY(!e.absorption());
        QVERIFY(e.modelPtr() == equalized);
    }

    void pairsThatCannotAbsorbSayWhy()
    {
        struct Case {
            const char* model;
            const char* layer;
            const char* reason;
        };
        for (const Case& k :
             {Case{"absorb_conv", "pw", "pads its input with zeros"}, Case{"absorb_linear", "fc2", "has no bias"}}) {
            Exploration e = openCalibrated(k.model, kAbsorbRules);
            bool found = false;
            for (const ExplorationWarning& w : e.warnings())
                if (w.field == "high_bias_absorption" && w.kind == ExplorationWarning::Kind::LayerNote && w.layer &&
                    e.model().layers[*w.layer].modulePath == k.layer) {
                    found = w.text.find(k.reason) != std::string::npos;
                    QVERIFY2(found, w.text.c_str());
                }
            QVERIFY(found);
            // The weights wait for the calibration that computes the absorption.
            QVERIFY(e.absorptionPending());
            QVERIFY(e.weightsNeedCalibration());
            DataConfig eval;
            eval.path = folder_ / (std::string(k.model) + "_calib.npz");
            e.setEvaluationData(eval);
            QVERIFY(errorOf([&] { e.evaluationJob(); }).contains("weights of the current rules are still being"));
        }
        // The field needs equalize.
        QVERIFY(errorOf([] {
                    RuleSet::fromJson(R"({"version":1,"rules":[{"high_bias_absorption":true}]})");
                }).contains("high_bias_absorption"));
    }

    void theCliReportsTheAbsorption()
    {
        const std::string rules = (folder_ / "absorb.json").string(), report = (folder_ / "report.json").string();
        writeFile(rules, kAbsorbRules);
        const CliRun r = runCli({"quantize", QString::fromStdString((folder_ / "absorb_conv.onnx").string()), "--rules",
                                 QString::fromStdString(rules), "--calib",
                                 QString::fromStdString((folder_ / "absorb_conv_calib.npz").string()), "--report",
                                 QString::fromStdString(report)});
        QCOMPARE(r.exitCode, 0);
        QVERIFY2(r.err.contains("high_bias_absorption: conv1 -> dw: 3 of 8 channels"), r.err.constData());
        const auto j = nlohmann::json::parse(readFile(report));
        const auto& pairs = j["absorption"]["pairs"];
        QCOMPARE(pairs.size(), size_t(2));
        QCOMPARE(pairs[0]["first"].get<std::string>(), std::string("conv1"));
        QCOMPARE(pairs[0]["second"].get<std::string>(), std::string("dw"));
        QCOMPARE(pairs[0]["channels"].get<int>(), 8);
        QCOMPARE(pairs[0]["channels_absorbed"].get<int>(), 3);
        QCOMPARE(pairs[1]["first"].get<std::string>(), std::string("dw"));
        QCOMPARE(pairs[1]["channels_absorbed"].get<int>(), 5);
        // The report's largest c is the reference's.
        for (int k = 0; k < 2; ++k) {
            const Tensor ref = readNpy(folder_ / ("absorb_conv_c_" + std::to_string(k) + ".npy"));
            const auto c = ref.values<double>();
            const double largest = *std::max_element(c.begin(), c.end());
            QVERIFY(std::abs(pairs[k]["max_absorbed"].get<double>() - largest) <= 1e-5 * largest);
        }
        const auto& skipped = j["absorption"]["skipped"];
        QCOMPARE(skipped.size(), size_t(1));
        QCOMPARE(skipped[0]["layer"].get<std::string>(), std::string("pw"));
        QVERIFY(skipped[0]["reason"].get<std::string>().find("pads its input with zeros") != std::string::npos);
        // Without the field the report says so with null.
        writeFile(rules, R"({"version":1,"rules":[{"weight_qtype":"int8","equalize":true}]})");
        QCOMPARE(runCli({"quantize", QString::fromStdString((folder_ / "absorb_conv.onnx").string()), "--rules",
                         QString::fromStdString(rules), "--report", QString::fromStdString(report)})
                     .exitCode,
                 0);
        QVERIFY(nlohmann::json::parse(readFile(report))["absorption"].is_null());
    }

    void onlyLayersWhoseRulesSayEqualizeArePaired()
    {
        // dw without equalize: neither conv1>dw nor dw>pw can be equalized.
        Exploration e = open("conv_chain", R"({"version":1,"rules":[
            {"module_path":"dw","weight_qtype":"int8"},
            {"weight_qtype":"int8","equalize":true}]})");
        QVERIFY(e.equalization());
        QVERIFY(e.equalization()->pairs.empty());
        QVERIFY(e.modelPtr() == e.loaded().model);
        // Turning equalize off gives the loaded model back; on again, an equalized one.
        e.setRules(RuleSet::fromJson(R"({"version":1,"rules":[{"weight_qtype":"int8","equalize":true}]})"));
        QVERIFY(e.modelPtr() != e.loaded().model);
        e.setRules(RuleSet::fromJson(R"({"version":1,"rules":[{"weight_qtype":"int8"}]})"));
        QVERIFY(!e.equalization());
        QVERIFY(e.modelPtr() == e.loaded().model);
        QVERIFY(e.interpreter() == e.loaded().interpreter);
    }
};

QTEST_GUILESS_MAIN(TestEqualization)
#include "tst_equalization.moc"
