// Hugging Face folders (io/hf_folder.h) against the torch reference of the LLM fixtures
// (tests/llm/make_llama.py, generated into the build tree by the CTest fixture `llm_fixtures`):
// every folder's float logits within 1e-4 relative L2 of the reference's and its perplexity equal
// to 4 digits; the tied head shares the embedding's quantizer; Mistral's sliding window checked by
// the translation invariance of rotary attention; `quantscope-cli quantize DIR` reports perplexity;
// and a hostile or unsupported config.json or checkpoint gets one clear error naming the field or
// tensor (or, for another architecture, a weights-only model with a warning).
#include <QtTest>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "core/sha256.h"
#include "io/hf_folder.h"
#include "io/model_loader.h"
#include "io/npy.h"
#include "io/text_data_source.h"
#include "io/safetensors.h"
#include "runtime/interpreter.h"
#include "session/evaluation.h"

using namespace qs;
namespace fs = std::filesystem;

namespace {

const fs::path kDir = QUANTSCOPE_LLM_DIR;

double relativeL2(const Tensor& a, const Tensor& b)
{
    const auto x = a.values<float>(), y = b.values<float>();
    double diff = 0, norm = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        diff += (double(x[i]) - double(y[i])) * (double(x[i]) - double(y[i]));
        norm += double(y[i]) * double(y[i]);
    }
    return std::sqrt(diff / norm);
}

QJsonObject readJson(const fs::path& path)
{
    QFile f(QString::fromStdString(path.string()));
    if (!f.open(QIODevice::ReadOnly))
        return {};
    return QJsonDocument::fromJson(f.readAll()).object();
}

void writeText(const fs::path& path, const std::string& text)
{
    std::ofstream(path, std::ios::binary) << text;
}

void writeJson(const fs::path& path, const QJsonObject& json)
{
    writeText(path, QJsonDocument(json).toJson().toStdString());
}

// A copy of the llama_f32 folder (config.json, the weights) in `dir`, its config edited by `edit`.
fs::path editedFolder(const QTemporaryDir& dir, const std::function<void(QJsonObject&)>& edit)
{
    const fs::path folder = fs::path(dir.path().toStdString()) / "model";
    fs::create_directories(folder);
    fs::copy_file(kDir / "llama_f32" / "model.safetensors", folder / "model.safetensors",
                  fs::copy_options::overwrite_existing);
    QJsonObject config = readJson(kDir / "llama_f32" / "config.json");
    edit(config);
    writeJson(folder / "config.json", config);
    return folder;
}

Tensor logitsOf(const Model& model, const Tensor& ids)
{
    const Interpreter interpreter{Model(model)};
    return interpreter.run({{"input_ids", ids}}).at("logits");
}

// The error loadModel() gives for `folder`, or "" when it loads.
QString loadError(const fs::path& folder)
{
    try {
        loadModel(folder);
    } catch (const Error& e) {
        return QString::fromStdString(e.what());
    }
    return {};
}

} // namespace

class TestHfFolder : public QObject {
    Q_OBJECT

private slots:
    void logitsAndPerplexityMatchTorch_data()
    {
        QTest::addColumn<QString>("folder");
        for (const char* f : {"llama_f32", "llama_bf16", "llama_tied_ropescaled", "qwen2_f32"})
            QTest::newRow(f) << f;
    }

    void logitsAndPerplexityMatchTorch()
    {
        QFETCH(QString, folder);
        const fs::path dir = kDir / folder.toStdString();
        const Model model = loadModel(dir);
        QCOMPARE(model.format, std::string("huggingface"));
        QVERIFY(causalLanguageModel(model).has_value());
        const Tensor ids = readNpy(dir / "reference" / "eval_ids.npy");
        const Tensor reference = readNpy(dir / "reference" / "logits.npy");
        const Tensor logits = logitsOf(model, ids);
        QCOMPARE(logits.shape(), reference.shape());
        const double error = relativeL2(logits, reference);
        qInfo("%s: logits relative L2 %.3g", qPrintable(folder), error);
        QVERIFY2(error <= 1e-4, qPrintable(QString::number(error)));

        NextTokenLoss loss;
        loss.add(logits, ids, "logits", "eval_ids");
        const QJsonObject expected = readJson(dir / "reference" / "perplexity.json");
        QCOMPARE(loss.tokens, int64_t(expected["tokens"].toInteger()));
        const double ppl = loss.perplexity(), ref = expected["perplexity"].toDouble();
        qInfo("%s: perplexity %.6f, torch %.6f", qPrintable(folder), ppl, ref);
        QVERIFY2(std::abs(ppl / ref - 1.0) < 5e-5, qPrintable(QString::number(ppl) + " vs " + QString::number(ref)));
    }

