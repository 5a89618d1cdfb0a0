// Two rule sets side by side (compare-rules) and the smallest rules that meet a
// target (quantize --search), run as a user runs them, on the demo model:
// compare-rules' differences are B − A of the two plain `quantize` reports;
// layer weight bytes follow the documented formula from the model's own
// shapes; the rules a search writes meet its target when run again through
// plain `quantize`; impossible and trivial targets; errors name the file and
// the rule or candidate; top-1 agreement counted by hand.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "io/model_loader.h"
#include "session/evaluation.h"
#include "session/exploration.h"
#include "session/rule_comparison.h"
#include "session/rule_search.h"
#include "test_support.h"

using namespace qs;

namespace {

const QString kModel = QStringLiteral(QUANTSCOPE_TEST_DATA "/../../resources/demo/digits/digits_cnn.onnx");
const QString kEval = QStringLiteral(QUANTSCOPE_TEST_DATA "/../../resources/demo/digits/digits_eval.npz");
const QString kCalib = QStringLiteral(QUANTSCOPE_TEST_DATA "/../../resources/demo/digits/digits_calib.npz");
const QString kCandidates = QStringLiteral(QUANTSCOPE_TEST_DATA "/../../resources/rules/search/int4_int8_float.json");

using Run = test::CliRun;
using test::runCli;

QString writeText(const QTemporaryDir& dir, const QString& name, const std::string& text)
{
    const QString path = dir.path() + "/" + name;
    test::writeFile(path.toStdString(), text);
    return path;
}

void expectUserError(const QStringList& args, const QString& mustContain)
{
    const Run r = runCli(args);
    QVERIFY2(r.exitCode == 1, qPrintable(args.join(' ') + " -> " + QString::number(r.exitCode) + ": " + r.err));
    QVERIFY2(r.err.contains(mustContain.toUtf8()), r.err.constData());
    QCOMPARE(r.err.count('\n'), 1);
}

nlohmann::json quantizeReport(const QTemporaryDir& dir, const QString& rules, const QString& name)
{
    const QString report = dir.path() + "/" + name;
    const Run r = runCli({"quantize", kModel, "--rules", rules, "--calib", kCalib, "--eval", kEval, "--batch-size",
                          "64", "--report", report});
    if (r.exitCode != 0)
        qWarning("%s", r.err.constData());
    return r.exitCode == 0 ? nlohmann::json::parse(test::readFile(report.toStdString())) : nlohmann::json();
}

const nlohmann::json* layerOf(const nlohmann::json& report, const std::string& path)
{
    for (const nlohmann::json& l : report["layers"])
        if (l["module_path"] == path)
            return &l;
    return nullptr;
}

// b − a of two report figures, null unless both are numbers.
nlohmann::json delta(const nlohmann::json& a, const nlohmann::json& b)
{
    return a.is_number() && b.is_number() ? nlohmann::json(b.get<double>() - a.get<double>()) : nlohmann::json();
}

void compareNumber(const nlohmann::json& got, const nlohmann::json& expected, const std::string& what)
{
    QVERIFY2(got.is_null() == expected.is_null(), (what + ": " + got.dump() + " vs " + expected.dump()).c_str());
    if (!got.is_null())
        QVERIFY2(std::abs(got.get<double>() - expected.get<double>()) <=
                     1e-9 * std::max(1.0, std::abs(expected.get<double>())),
                 (what + ": " + got.dump() + " vs " + expected.dump()).c_str());
}

// A: static int8 activations and int8 weights on the convolutions, int4 on fc1, fc2 float.
const std::string kRulesA =
    R"({"version": 1, "rules": [{"module_path": "features/.*", "weight_qtype": "int8", "act_qtype": "int8",
        "act_static_scale": true}, {"module_path": "classifier/fc1", "weight_qtype": "int4"}]})";
// B: int4 weights on the convolutions, conv3 and fc1 float, int8 on fc2.
const std::string kRulesB =
    R"({"version": 1, "rules": [{"module_path": "features/conv3|classifier/fc1"},
        {"module_path": "features/.*", "weight_qtype": "int4"}, {"module_path": "classifier/fc2", "weight_qtype": "int8"}]})";

} // namespace

