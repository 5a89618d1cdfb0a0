#include "export/gguf.h"

#include <array>
#include <cctype>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "io/hf_folder.h"
#include "numerics/gguf_blocks.h"

namespace qs {

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr uint32_t kGgufVersion = 3;
constexpr uint64_t kAlignment = 32;
constexpr uint64_t kMaxTokenizerBytes = 256ull << 20;

enum class ValueType : uint32_t { U32 = 4, I32 = 5, F32 = 6, Bool = 7, String = 8, Array = 9 };
enum TokenType : int32_t { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

// The metadata and tensor-info section, built in memory (it is small).
class Header {
public:
    void u32(uint32_t v) { raw(&v, 4); }
    void i32(int32_t v) { raw(&v, 4); }
    void u64(uint64_t v) { raw(&v, 8); }
    void f32(float v) { raw(&v, 4); }
    void string(std::string_view s)
    {
        u64(s.size());
        raw(s.data(), s.size());
    }

    void keyU32(std::string_view key, uint32_t v) { key_(key, ValueType::U32), u32(v); }
    void keyF32(std::string_view key, float v) { key_(key, ValueType::F32), f32(v); }
    void keyBool(std::string_view key, bool v)
    {
        key_(key, ValueType::Bool);
        const uint8_t b = v ? 1 : 0;
        raw(&b, 1);
    }
    void keyString(std::string_view key, std::string_view v) { key_(key, ValueType::String), string(v); }
    void keyStrings(std::string_view key, const std::vector<std::string>& values)
    {
        key_(key, ValueType::Array);
        u32(uint32_t(ValueType::String));
        u64(values.size());
        for (const std::string& v : values)
            string(v);
    }
    void keyF32s(std::string_view key, const std::vector<float>& values)
    {
        key_(key, ValueType::Array);
        u32(uint32_t(ValueType::F32));
        u64(values.size());
        for (float v : values)
            f32(v);
    }
    void keyI32s(std::string_view key, const std::vector<int32_t>& values)
    {
        key_(key, ValueType::Array);
        u32(uint32_t(ValueType::I32));
        u64(values.size());
        for (int32_t v : values)
            i32(v);
    }

    uint64_t keys() const { return keys_; }
    std::string& bytes() { return bytes_; }

private:
    void key_(std::string_view key, ValueType type)
    {
        string(key);
        u32(uint32_t(type));
        ++keys_;
    }
    void raw(const void* p, size_t n) { bytes_.append(static_cast<const char*>(p), n); }