    void layersCarryTheCheckpointNames()
    {
        const Model untied = loadModel(kDir / "llama_f32");
        QCOMPARE(untied.layers.size(), size_t(2 + 7 * 2));
        QCOMPARE(untied.layers.front().modulePath, std::string("model/embed_tokens"));
        QCOMPARE(untied.layers[1].modulePath, std::string("model/layers/0/self_attn/q_proj"));
        QCOMPARE(untied.layers[1].weightName, std::string("model.layers.0.self_attn.q_proj.weight"));
        QCOMPARE(untied.layers.back().modulePath, std::string("lm_head"));
        QVERIFY(!untied.layers.back().sharesWeightOf);

        // Tied: the head reads the embedding table, one quantizer for both.
        const Model tied = loadModel(kDir / "llama_tied_ropescaled");
        QCOMPARE(tied.layers.back().modulePath, std::string("lm_head"));
        QCOMPARE(tied.layers.back().weightName, std::string("model.embed_tokens.weight"));
        QCOMPARE(tied.layers.back().sharesWeightOf, std::optional<size_t>(0));

        // bf16 weights stay bf16 (borrowed), the graph still computes in float32.
        const Model bf16 = loadModel(kDir / "llama_bf16" );
        QCOMPARE(bf16.layers[1].weightDType, DType::BF16);
        QVERIFY(bf16.widenHalfInitializers);
    }

    // With a window of w, after L layers the last position sees at most L * (w - 1) tokens back; rotary
    // attention depends on relative positions only, so the last L * (w - 1) + 1 tokens alone give the
    // same last logits. A window one larger would need one more token per layer.
    void slidingWindowLimitsAttention()
    {
        QTemporaryDir dir;
        const int64_t window = 8;
        const fs::path folder = editedFolder(dir, [&](QJsonObject& c) {
            c["architectures"] = QJsonArray{"MistralForCausalLM"};
            c["model_type"] = "mistral";
            c["sliding_window"] = qint64(window);
        });
        const Model mistral = loadModel(folder);
        const Tensor ids = readNpy(kDir / "llama_f32" / "reference" / "eval_ids.npy");
        const int64_t T = ids.dim(1), span = 2 * (window - 1) + 1;
        const Tensor full = logitsOf(mistral, ids);
        Tensor tail(DType::I64, {ids.dim(0), span});
        for (int64_t r = 0; r < ids.dim(0); ++r)
            for (int64_t t = 0; t < span; ++t)
                tail.mutableValues<int64_t>()[size_t(r * span + t)] = ids.values<int64_t>()[size_t(r * T + T - span + t)];
        const Tensor part = logitsOf(mistral, tail);
        const int64_t V = full.dim(2);
        double diff = 0, norm = 0;
        for (int64_t r = 0; r < ids.dim(0); ++r)
            for (int64_t v = 0; v < V; ++v) {
                const double a = full.values<float>()[size_t((r * T + T - 1) * V + v)];
                const double b = part.values<float>()[size_t((r * span + span - 1) * V + v)];
                diff += (a - b) * (a - b);
                norm += a * a;
            }
        QVERIFY2(std::sqrt(diff / norm) < 1e-5, qPrintable(QString::number(std::sqrt(diff / norm))));
        // Without the window the same tail does not give the full row's logits.
        const Model llama = loadModel(kDir / "llama_f32");
        const Tensor unwindowed = logitsOf(llama, ids);
        double moved = 0;
        for (int64_t v = 0; v < V; ++v) {
            const double a = unwindowed.values<float>()[size_t((T - 1) * V + v)];
            const double b = full.values<float>()[size_t((T - 1) * V + v)];
            moved += (a - b) * (a - b);
        }
        QVERIFY(std::sqrt(moved / norm) > 1e-3);
    }