class TestCompareSearch : public QObject {
    Q_OBJECT

private slots:
    // The docs hold both commands' help verbatim.
    void docsHoldTheHelp()
    {
        QFile docs(QStringLiteral(QUANTSCOPE_TEST_DATA "/../../docs/cli.md"));
        QVERIFY(docs.open(QIODevice::ReadOnly));
        const QByteArray text = docs.readAll();
        for (const char* command : {"compare-rules", "quantize"}) {
            const Run r = runCli({command, "--help"});
            QCOMPARE(r.exitCode, 0);
            QVERIFY2(text.contains("```\n" + r.out + "```"), command);
        }
    }

    // Every difference compare-rules prints is B − A of the two plain quantize reports.
    void compareRulesIsTheDifferenceOfTwoReports()
    {
        QTemporaryDir dir;
        const QString a = writeText(dir, "a.json", kRulesA), b = writeText(dir, "b.json", kRulesB);
        const nlohmann::json ra = quantizeReport(dir, a, "ra.json"), rb = quantizeReport(dir, b, "rb.json");
        QVERIFY(!ra.is_null() && !rb.is_null());
        const Run r =
            runCli({"compare-rules", kModel, a, b, "--calib", kCalib, "--eval", kEval, "--batch-size", "64", "--json"});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        const nlohmann::json c = nlohmann::json::parse(r.out.toStdString());
        QCOMPARE(c["layers"].size(), size_t(5));
        for (const nlohmann::json& row : c["layers"]) {
            const std::string path = row["module_path"];
            const nlohmann::json* la = layerOf(ra, path);
            const nlohmann::json* lb = layerOf(rb, path);
            QVERIFY(la && lb);
            compareNumber(row["weight_sqnr_db_a"], (*la)["weight_sqnr_db"], path + " weight a");
            compareNumber(row["weight_sqnr_db_b"], (*lb)["weight_sqnr_db"], path + " weight b");
            compareNumber(row["delta_weight_sqnr_db"], delta((*la)["weight_sqnr_db"], (*lb)["weight_sqnr_db"]),
                          path + " d weight");
            compareNumber(row["delta_act_sqnr_db"], delta((*la)["act_sqnr_db"], (*lb)["act_sqnr_db"]),
                          path + " d isolated");
            compareNumber(row["delta_accumulated_sqnr_db"],
                          delta((*la)["accumulated_sqnr_db"], (*lb)["accumulated_sqnr_db"]), path + " d accumulated");
            QCOMPARE(row["delta_weight_bytes"].get<int64_t>(),
                     (*lb)["weight_bytes_quantized"].get<int64_t>() - (*la)["weight_bytes_quantized"].get<int64_t>());
        }
        compareNumber(c["outputs"][0]["delta_sqnr_db"], delta(ra["output_sqnr_db"], rb["output_sqnr_db"]), "output");
        compareNumber(c["quantized_top1"]["delta"], delta(ra["accuracy_quantized"], rb["accuracy_quantized"]), "top-1");
        compareNumber(c["top1_agreement"]["delta"],
                      delta(ra["top1_agreement"]["fraction"], rb["top1_agreement"]["fraction"]), "agreement");
        QCOMPARE(c["weight_bytes"]["delta"].get<int64_t>(),
                 rb["weight_bytes_quantized"].get<int64_t>() - ra["weight_bytes_quantized"].get<int64_t>());
        // Both sides' reports are embedded, layer for layer those of quantize.
        QCOMPARE(c["a"]["layers"], ra["layers"]);
        QCOMPARE(c["b"]["layers"], rb["layers"]);

        // Float on one side: no difference, and the note says which.
        for (const nlohmann::json& row : c["layers"]) {
            if (row["module_path"] == "classifier/fc2") {
                QCOMPARE(row["note"].get<std::string>(), std::string("float in A"));
                QVERIFY(row["delta_weight_sqnr_db"].is_null());
            }
            if (row["module_path"] == "features/conv3") {
                QCOMPARE(row["note"].get<std::string>(), std::string("float in B"));
                QVERIFY(row["delta_weight_sqnr_db"].is_null() && row["delta_act_sqnr_db"].is_null());
            }
            if (row["module_path"] == "features/conv1")
                QVERIFY(row["note"].is_null() && row["delta_weight_sqnr_db"].is_number());
        }

        // The table: sorted by Δ bytes (largest saving first); no NaN printed.
        const Run t = runCli({"compare-rules", kModel, a, b, "--calib", kCalib, "--eval", kEval, "--batch-size", "64",
                              "--sort", "bytes"});
        QVERIFY2(t.exitCode == 0, t.err.constData());
        QVERIFY(!t.out.contains("nan") && !t.out.contains("NaN"));
        QVERIFY(t.out.contains("float in A") && t.out.contains("float in B"));
        QVERIFY(t.out.contains("int8 / int8") && t.out.contains("int4 / float"));
        // fc1 goes int4 -> float (+ bytes), conv2 int8 -> int4 (- bytes): conv2's row comes first.
        QVERIFY(t.out.indexOf("features/conv2") < t.out.indexOf("classifier/fc1"));
    }

