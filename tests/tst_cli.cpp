// quantscope-cli, run as a user runs it (QProcess): exit statuses, one-line
// errors naming the file, fake-quant equal to the engine bit for bit,
// compare-methods JSON, bench JSON, inspect on every model format; docs/cli.md
// holds every --help text verbatim.
#include <QtTest>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <random>

#include <nlohmann/json.hpp>
#include <tbb/global_control.h>

#include "algorithm_support.h"
#include "analysis/method_comparison.h"
#include "io/model_loader.h"
#include "io/npy.h"
#include "quant/kernels.h"
#include "quantization/rule_resolution.h"
#include "quantization/tensor_quantization.h"
#include "runtime/op_registry.h"
#include "session/algorithm_comparison.h"

#include "test_support.h"

using namespace qs;

namespace {

using Run = test::CliRun;
using test::runCli;

// Weight-like data with the cases kernels get wrong: a zero channel, a constant
// channel, outliers, values on rounding ties, tiny and negative-only channels.
Tensor adversarialWeights(int64_t channels, int64_t width, uint32_t seed)
{
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.f, 1.f);
    Tensor t(DType::F32, {channels, width});
    auto v = t.mutableValues<float>();
    for (int64_t c = 0; c < channels; ++c) {
        const float spread = std::exp2(float(c % 9) - 4.f);
        for (int64_t i = 0; i < width; ++i) {
            float x = normal(rng) * spread;
            switch (c % 6) {
            case 0:
                x = 0.f;
                break; // all zero
            case 1:
                x = 0.375f;
                break; // constant
            case 2:
                x = (i % 17 == 0) ? x * 40.f : x;
                break; // outliers
            case 3:
                x = float(int(i % 255) - 127) / 127.f * 0.5f;
                break; // on the int8 grid and its ties
            case 4:
                x = -std::abs(x) * 1e-20f;
                break; // tiny, one-signed
            default:
                break;
            }
            v[size_t(c * width + i)] = x;
        }
    }
    return t;
}

QString writeTemp(const QTemporaryDir& dir, const QString& name, const Tensor& t)
{
    const QString path = dir.path() + "/" + name;
    writeNpy(path.toStdString(), t);
    return path;
}

void expectUserError(const QStringList& args, const QString& mustContain)
{
    const Run r = runCli(args);
    QVERIFY2(r.exitCode == 1, qPrintable(args.join(' ') + " -> " + QString::number(r.exitCode) + ": " + r.err));
    QVERIFY2(r.err.contains(mustContain.toUtf8()), r.err.constData());
    QCOMPARE(r.err.count('\n'), 1); // one line
    QVERIFY(r.out.isEmpty());
}

} // namespace

const char* const kDemoModel = QUANTSCOPE_TEST_DATA "/../../resources/demo/digits/digits_cnn.onnx";

bool runPython(const QStringList& args)
{
    QProcess p;
    p.setProcessChannelMode(QProcess::ForwardedChannels);
    p.start(QStringLiteral("/usr/bin/python3"), args);
    return p.waitForFinished(120000) && p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0;
}

class TestCli : public QObject {
    Q_OBJECT

    std::unique_ptr<QTemporaryDir> fixtures_; // generated model files; null when python3 is missing

private slots:
    void readmeTestCommandIsWhatCiRuns()
    {
        // The README's second command is the test command, and .ci/run must run exactly it.
        QFile readme(QStringLiteral(QUANTSCOPE_TEST_DATA "/../../README.md"));
        QFile ci(QStringLiteral(QUANTSCOPE_TEST_DATA "/../../.ci/run"));
        QVERIFY(readme.open(QIODevice::ReadOnly) && ci.open(QIODevice::ReadOnly));
        const QStringList lines = QString::fromUtf8(readme.readAll()).split('\n');
        QVERIFY(lines.size() > 3);
        QCOMPARE(lines[0], QStringLiteral("```sh"));
        QVERIFY(lines[1].contains("install-deps.sh") && lines[1].contains("quantscope"));
        QVERIFY(lines[2].contains("ctest"));
        QCOMPARE(lines[3], QStringLiteral("```"));
        QVERIFY2(QString::fromUtf8(ci.readAll()).split('\n').contains(lines[2]),
                 "the last README command is not a line of .ci/run");
    }

    // Model fixtures of every format from the loaders' generator scripts, plus
    // copies under names that do not say what they are.
    void initTestCase()
    {
        auto dir = std::make_unique<QTemporaryDir>();
        QVERIFY(dir->isValid());
        const QString root = dir->path();
        if (!runPython({QUANTSCOPE_TEST_DATA "/archives/make_valid_archives.py", root + "/a"}) ||
            !runPython({QUANTSCOPE_TEST_DATA "/hdf5/make_hdf5_fixtures.py", root + "/h"}) ||
            !runPython({QUANTSCOPE_TEST_DATA "/onnx/make_fixtures.py", root + "/o"}))
            return;
        QVERIFY(QFile::copy(root + "/a/plain.npz", root + "/renamed_npz.bin"));
        QVERIFY(QFile::copy(root + "/h/keras_sequential.h5", root + "/renamed_h5.dat"));
        QVERIFY(QFile::copy(root + "/a/all_dtypes.safetensors", root + "/renamed_safetensors.pt"));
        QVERIFY(QFile::copy(QString(kDemoModel), root + "/renamed_onnx.bin"));
        writeNpy((root + "/weight.npy").toStdString(), adversarialWeights(8, 16, 3));
        fixtures_ = std::move(dir);
    }