    std::string bytes_;
    uint64_t keys_ = 0;
};

// ---- vocabulary

// llama.cpp's two BPE tokenizers: "gpt2" (byte-level, merges by rank) and
// "llama" (SentencePiece: the pair whose joined text is the token of highest
// score merges first, bytes <0xXX> for what no token covers).
struct Vocabulary {
    std::string model = "gpt2";
    std::string pre = "default"; // gpt2 only: the pre-tokenizer llama.cpp applies
    std::vector<std::string> tokens;
    std::vector<int32_t> types;
    std::vector<std::string> merges;  // gpt2 only
    std::vector<float> scores;        // llama only
    std::optional<int32_t> unknownId; // llama only
    bool addSpacePrefix = false;      // llama only: "▁" before the text
    bool addBos = false;
};

// GPT-2's byte-level alphabet: printable bytes stand for themselves, the
// others for the code points from 256 up, in byte order.
std::array<std::string, 256> byteLevelAlphabet()
{
    std::array<std::string, 256> alphabet;
    int next = 256;
    for (int b = 0; b < 256; ++b) {
        const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        const int cp = printable ? b : next++;
        std::string s;
        if (cp < 0x80) {
            s += char(cp);
        } else {
            s += char(0xC0 | (cp >> 6));
            s += char(0x80 | (cp & 0x3F));
        }
        alphabet[size_t(b)] = s;
    }
    return alphabet;
}

// The pre-tokenizer names llama.cpp knows, recognised by the split pattern.
std::string preTokenizerName(const Json& pre)
{
    const std::string llama3 = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
                               "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
    const std::string qwen2 = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
                              "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
    if (!pre.is_object())
        return "default";
    const std::string type = pre.value("type", "");
    if (type == "ByteLevel")
        return pre.value("use_regex", true) ? "gpt-2" : "default";
    if (type != "Sequence" || !pre.contains("pretokenizers") || !pre["pretokenizers"].is_array())
        return "default";
    for (const Json& p : pre["pretokenizers"]) {
        if (!p.is_object() || p.value("type", "") != "Split" || !p.contains("pattern") || !p["pattern"].is_object())
            continue;
        const std::string regex = p["pattern"].value("Regex", "");
        if (regex == llama3)
            return "llama-bpe";
        if (regex == qwen2)
            return "qwen2";
    }
    return "default";
}

// SentencePiece's byte pieces, "<0x00>" … "<0xFF>".
bool isByteToken(std::string_view token)
{
    return token.size() == 6 && token.starts_with("<0x") && token.back() == '>' &&
           std::isxdigit(static_cast<unsigned char>(token[3])) && std::isxdigit(static_cast<unsigned char>(token[4]));
}

// Whether the text gets a leading "▁" before it is split: a Prepend("▁")
// normalizer (Llama 2's file) or a Metaspace pre-tokenizer that prepends.
bool prependsSpace(const Json& json)
{
    const std::string metaspace = "\xE2\x96\x81";
    std::function<bool(const Json&, const char*)> has = [&](const Json& node, const char* list) {
        if (!node.is_object())
            return false;
        const std::string type = node.value("type", "");
        if (type == "Sequence" && node.contains(list) && node[list].is_array())
            for (const Json& child : node[list])
                if (has(child, list))
                    return true;
        if (type == "Prepend")
            return node.value("prepend", "") == metaspace;
        if (type == "Metaspace")
            return node.value("prepend_scheme", node.value("add_prefix_space", true) ? "always" : "never") != "never";
        return false;
    };
    return has(json.value("normalizer", Json()), "normalizers") ||
           has(json.value("pre_tokenizer", Json()), "pretokenizers");
}

Vocabulary readVocabulary(const fs::path& folder, int64_t vocabSize)
{
    Vocabulary v;
    v.tokens.resize(size_t(vocabSize));
    v.types.assign(size_t(vocabSize), Unused);
    for (int64_t id = 0; id < vocabSize; ++id)
        v.tokens[size_t(id)] = "[PAD" + std::to_string(id) + "]";
    const fs::path file = folder / "tokenizer.json";
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) {
        // A byte-level vocabulary for test models without a tokenizer.
        const auto alphabet = byteLevelAlphabet();
        for (int64_t b = 0; b < std::min<int64_t>(256, vocabSize); ++b) {
            v.tokens[size_t(b)] = alphabet[size_t(b)];
            v.types[size_t(b)] = Normal;
        }
        return v;
    }
    const std::string where = file.string();
    const uint64_t size = fs::file_size(file, ec);
    if (ec || size > kMaxTokenizerBytes)
        throw Error(where + ": cannot read it (or larger than " + std::to_string(kMaxTokenizerBytes >> 20) + " MiB)");
    std::ifstream in(file, std::ios::binary);
    std::string text(size_t(size), '\0');
    in.read(text.data(), std::streamsize(size));
    Json json;
    try {
        json = Json::parse(text);
    } catch (const Json::exception& e) {
        throw Error(where + ": not valid JSON (" + std::string(e.what()) + ")");
    }
    const Json* model = json.is_object() && json.contains("model") ? &json["model"] : nullptr;
    if (!model || !model->is_object() || model->value("type", "") != "BPE" || !model->contains("vocab") ||
        !(*model)["vocab"].is_object())
        throw Error(where + ": field \"model\" must be a BPE model with a \"vocab\" object for the GGUF export");
    const bool sentencePiece = model->value("byte_fallback", false);
    if (sentencePiece) {
        v.model = "llama";
        v.scores.assign(size_t(vocabSize), 0.0f);
    }
    auto setToken = [&](const std::string& token, const Json& id, int32_t type, const std::string& field) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0)
            throw Error(where + ": " + field + ": token \"" + token + "\" has no valid id");
        const int64_t i = id.get<int64_t>();
        if (i >= vocabSize)
            throw Error(where + ": " + field + ": token \"" + token + "\" has id " + std::to_string(i) +
                        ", outside config.json's vocab_size " + std::to_string(vocabSize));
        v.tokens[size_t(i)] = token;
        v.types[size_t(i)] = type;
    };
    for (const auto& [token, id] : (*model)["vocab"].items())
        setToken(token, id, sentencePiece && isByteToken(token) ? Byte : Normal, "model.vocab");
    if (sentencePiece && model->contains("unk_token") && (*model)["unk_token"].is_string()) {
        const std::string unk = (*model)["unk_token"].get<std::string>();
        const Json& vocab = (*model)["vocab"];
        if (vocab.contains(unk) && vocab[unk].is_number_integer()) {
            v.unknownId = vocab[unk].get<int32_t>();
            v.types[size_t(*v.unknownId)] = Unknown;
        }
    }
    if (json.contains("added_tokens") && json["added_tokens"].is_array())
        for (const Json& t : json["added_tokens"])
            if (t.is_object() && t.contains("content") && t["content"].is_string() && t.contains("id"))
                setToken(t["content"].get<std::string>(), t["id"], t.value("special", false) ? Control : UserDefined,
                         "added_tokens");
    if (model->contains("merges") && (*model)["merges"].is_array())
        for (const Json& m : (*model)["merges"]) {
            if (m.is_string())
                v.merges.push_back(m.get<std::string>());
            else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
                v.merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
            else
                throw Error(where + ": model.merges: an entry is neither \"a b\" nor [\"a\", \"b\"]");
        }
    if (sentencePiece) {
        // The token a merge of rank r makes scores -r: llama.cpp's highest
        // score first is then the reference's lowest rank first. Tokens no
        // merge makes (characters, bytes, specials) are never a pair's result.
        std::vector<bool> scored(size_t(vocabSize), false);
        const Json& vocab = (*model)["vocab"];
        for (size_t rank = 0; rank < v.merges.size(); ++rank) {
            const std::string& merge = v.merges[rank];
            const size_t space = merge.find(' ');
            if (space == std::string::npos)
                throw Error(where + ": model.merges: entry " + std::to_string(rank) + " is not a pair");
            const std::string joined = merge.substr(0, space) + merge.substr(space + 1);
            if (!vocab.contains(joined) || !vocab[joined].is_number_integer())
                continue; // the reference skips a merge whose result is not a token, and so does llama.cpp
            const int64_t id = vocab[joined].get<int64_t>();
            if (id >= 0 && id < vocabSize && !scored[size_t(id)]) {
                scored[size_t(id)] = true;
                v.scores[size_t(id)] = -float(rank);
            }
        }
        v.merges.clear();
        v.addSpacePrefix = prependsSpace(json);
    } else {
        v.pre = preTokenizerName(json.value("pre_tokenizer", Json()));
    }
    // BOS added when the post-processor's single-sequence template starts with a special token.
    if (json.contains("post_processor") && json["post_processor"].is_object()) {
        const Json& p = json["post_processor"];
        const Json* processor = &p;
        if (p.value("type", "") == "Sequence" && p.contains("processors") && p["processors"].is_array())
            for (const Json& q : p["processors"])
                if (q.is_object() && q.value("type", "") == "TemplateProcessing")
                    processor = &q;
        if (processor->value("type", "") == "TemplateProcessing" && processor->contains("single") &&
            (*processor)["single"].is_array() && !(*processor)["single"].empty())
            v.addBos = (*processor)["single"][0].is_object() && (*processor)["single"][0].contains("SpecialToken");
    }
    return v;
}