    // Weight bytes per layer as docs/cli.md defines them, from the model's own shapes.
    void weightBytesFollowTheFormula()
    {
        QTemporaryDir dir;
        const nlohmann::json ra = quantizeReport(dir, writeText(dir, "a.json", kRulesA), "ra.json");
        QVERIFY(!ra.is_null());
        const Model model = loadModel(kModel.toStdString());
        int64_t floatTotal = 0, quantizedTotal = 0;
        for (const QuantizableLayer& l : model.layers) {
            const nlohmann::json* row = layerOf(ra, l.modulePath);
            QVERIFY(row);
            const int64_t n = l.parameterCount, channels = l.weightShape[0];
            int64_t expected = 4 * n; // float32
            if (l.modulePath.rfind("features/", 0) == 0)
                expected = n + 4 * channels; // int8 codes + one float32 scale per channel
            else if (l.modulePath == "classifier/fc1")
                expected = (n + 1) / 2 + 4 * channels; // int4 codes, packed
            QCOMPARE((*row)["weight_bytes_float"].get<int64_t>(), 4 * n);
            QCOMPARE((*row)["weight_bytes_quantized"].get<int64_t>(), expected);
            floatTotal += 4 * n;
            quantizedTotal += expected;
        }
        QCOMPARE(ra["weight_bytes_float"].get<int64_t>(), floatTotal);
        QCOMPARE(ra["weight_bytes_quantized"].get<int64_t>(), quantizedTotal);
    }

    void compareRulesBadInputs()
    {
        QTemporaryDir dir;
        const QString a = writeText(dir, "a.json", kRulesA);
        const QString badRegex =
            writeText(dir, "bad_b.json",
                      // (not a raw string: moc loses its way in one holding an unbalanced parenthesis)
                      "{\"version\": 1, \"rules\": [{\"weight_qtype\": \"int8\"}, "
                      "{\"module_path\": \"features/(conv\", \"weight_qtype\": \"int4\"}]}");
        expectUserError({"compare-rules", kModel, a, dir.path() + "/missing.json"}, dir.path() + "/missing.json");
        expectUserError({"compare-rules", kModel, a, badRegex}, badRegex + ": rule 1");
        expectUserError({"compare-rules", dir.path() + "/missing.onnx", a, a}, dir.path() + "/missing.onnx");
        QCOMPARE(runCli({"compare-rules", kModel, a}).exitCode, 2);
        QCOMPARE(runCli({"compare-rules", kModel, a, a, a}).exitCode, 2);
        QCOMPARE(runCli({"compare-rules", kModel, a, a, "--sort", "size"}).exitCode, 2);
    }

    // The rules a search writes meet its target when run through plain quantize,
    // and are smaller than the largest candidates everywhere.
    void searchResultMeetsTheTargetThroughQuantize()
    {
        QTemporaryDir dir;
        const QString rules = dir.path() + "/found.json", points = dir.path() + "/points.json";
        const double target = 30.0;
        const Run r =
            runCli({"quantize", kModel, "--search", kCandidates, "--target", "output_sqnr_db>=30", "--calib", kCalib,
                    "--eval", kEval, "--batch-size", "64", "--out-rules", rules, "--search-points", points});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        QVERIFY2(r.err.contains("target output_sqnr_db>=30 met"), r.err.constData());
        const nlohmann::json report = quantizeReport(dir, rules, "check.json");
        QVERIFY(!report.is_null());
        QVERIFY2(report["output_sqnr_db"].is_null() || report["output_sqnr_db"].get<double>() >= target,
                 report["output_sqnr_db"].dump().c_str());

        const nlohmann::json p = nlohmann::json::parse(test::readFile(points.toStdString()));
        QVERIFY(p["met"].get<bool>());
        const nlohmann::json& chosen = p["chosen"];
        QCOMPARE(chosen["weight_bytes"].get<int64_t>(), report["weight_bytes_quantized"].get<int64_t>());
        compareNumber(chosen["value"], report["output_sqnr_db"], "re-evaluated SQNR");
        // Every point the search kept as meeting the target did; the chosen one is the
        // smallest of the points it evaluated that met it... or came from trimming below them.
        int64_t largest = 0;
        bool sawSmallest = false;
        for (const nlohmann::json& point : p["points"]) {
            if (point["step"] == "largest")
                largest = point["weight_bytes"].get<int64_t>();
            if (point["step"] == "smallest") {
                sawSmallest = true;
                QVERIFY(!point["meets"].get<bool>()); // int4 everywhere misses 30 dB on this model
            }
            if (point["meets"].get<bool>())
                QVERIFY(chosen["weight_bytes"].get<int64_t>() <= point["weight_bytes"].get<int64_t>());
            if (!point["value"].is_null())
                QCOMPARE(point["meets"].get<bool>(), point["value"].get<double>() >= target);
        }
        QVERIFY(sawSmallest && largest > 0);
        QVERIFY(chosen["weight_bytes"].get<int64_t>() < largest);
        QCOMPARE(p["sensitivity_order"].size(), size_t(5));
    }