    void versionAndHelp()
    {
        Run r = runCli({"--version"});
        QCOMPARE(r.exitCode, 0);
        QVERIFY(r.out.startsWith("quantscope-cli " QUANTSCOPE_VERSION));
        for (const char* command : {"fake-quant", "compare-methods", "bench"}) {
            r = runCli({command, "--help"});
            QCOMPARE(r.exitCode, 0);
            QVERIFY(r.out.startsWith(QByteArray("usage: quantscope-cli ") + command));
        }
        r = runCli({"--help"});
        QCOMPARE(r.exitCode, 0);
        QVERIFY(r.out.contains("compare-methods"));
    }

    // docs/cli.md shows every help text verbatim: a changed option or note must change the docs.
    void docsHoldEveryHelpText()
    {
        QFile docs(QStringLiteral(QUANTSCOPE_TEST_DATA "/../../docs/cli.md"));
        QVERIFY(docs.open(QIODevice::ReadOnly));
        const QByteArray text = docs.readAll();
        Run r = runCli({"--help"});
        QCOMPARE(r.exitCode, 0);
        QVERIFY2(text.contains("```\n" + r.out + "```"), "docs/cli.md: the --help block differs");
        for (const char* command : {"inspect", "fake-quant", "compare-methods", "bench"}) {
            r = runCli({command, "--help"});
            QCOMPARE(r.exitCode, 0);
            QVERIFY2(text.contains("```\n" + r.out + "```"), command);
        }
    }

    void badUsageExitsTwo_data()
    {
        QTest::addColumn<QStringList>("args");
        const QString npy = QStringLiteral(QUANTSCOPE_TEST_DATA "/npy/f4_le_c_v1.npy");
        QTest::newRow("no arguments") << QStringList{};
        QTest::newRow("unknown command") << QStringList{"frobnicate"};
        QTest::newRow("unknown option") << QStringList{"bench", "--sise", "4096"};
        QTest::newRow("inspect without MODEL") << QStringList{"inspect", "--json"};
        QTest::newRow("inspect two MODELs") << QStringList{"inspect", "a.onnx", "b.onnx"};
        QTest::newRow("inspect --rules without value") << QStringList{"inspect", "a.onnx", "--rules"};
        QTest::newRow("missing value") << QStringList{"fake-quant", "--npy",    npy,      "--qtype",
                                                      "int8",       "--method", "absmax", "--out"};
        QTest::newRow("value swallowed by option")
            << QStringList{"fake-quant", "--npy", "--qtype", "int8", "--method", "absmax", "--out", "o.npy"};
        QTest::newRow("missing required option")
            << QStringList{"fake-quant", "--npy", npy, "--qtype", "int8", "--out", "o.npy"};
        QTest::newRow("bad choice") << QStringList{"compare-methods", "--npy",  npy, "--qtype", "int8",
                                                   "--granularity",   "per_row"};
        QTest::newRow("not a number") << QStringList{"compare-methods", "--npy", npy, "--qtype", "int8",
                                                     "--axis",          "one"};
        QTest::newRow("repeated option") << QStringList{"bench", "--json", "--json"};
        QTest::newRow("stray argument") << QStringList{"bench", "extra"};
        QTest::newRow("size not a multiple of 4096") << QStringList{"bench", "--size", "5000"};
        QTest::newRow("tile without tile granularity")
            << QStringList{"compare-methods", "--npy", npy, "--qtype", "int8", "--tile", "64"};
        QTest::newRow("npy and model") << QStringList{"compare-methods", "m.onnx", "--npy", npy, "--qtype", "int8"};
    }

