// quantscope-cli's model commands, run as a user runs them (QProcess): quantize's
// report holds what evaluate() computes, run's .npz equals the interpreter's
// outputs, errors name the rule file or the rule, compare-methods on a model's
// weight equals compare-methods on that weight saved as .npy, bench-model's
// JSON, batch sizes and --shape on the models users have (a batch fixed at 1,
// dynamic spatial dimensions, token ids), and docs/cli.md holds these
// commands' help verbatim.
#include <QtTest>

#include <cmath>
#include <map>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/model_loader.h"
#include "io/npy.h"
#include "io/npz.h"
#include "runtime/quantization_hook.h"
#include "session/evaluation.h"
#include "test_support.h"

using namespace qs;

namespace {

const QString kModel = QStringLiteral(QUANTSCOPE_TEST_DATA "/../../resources/demo/digits/digits_cnn.onnx");
const QString kEval = QStringLiteral(QUANTSCOPE_TEST_DATA "/../../resources/demo/digits/digits_eval.npz");
const QString kCalib = QStringLiteral(QUANTSCOPE_TEST_DATA "/../../resources/demo/digits/digits_calib.npz");

using Run = test::CliRun;
using test::runCli;

QString writeText(const QTemporaryDir& dir, const QString& name, const std::string& text)
{
    const QString path = dir.path() + "/" + name;
    test::writeFile(path.toStdString(), text);
    return path;
}

// Int8 weights and statically calibrated int8 activations on every layer.
const std::string kStaticRules =
    R"({"version": 1, "rules": [{"weight_qtype": "int8", "act_qtype": "int8", "act_static_scale": true}]})";

// The models and data of data/shapes/make_shape_models.py, made once per run;
// empty when python3-onnx is missing.
QString shapeFixtures()
{
    static QTemporaryDir dir;
    static const bool made =
        test::runPython(QStringLiteral(QUANTSCOPE_TEST_DATA "/shapes/make_shape_models.py"), {dir.path()});
    return made ? dir.path() : QString();
}

void expectUserError(const QStringList& args, const QString& mustContain)
{
    const Run r = runCli(args);
    QVERIFY2(r.exitCode == 1, qPrintable(args.join(' ') + " -> " + QString::number(r.exitCode) + ": " + r.err));
    QVERIFY2(r.err.contains(mustContain.toUtf8()), r.err.constData());
    QCOMPARE(r.err.count('\n'), 1);
}

double sqnrOf(const nlohmann::json& metrics)
{
    return metrics["sqnr_db"].is_null() ? INFINITY : metrics["sqnr_db"].get<double>();
}

} // namespace

class TestCliModel : public QObject {
    Q_OBJECT

private slots:
    void docsHoldTheModelCommandsHelp()
    {
        QFile docs(QStringLiteral(QUANTSCOPE_TEST_DATA "/../../docs/cli.md"));
        QVERIFY(docs.open(QIODevice::ReadOnly));
        const QByteArray text = docs.readAll();
        for (const char* command : {"run", "quantize", "bench-model", "compare-methods"}) {
            const Run r = runCli({command, "--help"});
            QCOMPARE(r.exitCode, 0);
            QVERIFY(r.out.startsWith(QByteArray("usage: quantscope-cli ") + command));
            QVERIFY2(text.contains("```\n" + r.out + "```"), command);
        }
    }