    void impossibleTargetSaysSo()
    {
        QTemporaryDir dir;
        const QString candidates = writeText(
            dir, "c.json", R"({"version": 1, "candidates": [{"weight_qtype": "int4"}, {"weight_qtype": "int8"}]})");
        const QString rules = dir.path() + "/found.json";
        expectUserError({"quantize", kModel, "--search", candidates, "--target", "output_sqnr_db>=200", "--eval", kEval,
                         "--out-rules", rules},
                        "cannot be met with these candidates");
        QVERIFY(!QFile::exists(rules));
        QVERIFY(QFile::exists(dir.path() + "/found.search.json")); // the points tried, for the chart
    }

    void trivialTargetTakesTheSmallestEverywhere()
    {
        QTemporaryDir dir;
        const QString candidates = writeText(
            dir, "c.json",
            R"({"version": 1, "candidates": [{"weight_qtype": "int4", "granularity": "per_tensor"}, {"weight_qtype": "int8"}, {}]})");
        const QString rules = dir.path() + "/found.json";
        const Run r = runCli({"quantize", kModel, "--search", candidates, "--target", "top1_agreement>=0", "--eval",
                              kEval, "--out-rules", rules});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        const nlohmann::json found = nlohmann::json::parse(test::readFile(rules.toStdString()));
        QCOMPARE(found["rules"].size(), size_t(1));
        QVERIFY(!found["rules"][0].contains("module_path")); // ".*", the default, is left out
        QCOMPARE(found["rules"][0]["weight_qtype"].get<std::string>(), std::string("int4"));
        QCOMPARE(found["rules"][0]["granularity"].get<std::string>(), std::string("per_tensor"));
        const nlohmann::json report = quantizeReport(dir, rules, "check.json");
        for (const nlohmann::json& l : report["layers"])
            QCOMPARE(l["weight_qtype"].get<std::string>(), std::string("int4"));

        // q4_0 cannot take conv1 and conv2 (16 and 1 input features, blocks of 32): they get
        // their first candidate that applies, the commonest choice becomes the final ".*".
        const QString blocks = writeText(
            dir, "q.json", R"({"version": 1, "candidates": [{"weight_qtype": "q4_0"}, {"weight_qtype": "int8"}, {}]})");
        const Run q = runCli({"quantize", kModel, "--search", blocks, "--target", "output_sqnr_db>=-100", "--eval",
                              kEval, "--out-rules", rules});
        QVERIFY2(q.exitCode == 0, q.err.constData());
        QVERIFY2(!q.err.contains("warning"), q.err.constData());
        const nlohmann::json mixed = nlohmann::json::parse(test::readFile(rules.toStdString()));
        QCOMPARE(mixed["rules"].size(), size_t(2));
        QCOMPARE(mixed["rules"][0]["module_path"].get<std::string>(), std::string("features/conv1|features/conv2"));
        QCOMPARE(mixed["rules"][0]["weight_qtype"].get<std::string>(), std::string("int8"));
        QVERIFY(!mixed["rules"][1].contains("module_path"));
        QCOMPARE(mixed["rules"][1]["weight_qtype"].get<std::string>(), std::string("q4_0"));
    }

