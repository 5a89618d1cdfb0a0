// The language-model fixtures of issue 21 (tests/llm/make_llama.py, generated into the
// build tree by the target `llm_fixtures`, which the CTest fixture of that name builds): each Hugging Face folder opens
// with our safetensors reader, holds exactly the tensors its config.json implies with those shapes and dtype, the
// sharded index names only tensors of its shards, the bf16 folder holds the f32 weights rounded to nearest-even, and
// tokenizer.json is a byte-level BPE whose ids agree with config.json. The torch reference is checked where it can be
// recomputed here: eval_ids decode (through tokenizer.json) to the start of eval.txt, hidden_states[0] is the embedding
// of eval_ids, the logits are the final RMSNorm of the last hidden state times lm_head (or the tied embedding), and
// perplexity.json is the next-token NLL of logits.npy.
#include <QtTest>

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "io/npy.h"
#include "io/safetensors.h"

using namespace qs;
namespace fs = std::filesystem;

namespace {

const fs::path kDir = QUANTSCOPE_LLM_DIR;

QJsonObject readJson(const fs::path& path)
{
    QFile f(QString::fromStdString(path.string()));
    if (!f.open(QIODevice::ReadOnly))
        return {};
    QJsonParseError error;
    const QJsonDocument doc = QJsonDocument::fromJson(f.readAll(), &error);
    return error.error == QJsonParseError::NoError ? doc.object() : QJsonObject{};
}

struct Config {
    QJsonObject json;
    QString modelType;
    int64_t hidden = 0, intermediate = 0, layers = 0, heads = 0, kvHeads = 0, headDim = 0, vocab = 0;
    bool tied = false;
    double eps = 0;
};

Config readConfig(const fs::path& folder)
{
    Config c;
    c.json = readJson(folder / "config.json");
    c.modelType = c.json["model_type"].toString();
    c.hidden = c.json["hidden_size"].toInteger();
    c.intermediate = c.json["intermediate_size"].toInteger();
    c.layers = c.json["num_hidden_layers"].toInteger();
    c.heads = c.json["num_attention_heads"].toInteger();
    c.kvHeads = c.json["num_key_value_heads"].toInteger();
    c.headDim = c.json.contains("head_dim") ? c.json["head_dim"].toInteger() : c.hidden / std::max<int64_t>(c.heads, 1);
    c.vocab = c.json["vocab_size"].toInteger();
    c.tied = c.json["tie_word_embeddings"].toBool();
    c.eps = c.json["rms_norm_eps"].toDouble();
    return c;
}

// What a Llama-family checkpoint with this config holds, derived here from the
// architecture (Hugging Face's names, Linear weights [out, in]).
std::map<std::string, Shape> expectedTensors(const Config& c)
{
    const bool bias = c.modelType == QLatin1String("qwen2") || c.json["attention_bias"].toBool();
    std::map<std::string, Shape> t;
    t["model.embed_tokens.weight"] = {c.vocab, c.hidden};
    t["model.norm.weight"] = {c.hidden};
    if (!c.tied)
        t["lm_head.weight"] = {c.vocab, c.hidden};
    for (int64_t l = 0; l < c.layers; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        t[p + "self_attn.q_proj.weight"] = {c.heads * c.headDim, c.hidden};
        t[p + "self_attn.k_proj.weight"] = {c.kvHeads * c.headDim, c.hidden};
        t[p + "self_attn.v_proj.weight"] = {c.kvHeads * c.headDim, c.hidden};
        t[p + "self_attn.o_proj.weight"] = {c.hidden, c.heads * c.headDim};
        if (bias) {
            t[p + "self_attn.q_proj.bias"] = {c.heads * c.headDim};
            t[p + "self_attn.k_proj.bias"] = {c.kvHeads * c.headDim};
            t[p + "self_attn.v_proj.bias"] = {c.kvHeads * c.headDim};
        }
        t[p + "mlp.gate_proj.weight"] = {c.intermediate, c.hidden};
        t[p + "mlp.up_proj.weight"] = {c.intermediate, c.hidden};
        t[p + "mlp.down_proj.weight"] = {c.hidden, c.intermediate};
        t[p + "input_layernorm.weight"] = {c.hidden};
        t[p + "post_attention_layernorm.weight"] = {c.hidden};
    }
    return t;
}

SafetensorsFile openCheckpoint(const fs::path& folder)
{
    const fs::path index = folder / "model.safetensors.index.json";
    return SafetensorsFile::open(fs::exists(index) ? index : folder / "model.safetensors");
}

// GPT-2's byte -> character table of byte-level BPE, written out from its definition:
// printable Latin-1 bytes stand for themselves, the others get 256, 257, ... in order.
std::map<char32_t, uint8_t> byteLevelAlphabet()
{
    std::map<char32_t, uint8_t> table;
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
        const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        table[printable ? char32_t(b) : next++] = uint8_t(b);
    }
    return table;
}