    void cliQuantizeReportsPerplexity()
    {
        QTemporaryDir dir;
        const QString rules = dir.filePath("int4.json");
        writeText(rules.toStdString(), R"({"version": 1, "rules": [{"module_path": "model/layers/.*|lm_head",
            "weight_qtype": "int4", "granularity": "per_channel"}]})");
        const QString ids = QString::fromStdString((kDir / "llama_f32" / "reference" / "eval_ids.npy").string());
        const QString report = dir.filePath("report.json");
        QProcess cli;
        cli.start(QUANTSCOPE_CLI, {"quantize", QString::fromStdString((kDir / "llama_f32").string()), "--rules", rules,
                                   "--eval", ids, "--report", report});
        QVERIFY(cli.waitForFinished(120000));
        const QString out = cli.readAllStandardOutput();
        QVERIFY2(cli.exitCode() == 0, qPrintable(cli.readAllStandardError()));
        QVERIFY2(out.contains("perplexity: float 44.93"), qPrintable(out));
        const QJsonObject r = readJson(report.toStdString());
        const QJsonObject p = r["perplexity"].toObject();
        const double ref = readJson(kDir / "llama_f32" / "reference" / "perplexity.json")["perplexity"].toDouble();
        QVERIFY(std::abs(p["float"].toDouble() / ref - 1.0) < 5e-5);
        QVERIFY(p["quantized"].toDouble() > p["float"].toDouble());
        QCOMPARE(p["tokens"].toInt(), 252);
    }

    // Text through the folder's tokenizer.json: rows of BOS + sequence - 1 tokens. eval_ids are the first N * T
    // tokens of eval.txt's encoding, so rows of T + 1 hold exactly them after BOS.
    void textDataIsTokenizedIntoRows()
    {
        const fs::path dir = kDir / "llama_f32";
        const Model model = loadModel(dir);
        const Tensor ids = readNpy(dir / "reference" / "eval_ids.npy");
        const int64_t T = ids.dim(1);
        DataSourceOptions options;
        options.sequenceLength = T + 1;
        options.batchSize = 2;
        const std::unique_ptr<DataSource> data = openDataSource(dir / "reference" / "eval.txt", options, &model);
        QVERIFY(data->rowCount() >= ids.dim(0));
        const QJsonObject config = readJson(dir / "config.json");
        int64_t row = 0;
        while (std::optional<Batch> batch = data->next()) {
            const Tensor& t = batch->inputs.at("input_ids");
            QCOMPARE(t.shape(), Shape({batch->rows, T + 1}));
            for (int64_t r = 0; r < batch->rows && row < ids.dim(0); ++r, ++row) {
                QCOMPARE(t.values<int64_t>()[size_t(r * (T + 1))], int64_t(config["bos_token_id"].toInteger()));
                for (int64_t i = 0; i < T; ++i)
                    QCOMPARE(t.values<int64_t>()[size_t(r * (T + 1) + 1 + i)], ids.values<int64_t>()[size_t(row * T + i)]);
            }
        }
        QCOMPARE(row, ids.dim(0));

        // Errors name the file: a sequence longer than the text, a model that is no language model, a folder
        // without tokenizer.json.
        auto errorOf = [](const fs::path& file, const DataSourceOptions& o, const Model* m) {
            try {
                openDataSource(file, o, m);
            } catch (const Error& e) {
                return QString::fromStdString(e.what());
            }
            return QString();
        };
        options.sequenceLength = 100000;
        QVERIFY(errorOf(dir / "reference" / "eval.txt", options, &model).contains("fewer than one sequence"));
        options.sequenceLength = 0;
        const Model digits = loadModel(QUANTSCOPE_TEST_DATA "/../../resources/demo/digits/digits_cnn.onnx");
        QVERIFY(errorOf(dir / "reference" / "eval.txt", options, &digits).contains("is not one"));
        QTemporaryDir tmp;
        const fs::path bare = editedFolder(tmp, [](QJsonObject&) {});
        const Model noTokenizer = loadModel(bare);
        QVERIFY(errorOf(dir / "reference" / "eval.txt", options, &noTokenizer).contains("has none"));
    }

    // A folder's digest: its json files and each shard's header and size; the same for a copy, different when
    // the config changes.
    void folderDigestCoversConfigAndLayout()
    {
        QTemporaryDir a, b;
        const fs::path one = editedFolder(a, [](QJsonObject&) {});
        const fs::path two = editedFolder(b, [](QJsonObject&) {});
        const std::string digest = sha256OfModel(one);
        QCOMPARE(digest.size(), size_t(64));
        QCOMPARE(sha256OfModel(two), digest);
        writeJson(two / "config.json", readJson(kDir / "llama_tied_ropescaled" / "config.json"));
        QVERIFY(sha256OfModel(two) != digest);
    }

    void otherArchitecturesOpenAsWeights()
    {
        QTemporaryDir dir;
        const fs::path folder = editedFolder(dir, [](QJsonObject& c) {
            c["architectures"] = QJsonArray{"GPTNeoXForCausalLM"};
        });
        const Model model = loadModel(folder);
        QVERIFY(model.weightsOnly);
        QVERIFY(!model.layers.empty());
        QCOMPARE(model.warnings.size(), size_t(1));
        QVERIFY(QString::fromStdString(model.warnings[0]).contains("GPTNeoXForCausalLM"));
        QVERIFY(QString::fromStdString(model.warnings[0]).contains("weights only"));
    }

    void hostileConfigsNameTheField_data()
    {
        QTest::addColumn<QString>("field");
        QTest::addColumn<QVariant>("value"); // an invalid QVariant removes the field
        QTest::addColumn<QString>("expected");
        QTest::newRow("missing hidden_size") << "hidden_size" << QVariant() << "\"hidden_size\" is missing";
        QTest::newRow("string layers") << "num_hidden_layers" << QVariant("2") << "\"num_hidden_layers\" must be an integer";
        QTest::newRow("negative vocab") << "vocab_size" << QVariant(-5) << "\"vocab_size\" must be at least 1";
        QTest::newRow("huge hidden") << "hidden_size" << QVariant(qint64(1) << 40) << "\"hidden_size\" is larger than";
        QTest::newRow("kv heads") << "num_key_value_heads" << QVariant(3) << "must divide num_attention_heads";
        QTest::newRow("odd head_dim") << "head_dim" << QVariant(15) << "must be even";
        QTest::newRow("gelu") << "hidden_act" << QVariant("gelu") << "\"hidden_act\" \"gelu\" is not supported";
        QTest::newRow("nan eps") << "rms_norm_eps" << QVariant("x") << "\"rms_norm_eps\" must be a number";
        QTest::newRow("yarn") << "rope_scaling" << QVariant(QJsonObject{{"rope_type", "yarn"}, {"factor", 4}})
                              << "\"rope_scaling.rope_type\" \"yarn\" is not supported";
        QTest::newRow("llama3 without factors")
            << "rope_scaling" << QVariant(QJsonObject{{"rope_type", "llama3"}, {"factor", 8}})
            << "\"rope_scaling.low_freq_factor\" is missing";
        QTest::newRow("architectures not a list") << "architectures" << QVariant("LlamaForCausalLM")
                                                  << "\"architectures\" must be a non-empty array";
        // Shapes the checkpoint does not have.
        QTest::newRow("wrong intermediate") << "intermediate_size" << QVariant(100)
                                            << "tensor \"model.layers.0.mlp.gate_proj.weight\" has shape [176, 64], "
                                               "config.json implies [100, 64]";
        QTest::newRow("more layers") << "num_hidden_layers" << QVariant(3)
                                     << "tensor \"model.layers.2.input_layernorm.weight\" is missing";
    }

    void hostileConfigsNameTheField()
    {
        QFETCH(QString, field);
        QFETCH(QVariant, value);
        QFETCH(QString, expected);
        QTemporaryDir dir;
        const fs::path folder = editedFolder(dir, [&](QJsonObject& c) {
            if (value.isValid())
                c[field] = QJsonValue::fromVariant(value);
            else
                c.remove(field);
        });
        const QString error = loadError(folder);
        QVERIFY2(error.contains(expected), qPrintable(error));
        QVERIFY2(error.contains(folder.string().c_str()), qPrintable(error));
    }

    void brokenFoldersAreClearErrors()
    {
        QTemporaryDir dir;
        const fs::path root(dir.path().toStdString());
        // Not JSON, not an object, too large.
        fs::create_directories(root / "a");
        writeText(root / "a" / "config.json", "{\"vocab_size\": 5,");
        QVERIFY(loadError(root / "a").contains("config.json: not valid JSON"));
        writeText(root / "a" / "config.json", "[1, 2]");
        QVERIFY(loadError(root / "a").contains("config.json: must be a JSON object"));
        writeText(root / "a" / "config.json", std::string(kMaxHfConfigBytes + 1, ' '));
        QVERIFY(loadError(root / "a").contains("larger than a config.json can be"));
        // A config without weights.
        writeJson(root / "a" / "config.json", readJson(kDir / "llama_f32" / "config.json"));
        QVERIFY2(loadError(root / "a").contains("neither model.safetensors nor model.safetensors.index.json"),
                 qPrintable(loadError(root / "a")));
        // A folder without config.json.
        fs::create_directories(root / "b");
        QVERIFY(loadError(root / "b").contains("is a folder without a config.json"));
    }
};

QTEST_GUILESS_MAIN(TestHfFolder)
#include "tst_hf_folder.moc"