    void searchBadInputs()
    {
        QTemporaryDir dir;
        const QString out = dir.path() + "/r.json";
        const QString withPath = writeText(
            dir, "p.json", R"({"version": 1, "candidates": [{}, {"module_path": "x", "weight_qtype": "int8"}]})");
        expectUserError({"quantize", kModel, "--search", withPath, "--target", "output_sqnr_db>=30", "--eval", kEval,
                         "--out-rules", out},
                        withPath + ": candidate 1, field \"module_path\"");
        const QString badType =
            writeText(dir, "t.json", R"({"version": 1, "candidates": [{"weight_qtype": "int3x"}]})");
        expectUserError({"quantize", kModel, "--search", badType, "--target", "output_sqnr_db>=30", "--eval", kEval,
                         "--out-rules", out},
                        badType + ": candidate 0, field \"weight_qtype\"");
        expectUserError({"quantize", kModel, "--search", kCandidates, "--target", "output_sqnr_db<=30", "--eval", kEval,
                         "--out-rules", out},
                        "--target 'output_sqnr_db<=30'");
        expectUserError({"quantize", kModel, "--search", kCandidates, "--target", "perplexity_increase<=0.05", "--eval",
                         kEval, "--out-rules", out},
                        "perplexity is measured for causal language models only");
        const QString statics = writeText(
            dir, "s.json",
            R"({"version": 1, "candidates": [{"weight_qtype": "int8", "act_qtype": "int8", "act_static_scale": true}, {}]})");
        expectUserError({"quantize", kModel, "--search", statics, "--target", "output_sqnr_db>=20", "--eval", kEval,
                         "--out-rules", out},
                        statics + ": candidate 0 sets act_static_scale");
        QCOMPARE(runCli({"quantize", kModel, "--search", kCandidates, "--eval", kEval, "--out-rules", out}).exitCode,
                 2);
        QCOMPARE(runCli({"quantize", kModel, "--search", kCandidates, "--rules", kCandidates, "--target",
                         "output_sqnr_db>=1", "--eval", kEval, "--out-rules", out})
                     .exitCode,
                 2);
        QVERIFY(!QFile::exists(out));
    }

    // The engine's search, as the app will run it: progress rises to 1, a cancelled
    // token stops it with Cancelled, and the exploration ends on the chosen rules.
    void searchReportsProgressAndCancels()
    {
        auto open = [] {
            Exploration x;
            x.setModel(loadExplorationModel(kModel.toStdString()));
            DataConfig eval;
            eval.path = kEval.toStdString();
            eval.batchSize = 150;
            x.setEvaluationData(eval);
            return x;
        };
        const SearchCandidates candidates = SearchCandidates::load(kCandidates.toStdString());
        const SearchTarget target = SearchTarget::parse("output_sqnr_db>=30");
        Exploration x = open();
        std::vector<double> fractions;
        const RuleSearchResult r =
            searchRules(x, candidates, target, {}, [&](double f, std::string_view) { fractions.push_back(f); });
        QVERIFY(r.met);
        QVERIFY(fractions.size() >= r.points.size());
        QVERIFY(std::is_sorted(fractions.begin(), fractions.end()));
        QCOMPARE(fractions.back(), 1.0);
        QCOMPARE(x.rules(), r.rules);
        QVERIFY(x.evaluation() && x.evaluationGeneration() == x.generation());
        QCOMPARE(x.evaluation()->outputs[0].metrics.sqnrDb, r.chosen->value);

        // A/B of the search's choice against int8 everywhere, in the engine: fewer bytes, lower SQNR.
        Exploration int8 = open();
        int8.setRules(RuleSet::fromJson(R"({"version": 1, "rules": [{"weight_qtype": "int8"}]})"));
        int8.updateWeights();
        int8.evaluate();
        const RuleComparison c = compareRules(int8, x);
        QVERIFY(c.totalB.quantizedBytes < c.totalA.quantizedBytes);
        QCOMPARE(c.totalB.quantizedBytes, r.chosen->weightBytes);
        QVERIFY(*c.outputs[0].sqnrDb.delta() < 0);

        Exploration y = open();
        CancellationToken cancel;
        cancel.cancel();
        QVERIFY_THROWS_EXCEPTION(Cancelled, searchRules(y, candidates, target, cancel));
    }