    // The report's numbers are evaluate()'s on the same data, rules and batches.
    void quantizeReportHoldsEvaluation()
    {
        QTemporaryDir dir;
        const std::string rulesText =
            R"({"version": 1, "rules": [{"module_path": "features/.*", "weight_qtype": "int8", "act_qtype": "int8",
                "act_static_scale": true}, {"module_path": "classifier/fc1", "weight_qtype": "int4"},
                {"module_path": "nothing", "weight_qtype": "int4"}]})";
        const QString rulesFile = writeText(dir, "rules.json", rulesText);
        const QString report = dir.path() + "/report.json";
        const Run r = runCli({"quantize", kModel, "--rules", rulesFile, "--calib", kCalib, "--eval", kEval,
                              "--batch-size", "64", "--sensitivity", "one", "--report", report});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        QVERIFY2(r.err.contains("rule 2") && r.err.contains("matches no layer"), r.err.constData());
        QVERIFY(r.out.contains("features/conv2") && r.out.contains("top-1: float 98.67%"));
        const nlohmann::json j = nlohmann::json::parse(test::readFile(report.toStdString()));

        Interpreter interpreter(loadModel(kModel.toStdString()));
        const QuantizationPlan plan = QuantizationPlan::build(interpreter.model(), RuleSet::fromJson(rulesText));
        WeightQuantizer weights;
        weights.update(interpreter.model(), plan);
        DataSourceOptions o;
        o.batchSize = 64;
        auto calib = openDataSource(kCalib.toStdString(), o, &interpreter.model());
        const ActivationStatistics stats = calibrateActivations(interpreter, plan, *calib);
        auto eval = openDataSource(kEval.toStdString(), o, &interpreter.model());
        const EvaluationResult e = evaluate(interpreter, plan, weights, &stats, *eval);
        const SensitivityResult s = sensitivity(interpreter, plan, weights, &stats, *eval, SensitivityKind::OneLayer);

        QCOMPARE(j["version"].get<int>(), 1);
        QCOMPARE(j["model"]["path"].get<std::string>(), kModel.toStdString());
        QCOMPARE(j["model"]["sha256"].get<std::string>().size(), size_t(64));
        QCOMPARE(j["rules"]["unused"], nlohmann::json::array({2}));
        QCOMPARE(j["layers"].size(), size_t(5));
        QCOMPARE(j["accuracy"]["float_top1"].get<double>(), e.accuracy->floatTop1);
        QCOMPARE(j["accuracy"]["quantized_top1"].get<double>(), e.accuracy->quantizedTop1);
        QCOMPARE(sqnrOf(j["outputs"][0]), e.outputs[0].metrics.sqnrDb);
        for (const LayerEvaluation& l : e.layers) {
            const nlohmann::json& layer = j["layers"][l.layer];
            QCOMPARE(sqnrOf(layer["isolated"]), l.isolated->sqnrDb);
            QCOMPARE(sqnrOf(layer["accumulated"]), l.accumulated->sqnrDb);
            QCOMPARE(sqnrOf(layer["weight"]), l.weight->sqnrDb);
            // The flat headline fields repeat them.
            QCOMPARE(layer["act_sqnr_db"].get<double>(), l.isolated->sqnrDb);
            QCOMPARE(layer["accumulated_sqnr_db"].get<double>(), l.accumulated->sqnrDb);
            QCOMPARE(layer["weight_sqnr_db"].get<double>(), l.weight->sqnrDb);
            QCOMPARE(layer["rule_index"], layer["rule"]);
        }
        QCOMPARE(j["output_sqnr_db"].get<double>(), e.outputs[0].metrics.sqnrDb);
        QCOMPARE(j["accuracy_float"].get<double>(), e.accuracy->floatTop1);
        QCOMPARE(j["accuracy_quantized"].get<double>(), e.accuracy->quantizedTop1);
        QVERIFY(j["layers"][4]["rule"].is_null()); // fc2 stays float
        QCOMPARE(j["layers"][3]["weight_qtype"].get<std::string>(), std::string("int4"));
        QCOMPARE(j["layers"][0]["act_qtype"].get<std::string>(), std::string("int8"));
        QCOMPARE(j["sensitivity"]["ranking"].size(), s.ranking.size());
        for (size_t i = 0; i < s.ranking.size(); ++i) {
            QCOMPARE(j["sensitivity"]["ranking"][i]["layer"].get<size_t>(), s.ranking[i].layer);
            QCOMPARE(sqnrOf(j["sensitivity"]["ranking"][i]["output"]), s.ranking[i].output.sqnrDb);
        }
        QVERIFY(j["timings"]["total_s"].get<double>() > 0);
    }

    // --sensitivity-algorithm gptq ranks with every layer's int4 weights rounded by GPTQ. Each layer's
    // figure is what an independent `quantize` run with that layer alone quantized under `algorithm:
    // gptq` reports as its output SQNR; a layer round-to-nearest ranks high gains and drops.
    void sensitivityWithAnAlgorithm()
    {
        QTemporaryDir dir;
        const std::string grid = R"("weight_qtype": "int4", "granularity": "per_channel")";
        // fc2 on fp8: GPTQ rounds onto integer grids only, so that layer keeps its rule's rounding.
        const std::string fp8 = R"({"module_path": "classifier/fc2", "weight_qtype": "fp8_e4m3"})";
        // (Rule documents are put together by rulesOf: moc's lexer takes raw strings with unbalanced brackets badly.)
        auto rulesOf = [](const std::string& list) { return "{\"version\": 1, \"rules\": [" + list + "]}"; };
        const QString rules = writeText(dir, "rules.json", rulesOf(fp8 + ", {" + grid + "}"));
        const QString report = dir.path() + "/report.json";
        auto quantize = [&](const QString& rulesFile, QStringList extra, QByteArray* out = nullptr) {
            const Run r = runCli(QStringList{"quantize", kModel, "--rules", rulesFile, "--calib", kCalib, "--eval",
                                             kEval, "--batch-size", "64", "--report", report} +
                                 extra);
            if (r.exitCode != 0)
                throw Error("quantize failed: " + r.err.toStdString());
            if (out)
                *out = r.out;
            return nlohmann::json::parse(test::readFile(report.toStdString()));
        };
        QByteArray text;
        const nlohmann::json rtn = quantize(rules, {"--sensitivity", "one"})["sensitivity"];
        const nlohmann::json gptq =
            quantize(rules, {"--sensitivity", "one", "--sensitivity-algorithm", "gptq"}, &text)["sensitivity"];
        QVERIFY(rtn["algorithm"].is_null());
        QVERIFY(rtn["kept_rounding"].empty());
        QCOMPARE(gptq["algorithm"].get<std::string>(), std::string("gptq"));
        QCOMPARE(gptq["kept_rounding"].size(), size_t(1));
        QCOMPARE(gptq["kept_rounding"][0]["module_path"].get<std::string>(), std::string("classifier/fc2"));
        QVERIFY(gptq["kept_rounding"][0]["reason"].get<std::string>().find("integer grid") != std::string::npos);
        QVERIFY2(text.contains("weights rounded by gptq)") && text.contains("classifier/fc2 keeps its rule's rounding"),
                 text.constData());
        QCOMPARE(gptq["ranking"].size(), size_t(5));
        QCOMPARE(rtn["ranking"].size(), size_t(5));

        std::map<std::string, std::pair<size_t, double>> rtnRank, gptqRank; // module path -> rank, output SQNR
        for (size_t i = 0; i < 5; ++i) {
            rtnRank[rtn["ranking"][i]["module_path"]] = {i, sqnrOf(rtn["ranking"][i]["output"])};
            gptqRank[gptq["ranking"][i]["module_path"]] = {i, sqnrOf(gptq["ranking"][i]["output"])};
        }
        for (const auto& [path, rankAndSqnr] : gptqRank) {
            const std::string alone = rulesOf(path == "classifier/fc2" ? fp8
                                                                       : "{\"module_path\": \"" + path + "\", " + grid +
                                                                             ", \"algorithm\": \"gptq\"}");
            const nlohmann::json j = quantize(writeText(dir, "alone.json", alone), {});
            const double expected = j["output_sqnr_db"].get<double>();
            QVERIFY2(std::abs(rankAndSqnr.second - expected) <= 1e-9 * std::abs(expected),
                     qPrintable(QString("%1: ranking %2 dB, alone %3 dB")
                                    .arg(QString::fromStdString(path))
                                    .arg(rankAndSqnr.second, 0, 'g', 12)
                                    .arg(expected, 0, 'g', 12)));
        }
        // On this model (int4 per channel, 64-row batches) round-to-nearest ranks features/conv2 second
        // most sensitive; GPTQ lifts it by more than 10 dB (29.1 -> 45.0 dB) and it drops to fourth.
        // features/conv1 (9 im2col features of one input channel: little for GPTQ to compensate with)
        // stays first.
        const auto conv2 = std::make_pair(rtnRank["features/conv2"], gptqRank["features/conv2"]);
        qInfo("features/conv2: rtn rank %zu, %.2f dB; gptq rank %zu, %.2f dB", conv2.first.first + 1,
              conv2.first.second, conv2.second.first + 1, conv2.second.second);
        QVERIFY(conv2.first.first <= 1);
        QVERIFY(conv2.second.first >= 3);
        QVERIFY(conv2.second.second > conv2.first.second + 10.0);
        // fc2 kept its fp8 rounding: the same figure in both runs.
        QCOMPARE(gptqRank["classifier/fc2"].second, rtnRank["classifier/fc2"].second);

        // Usage: without --sensitivity, gptq without --calib, an algorithm that does not parse.
        const QStringList base{"quantize", kModel, "--rules", rules, "--eval", kEval};
        QCOMPARE(runCli(base + QStringList{"--calib", kCalib, "--sensitivity-algorithm", "gptq"}).exitCode, 2);
        QCOMPARE(runCli(base + QStringList{"--sensitivity", "one", "--sensitivity-algorithm", "gptq"}).exitCode, 2);
        const Run bad =
            runCli(base + QStringList{"--calib", kCalib, "--sensitivity", "one", "--sensitivity-algorithm", "gptq,2"});
        QCOMPARE(bad.exitCode, 2);
        QVERIFY2(bad.err.contains("--sensitivity-algorithm"), bad.err.constData());
    }

    // The export options write their files and say so in the report; the QDQ model loads back.
    void quantizeExports()
    {
        QTemporaryDir dir;
        const QString rules = QStringLiteral(QUANTSCOPE_TEST_DATA "/../../resources/rules/w8a8_per_channel.json");
        const QString report = dir.path() + "/r.json", ckpt = dir.path() + "/w.safetensors",
                      qdq = dir.path() + "/q.onnx", odml = dir.path() + "/odml.json";
        Run r = runCli({"quantize", kModel, "--rules", rules, "--calib", kCalib, "--export-checkpoint", ckpt,
                        "--export-onnx", qdq, "--report", report});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        nlohmann::json j = nlohmann::json::parse(test::readFile(report.toStdString()));
        QCOMPARE(j["exports"]["checkpoint"]["quantized_weights"].get<int>(), 5);
        for (const char* kind : {"checkpoint", "onnx"}) { // int8 weights: about 4x smaller than float
            const nlohmann::json& x = j["exports"][kind];
            QCOMPARE(x["ratio"].get<double>(), x["float_bytes"].get<double>() / x["quantized_bytes"].get<double>());
            QVERIFY(x["ratio"].get<double>() > 3.5 && x["ratio"].get<double>() < 4.0);
        }
        QVERIFY(r.out.contains("x smaller"));
        QCOMPARE(j["exports"]["onnx"]["path"].get<std::string>(), qdq.toStdString());
        QVERIFY(QFile::exists(ckpt));
        const Model exported = loadModel(qdq.toStdString());
        QVERIFY(exported.opTypes().size() > loadModel(kModel.toStdString()).opTypes().size()); // Q/DQ nodes
        QVERIFY(j["evaluation"].is_null() && j["accuracy"].is_null());

        // ODML needs --mode odml and --calib (usage), then writes its annotations.
        QCOMPARE(runCli({"quantize", kModel, "--rules", rules, "--calib", kCalib, "--export-odml", odml}).exitCode, 2);
        r = runCli({"quantize", kModel, "--rules", rules, "--mode", "odml", "--calib", kCalib, "--export-odml", odml,
                    "--report", report});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        j = nlohmann::json::parse(test::readFile(report.toStdString()));
        QCOMPARE(j["mode"].get<std::string>(), std::string("odml"));
        QVERIFY(j["exports"]["odml"]["ops"].get<int>() > 0);
        QVERIFY(nlohmann::json::parse(test::readFile(odml.toStdString())).is_object());
        // A checkpoint name without a known extension is a user error naming it.
        expectUserError(
            {"quantize", kModel, "--rules", rules, "--calib", kCalib, "--export-checkpoint", dir.path() + "/w.bin"},
            "w.bin");
    }

    void quantizeErrorsNameTheFileOrRule()
    {
        QTemporaryDir dir;
        const QString bad = writeText(dir, "bad_rules.json", R"({"version": 1, "rules": [{"weight_qtyp": "int8"}]})");
        expectUserError({"quantize", kModel, "--rules", bad}, bad);
        const QString missing = dir.path() + "/missing.json";
        expectUserError({"quantize", kModel, "--rules", missing}, missing);
        const QString staticRules =
            writeText(dir, "static.json",
                      R"({"version": 1, "rules": [{"module_path": "classifier/.*", "weight_qtype": "int8"},
                {"weight_qtype": "int8", "act_qtype": "int8", "act_static_scale": true}]})");
        expectUserError({"quantize", kModel, "--rules", staticRules, "--eval", kEval}, "rule 1");
        expectUserError(
            {"run", kModel, "--input", "input=x.npy", "--rules", staticRules, "--out", dir.path() + "/o.npz"},
            "--calib");
        // Usage: --sensitivity without --eval, a bad mode.
        QCOMPARE(runCli({"quantize", kModel, "--rules", staticRules, "--sensitivity", "one"}).exitCode, 2);
        QCOMPARE(runCli({"quantize", kModel, "--rules", staticRules, "--mode", "qat"}).exitCode, 2);
    }

    // run's .npz holds the interpreter's outputs bit for bit, float and fake-quantized.
    void runWritesInterpreterOutputs()
    {
        QTemporaryDir dir;
        const Tensor all = NpzFile::open(kEval.toStdString()).read("input");
        const Tensor input = Tensor::borrow(DType::F32, {7, 1, 8, 8}, all.rawData(), nullptr).clone();
        const QString inputFile = dir.path() + "/input.npy";
        writeNpy(inputFile.toStdString(), input);
        const std::string rulesText = R"({"version": 1, "rules": [{"weight_qtype": "int4", "act_qtype": "int8"}]})";
        const QString rulesFile = writeText(dir, "rules.json", rulesText);

        Interpreter interpreter(loadModel(kModel.toStdString()));
        const QuantizationPlan plan = QuantizationPlan::build(interpreter.model(), RuleSet::fromJson(rulesText));
        WeightQuantizer weights;
        weights.update(interpreter.model(), plan);
        const std::map<size_t, StaticActivation> none;
        QuantizationHook hook(interpreter.model(), plan, weights, none);

        for (bool quantized : {false, true}) {
            const QString out = dir.path() + (quantized ? "/q.npz" : "/f.npz");
            QStringList args{"run", kModel, "--input", "input=" + inputFile, "--out", out};
            if (quantized)
                args << "--rules" << rulesFile;
            const Run r = runCli(args);
            QVERIFY2(r.exitCode == 0, r.err.constData());
            const Tensor expected =
                interpreter.run({{"input", input}}, {CancellationToken(), quantized ? &hook : nullptr}).at("logits");
            const NpzFile npz = NpzFile::open(out.toStdString());
            QCOMPARE(npz.arrays().size(), size_t(1));
            const Tensor got = npz.read("logits");
            QCOMPARE(got.shape(), (Shape{7, 10}));
            QCOMPARE(test::bytesOf(got), test::bytesOf(expected));
        }
        // numpy reads it too.
        QProcess p;
        p.start(test::kPython, {"-c", "import numpy, sys; z = numpy.load(sys.argv[1]); print(z['logits'].shape)",
                                dir.path() + "/q.npz"});
        QVERIFY(p.waitForFinished(60000));
        QCOMPARE(p.readAllStandardOutput().trimmed(), QByteArray("(7, 10)"));

        expectUserError({"run", kModel, "--input", "wrong=" + inputFile, "--out", dir.path() + "/x.npz"}, "wrong");
        QCOMPARE(runCli({"run", kModel, "--input", inputFile, "--out", dir.path() + "/x.npz"}).exitCode, 2);
    }

    // A model's weight by module path or initializer name gives the same table as the .npy of it.
    void compareMethodsOnModelTensor()
    {
        QTemporaryDir dir;
        const Model model = loadModel(kModel.toStdString());
        const QString npy = dir.path() + "/w.npy";
        writeNpy(npy.toStdString(), *model.initializer("features.conv2.weight"));
        const Run fromNpy = runCli({"compare-methods", "--npy", npy, "--qtype", "int4", "--json"});
        QVERIFY2(fromNpy.exitCode == 0, fromNpy.err.constData());
        for (const char* name : {"features/conv2", "features.conv2.weight"}) {
            const Run fromModel = runCli({"compare-methods", kModel, "--tensor", name, "--qtype", "int4", "--json"});
            QVERIFY2(fromModel.exitCode == 0, fromModel.err.constData());
            const nlohmann::json a = nlohmann::json::parse(fromNpy.out.toStdString());
            const nlohmann::json b = nlohmann::json::parse(fromModel.out.toStdString());
            QCOMPARE(b["methods"], a["methods"]);
            QCOMPARE(b["granularity"], a["granularity"]);
        }
        // fc1's channel axis is the default axis: its per-channel table has 64 groups.
        const Run fc1 = runCli({"compare-methods", kModel, "--tensor", "classifier/fc1", "--qtype", "int8", "--json"});
        QVERIFY2(fc1.exitCode == 0, fc1.err.constData());
        QCOMPARE(nlohmann::json::parse(fc1.out.toStdString())["methods"][0]["scales"].size(), size_t(64));
        expectUserError({"compare-methods", kModel, "--tensor", "no.such", "--qtype", "int8"}, "no.such");
    }

    void benchModelJson()
    {
        const Run r = runCli({"bench-model", kModel, "--batch-size", "4", "--runs", "3", "--threads", "1", "--json"});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        const nlohmann::json j = nlohmann::json::parse(r.out.toStdString());
        QCOMPARE(j["model"].get<std::string>(), kModel.toStdString());
        QCOMPARE(j["batch"].get<int>(), 4);
        QCOMPARE(j["threads"].get<int>(), 1);
        QCOMPARE(j["runs"].get<int>(), 3);
        const double fp32 = j["latency_ms_median"].get<double>();
        QVERIFY(fp32 > 0 && j["latency_ms_mean"].get<double>() > 0);
        QVERIFY(j["fake_quant_latency_ms_median"].get<double>() > 0);
        // The overhead is the observer run's median over float's, minus 1.
        QVERIFY(std::abs(j["observer_overhead"].get<double>() -
                         (j["observer_latency_ms_median"].get<double>() / fp32 - 1.0)) < 1e-12);
        QVERIFY(std::abs(j["observer_overhead_all_histograms"].get<double>() -
                         (j["observer_all_histograms_latency_ms_median"].get<double>() / fp32 - 1.0)) < 1e-12);
        // With static rules the benchmark calibrates on its own inputs first.
        const Run w8a8 =
            runCli({"bench-model", kModel, "--runs", "2", "--rules",
                    QStringLiteral(QUANTSCOPE_TEST_DATA "/../../resources/rules/w8a8_per_channel.json"), "--json"});
        QVERIFY2(w8a8.exitCode == 0, w8a8.err.constData());
        QVERIFY(nlohmann::json::parse(w8a8.out.toStdString())["fake_quant_latency_ms_median"].get<double>() > 0);
        expectUserError({"bench-model", kModel, "--rules", "no-such-rules.json"}, "no-such-rules.json");
        expectUserError({"bench-model", QStringLiteral(QUANTSCOPE_TEST_DATA "/npy/f4_le_c_v1.npy")}, "weights-only");
        // --batch is the older name of --batch-size: the same run, and not both at once.
        const Run older = runCli({"bench-model", kModel, "--batch", "3", "--runs", "1", "--json"});
        QVERIFY2(older.exitCode == 0, older.err.constData());
        QCOMPARE(nlohmann::json::parse(older.out.toStdString())["batch"].get<int>(), 3);
        QCOMPARE(runCli({"bench-model", kModel, "--batch", "3", "--batch-size", "3"}).exitCode, 2);
    }

    // --profile: every op type of the main graph once, and the --top slowest
    // nodes, each a node of the model, slowest first, their shares of the
    // profiled total. --save-inputs writes what ONNX Runtime's scripts read.
    void benchModelProfile()
    {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const Run r = runCli({"bench-model", kModel, "--runs", "2", "--threads", "1", "--profile", "--top", "3",
                              "--save-inputs", dir.path(), "--json"});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        const nlohmann::json j = nlohmann::json::parse(r.out.toStdString());
        const double total = j["profile_ms_total"].get<double>();
        QVERIFY(total > 0);
        double sum = 0;
        for (const auto& t : j["profile"])
            sum += t["ms_mean"].get<double>();
        QVERIFY(std::abs(sum - total) < 1e-9 * std::max(1.0, total));
        const nlohmann::json& nodes = j["nodes"];
        QCOMPARE(nodes.size(), size_t(3));
        const Model model = loadModel(kModel.toStdString());
        for (size_t i = 0; i < nodes.size(); ++i) {
            const size_t index = nodes[i]["index"].get<size_t>();
            QVERIFY(index < model.nodes.size());
            QCOMPARE(nodes[i]["op_type"].get<std::string>(), model.nodes[index].opType);
            QVERIFY(std::abs(nodes[i]["share"].get<double>() - nodes[i]["ms_mean"].get<double>() / total) < 1e-12);
            if (i > 0)
                QVERIFY(nodes[i]["ms_mean"].get<double>() <= nodes[i - 1]["ms_mean"].get<double>());
        }
        const nlohmann::json saved = nlohmann::json::parse(test::readFile(dir.filePath("inputs.json").toStdString()));
        QCOMPARE(saved.size(), model.inputs.size());
        for (const ValueInfo& input : model.inputs)
            QVERIFY(readNpy(saved[input.name].get<std::string>()).dim(0) == 1);
        QCOMPARE(runCli({"bench-model", kModel, "--top", "3"}).exitCode, 2); // --top without --profile
    }

    // A model exported with its batch fixed at 1 (torch.onnx's default)
    // calibrates and evaluates a 40-row file at default options, in 40
    // batches of 1; one fixed at 16 takes 2 batches and says the last 8 rows
    // are left out. Both refuse another --batch-size, naming the input.
    void fixedBatchModelTakesItsBatchSize()
    {
        const QString dir = shapeFixtures();
        QVERIFY(!dir.isEmpty());
        QTemporaryDir out;
        const QString rules = writeText(out, "rules.json", kStaticRules);
        const QString report = out.path() + "/report.json";
        const QString rows = dir + "/rows40.npz";
        Run r = runCli({"quantize", dir + "/fixed_batch.onnx", "--rules", rules, "--calib", rows, "--eval", rows,
                        "--sensitivity", "one", "--report", report});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        nlohmann::json j = nlohmann::json::parse(test::readFile(report.toStdString()));
        QCOMPARE(j["calibration"]["batches"].get<int>(), 40);
        QCOMPARE(j["evaluation"]["batches"].get<int>(), 40);
        QCOMPARE(j["evaluation"]["samples"].get<int>(), 40);
        QVERIFY(!r.err.contains("left out"));

        r = runCli({"quantize", dir + "/fixed_batch16.onnx", "--rules", rules, "--calib", rows, "--eval", rows,
                    "--report", report});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        QVERIFY2(r.err.contains("exactly 16 rows: the last 8 of 40 rows are left out"), r.err.constData());
        j = nlohmann::json::parse(test::readFile(report.toStdString()));
        QCOMPARE(j["calibration"]["batches"].get<int>(), 2);
        QCOMPARE(j["evaluation"]["samples"].get<int>(), 32);

        // run --calib calibrates in batches of 1 as well.
        const QString x = out.path() + "/x.npy";
        writeNpy(x.toStdString(), Tensor::fromVector<float>(DType::F32, {1, 4}, {1, -2, 3, -4}));
        r = runCli({"run", dir + "/fixed_batch.onnx", "--input", "x=" + x, "--rules", rules, "--calib", rows, "--out",
                    out.path() + "/y.npz"});
        QVERIFY2(r.exitCode == 0, r.err.constData());

        // run splits an --input of 40 rows into the model's 40 batches of 1 and joins the outputs: the
        // same rows as the dynamic-batch model (same weights) gives in one run.
        const QString x40 = out.path() + "/x40.npy";
        writeNpy(x40.toStdString(), NpzFile::open(rows.toStdString()).read("x"));
        r = runCli({"run", dir + "/fixed_batch.onnx", "--input", "x=" + x40, "--out", out.path() + "/f.npz"});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        r = runCli({"run", dir + "/dynamic_batch.onnx", "--input", "x=" + x40, "--out", out.path() + "/d.npz"});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        const Tensor fixedOut = NpzFile::open((out.path() + "/f.npz").toStdString()).read("y");
        QCOMPARE(fixedOut.shape(), (Shape{40, 3}));
        QCOMPARE(test::bytesOf(fixedOut),
                 test::bytesOf(NpzFile::open((out.path() + "/d.npz").toStdString()).read("y")));
        expectUserError({"run", dir + "/fixed_batch16.onnx", "--input", "x=" + x40, "--out", out.path() + "/g.npz"},
                        "give a multiple of 16 rows");

        for (const QStringList& args :
             {QStringList{"quantize", dir + "/fixed_batch.onnx", "--rules", rules, "--calib", rows, "--batch-size",
                          "8"},
              QStringList{"run", dir + "/fixed_batch.onnx", "--input", "x=" + x, "--rules", rules, "--calib", rows,
                          "--batch-size", "8", "--out", out.path() + "/y.npz"},
              QStringList{"bench-model", dir + "/fixed_batch.onnx", "--batch-size", "8", "--runs", "1"}}) {
            expectUserError(args, "--batch-size 8");
            expectUserError(args, "input 'x' (float32[1, 4]) takes batches of exactly 1");
        }
    }

    // A dynamic batch takes --batch-size: 40 rows in batches of 8 are 5 batches.
    void dynamicBatchTakesTheGivenBatchSize()
    {
        const QString dir = shapeFixtures();
        QVERIFY(!dir.isEmpty());
        QTemporaryDir out;
        const QString report = out.path() + "/report.json";
        const QString rows = dir + "/rows40.npz";
        const Run r =
            runCli({"quantize", dir + "/dynamic_batch.onnx", "--rules", writeText(out, "r.json", kStaticRules),
                    "--calib", rows, "--eval", rows, "--batch-size", "8", "--report", report});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        const nlohmann::json j = nlohmann::json::parse(test::readFile(report.toStdString()));
        QCOMPARE(j["calibration"]["batches"].get<int>(), 5);
        QCOMPARE(j["evaluation"]["batches"].get<int>(), 5);
        QCOMPARE(j["evaluation"]["samples"].get<int>(), 40);
    }

    // Dynamic dimensions past the batch need --shape: bench-model and run
    // refuse without one, naming the input and its dynamic dimensions, and
    // run with one; a --shape must keep the fixed dimensions.
    void dynamicDimensionsNeedAShape()
    {
        const QString dir = shapeFixtures();
        QVERIFY(!dir.isEmpty());
        const QString model = dir + "/dynamic_hw.onnx";
        expectUserError({"bench-model", model, "--runs", "1"}, "input 'x' (float32[1, 1, H, W])");
        expectUserError({"bench-model", model, "--runs", "1"}, "dynamic dimensions 2 (H) and 3 (W)");
        expectUserError({"bench-model", model, "--runs", "1"}, "--shape x=1x1x<H>x<W>");
        const Run bench =
            runCli({"bench-model", model, "--shape", "x=1x1x48x32", "--runs", "2", "--threads", "1", "--json"});
        QVERIFY2(bench.exitCode == 0, bench.err.constData());
        QVERIFY(nlohmann::json::parse(bench.out.toStdString())["latency_ms_median"].get<double>() > 0);
        expectUserError({"bench-model", model, "--shape", "x=2x1x8x8"}, "fixed at 1");
        expectUserError({"bench-model", model, "--shape", "y=1x1x8x8"}, "no input 'y'");
        QCOMPARE(runCli({"bench-model", model, "--shape", "x=1x1x8"}).exitCode, 1);
        QCOMPARE(runCli({"bench-model", model, "--shape", "x=1x1x0x8"}).exitCode, 2);
        QCOMPARE(runCli({"bench-model", model, "--shape", "x1x1x8x8"}).exitCode, 2);

        QTemporaryDir out;
        const QString y = out.path() + "/y.npz";
        expectUserError({"run", model, "--out", y}, "dimensions 2 (H) and 3 (W) are dynamic");
        const Run run = runCli({"run", model, "--shape", "x=1x1x6x10", "--out", y});
        QVERIFY2(run.exitCode == 0, run.err.constData());
        QVERIFY2(run.out.contains("seeded random input x [1, 1, 6, 10]"), run.out.constData());
        QCOMPARE(NpzFile::open(y.toStdString()).read("y").shape(), (Shape{1, 2, 3, 5}));

        // Token ids: seeded ids index the [100, 16] table without running off it.
        const Run tokens = runCli({"run", dir + "/tokens.onnx", "--shape", "ids=4x50", "--out", y});
        QVERIFY2(tokens.exitCode == 0, tokens.err.constData());
        QCOMPARE(NpzFile::open(y.toStdString()).read("y").shape(), (Shape{4, 16}));
        const Run benchTokens =
            runCli({"bench-model", dir + "/tokens.onnx", "--shape", "ids=2x30", "--runs", "1", "--json"});
        QVERIFY2(benchTokens.exitCode == 0, benchTokens.err.constData());
        expectUserError({"bench-model", dir + "/tokens.onnx"}, "dimension 1 (T)");
    }
};

QTEST_APPLESS_MAIN(TestCliModel)
#include "tst_cli_model.moc"