// ---- tensors

struct OutTensor {
    std::string name;
    std::vector<uint64_t> ne; // innermost first
    GgmlType type = GgmlType::F32;
    uint64_t bytes = 0;
    uint64_t offset = 0;
    uint64_t sourceBytes = 0;          // the checkpoint's bytes of the tensor
    std::function<std::string()> data; // the tensor's bytes, made when written
};

std::optional<GgmlType> ggmlTypeOf(QType t)
{
    switch (t) {
    case QType::Q8_0:
        return GgmlType::Q8_0;
    case QType::Q4_0:
        return GgmlType::Q4_0;
    case QType::Q4_1:
        return GgmlType::Q4_1;
    case QType::Q5_0:
        return GgmlType::Q5_0;
    case QType::Q5_1:
        return GgmlType::Q5_1;
    case QType::Q4K:
        return GgmlType::Q4_K;
    case QType::Q5K:
        return GgmlType::Q5_K;
    case QType::Q6K:
        return GgmlType::Q6_K;
    default:
        return std::nullopt;
    }
}

// Row order for the "llama" architecture's q/k: row h·d + 2i + j holds row h·d + j·d/2 + i.
std::vector<int64_t> interleavedRows(int64_t heads, int64_t headDim)
{
    std::vector<int64_t> order(size_t(heads * headDim));
    for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < headDim / 2; ++i)
            for (int64_t j = 0; j < 2; ++j)
                order[size_t(h * headDim + 2 * i + j)] = h * headDim + j * (headDim / 2) + i;
    return order;
}