    void badUsageExitsTwo()
    {
        QFETCH(QStringList, args);
        const Run r = runCli(args);
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains("usage: quantscope-cli"), r.err.constData());
    }

    void userErrorsExitOneNamingTheFile()
    {
        QTemporaryDir dir;
        const QString good = writeTemp(dir, "w.npy", adversarialWeights(4, 64, 1));
        const QString missing = dir.path() + "/missing.npy";
        const QString corrupt = dir.path() + "/corrupt.npy";
        QFile f(corrupt);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("\x93NUMPY\x01\x00\x20\x00{'descr': '<f4', 'shape': (4,)}");
        f.close();
        const QStringList options{"--qtype", "int8", "--method", "absmax", "--out", dir.path() + "/o.npy"};
        expectUserError(QStringList{"fake-quant", "--npy", missing} + options, missing);
        expectUserError(QStringList{"fake-quant", "--npy", corrupt} + options, corrupt);
        expectUserError({"compare-methods", "--npy", corrupt, "--qtype", "int8"}, corrupt);
        // An unknown qtype lists the valid ones.
        const Run r = runCli({"fake-quant", "--npy", good, "--qtype", "int9", "--method", "absmax", "--out", "o.npy"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY(r.err.contains("'int9'") && r.err.contains("int8") && r.err.contains("nf4") && r.err.contains("mxfp4"));
        expectUserError({"fake-quant", "--npy", good, "--qtype", "int8", "--method", "percentile,120", "--out",
                         dir.path() + "/o.npy"},
                        "percentile,120");
        expectUserError(
            {"fake-quant", "--npy", good, "--qtype", "int8", "--method", "rms", "--out", dir.path() + "/o.npy"},
            "--method");
        // What the data cannot take names the file: an axis out of range, an asymmetric method on fp8.
        expectUserError({"fake-quant", "--npy", good, "--qtype", "int8", "--method", "absmax", "--axis", "5", "--out",
                         dir.path() + "/o.npy"},
                        good);
        expectUserError(
            {"fake-quant", "--npy", good, "--qtype", "fp8_e4m3", "--method", "minmax", "--out", dir.path() + "/o.npy"},
            good);
        // An output folder that does not exist: the output file is named, nothing is written.
        const QString badOut = dir.path() + "/no/such/o.npy";
        expectUserError({"fake-quant", "--npy", good, "--qtype", "int8", "--method", "absmax", "--out", badOut},
                        badOut);
        QVERIFY(!QFile::exists(badOut));
        expectUserError({"compare-methods", "model.onnx", "--tensor", "w", "--qtype", "int8"}, "model.onnx");
    }

    // The demo CNN: the five layers with their module paths, weights and axes, rule
    // indices and counts, inputs, outputs, opsets, op types and totals.
    void inspectDemoModelJson()
    {
        QTemporaryDir dir;
        const QString rules = dir.path() + "/rules.json";
        QFile f(rules);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(R"({"version": 1, "rules": [{"module_path": "features/.*", "weight_qtype": "int8"},
                   {"module_path": "nothing", "weight_qtype": "int4"},
                   {"module_path": "classifier/.*", "op_types": ["Gemm"], "weight_qtype": "int4"}]})");
        f.close();
        const Run r = runCli({"inspect", kDemoModel, "--rules", rules, "--json"});
        QCOMPARE(r.exitCode, 0);
        const auto j = nlohmann::json::parse(r.out.toStdString());
        QCOMPARE(j["format"], "onnx");
        QCOMPARE(j["opset_imports"]["ai.onnx"], 13);
        QCOMPARE(j["inputs"].size(), size_t(1));
        QCOMPARE(j["inputs"][0]["name"], "input");
        QCOMPARE(j["inputs"][0]["shape"], nlohmann::json::parse(R"(["N", 1, 8, 8])"));
        QCOMPARE(j["outputs"][0]["shape"], nlohmann::json::parse(R"(["N", 10])"));
        const std::vector<std::string> paths{"features/conv1", "features/conv2", "features/conv3", "classifier/fc1",
                                             "classifier/fc2"};
        const std::vector<int> ruleOf{0, 0, 0, 2, 2};
        QCOMPARE(j["layers"].size(), paths.size());
        int64_t quantizable = 0;
        for (size_t i = 0; i < paths.size(); ++i) {
            const auto& l = j["layers"][i];
            QCOMPARE(l["module_path"], paths[i]);
            QCOMPARE(l["op_type"], i < 3 ? "Conv" : "Gemm");
            QCOMPARE(l["rule"], ruleOf[i]);
            QCOMPARE(l["dtype"], "float32");
            QCOMPARE(l["channel_axis"], 0);
            QCOMPARE(l["contraction_axes"], nlohmann::json::parse("[1]"));
            int64_t n = 1;
            for (int64_t d : l["shape"])
                n *= d;
            QCOMPARE(l["parameters"].get<int64_t>(), n);
            quantizable += n;
        }
        QCOMPARE(j["layers"][0]["weight"], "features.conv1.weight");
        QCOMPARE(j["layers"][0]["shape"], nlohmann::json::parse("[16, 1, 3, 3]"));
        QCOMPARE(j["layers"][3]["shape"], nlohmann::json::parse("[64, 512]"));
        QCOMPARE(j["totals"]["layers"], 5);
        QCOMPARE(j["totals"]["quantizable_parameters"].get<int64_t>(), quantizable);
        QCOMPARE(j["totals"]["parameters"].get<int64_t>(), 47530); // weights and biases
        QCOMPARE(j["totals"]["bytes"].get<int64_t>(), 47530 * 4);
        QCOMPARE(j["totals"]["layers_matched"], 5);
        QCOMPARE(j["rules"]["match_counts"], nlohmann::json::parse("[3, 0, 2]"));
        QCOMPARE(j["rules"]["unused"], nlohmann::json::parse("[1]"));
        std::map<std::string, int> ops;
        for (const auto& op : j["op_types"])
            ops[op["op_type"]] = op["count"];
        QCOMPARE(ops["Conv"], 3);
        QCOMPARE(ops["Gemm"], 2);
        QCOMPARE(ops["Relu"], 4);
    }

    // The table: one row per layer, columns aligned (every row as long as the
    // header where the last column ends), rule "-" without rules.
    void inspectDemoModelTable()
    {
        const Run r = runCli({"inspect", kDemoModel});
        QCOMPARE(r.exitCode, 0);
        const QList<QByteArray> lines = r.out.split('\n');
        qsizetype header = -1;
        for (qsizetype i = 0; i < lines.size(); ++i)
            if (lines[i].startsWith("#  module path"))
                header = i;
        QVERIFY(header >= 0);
        QVERIFY(r.out.contains("inputs:\n  input  float32[N, 1, 8, 8]"));
        QVERIFY(r.out.contains("opsets: ai.onnx 13"));
        QVERIFY(r.out.contains("op types: Conv 3, Flatten 1, Gemm 2, MaxPool 1, Relu 4\n"
                               "not run by the runtime: none\n"));
        QVERIFY(r.out.contains("totals: 5 layers, 47530 parameters"));
        const qsizetype ruleColumn = lines[header].indexOf("rule");
        const qsizetype paramsEnd = lines[header].indexOf("params") + 6;
        for (int i = 1; i <= 5; ++i) {
            const QByteArray& row = lines[header + i];
            QVERIFY2(row.startsWith(QByteArray::number(i - 1) + "  "), row.constData());
            QCOMPARE(row.size(), lines[header].size()); // "-" under the right-aligned "rule"
            QCOMPARE(row.at(row.size() - 1), '-');
            QVERIFY(row.at(paramsEnd - 1) >= '0' && row.at(paramsEnd - 1) <= '9');
            QCOMPARE(row.at(paramsEnd), ' ');
            QVERIFY(ruleColumn > 0);
        }
        QVERIFY(lines[header + 1].contains("features/conv1  Conv  features.conv1.weight  [16, 1, 3, 3]"));
    }

    // Every format inspect takes, generated by the fixture scripts of the loaders'
    // own tests: what the CLI reports equals the engine's Model, layer by layer.
    void inspectEveryFormat_data()
    {
        QTest::addColumn<QString>("file");
        QTest::addColumn<QString>("format");
        QTest::newRow("onnx") << QString(kDemoModel) << "onnx";
        QTest::newRow("onnx, every layout") << "o/layers.onnx"
                                            << "onnx";
        QTest::newRow("onnx, external data") << "o/external.onnx"
                                             << "onnx";
        QTest::newRow("safetensors") << "a/all_dtypes.safetensors"
                                     << "safetensors";
        QTest::newRow("sharded safetensors") << "a/sharded/model.safetensors.index.json"
                                             << "safetensors";
        QTest::newRow("npz") << "a/plain.npz"
                             << "npz";
        QTest::newRow("npz deflated") << "a/compressed.npz"
                                      << "npz";
        QTest::newRow("keras sequential") << "h/keras_sequential.h5"
                                          << "keras-h5";
        QTest::newRow("keras attention") << "h/keras_attention.h5"
                                         << "keras-h5";
        QTest::newRow("generic hdf5") << "h/generic.h5"
                                      << "hdf5";
        QTest::newRow("npy") << "weight.npy"
                             << "npy";
        // Recognised by the bytes, whatever the name says.
        QTest::newRow("npz named .bin") << "renamed_npz.bin"
                                        << "npz";
        QTest::newRow("hdf5 named .dat") << "renamed_h5.dat"
                                         << "keras-h5";
        QTest::newRow("safetensors named .pt") << "renamed_safetensors.pt"
                                               << "safetensors";
        QTest::newRow("onnx named .bin") << "renamed_onnx.bin"
                                         << "onnx";
    }

    void inspectEveryFormat()
    {
        QFETCH(QString, file);
        QFETCH(QString, format);
        if (!fixtures_)
            QSKIP("/usr/bin/python3 with numpy and h5py is needed to generate the fixtures");
        const QString path = QFileInfo(file).isAbsolute() ? file : fixtures_->path() + "/" + file;
        const Run r = runCli({"inspect", path, "--json"});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        const auto j = nlohmann::json::parse(r.out.toStdString());
        QCOMPARE(j["format"], format.toStdString());
        const Model model = loadModel(path.toStdString());
        QVERIFY(!model.layers.empty());
        QCOMPARE(j["layers"].size(), model.layers.size());
        QCOMPARE(j["weights_only"], model.weightsOnly);
        for (size_t i = 0; i < model.layers.size(); ++i) {
            const QuantizableLayer& l = model.layers[i];
            const auto& row = j["layers"][i];
            QCOMPARE(row["module_path"], l.modulePath);
            QCOMPARE(row["op_type"], l.opType);
            QCOMPARE(row["weight"], l.weightName);
            QCOMPARE(row["shape"], nlohmann::json(l.weightShape));
            QCOMPARE(row["dtype"], std::string(dtypeName(l.weightDType)));
            QCOMPARE(row["parameters"], l.parameterCount);
            QCOMPARE(row["channel_axis"], l.channelAxis);
            QCOMPARE(row["contraction_axes"], nlohmann::json(l.contractionAxes));
            QVERIFY(row["rule"].is_null());
        }
        QCOMPARE(j["totals"]["parameters"].get<int64_t>(), model.parameterCount());
        QCOMPARE(j["inputs"].size(), model.inputs.size());
        QCOMPARE(j["warnings"].size(), model.warnings.size());
        QCOMPARE(j["unsupported_ops"].size(), unsupportedOps(model).size());
    }

    // Op types the runtime cannot run are named, in the table and the JSON.
    void inspectNamesUnsupportedOps()
    {
        Run r = runCli({"inspect", kDemoModel, "--json"});
        QCOMPARE(r.exitCode, 0);
        QCOMPARE(nlohmann::json::parse(r.out.toStdString())["unsupported_ops"], nlohmann::json::array());
        if (!fixtures_)
            QSKIP("/usr/bin/python3 with onnx is needed to generate the fixtures");
        const QString file = fixtures_->path() + "/o/unknown_op.onnx";
        r = runCli({"inspect", file, "--json"});
        QCOMPARE(r.exitCode, 0);
        QCOMPARE(nlohmann::json::parse(r.out.toStdString())["unsupported_ops"],
                 nlohmann::json::array({"FancyNewOp", "com.example:Foo"}));
        r = runCli({"inspect", file});
        QVERIFY2(r.out.contains("op types: FancyNewOp 1, MatMul 1, com.example:Foo 1\n"
                                "not run by the runtime: FancyNewOp, com.example:Foo\n"),
                 r.out.constData());
        QVERIFY(r.out.contains("warning: the ONNX checker does not know an op"));
    }

    void inspectErrorsExitOne()
    {
        if (!fixtures_)
            QSKIP("/usr/bin/python3 with numpy and h5py is needed to generate the fixtures");
        const QString root = fixtures_->path();
        for (const char* bad : {"h/truncated.h5", "h/bad_json.h5", "h/missing_weight.h5"})
            expectUserError({"inspect", root + "/" + bad}, root + "/" + bad);
        // Neither bytes nor name say what it is: the error lists the formats.
        expectUserError({"inspect", root + "/h/not_hdf5.h5"}, "supported: ONNX");
        expectUserError({"inspect", root + "/missing.onnx"}, root + "/missing.onnx");
        expectUserError({"inspect", root}, root); // a folder
        // A bad rule file names the rule file, even with a good model.
        const QString rules = root + "/bad_rules.json";
        QFile f(rules);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("{\"version\": 1, \"rules\": [{\"module_path\": \"(\", \"weight_qtype\": \"int8\"}]}");
        f.close();
        expectUserError({"inspect", kDemoModel, "--rules", rules}, rules);
        expectUserError({"inspect", kDemoModel, "--rules", root + "/no_rules.json"}, root + "/no_rules.json");
    }

    void fakeQuantEqualsTheEngine_data()
    {
        QTest::addColumn<QStringList>("options");
        QTest::newRow("int8 absmax per_channel") << QStringList{"--qtype", "int8", "--method", "absmax"};
        QTest::newRow("int8 absmax narrow per_tensor")
            << QStringList{"--qtype", "int8", "--method", "absmax", "--narrow-range", "--granularity", "per_tensor"};
        QTest::newRow("uint8 minmax") << QStringList{"--qtype", "uint8", "--method", "minmax"};
        QTest::newRow("int4 minmax tile 64")
            << QStringList{"--qtype", "int4", "--method", "minmax", "--granularity", "tile", "--tile", "64"};
        QTest::newRow("int4 mse two-sided pow2")
            << QStringList{"--qtype", "int4", "--method", "mse", "--symmetric", "false", "--scale-restriction", "pow2"};
        QTest::newRow("int8 percentile axis -1")
            << QStringList{"--qtype", "int8", "--method", "percentile,99.9", "--axis", "-1"};
        QTest::newRow("nf4 entropy tile")
            << QStringList{"--qtype", "nf4", "--method", "entropy", "--granularity", "tile", "--tile", "0.25"};
        QTest::newRow("fp8 rms fp16 scale")
            << QStringList{"--qtype", "fp8_e4m3", "--method", "rms,3", "--scale-restriction", "fp16"};
        QTest::newRow("ternary fixed") << QStringList{"--qtype", "ternary", "--method", "fixed,-1,1"};
        QTest::newRow("int4 stochastic") << QStringList{"--qtype",    "int4",       "--method", "absmax",
                                                        "--rounding", "stochastic", "--seed",   "42"};
        QTest::newRow("mxfp4") << QStringList{"--qtype", "mxfp4", "--method", "absmax"};
        QTest::newRow("nvfp4") << QStringList{"--qtype", "nvfp4", "--method", "absmax"};
    }

    void fakeQuantEqualsTheEngine()
    {
        QFETCH(QStringList, options);
        QTemporaryDir dir;
        const Tensor x = adversarialWeights(12, 256, 7);
        const QString in = writeTemp(dir, "w.npy", x);
        const QString out = dir.path() + "/fq.npy";
        const Run r = runCli(QStringList{"fake-quant", "--npy", in, "--out", out} + options);
        QVERIFY2(r.exitCode == 0, r.err.constData());
        QVERIFY(r.out.contains("sqnr"));

        // The same through the engine, in process.
        auto option = [&](const QString& name) {
            const qsizetype i = options.indexOf(name);
            return i < 0 ? std::optional<std::string>() : std::optional(options[i + 1].toStdString());
        };
        QuantizationSpec spec;
        spec.qtype = *parseQType(*option("--qtype"));
        spec.method = CalibrationMethod::parse(*option("--method"));
        spec.granularity = option("--granularity") == "per_tensor" ? Granularity::PerTensor : Granularity::PerChannel;
        if (option("--granularity") == "tile")
            spec.tileSize = std::stod(option("--tile").value_or("128"));
        spec.axis = std::stoi(option("--axis").value_or("0"));
        spec.options.narrowRange = options.contains("--narrow-range");
        if (option("--symmetric"))
            spec.symmetric = option("--symmetric") == "true";
        spec.options.restriction = *parseScaleRestriction(option("--scale-restriction").value_or("float"));
        const Rounding rounding = *parseRounding(option("--rounding").value_or("nearest"));
        const uint64_t seed = std::stoull(option("--seed").value_or("0"));
        const TensorQuantization q = computeQuantization(x, spec, in.toStdString());
        const Tensor expected = fakeQuantize(x, q.params, rounding, seed, in.toStdString());

        const Tensor got = readNpy(out.toStdString());
        QCOMPARE(got.dtype(), DType::F32);
        QCOMPARE(got.shape(), x.shape());
        QVERIFY(std::memcmp(got.rawData(), expected.rawData(), expected.nbytes()) == 0);
        // And it did quantize: far fewer distinct values than the input, none NaN.
        QSet<float> distinct;
        for (float v : got.values<float>()) {
            QVERIFY(std::isfinite(v));
            distinct.insert(v);
        }
        QVERIFY(distinct.size() < 12 * 256 / 2);
    }

    void fakeQuantSaysWhatCalibrationCannotDo()
    {
        QTemporaryDir dir;
        std::vector<float> ramp(1000);
        for (size_t k = 0; k < ramp.size(); ++k)
            ramp[k] = float(-1.0 + 2.0 * double(k) / 999.0);
        const QString in = writeTemp(dir, "ramp.npy", Tensor::fromVector<float>(DType::F32, {1000}, ramp));
        const QString out = dir.path() + "/fq.npy";
        const QStringList perTensor{"fake-quant", "--npy", in, "--out", out, "--granularity", "per_tensor"};
        // A pow2 scale rounds 1/127.5 down to 2^-7: 0.998 and 1 saturate (0.2%), which the
        // calibrated range [-1, 1] alone would not show.
        Run r = runCli(perTensor + QStringList{"--qtype", "int8", "--method", "absmax", "--scale-restriction", "pow2"});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        QVERIFY2(r.out.contains("0.2000% clipped"), r.out.constData());
        r = runCli(perTensor + QStringList{"--qtype", "int8", "--method", "absmax"});
        QVERIFY2(r.out.contains("0.0000% clipped"), r.out.constData());
        // An unsigned type under a symmetric method would zero the negative half: refused.
        expectUserError(perTensor + QStringList{"--qtype", "uint4", "--method", "absmax"}, "minmax");
        expectUserError(perTensor + QStringList{"--qtype", "uint4", "--method", "absmax"}, "ramp.npy");
        r = runCli(perTensor + QStringList{"--qtype", "uint4", "--method", "minmax"});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        // compare-methods keeps the asymmetric method and skips the symmetric ones, saying why.
        r = runCli({"compare-methods", "--npy", in, "--qtype", "uint4", "--json"});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        const nlohmann::json methods = nlohmann::json::parse(r.out.toStdString());
        QCOMPARE(methods["skipped"].size(), comparedMethods().size() - 1);
        QVERIFY(methods["skipped"][0]["reason"].get<std::string>().find("negative values into 0") != std::string::npos);
        // Entropy on tiles of 32: too few values for its histogram, said so.
        const QString w = writeTemp(dir, "w.npy", adversarialWeights(12, 256, 7));
        r = runCli({"fake-quant", "--npy", w, "--out", out, "--qtype", "int4", "--method", "entropy", "--granularity",
                    "tile", "--tile", "32"});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        QVERIFY2(r.out.contains("entropy: 96 of 96 groups kept their whole range"), r.out.constData());
    }

    void odmlExportHandlesBiasesSharedThroughIdentity()
    {
        // The PyTorch exporter writes one initializer for equal biases and an Identity
        // per conv reading it (torchvision's resnet18 at opset 13); the ODML export
        // failed on them with "map::at". Two convs here share a bias that way.
        QTemporaryDir dir;
        const QString model = dir.path() + "/shared_bias.onnx", calib = dir.path() + "/calib.npz";
        const char* script = R"(
import sys, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto
rng = np.random.default_rng(0)
w1 = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), 'w1')
w2 = numpy_helper.from_array(rng.standard_normal((4, 4, 3, 3)).astype(np.float32), 'w2')
b = numpy_helper.from_array(np.full(4, 0.1, np.float32), 'shared_bias')
nodes = [helper.make_node('Identity', ['shared_bias'], ['b1'], name='Identity_0'),
         helper.make_node('Identity', ['shared_bias'], ['b2'], name='Identity_1'),
         helper.make_node('Conv', ['x', 'w1', 'b1'], ['c1'], name='/conv1/Conv', pads=[1, 1, 1, 1]),
         helper.make_node('Relu', ['c1'], ['r1'], name='/relu/Relu'),
         helper.make_node('Conv', ['r1', 'w2', 'b2'], ['y'], name='/conv2/Conv', pads=[1, 1, 1, 1])]