// float32 -> bfloat16 bits, round to nearest even (the input has no NaN).
uint16_t bf16Bits(float v)
{
    const uint32_t u = std::bit_cast<uint32_t>(v);
    return uint16_t((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

double relativeL2(std::span<const float> got, const std::vector<double>& want)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
        den += want[i] * want[i];
    }
    return std::sqrt(num / den);
}

} // namespace

class TestLlmFixture : public QObject {
    Q_OBJECT
private slots:
    void initTestCase()
    {
        QVERIFY2(fs::exists(kDir / "llm_fixture.json"),
                 "no LLM fixtures in " QUANTSCOPE_LLM_DIR ": build the target llm_fixtures (ctest runs it as the "
                 "fixture of the same name)");
    }

    void folder_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<QString>("architecture");
        QTest::addColumn<QString>("dtype");
        for (const char* n : {"llama_f32", "llama_bf16", "llama_tied_ropescaled", "qwen2_f32"}) {
            const QString name = QString::fromLatin1(n);
            QTest::newRow(n) << name
                             << (name.startsWith("qwen2") ? QStringLiteral("Qwen2ForCausalLM")
                                                          : QStringLiteral("LlamaForCausalLM"))
                             << (name.endsWith("bf16") ? QStringLiteral("bfloat16") : QStringLiteral("float32"));
        }
    }

    // config.json as transformers writes it, and a checkpoint that holds exactly what it implies.
    void folder()
    {
        QFETCH(QString, name);
        QFETCH(QString, architecture);
        QFETCH(QString, dtype);
        const fs::path folder = kDir / name.toStdString();
        const Config c = readConfig(folder);
        QVERIFY2(!c.json.isEmpty(), qPrintable(name + ": no config.json"));
        QCOMPARE(c.json["architectures"].toArray().size(), 1);
        QCOMPARE(c.json["architectures"].toArray().at(0).toString(), architecture);
        QCOMPARE(c.modelType, architecture.startsWith("Qwen2") ? QStringLiteral("qwen2") : QStringLiteral("llama"));
        QCOMPARE(c.json["torch_dtype"].toString(), dtype);
        QCOMPARE(c.json["hidden_act"].toString(), QStringLiteral("silu"));
        QVERIFY(c.hidden > 0 && c.layers > 0 && c.vocab > 256);
        QVERIFY(c.kvHeads > 0 && c.kvHeads < c.heads && c.heads % c.kvHeads == 0); // grouped-query attention
        QVERIFY(c.eps > 0 && c.json["rope_theta"].toDouble() > 0);
        QCOMPARE(c.tied, name.contains("tied"));
        if (c.modelType == QLatin1String("qwen2")) {
            QVERIFY(!c.json.contains("head_dim")); // Qwen2's config derives it
        } else {
            QCOMPARE(c.json["attention_bias"].toBool(true), false);
            QCOMPARE(c.headDim * c.heads, c.hidden);
        }
        if (name.contains("ropescaled")) {
            const QJsonObject s = c.json["rope_scaling"].toObject();
            QCOMPARE(s["rope_type"].toString(), QStringLiteral("llama3"));
            for (const char* k : {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"})
                QVERIFY2(s[k].toDouble() > 0, k);
        } else {
            QVERIFY(c.json["rope_scaling"].isNull());
        }
        const QJsonObject gen = readJson(folder / "generation_config.json");
        QCOMPARE(gen["bos_token_id"].toInteger(), c.json["bos_token_id"].toInteger());
        QCOMPARE(gen["eos_token_id"].toInteger(), c.json["eos_token_id"].toInteger());

        const SafetensorsFile ckpt = openCheckpoint(folder);
        const std::map<std::string, Shape> want = expectedTensors(c);
        QCOMPARE(ckpt.entries().size(), want.size());
        const DType storage = dtype == QLatin1String("bfloat16") ? DType::BF16 : DType::F32;
        for (const auto& [tensorName, shape] : want) {
            const SafetensorsEntry* e = ckpt.find(tensorName);
            QVERIFY2(e, (name.toStdString() + ": no tensor " + tensorName).c_str());
            QVERIFY2(e->shape == shape, tensorName.c_str());
            QCOMPARE(e->dtype, storage);
            const Tensor t = ckpt.tensor(*e);
            QCOMPARE(t.nbytes(), size_t(e->end - e->begin));
            const Tensor wide = t.toFloat32();
            for (float v : wide.values<float>())
                QVERIFY2(std::isfinite(v), tensorName.c_str());
        }
        for (size_t f = 0; f < ckpt.files().size(); ++f)
            QCOMPARE(QString::fromStdString(ckpt.fileMetadata(f).at("format")), QStringLiteral("pt"));
    }

    // The bf16 folder: two shards named as transformers names them, an index that maps
    // every tensor to the shard holding it, total_size the tensors' bytes, and every
    // weight the f32 folder's rounded to nearest-even.
    void bf16Shards()
    {
        const fs::path folder = kDir / "llama_bf16";
        const QJsonObject index = readJson(folder / "model.safetensors.index.json");
        const QJsonObject map = index["weight_map"].toObject();
        QVERIFY(!map.isEmpty());
        std::set<QString> files;
        for (auto it = map.begin(); it != map.end(); ++it)
            files.insert(it.value().toString());
        QVERIFY(files == (std::set<QString>{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}));

        uint64_t total = 0;
        const SafetensorsFile sharded = SafetensorsFile::open(folder / "model.safetensors.index.json");
        QVERIFY(sharded.isSharded());
        QCOMPARE(sharded.files().size(), size_t(2));
        QCOMPARE(sharded.entries().size(), size_t(map.size()));
        for (const SafetensorsEntry& e : sharded.entries()) {
            const QString mapped = map[QString::fromStdString(e.name)].toString();
            QCOMPARE(QString::fromStdString(sharded.files()[e.file].filename().string()), mapped);
            // The shard itself, opened alone, holds the tensor.
            QVERIFY(SafetensorsFile::open(folder / mapped.toStdString()).find(e.name));
            total += e.end - e.begin;
        }
        QCOMPARE(uint64_t(index["metadata"].toObject()["total_size"].toInteger()), total);

        const SafetensorsFile f32 = SafetensorsFile::open(kDir / "llama_f32" / "model.safetensors");
        QCOMPARE(f32.entries().size(), sharded.entries().size());
        for (const SafetensorsEntry& e : f32.entries()) {
            const Tensor wideTensor = f32.tensor(e);
            const auto wide = wideTensor.values<float>();
            const Tensor narrow = sharded.tensor(e.name);
            QCOMPARE(narrow.dtype(), DType::BF16);
            const auto bits = narrow.values<uint16_t>();
            QCOMPARE(bits.size(), wide.size());
            for (size_t i = 0; i < bits.size(); ++i)
                QVERIFY2(bits[i] == bf16Bits(wide[i]), e.name.c_str());
        }
    }

    // tokenizer.json: a byte-level BPE over GPT-2's 256-character alphabet, the special
    // tokens as added tokens with config.json's ids, vocab + added = vocab_size.
    void tokenizer_data() { folder_data(); }
    void tokenizer()
    {
        QFETCH(QString, name);
        const fs::path folder = kDir / name.toStdString();
        const Config c = readConfig(folder);
        const QJsonObject tok = readJson(folder / "tokenizer.json");
        const QJsonObject model = tok["model"].toObject();
        QCOMPARE(model["type"].toString(), QStringLiteral("BPE"));
        QCOMPARE(tok["pre_tokenizer"].toObject()["type"].toString(), QStringLiteral("ByteLevel"));
        QCOMPARE(tok["decoder"].toObject()["type"].toString(), QStringLiteral("ByteLevel"));
        const QJsonObject vocab = model["vocab"].toObject();
        const QJsonArray added = tok["added_tokens"].toArray();
        QCOMPARE(int64_t(vocab.size() + added.size()), c.vocab);
        std::set<int64_t> ids;
        for (auto it = vocab.begin(); it != vocab.end(); ++it)
            ids.insert(it.value().toInteger());
        std::map<QString, int64_t> special;
        for (const QJsonValue& a : added) {
            QVERIFY(a["special"].toBool());
            special[a["content"].toString()] = a["id"].toInteger();
            ids.insert(a["id"].toInteger());
        }
        QCOMPARE(int64_t(ids.size()), c.vocab); // every id once
        QCOMPARE(*ids.begin(), int64_t(0));
        QCOMPARE(*ids.rbegin(), c.vocab - 1);
        QCOMPARE(special.at("<|begin_of_text|>"), c.json["bos_token_id"].toInteger());
        QCOMPARE(special.at("<|end_of_text|>"), c.json["eos_token_id"].toInteger());
        for (const auto& [ch, byte] : byteLevelAlphabet()) {
            Q_UNUSED(byte);
            QVERIFY2(vocab.contains(QString::fromUcs4(&ch, 1)), "a byte of the alphabet is missing");
        }
        const QJsonArray merges = model["merges"].toArray();
        QCOMPARE(int64_t(merges.size()), c.vocab - 256 - int64_t(added.size()));
        for (const QJsonValue& m : merges) {
            const QJsonArray pair = m.toArray();
            QCOMPARE(pair.size(), 2);
            QVERIFY(vocab.contains(pair[0].toString()) && vocab.contains(pair[1].toString()));
            QVERIFY(vocab.contains(pair[0].toString() + pair[1].toString()));
        }
    }

    // reference/: shapes, the text behind eval_ids, perplexity.json from logits.npy, and
    // the two ends of the forward pass recomputed here from the checkpoint.
    void reference_data() { folder_data(); }
    void reference()
    {
        QFETCH(QString, name);
        const fs::path folder = kDir / name.toStdString();
        const fs::path ref = folder / "reference";
        const Config c = readConfig(folder);
        const Tensor ids = readNpy(ref / "eval_ids.npy");
        QCOMPARE(ids.dtype(), DType::I64);
        QCOMPARE(ids.rank(), 2);
        const int64_t n = ids.dim(0), t = ids.dim(1);
        QVERIFY(n >= 2 && t >= 32);
        const auto idv = ids.values<int64_t>();
        const QJsonObject tokModel = readJson(folder / "tokenizer.json")["model"].toObject();
        const int64_t ordinary = 256 + int64_t(tokModel["merges"].toArray().size()); // ids below the special tokens
        for (int64_t id : idv)
            QVERIFY(id >= 0 && id < ordinary);

        // eval_ids, decoded through tokenizer.json's vocabulary and the byte alphabet, are the
        // start of eval.txt (rows follow each other).
        {
            const QJsonObject vocab = tokModel["vocab"].toObject();
            std::map<int64_t, QString> byId;
            for (auto it = vocab.begin(); it != vocab.end(); ++it)
                byId[it.value().toInteger()] = it.key();
            const auto alphabet = byteLevelAlphabet();
            std::string decoded;
            for (int64_t id : idv)
                for (char32_t ch : byId.at(id).toUcs4())
                    decoded.push_back(char(alphabet.at(ch)));
            QFile text(QString::fromStdString((ref / "eval.txt").string()));
            QVERIFY(text.open(QIODevice::ReadOnly));
            const std::string full = text.readAll().toStdString();
            QVERIFY(decoded.size() > full.size() / 2);
            QVERIFY2(full.compare(0, decoded.size(), decoded) == 0, "eval_ids do not spell the start of eval.txt");
        }

        const Tensor logits = readNpy(ref / "logits.npy");
        QCOMPARE(logits.dtype(), DType::F32);
        QVERIFY(logits.shape() == (Shape{n, t, c.vocab}));
        const auto lv = logits.values<float>();

        // perplexity.json: mean next-token NLL over every row, in double from the float logits.
        double nll = 0;
        for (int64_t r = 0; r < n; ++r)
            for (int64_t p = 0; p + 1 < t; ++p) {
                const float* row = lv.data() + (r * t + p) * c.vocab;
                double mx = -INFINITY;
                for (int64_t v = 0; v < c.vocab; ++v)
                    mx = std::max(mx, double(row[v]));
                double sum = 0;
                for (int64_t v = 0; v < c.vocab; ++v)
                    sum += std::exp(double(row[v]) - mx);
                nll += mx + std::log(sum) - double(row[idv[size_t(r * t + p + 1)]]);
            }
        const int64_t tokens = n * (t - 1);
        nll /= double(tokens);
        const QJsonObject ppl = readJson(ref / "perplexity.json");
        QCOMPARE(ppl["tokens"].toInteger(), tokens);
        QVERIFY2(std::abs(ppl["nll_mean"].toDouble() - nll) < 1e-9, qPrintable(QString::number(nll, 'g', 12)));
        QVERIFY(std::abs(ppl["perplexity"].toDouble() / std::exp(nll) - 1) < 1e-9);
        // A trained model: far below the uniform perplexity of the vocabulary.
        QVERIFY2(std::exp(nll) < double(c.vocab) / 2, qPrintable(QString::number(std::exp(nll))));

        // hidden_states[0] is the embedding of eval_ids; the logits are the final RMSNorm of
        // the last hidden state times lm_head (the embedding when tied).
        const Tensor hidden = readNpy(ref / "hidden_states.npy");
        QVERIFY(hidden.shape() == (Shape{c.layers + 1, n, t, c.hidden}));
        const auto hv = hidden.values<float>();
        const SafetensorsFile ckpt = openCheckpoint(folder);
        const Tensor embed = ckpt.tensor("model.embed_tokens.weight").toFloat32();
        const Tensor head = ckpt.tensor(c.tied ? "model.embed_tokens.weight" : "lm_head.weight").toFloat32();
        const Tensor norm = ckpt.tensor("model.norm.weight").toFloat32();
        const auto ev = embed.values<float>(), headv = head.values<float>(), normv = norm.values<float>();
        for (int64_t i = 0; i < n * t; ++i)
            QVERIFY(std::memcmp(hv.data() + i * c.hidden, ev.data() + idv[size_t(i)] * c.hidden,
                                size_t(c.hidden) * sizeof(float)) == 0);
        std::vector<double> want(size_t(n * t * c.vocab));
        const float* last = hv.data() + c.layers * n * t * c.hidden;
        for (int64_t i = 0; i < n * t; ++i) {
            const float* x = last + i * c.hidden;
            double ms = 0;
            for (int64_t k = 0; k < c.hidden; ++k)
                ms += double(x[k]) * x[k];
            const double inv = 1 / std::sqrt(ms / double(c.hidden) + c.eps);
            for (int64_t v = 0; v < c.vocab; ++v) {
                double s = 0;
                for (int64_t k = 0; k < c.hidden; ++k)
                    s += double(x[k]) * inv * normv[size_t(k)] * headv[size_t(v * c.hidden + k)];
                want[size_t(i * c.vocab + v)] = s;
            }
        }
        const double err = relativeL2(lv, want);
        QVERIFY2(err < 1e-5, qPrintable(QString::number(err)));
    }

    // Every folder is evaluated on the same tokens; the bf16 reference comes from the
    // rounded weights (close to the f32 one, not equal to it).
    void sameEvaluationAcrossFolders()
    {
        const Tensor ids = readNpy(kDir / "llama_f32" / "reference" / "eval_ids.npy");
        for (const char* other : {"llama_bf16", "llama_tied_ropescaled", "qwen2_f32"}) {
            const Tensor o = readNpy(kDir / other / "reference" / "eval_ids.npy");
            QVERIFY(o.shape() == ids.shape());
            QVERIFY(std::memcmp(o.rawData(), ids.rawData(), ids.nbytes()) == 0);
        }
        const Tensor f32 = readNpy(kDir / "llama_f32" / "reference" / "logits.npy");
        const Tensor bf16 = readNpy(kDir / "llama_bf16" / "reference" / "logits.npy");
        const auto fv = f32.values<float>();
        const std::vector<double> want(fv.begin(), fv.end());
        const double err = relativeL2(bf16.values<float>(), want);
        QVERIFY2(err > 1e-6 && err < 0.05, qPrintable(QString::number(err)));
    }
};

QTEST_GUILESS_MAIN(TestLlmFixture)
#include "tst_llm_fixture.moc"