class GgufBuilder {
public:
    GgufBuilder(const Model& model, const QuantizationPlan& plan) : model_(model), plan_(plan)
    {
        for (size_t i = 0; i < model.layers.size(); ++i)
            if (!layerOfWeight_.contains(model.layers[i].weightName))
                layerOfWeight_[model.layers[i].weightName] = i;
    }

    // A checkpoint tensor: a layer's weight in its rule's GGUF type or stored dtype, anything else as float32.
    void add(const std::string& ggufName, const std::string& tensorName, const std::vector<int64_t>& rowOrder = {})
    {
        const Tensor* t = model_.initializer(tensorName);
        if (!t)
            throw Error(model_.sourcePath.string() + ": tensor \"" + tensorName + "\" is missing");
        const Shape& shape = t->shape();
        OutTensor out;
        out.name = ggufName;
        out.sourceBytes = uint64_t(t->numel()) * uint64_t(dtypeSize(t->dtype()));
        for (auto it = shape.rbegin(); it != shape.rend(); ++it)
            out.ne.push_back(uint64_t(*it));
        const int64_t rowLength = shape.empty() ? 1 : shape.back();
        const int64_t rows = rowLength ? t->numel() / rowLength : 0;
        std::optional<QType> qtype;
        if (auto layer = layerOfWeight_.find(tensorName); layer != layerOfWeight_.end()) {
            const LayerQuantization* lq = plan_.forLayer(layer->second);
            if (lq && lq->problem.empty() && lq->weight) {
                qtype = lq->weight->qtype;
                if (!ggmlTypeOf(*qtype))
                    throw Error("layer '" + model_.layers[layer->second].modulePath + "': weight_qtype " +
                                std::string(qtypeName(*qtype)) +
                                " has no GGUF encoding llama.cpp runs; use q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, "
                                "q5_k or q6_k, or leave the layer float");
            }
            if (!qtype && t->dtype() != DType::F32)
                out.type = t->dtype() == DType::F16 ? GgmlType::F16 : GgmlType::BF16;
        }
        const Tensor* source = t;
        std::vector<int64_t> order = rowOrder;
        if (qtype) {
            out.type = *ggmlTypeOf(*qtype);
            const size_t rowBytes = ggufRowBytes(*qtype, rowLength);
            out.bytes = uint64_t(rowBytes) * uint64_t(rows);
            const QType q = *qtype;
            out.data = [source, q, rows, rowLength, rowBytes, order] {
                const Tensor x = source->toFloat32();
                const float* values = x.values<float>().data();
                std::string bytes(rowBytes * size_t(rows), '\0');
                for (int64_t r = 0; r < rows; ++r) {
                    const int64_t from = order.empty() ? r : order[size_t(r)];
                    ggufEncodeRow(q, {values + from * rowLength, size_t(rowLength)},
                                  {reinterpret_cast<uint8_t*>(bytes.data()) + size_t(r) * rowBytes, rowBytes});
                }
                releaseResidentPages(*source);
                return bytes;
            };
        } else {
            const GgmlType type = out.type;
            const size_t item = type == GgmlType::F32 ? 4 : 2;
            out.bytes = uint64_t(t->numel()) * item;
            out.data = [source, type, item, rows, rowLength, order] {
                const Tensor x = type == GgmlType::F32 ? source->toFloat32() : *source;
                const auto* base = static_cast<const char*>(x.rawData());
                const size_t rowBytes = size_t(rowLength) * item;
                std::string bytes(rowBytes * size_t(rows), '\0');
                for (int64_t r = 0; r < rows; ++r) {
                    const int64_t from = order.empty() ? r : order[size_t(r)];
                    std::memcpy(bytes.data() + size_t(r) * rowBytes, base + size_t(from) * rowBytes, rowBytes);
                }
                releaseResidentPages(*source);
                return bytes;
            };
        }
        tensors_.push_back(std::move(out));
    }