    // Rows are matched by module path: layers of two different models show as only in
    // one side, with no difference; the layer both have is compared.
    void compareRulesMatchesLayersByPath()
    {
        QTemporaryDir dir;
        // A weights-only checkpoint: conv1 of the demo model's shape and a layer it lacks.
        const std::string header =
            R"({"features.conv1.weight": {"dtype": "F32", "shape": [16, 1, 3, 3], "data_offsets": [0, 576]},)"
            R"( "extra.fc.weight": {"dtype": "F32", "shape": [4, 8], "data_offsets": [576, 704]}})";
        std::string bytes(8, '\0');
        for (int i = 0; i < 8; ++i)
            bytes[size_t(i)] = char((header.size() >> (8 * i)) & 0xff);
        bytes += header;
        for (int i = 0; i < 144 + 32; ++i) {
            const float v = std::sin(0.37f * float(i)) * (1.0f + float(i % 7));
            bytes.append(reinterpret_cast<const char*>(&v), sizeof v);
        }
        const QString checkpoint = writeText(dir, "other.safetensors", bytes);

        Exploration a;
        a.setModel(loadExplorationModel(kModel.toStdString()));
        a.setRules(RuleSet::fromJson(R"({"version": 1, "rules": [{"weight_qtype": "int8"}]})"));
        a.updateWeights();
        Exploration b;
        b.setModel(loadExplorationModel(checkpoint.toStdString()));
        b.setRules(RuleSet::fromJson(R"({"version": 1, "rules": [{"weight_qtype": "int4"}]})"));
        b.updateWeights();
        const RuleComparison c = compareRules(a, b);
        QCOMPARE(c.layers.size(), size_t(6));
        for (const LayerComparison& row : c.layers) {
            if (row.modulePath == "features/conv1") {
                QVERIFY(row.note.empty());
                QVERIFY(row.deltaWeightSqnr && *row.deltaWeightSqnr < 0); // int4 against int8
                QCOMPARE(*row.deltaWeightBytes, int64_t((144 + 1) / 2 + 16 * 4) - int64_t(144 + 16 * 4));
            } else if (row.modulePath == "extra/fc") {
                QCOMPARE(row.note, std::string("only in B"));
                QCOMPARE(row.a.summary(), std::string("-"));
                QVERIFY(!row.deltaWeightSqnr && !row.deltaWeightBytes);
            } else {
                QCOMPARE(row.note, std::string("only in A"));
                QCOMPARE(row.b.summary(), std::string("-"));
                QVERIFY(!row.deltaWeightSqnr && !row.deltaWeightBytes);
            }
        }
        QVERIFY(!c.evaluatedA && !c.evaluatedB && c.outputs.empty());
        const nlohmann::json j = c.toJson();
        QVERIFY(j["layers"][5]["a"].is_null() && j["layers"][5]["delta_weight_bytes"].is_null());
    }

    // Agreement counted on hand-made logits: ties take the first class, a NaN row never agrees.
    void topOneAgreementByHand()
    {
        const Tensor f = Tensor::fromVector(DType::F32, {4, 3}, std::vector<float>{1, 2, 3, 5, 5, 0, 0, 1, 0, 2, 1, 0});
        const float nan = std::numeric_limits<float>::quiet_NaN();
        const Tensor q =
            Tensor::fromVector(DType::F32, {4, 3}, std::vector<float>{0, 0, 9, 4, 5, 0, 0, 1, nan, 2, 2, 0});
        TopOneAgreement a;
        addTopOneAgreement(a, f, q, 3, "logits");
        // rows: 2 = 2; 0 vs 1; 1 vs NaN row; 0 = 0 (tie with 1 takes 0)
        QCOMPARE(a.rows, int64_t(4));
        QCOMPARE(a.agreeing, int64_t(2));
        QCOMPARE(a.fraction(), 0.5);
        const Tensor other = Tensor::fromVector(DType::F32, {3, 4}, std::vector<float>(12, 0.f));
        QVERIFY_THROWS_EXCEPTION(Error, addTopOneAgreement(a, f, other, 3, "logits"));
    }

    void targetsParse()
    {
        QCOMPARE(SearchTarget::parse("output_sqnr_db>=30").threshold, 30.0);
        QVERIFY(SearchTarget::parse("top1_agreement >= 0.99").metric == SearchTarget::Metric::Top1Agreement);
        QVERIFY(SearchTarget::parse("perplexity_increase<=0.05").met(0.05));
        QVERIFY(!SearchTarget::parse("perplexity_increase<=0.05").met(0.051));
        for (const char* bad : {"output_sqnr_db>30", "top1_agreement>=1.5", "accuracy>=0.9", "output_sqnr_db>=x"})
            QVERIFY_THROWS_EXCEPTION(Error, SearchTarget::parse(bad));
        QCOMPARE(escapedModulePath("a.b/c(1)+"), std::string("a\\.b/c\\(1\\)\\+"));
    }
};

QTEST_GUILESS_MAIN(TestCompareSearch)
#include "tst_compare_search.moc"