g = helper.make_graph(nodes, 'g', [helper.make_tensor_value_info('x', TensorProto.FLOAT, [1, 3, 8, 8])],
                      [helper.make_tensor_value_info('y', TensorProto.FLOAT, [1, 4, 8, 8])], [w1, w2, b])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)]), sys.argv[1])
np.savez(sys.argv[2], x=rng.standard_normal((4, 3, 8, 8)).astype(np.float32))
)";
        if (!runPython({"-c", script, model, calib}))
            QSKIP("/usr/bin/python3 with numpy and onnx is needed to generate the model");
        const QString rules = dir.path() + "/rules.json", odml = dir.path() + "/odml.json";
        {
            QFile f(rules);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write(R"({"version": 1, "rules": [{"weight_qtype": "int8", "act_qtype": "int8"}]})");
        }
        const Run r =
            runCli({"quantize", model, "--rules", rules, "--mode", "odml", "--calib", calib, "--export-odml", odml});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        const nlohmann::json j = nlohmann::json::parse(test::readFile(odml.toStdString()));
        std::map<std::string, std::string> kinds;
        for (const auto& p : j["quantization_points"])
            kinds[p["tensor"].get<std::string>()] = p["kind"].get<std::string>();
        // Each conv's bias is annotated under the name the conv reads.
        QCOMPARE(kinds["b1"], std::string("bias"));
        QCOMPARE(kinds["b2"], std::string("bias"));
        QCOMPARE(kinds["r1"], std::string("activation"));
        QCOMPARE(kinds["y"], std::string("activation"));
        QCOMPARE(kinds.count("c1"), size_t(0)); // the Relu is fused into conv1: c1 is never materialised
    }

    void compareMethodsJson()
    {
        QTemporaryDir dir;
        const Tensor x = adversarialWeights(6, 512, 3);
        const QString in = writeTemp(dir, "w.npy", x);
        struct Case {
            QStringList args;
            int methods, skipped, groups;
        };
        const std::vector<Case> cases{
            {{"--qtype", "int8"}, 7, 0, 6},
            {{"--qtype", "int4", "--granularity", "per_tensor"}, 7, 0, 1},
            {{"--qtype", "fp8_e4m3", "--granularity", "tile", "--tile", "128"}, 6, 1, 24},
            {{"--qtype", "mxfp4"}, 1, 0, 6 * 16},
        };
        for (const Case& c : cases) {
            const Run r = runCli(QStringList{"compare-methods", "--npy", in, "--json"} + c.args);
            QVERIFY2(r.exitCode == 0, r.err.constData());
            QJsonParseError error;
            const QJsonObject root = QJsonDocument::fromJson(r.out, &error).object();
            QVERIFY2(error.error == QJsonParseError::NoError, qPrintable(error.errorString()));
            QCOMPARE(root["file"].toString(), in);
            const QJsonArray methods = root["methods"].toArray();
            QCOMPARE(methods.size(), c.methods);
            QCOMPARE(root["skipped"].toArray().size(), c.skipped);
            double previous = -1;
            for (const QJsonValue& v : methods) {
                const QJsonObject m = v.toObject();
                for (const char* field : {"method", "range", "scales", "mse", "sqnr_db", "fraction_clipped"})
                    QVERIFY2(m.contains(field), field);
                QVERIFY(m["mse"].toDouble() >= previous); // best first
                previous = m["mse"].toDouble();
                const double clipped = m["fraction_clipped"].toDouble();
                QVERIFY(clipped >= 0 && clipped <= 1);
                const int groups = c.groups == 1 ? 1 : int(m["scales"].toArray().size());
                QCOMPARE(groups, c.groups);
                if (c.groups > 1)
                    QCOMPARE(m["range"].toObject()["min"].toArray().size(), c.groups);
                else
                    QVERIFY(m["range"].toObject()["max"].isDouble());
            }
        }
        // The figures are the engine's: the best int8 method and its MSE, exactly.
        QuantizationSpec spec;
        const std::vector<MethodResult> engine = compareMethods(x, spec, in.toStdString());
        const Run r = runCli({"compare-methods", "--npy", in, "--qtype", "int8", "--json"});
        const QJsonObject best = QJsonDocument::fromJson(r.out).object()["methods"].toArray()[0].toObject();
        QCOMPARE(best["method"].toString().toStdString(), engine.front().method);
        QCOMPARE(best["mse"].toDouble(), engine.front().metrics.mse);
        // The table lists the same methods, best first, and notes skipped ones.
        const Run table = runCli({"compare-methods", "--npy", in, "--qtype", "nf4"});
        QCOMPARE(table.exitCode, 0);
        QVERIFY(table.out.contains("skipped minmax"));
        QVERIFY(table.out.contains("SQNR dB"));
    }

    // --algorithms on the demo's fc1 under an int4 rule: every variant's weight SQNR is the one
    // the pipeline gets for that rule, the output figures are the engine's, and gptq's output
    // error is below rtn's.
    void compareMethodsAlgorithms()
    {
        QTemporaryDir dir;
        const std::string rulesFile = (dir.path() + "/r.json").toStdString();
        test::writeFile(rulesFile, R"({"version":1,"rules":[{"weight_qtype":"int4"}]})");
        const QStringList args{"compare-methods",
                               test::kModel,
                               "--tensor",
                               "classifier/fc1",
                               "--algorithms",
                               "--rules",
                               QString::fromStdString(rulesFile),
                               "--calib",
                               test::kCalib};
        const Run r = runCli(args + QStringList{"--json"});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        const nlohmann::json j = nlohmann::json::parse(r.out.toStdString());
        QCOMPARE(j["layer"].get<std::string>(), std::string("classifier/fc1"));
        std::map<std::string, nlohmann::json> byVariant;
        for (const auto& a : j["algorithms"])
            byVariant[a["variant"].get<std::string>()] = a;
        for (const char* v : {"rtn", "rtn + bias_correction", "gptq", "gptq + bias_correction", "awq",
                              "awq + bias_correction", "adaround", "adaround + bias_correction", "lut4",
                              "lut4 + bias_correction"})
            QVERIFY2(byVariant.count(v), v);
        QVERIFY(j["skipped"].empty());

        // The weights the pipeline computes for each variant's rule, on the same calibration.
        auto pipelineSqnr = [](const std::string& rule) {
            Exploration e;
            e.setModel(loadExplorationModel(test::kModel));
            e.setRules(RuleSet::fromJson(R"({"version":1,"rules":[)" + rule + "]}"));
            e.setCalibrationData(test::file(test::kCalib));
            if (e.needsCalibration())
                e.calibrate(KeptHistograms::AsPlanNeeds);
            e.updateWeights();
            for (const auto& [layer, w] : e.weights()->weights())
                if (e.model().layers[layer].modulePath == "classifier/fc1")
                    return w->metrics.sqnrDb;
            throw Error("fc1 not quantized");
        };
        QCOMPARE(byVariant["rtn"]["weight_sqnr_db"].get<double>(), pipelineSqnr(R"({"weight_qtype":"int4"})"));
        QCOMPARE(byVariant["gptq"]["weight_sqnr_db"].get<double>(),
                 pipelineSqnr(R"({"weight_qtype":"int4","algorithm":"gptq"})"));
        QCOMPARE(byVariant["awq"]["weight_sqnr_db"].get<double>(),
                 pipelineSqnr(R"({"weight_qtype":"int4","algorithm":"awq"})"));
        QCOMPARE(byVariant["adaround"]["weight_sqnr_db"].get<double>(),
                 pipelineSqnr(R"({"weight_qtype":"int4","algorithm":"adaround"})"));
        QCOMPARE(byVariant["lut4"]["weight_sqnr_db"].get<double>(), pipelineSqnr(R"({"weight_qtype":"lut4"})"));

        // The output figures are the engine's for the same statistics.
        Exploration e;
        e.setModel(loadExplorationModel(test::kModel));
        const RuleSet rules = RuleSet::fromJson(R"({"version":1,"rules":[{"weight_qtype":"int4"}]})");
        const size_t layer = *e.namedTensor("classifier/fc1").layer;
        e.setRules(rulesReadingInputsOf(e.model(), rules, layer));
        e.setCalibrationData(test::file(test::kCalib));
        e.calibrate(KeptHistograms::AsPlanNeeds);
        const AlgorithmComparison c = compareAlgorithms(e.model(), rules, layer, *e.statistics()->hessians().at(layer));
        QCOMPARE(j["calibration_rows"].get<int64_t>(), c.calibrationRows);
        for (const AlgorithmRow& row : c.rows) {
            QVERIFY2(byVariant.count(row.variant), row.variant.c_str());
            QCOMPARE(byVariant[row.variant]["output_mse"].get<double>(), row.outputMse);
            QCOMPARE(byVariant[row.variant]["output_sqnr_db"].get<double>(), row.outputSqnrDb);
            qInfo("fc1 int4 %-32s weight %.2f dB, output %.2f dB", row.variant.c_str(), row.weight.sqnrDb,
                  row.outputSqnrDb);
        }
        const double rtn = byVariant["rtn"]["output_sqnr_db"].get<double>();
        QVERIFY(byVariant["gptq"]["output_sqnr_db"].get<double>() >= rtn);
        // Bias correction removes the mean of the output error: never more error than without it.
        QVERIFY(byVariant["rtn + bias_correction"]["output_mse"].get<double>() <=
                byVariant["rtn"]["output_mse"].get<double>());

        // The table names every variant; usage errors exit 2.
        const Run table = runCli(args);
        QVERIFY2(table.exitCode == 0, table.err.constData());
        QVERIFY(table.out.contains("output SQNR dB") && table.out.contains("lut4 + bias_correction"));
        QCOMPARE(runCli(args + QStringList{"--qtype", "int8"}).exitCode, 2);
        QCOMPARE(runCli(QStringList{"compare-methods", test::kModel, "--tensor", "classifier/fc1", "--algorithms",
                                    "--rules", QString::fromStdString(rulesFile)})
                     .exitCode,
                 2);
    }

    // The metrics compare-methods prints, against plain loops (quant/metrics.h).
    void metricsMatchScalarReference()
    {
        const Tensor x = adversarialWeights(24, 300, 11);
        const auto xs = x.values<float>();
        std::mt19937 rng(5);
        std::vector<float> q(xs.begin(), xs.end());
        for (float& v : q)
            v += std::uniform_real_distribution<float>(-1e-3f, 1e-3f)(rng);
        double signal = 0, noise = 0, cross = 0, qq = 0, maxAbs = 0;
        for (size_t i = 0; i < xs.size(); ++i) {
            signal += double(xs[i]) * xs[i];
            noise += (double(xs[i]) - q[i]) * (double(xs[i]) - q[i]);
            cross += double(xs[i]) * q[i];
            qq += double(q[i]) * q[i];
            maxAbs = std::max(maxAbs, std::abs(double(xs[i]) - q[i]));
        }
        const ErrorMetrics m = errorMetrics(xs, q);
        QVERIFY(std::abs(m.mse - noise / double(xs.size())) <= 1e-12 * m.mse);
        QVERIFY(std::abs(m.sqnrDb - 10 * std::log10(signal / noise)) < 1e-9);
        QCOMPARE(m.maxAbsError, maxAbs);
        QVERIFY(std::abs(m.cosine - cross / std::sqrt(signal * qq)) < 1e-12);
        QVERIFY(m.cosine < 1.0);
        std::vector<float> negated(xs.begin(), xs.end());
        for (float& v : negated)
            v = -v;
        QVERIFY(std::abs(errorMetrics(xs, negated).cosine + 1.0) < 1e-12);
        const std::vector<float> zeros(xs.size(), 0.0f);
        QCOMPARE(errorMetrics(xs, zeros).cosine, 0.0);
        QCOMPARE(errorMetrics(zeros, zeros).cosine, 1.0);
        QVERIFY(std::isinf(errorMetrics(xs, xs).sqnrDb) && errorMetrics(xs, xs).sqnrDb > 0);
        QCOMPARE(errorMetrics(xs, xs).mse, 0.0);

        // Clipping over a tiled layout with random ranges: count with groupOf, element by element.
        const BlockLayout layout = BlockLayout::tiled(x.shape(), 0, 1, 64);
        std::vector<Range> ranges(size_t(layout.groupCount()));
        for (Range& r : ranges) {
            const float a = std::uniform_real_distribution<float>(0.f, 2.f)(rng);
            r = {-a, a * 0.5f};
        }
        int64_t clipped = 0;
        for (size_t i = 0; i < xs.size(); ++i) {
            const Range r = ranges[size_t(layout.groupOf(int64_t(i)))];
            clipped += xs[i] < r.min || xs[i] > r.max;
        }
        QVERIFY(clipped > 0);
        QCOMPARE(fractionClipped(xs, layout, ranges), double(clipped) / double(xs.size()));

        // Independent of the thread count, to the last bit.
        const Tensor big = adversarialWeights(64, 4096, 12);
        std::vector<float> bigQ(big.values<float>().begin(), big.values<float>().end());
        for (float& v : bigQ)
            v *= 1.001f;
        const ErrorMetrics parallel = errorMetrics(big.values<float>(), bigQ);
        tbb::global_control one(tbb::global_control::max_allowed_parallelism, 1);
        const ErrorMetrics serial = errorMetrics(big.values<float>(), bigQ);
        QCOMPARE(parallel.mse, serial.mse);
        QCOMPARE(parallel.sqnrDb, serial.sqnrDb);
    }

    void benchJson()
    {
        const Run r = runCli({"bench", "--size", "65536", "--threads", "2", "--json"});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        QVERIFY(r.err.isEmpty()); // no progress when stderr is not a terminal
        const QJsonObject root = QJsonDocument::fromJson(r.out).object();
        QCOMPARE(root["elements"].toInteger(), 65536);
        QCOMPARE(root["threads"].toInteger(), 2);
        const QStringList expected{"copy",
                                   "absmax_per_channel",
                                   "minmax_per_channel",
                                   "percentile",
                                   "histogram_2048",
                                   "fake_quant_int8_per_channel",
                                   "fake_quant_int4_tile128",
                                   "fake_quant_nf4",
                                   "fake_quant_fp8_e4m3"};
        const QJsonArray results = root["results"].toArray();
        QCOMPARE(results.size(), expected.size());
        for (qsizetype i = 0; i < results.size(); ++i) {
            const QJsonObject o = results[i].toObject();
            QCOMPARE(o["name"].toString(), expected[i]);
            for (const char* field : {"seconds", "gbps", "ratio_to_copy"})
                QVERIFY2(o[field].toDouble() > 0, field);
        }
        QCOMPARE(results[0].toObject()["ratio_to_copy"].toDouble(), 1.0);
    }
};

QTEST_APPLESS_MAIN(TestCli)
#include "tst_cli.moc"