    void addFloats(const std::string& ggufName, std::vector<float> values)
    {
        OutTensor out;
        out.name = ggufName;
        out.ne = {uint64_t(values.size())};
        out.bytes = values.size() * sizeof(float);
        out.data = [values] { return std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4); };
        tensors_.push_back(std::move(out));
    }

    std::vector<OutTensor>& tensors() { return tensors_; }

private:
    const Model& model_;
    const QuantizationPlan& plan_;
    std::map<std::string, size_t> layerOfWeight_;
    std::vector<OutTensor> tensors_;
};

// llama3 rope scaling as llama.cpp applies it: each frequency divided by its factor.
std::vector<float> ropeFrequencyFactors(const LlamaConfig& config)
{
    LlamaConfig unscaled = config;
    unscaled.ropeScaling.clear();
    const std::vector<float> base = ropeInverseFrequencies(unscaled), scaled = ropeInverseFrequencies(config);
    std::vector<float> factors(base.size());
    for (size_t i = 0; i < base.size(); ++i)
        factors[i] = base[i] / scaled[i];
    return factors;
}

} // namespace

GgufHeader readGgufHeader(const fs::path& file)
{
    std::ifstream in(file, std::ios::binary);
    char magic[4] = {};
    GgufHeader h;
    if (!in.read(magic, 4) || std::string_view(magic, 4) != "GGUF")
        throw Error(file.string() + ": not a GGUF file (no GGUF magic)");
    if (!in.read(reinterpret_cast<char*>(&h.version), 4) || !in.read(reinterpret_cast<char*>(&h.tensors), 8) ||
        !in.read(reinterpret_cast<char*>(&h.metadata), 8))
        throw Error(file.string() + ": the GGUF header is cut short");
    return h;
}

ExportSummary exportGguf(const Model& model, const QuantizationPlan& plan, const fs::path& out,
                         const CancellationToken& cancel, const ProgressCallback& progress)
{
    if (model.format != "huggingface")
        throw Error(out.string() + ": the GGUF export writes Hugging Face folders of the Llama family (" +
                    model.sourcePath.string() + " is " + model.format + ")");
    for (const LayerQuantization& lq : plan.layers())
        if (lq.problem.empty() && lq.biasCorrection)
            throw Error(out.string() + ": layer '" + model.layers.at(lq.layer).modulePath +
                        "' sets bias_correction, which a GGUF file (Llama layers have no bias) cannot carry; remove "
                        "bias_correction for GGUF");
    bool runnable = false;
    const LlamaConfig config = readLlamaConfig(model.sourcePath / "config.json", runnable);
    if (!runnable)
        throw Error(out.string() + ": the GGUF export needs a Llama-family folder; " + model.sourcePath.string() +
                    " is " + config.architecture);
    const bool qwen2 = config.architecture == "Qwen2ForCausalLM";
    const std::string arch = qwen2 ? "qwen2" : "llama";
    const Vocabulary vocab = readVocabulary(model.sourcePath, config.vocabSize);

    Header h;
    h.keyString("general.architecture", arch);
    h.keyString("general.name", model.sourcePath.filename().string());
    h.keyU32("general.alignment", uint32_t(kAlignment));
    h.keyU32(arch + ".context_length", uint32_t(config.maxPositions > 0 ? config.maxPositions : 2048));
    h.keyU32(arch + ".embedding_length", uint32_t(config.hiddenSize));
    h.keyU32(arch + ".block_count", uint32_t(config.layers));
    h.keyU32(arch + ".feed_forward_length", uint32_t(config.intermediateSize));
    h.keyU32(arch + ".attention.head_count", uint32_t(config.heads));
    h.keyU32(arch + ".attention.head_count_kv", uint32_t(config.kvHeads));
    h.keyU32(arch + ".attention.key_length", uint32_t(config.headDim));
    h.keyU32(arch + ".attention.value_length", uint32_t(config.headDim));
    h.keyU32(arch + ".rope.dimension_count", uint32_t(config.headDim));
    h.keyF32(arch + ".rope.freq_base", float(config.ropeTheta));
    h.keyF32(arch + ".attention.layer_norm_rms_epsilon", float(config.rmsNormEps));
    h.keyU32(arch + ".vocab_size", uint32_t(config.vocabSize));
    if (config.ropeScaling == "linear") {
        h.keyString(arch + ".rope.scaling.type", "linear");
        h.keyF32(arch + ".rope.scaling.factor", float(config.ropeFactor));
    }
    h.keyString("tokenizer.ggml.model", vocab.model);
    if (vocab.model == "gpt2")
        h.keyString("tokenizer.ggml.pre", vocab.pre);
    h.keyStrings("tokenizer.ggml.tokens", vocab.tokens);
    h.keyI32s("tokenizer.ggml.token_type", vocab.types);
    if (!vocab.merges.empty())
        h.keyStrings("tokenizer.ggml.merges", vocab.merges);
    if (!vocab.scores.empty())
        h.keyF32s("tokenizer.ggml.scores", vocab.scores);
    if (vocab.unknownId)
        h.keyU32("tokenizer.ggml.unknown_token_id", uint32_t(*vocab.unknownId));
    if (vocab.model == "llama")
        h.keyBool("tokenizer.ggml.add_space_prefix", vocab.addSpacePrefix);
    if (config.bosTokenId)
        h.keyU32("tokenizer.ggml.bos_token_id", uint32_t(*config.bosTokenId));
    if (config.eosTokenId)
        h.keyU32("tokenizer.ggml.eos_token_id", uint32_t(*config.eosTokenId));
    h.keyBool("tokenizer.ggml.add_bos_token", vocab.addBos);

    GgufBuilder b(model, plan);
    const std::vector<int64_t> queryRows =
        qwen2 ? std::vector<int64_t>{} : interleavedRows(config.heads, config.headDim);
    const std::vector<int64_t> keyRows =
        qwen2 ? std::vector<int64_t>{} : interleavedRows(config.kvHeads, config.headDim);
    b.add("token_embd.weight", "model.embed_tokens.weight");
    if (config.ropeScaling == "llama3")
        b.addFloats("rope_freqs.weight", ropeFrequencyFactors(config));
    for (int64_t i = 0; i < config.layers; ++i) {
        const std::string from = "model.layers." + std::to_string(i) + ".";
        const std::string to = "blk." + std::to_string(i) + ".";
        b.add(to + "attn_norm.weight", from + "input_layernorm.weight");
        const std::pair<const char*, const char*> projections[] = {
            {"attn_q", "self_attn.q_proj"},      {"attn_k", "self_attn.k_proj"}, {"attn_v", "self_attn.v_proj"},
            {"attn_output", "self_attn.o_proj"}, {"ffn_gate", "mlp.gate_proj"},  {"ffn_up", "mlp.up_proj"},
            {"ffn_down", "mlp.down_proj"}};
        for (const auto& [gguf, hf] : projections) {
            const std::string name = hf;
            const std::vector<int64_t>& rows = name == "self_attn.q_proj"   ? queryRows
                                               : name == "self_attn.k_proj" ? keyRows
                                                                            : std::vector<int64_t>{};
            b.add(to + gguf + ".weight", from + name + ".weight", rows);
            if (model.isInitializer(from + name + ".bias"))
                b.add(to + gguf + ".bias", from + name + ".bias", rows);
        }
        b.add(to + "ffn_norm.weight", from + "post_attention_layernorm.weight");
    }
    b.add("output_norm.weight", "model.norm.weight");
    if (!config.tieWordEmbeddings)
        b.add("output.weight", "lm_head.weight");

    std::vector<OutTensor>& tensors = b.tensors();
    uint64_t offset = 0;
    for (OutTensor& t : tensors) {
        t.offset = offset;
        offset += (t.bytes + kAlignment - 1) / kAlignment * kAlignment;
    }
    std::string& header = h.bytes();
    const uint64_t keys = h.keys();
    for (const OutTensor& t : tensors) {
        h.string(t.name);
        h.u32(uint32_t(t.ne.size()));
        for (uint64_t n : t.ne)
            h.u64(n);
        h.u32(uint32_t(t.type));
        h.u64(t.offset);
    }
    std::string preamble("GGUF", 4);
    auto put = [&preamble](const void* p, size_t n) { preamble.append(static_cast<const char*>(p), n); };
    const uint32_t version = kGgufVersion;
    const uint64_t tensorCount = tensors.size();
    put(&version, 4);
    put(&tensorCount, 8);
    put(&keys, 8);
    preamble += header;
    preamble.resize((preamble.size() + kAlignment - 1) / kAlignment * kAlignment, '\0');

    AtomicFile file(out);
    file.write(preamble.data(), preamble.size());
    ExportSummary summary;
    summary.path = out;
    for (size_t i = 0; i < tensors.size(); ++i) {
        cancel.check();
        if (progress)
            progress(double(i) / double(tensors.size()), "writing " + tensors[i].name);
        std::string bytes = tensors[i].data();
        if (bytes.size() != tensors[i].bytes)
            throw Error(out.string() + ": tensor " + tensors[i].name + " has " + std::to_string(bytes.size()) +
                        " bytes, its header says " + std::to_string(tensors[i].bytes));
        bytes.resize((bytes.size() + kAlignment - 1) / kAlignment * kAlignment, '\0');
        file.write(bytes.data(), bytes.size());
        ++summary.tensors;
        if (tensors[i].type != GgmlType::F32 && tensors[i].type != GgmlType::F16 && tensors[i].type != GgmlType::BF16) {
            ++summary.quantizedWeights;
            summary.floatBytes += int64_t(tensors[i].sourceBytes);
            summary.quantizedBytes += int64_t(tensors[i].bytes);
        }
    }
    file.commit();
    if (progress)
        progress(1.0, "written");
    return summary;
}

} // namespace qs
