#include "io/hf_folder.h"

#include <cmath>
#include <fstream>
#include <numbers>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "graph/weight_layout.h"
#include "io/checkpoint_model.h"
#include "io/load_budget.h"
#include "io/safetensors.h"

namespace qs {

namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;

constexpr int64_t kMaxDimension = int64_t(1) << 20; // hidden, intermediate sizes, head counts
constexpr int64_t kMaxVocabulary = int64_t(1) << 24;
constexpr int64_t kMaxLayers = 4096;

// ---- config.json

class ConfigReader {
public:
    ConfigReader(const Json& json, std::string file) : json_(json), file_(std::move(file)) {}

    [[noreturn]] void fail(std::string_view field, const std::string& what) const
    {
        throw Error(file_ + ": field \"" + std::string(field) + "\" " + what);
    }

    bool has(std::string_view field) const
    {
        auto it = json_.find(field);
        return it != json_.end() && !it->is_null();
    }

    int64_t integer(std::string_view field, int64_t min, int64_t max) const
    {
        if (!has(field))
            fail(field, "is missing");
        return integerOf(json_.at(std::string(field)), field, min, max);
    }

    std::optional<int64_t> optionalInteger(std::string_view field, int64_t min, int64_t max) const
    {
        if (!has(field))
            return std::nullopt;
        return integerOf(json_.at(std::string(field)), field, min, max);
    }

    double number(std::string_view field, double fallback, double min, double max) const
    {
        if (!has(field))
            return fallback;
        return numberOf(json_.at(std::string(field)), field, min, max);
    }

    bool boolean(std::string_view field, bool fallback) const
    {
        if (!has(field))
            return fallback;
        const Json& v = json_.at(std::string(field));
        if (!v.is_boolean())
            fail(field, "must be true or false");
        return v.get<bool>();
    }

    std::string string(std::string_view field) const
    {
        if (!has(field))
            return {};
        const Json& v = json_.at(std::string(field));
        if (!v.is_string())
            fail(field, "must be a string");
        return v.get<std::string>();
    }

    int64_t integerOf(const Json& v, std::string_view field, int64_t min, int64_t max) const
    {
        if (!v.is_number_integer())
            fail(field, "must be an integer");
        if (v.is_number_unsigned() ? v.get<uint64_t>() > uint64_t(max) : v.get<int64_t>() > max)
            fail(field, "is larger than " + std::to_string(max));
        const int64_t n = v.get<int64_t>();
        if (n < min)
            fail(field, "must be at least " + std::to_string(min) + ", not " + std::to_string(n));
        return n;
    }

    double numberOf(const Json& v, std::string_view field, double min, double max) const
    {
        if (!v.is_number())
            fail(field, "must be a number");
        const double d = v.get<double>();
        if (!std::isfinite(d) || d < min || d > max) {
            std::ostringstream s;
            s << "must be between " << min << " and " << max << ", not " << d;
            fail(field, s.str());
        }
        return d;
    }

    const Json& json() const { return json_; }

private:
    const Json& json_;
    std::string file_;
};

Json parseConfig(const fs::path& configJson)
{
    const std::string file = configJson.string();
    std::error_code ec;
    const uint64_t size = fs::file_size(configJson, ec);
    if (ec)
        throw Error(file + ": cannot read (" + ec.message() + ")");
    if (size > kMaxHfConfigBytes)
        throw Error(file + ": " + std::to_string(size) + " bytes is larger than a config.json can be (" +
                    std::to_string(kMaxHfConfigBytes) + ")");
    std::ifstream in(configJson, std::ios::binary);
    std::string text(size_t(size), '\0');
    if (!in.read(text.data(), std::streamsize(size)))
        throw Error(file + ": cannot read");
    Json json;
    try {
        json = Json::parse(text);
    } catch (const Json::exception& e) {
        // nlohmann's messages name the byte offset: keep that, not its prefix.
        std::string what = e.what();
        if (auto colon = what.find("] "); colon != std::string::npos)
            what = what.substr(colon + 2);
        throw Error(file + ": not valid JSON (" + what + ")");
    }
    if (!json.is_object())
        throw Error(file + ": must be a JSON object");
    return json;
}

bool isLlamaFamily(const std::string& architecture)
{
    return architecture == "LlamaForCausalLM" || architecture == "MistralForCausalLM" ||
           architecture == "Qwen2ForCausalLM";
}

void readRopeScaling(const ConfigReader& c, LlamaConfig& config)
{
    if (!c.has("rope_scaling"))
        return;
    const Json& s = c.json().at("rope_scaling");
    if (!s.is_object())
        c.fail("rope_scaling", "must be an object or null");
    const ConfigReader r(s, "");
    auto fail = [&](std::string_view field, const std::string& what) {
        c.fail("rope_scaling." + std::string(field), what);
    };
    std::string type;
    for (const char* key : {"rope_type", "type"})
        if (auto it = s.find(key); it != s.end() && !it->is_null()) {
            if (!it->is_string())
                fail(key, "must be a string");
            type = it->get<std::string>();
            break;
        }
    if (type == "default" || type.empty())
        return;
    auto number = [&](const char* key, double min, double max) {
        auto it = s.find(key);
        if (it == s.end() || it->is_null())
            fail(key, "is missing");
        if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < min ||
            it->get<double>() > max)
            fail(key, "must be a number between " + std::to_string(min) + " and " + std::to_string(max));
        return it->get<double>();
    };
    if (type == "linear") {
        config.ropeScaling = type;
        config.ropeFactor = number("factor", 1e-6, 1e6);
    } else if (type == "llama3") {
        config.ropeScaling = type;
        config.ropeFactor = number("factor", 1e-6, 1e6);
        config.ropeLowFreqFactor = number("low_freq_factor", 1e-6, 1e6);
        config.ropeHighFreqFactor = number("high_freq_factor", 1e-6, 1e6);
        if (!(config.ropeHighFreqFactor > config.ropeLowFreqFactor))
            fail("high_freq_factor", "must be larger than low_freq_factor");
        const double original = number("original_max_position_embeddings", 1, double(int64_t(1) << 40));
        if (original != std::floor(original))
            fail("original_max_position_embeddings", "must be an integer");
        config.ropeOriginalMaxPositions = int64_t(original);
    } else {
        fail("rope_type", "\"" + type + "\" is not supported (supported: default, linear, llama3)");
    }
}

} // namespace

bool isHuggingFaceFolder(const fs::path& folder)
{
    std::error_code ec;
    return fs::is_directory(folder, ec) && fs::is_regular_file(folder / "config.json", ec);
}

LlamaConfig readLlamaConfig(const fs::path& configJson, bool& runnable)
{
    const Json json = parseConfig(configJson);
    const ConfigReader c(json, configJson.string());
    LlamaConfig config;
    if (c.has("architectures")) {
        const Json& a = json.at("architectures");
        if (!a.is_array() || a.empty() || !a.front().is_string())
            c.fail("architectures", "must be a non-empty array of strings");
        config.architecture = a.front().get<std::string>();
    }
    config.modelType = c.string("model_type");
    runnable = isLlamaFamily(config.architecture);
    if (!runnable)
        return config;

    config.vocabSize = c.integer("vocab_size", 1, kMaxVocabulary);
    config.hiddenSize = c.integer("hidden_size", 1, kMaxDimension);
    config.intermediateSize = c.integer("intermediate_size", 1, kMaxDimension);
    config.layers = c.integer("num_hidden_layers", 1, kMaxLayers);
    config.heads = c.integer("num_attention_heads", 1, kMaxDimension);
    config.kvHeads = c.optionalInteger("num_key_value_heads", 1, kMaxDimension).value_or(config.heads);
    if (config.heads % config.kvHeads != 0)
        c.fail("num_key_value_heads", "(" + std::to_string(config.kvHeads) +
                                          ") must divide num_attention_heads (" + std::to_string(config.heads) + ")");
    if (auto headDim = c.optionalInteger("head_dim", 2, kMaxDimension)) {
        config.headDim = *headDim;
    } else {
        if (config.hiddenSize % config.heads != 0)
            c.fail("num_attention_heads", "(" + std::to_string(config.heads) + ") must divide hidden_size (" +
                                              std::to_string(config.hiddenSize) + ") when there is no head_dim");
        config.headDim = config.hiddenSize / config.heads;
    }
    if (config.headDim % 2 != 0)
        c.fail("head_dim", "must be even for rotary embeddings, not " + std::to_string(config.headDim));
    if (config.heads * config.headDim > kMaxDimension)
        c.fail("num_attention_heads", "times head_dim is larger than " + std::to_string(kMaxDimension));
    config.rmsNormEps = c.number("rms_norm_eps", 1e-6, 0.0, 1.0);
    config.ropeTheta = c.number("rope_theta", 10000.0, 1e-6, 1e12);
    config.maxPositions = c.optionalInteger("max_position_embeddings", 1, int64_t(1) << 40).value_or(0);
    readRopeScaling(c, config);
    const std::string act = c.has("hidden_act") ? c.string("hidden_act") : "silu";
    if (act != "silu")
        c.fail("hidden_act", "\"" + act + "\" is not supported (the Llama family uses silu)");
    config.tieWordEmbeddings = c.boolean("tie_word_embeddings", false);
    const bool qwen2 = config.architecture == "Qwen2ForCausalLM";
    const bool attentionBias = c.boolean("attention_bias", false);
    config.qkvBias = qwen2 || attentionBias;
    config.outputBias = !qwen2 && attentionBias;
    config.mlpBias = c.boolean("mlp_bias", false);
    const bool windowed = config.architecture == "MistralForCausalLM" ||
                          (qwen2 && c.boolean("use_sliding_window", false));
    if (windowed)
        config.slidingWindow = c.optionalInteger("sliding_window", 1, int64_t(1) << 40);
    config.bosTokenId = c.has("bos_token_id") && json.at("bos_token_id").is_number_integer()
                            ? std::optional<int64_t>(c.integer("bos_token_id", 0, config.vocabSize - 1))
                            : std::nullopt;
    config.eosTokenId = c.has("eos_token_id") && json.at("eos_token_id").is_number_integer()
                            ? std::optional<int64_t>(c.integer("eos_token_id", 0, config.vocabSize - 1))
                            : std::nullopt;
    return config;
}

std::vector<float> ropeInverseFrequencies(const LlamaConfig& config)
{
    const int64_t half = config.headDim / 2;
    const float theta = float(config.ropeTheta);
    std::vector<float> inv(size_t(half), 0.0f);
    for (int64_t i = 0; i < half; ++i)
        inv[size_t(i)] = 1.0f / std::pow(theta, float(2 * i) / float(config.headDim));
    if (config.ropeScaling == "linear") {
        for (float& f : inv)
            f = f / float(config.ropeFactor);
    } else if (config.ropeScaling == "llama3") {
        const float factor = float(config.ropeFactor);
        const float low = float(config.ropeLowFreqFactor);
        const float high = float(config.ropeHighFreqFactor);
        const float original = float(config.ropeOriginalMaxPositions);
        const float lowFreqWavelength = original / low;
        const float highFreqWavelength = original / high;
        for (float& f : inv) {
            const float wavelength = 2.0f * std::numbers::pi_v<float> / f;
            const float scaled = wavelength > lowFreqWavelength ? f / factor : f;
            const bool medium = !(wavelength < highFreqWavelength) && !(wavelength > lowFreqWavelength);
            if (medium) {
                const float smooth = (original / wavelength - low) / (high - low);
                f = (1.0f - smooth) * scaled / factor + smooth * scaled;
            } else {
                f = scaled;
            }
        }
    }
    return inv;
}

namespace {

// ---- the graph

class GraphBuilder {
public:
    explicit GraphBuilder(Model& model) : model_(model) {}

    // Adds a node; its output is named after the node.
    std::string op(std::string opType, std::vector<std::string> inputs, std::string name,
                   std::vector<Attribute> attributes = {})
    {
        Node node;
        node.name = name;
        node.opType = std::move(opType);
        node.inputs = std::move(inputs);
        node.outputs = {name};
        node.attributes = std::move(attributes);
        model_.nodes.push_back(std::move(node));
        return name;
    }

    std::string int64s(const std::string& name, const std::vector<int64_t>& values, bool scalar = false)
    {
        const Shape shape = scalar ? Shape{} : Shape{int64_t(values.size())};
        model_.addInitializer(name, Tensor::fromVector(DType::I64, shape, values));
        return name;
    }

    std::string floats(const std::string& name, const std::vector<float>& values, Shape shape)
    {
        model_.addInitializer(name, Tensor::fromVector(DType::F32, std::move(shape), values));
        return name;
    }

    static Attribute ints(std::string name, std::vector<int64_t> values)
    {
        Attribute a;
        a.name = std::move(name);
        a.kind = Attribute::Kind::Ints;
        a.ints = std::move(values);
        return a;
    }

    static Attribute integer(std::string name, int64_t value)
    {
        Attribute a;
        a.name = std::move(name);
        a.kind = Attribute::Kind::Int;
        a.i = value;
        return a;
    }

private:
    Model& model_;
};

class LlamaGraph {
public:
    LlamaGraph(Model& model, const LlamaConfig& config, const SafetensorsFile& weights)
        : model_(model), config_(config), weights_(weights), g_(model)
    {
    }

    void build()
    {
        model_.opsetImports[""] = 17;
        ValueInfo ids;
        ids.name = "input_ids";
        ids.dtype = DType::I64;
        ids.typeName = "int64";
        ids.shape = std::vector<Dim>{Dim::named("batch"), Dim::named("sequence")};
        model_.inputs.push_back(ids);
        ValueInfo logits;
        logits.name = "logits";
        logits.dtype = DType::F32;
        logits.typeName = "float32";
        logits.shape = std::vector<Dim>{Dim::named("batch"), Dim::named("sequence"), Dim::fixed(config_.vocabSize)};
        model_.outputs.push_back(logits);

        const int64_t H = config_.hiddenSize;
        const std::string embedding = weight("model.embed_tokens.weight", {config_.vocabSize, H});
        sharedValues();
        const std::string embedded = g_.op("Gather", {embedding, "input_ids"}, "model.embed_tokens");
        std::string h = g_.op("Reshape", {embedded, g_.int64s("const/rows_by_hidden", {-1, H})}, "model/hidden_rows");
        for (int64_t layer = 0; layer < config_.layers; ++layer)
            h = decoderLayer(h, "model.layers." + std::to_string(layer));
        h = rmsNorm(h, "model.norm");
        // Tied: the embedding table is the head (a stored lm_head.weight is the
        // same values, replaced by the tie when the reference loads it).
        const std::string head =
            config_.tieWordEmbeddings ? embedding : weight("lm_head.weight", {config_.vocabSize, H});
        const std::string rows = g_.op("Gemm", {h, head}, "lm_head", {GraphBuilder::integer("transB", 1)});
        const std::string logitsShape =
            g_.op("Concat", {batchAndSequence_, g_.int64s("const/vocab", {config_.vocabSize})}, "model/logits_shape",
                  {GraphBuilder::integer("axis", 0)});
        Node& last = model_.nodes.emplace_back();
        last.name = "model/logits";
        last.opType = "Reshape";
        last.inputs = {rows, logitsShape};
        last.outputs = {"logits"};
    }

private:
    // A checkpoint tensor as an initializer (borrowed from the mapping), checked
    // against the shape the config implies.
    std::string weight(const std::string& name, const Shape& shape)
    {
        const SafetensorsEntry* entry = weights_.find(name);
        if (!entry)
            throw Error(weights_.path().string() + ": tensor \"" + name + "\" is missing (config.json's " +
                        config_.architecture + " needs it)");
        if (entry->shape != shape)
            throw Error(weights_.path().string() + ": tensor \"" + name + "\" has shape " + shapeText(entry->shape) +
                        ", config.json implies " + shapeText(shape));
        if (entry->dtype != DType::F32 && entry->dtype != DType::F16 && entry->dtype != DType::BF16)
            throw Error(weights_.path().string() + ": tensor \"" + name + "\" is " + entry->sourceDtype +
                        "; the model runs from F32, F16 or BF16 weights");
        if (!model_.isInitializer(name))
            model_.addInitializer(name, weights_.tensor(*entry));
        return name;
    }

    static std::string shapeText(const Shape& shape)
    {
        std::string s = "[";
        for (size_t i = 0; i < shape.size(); ++i)
            s += (i ? ", " : "") + std::to_string(shape[i]);
        return s + "]";
    }

    // Values every layer reads: [batch, sequence], the rotary tables and the mask.
    void sharedValues()
    {
        const std::string shape = g_.op("Shape", {"input_ids"}, "model/input_shape");
        batchAndSequence_ = shape;
        const std::string sequence =
            g_.op("Gather", {shape, g_.int64s("const/one", {1}, true)}, "model/sequence_length",
                  {GraphBuilder::integer("axis", 0)});
        const std::string positions =
            g_.op("Range", {g_.int64s("const/zero", {0}, true), sequence, "const/one"}, "model/positions");
        const std::string positionsF = g_.op("Cast", {positions}, "model/positions_float",
                                             {GraphBuilder::integer("to", 1)}); // FLOAT
        const int64_t half = config_.headDim / 2;
        const std::string column =
            g_.op("Unsqueeze", {positionsF, g_.int64s("const/axis_1", {1})}, "model/positions_column");
        const std::string inv = g_.floats("model.rotary_emb.inv_freq", ropeInverseFrequencies(config_), {1, half});
        const std::string freqs = g_.op("Mul", {column, inv}, "model/rotary_freqs");
        const std::string angles =
            g_.op("Concat", {freqs, freqs}, "model/rotary_angles", {GraphBuilder::integer("axis", 1)});
        cos_ = g_.op("Cos", {angles}, "model/rotary_cos");
        sin_ = g_.op("Sin", {angles}, "model/rotary_sin");

        // mask[i, j] = 0 where query i may see key j (j <= i, and i - j < window), else -inf.
        const std::string rowsIdx = g_.op("Unsqueeze", {positions, "const/axis_1"}, "model/mask_rows");
        const std::string colsIdx =
            g_.op("Unsqueeze", {positions, g_.int64s("const/axis_0", {0})}, "model/mask_columns");
        std::string hidden = g_.op("Greater", {colsIdx, rowsIdx}, "model/mask_future");
        if (config_.slidingWindow) {
            const std::string distance = g_.op("Sub", {rowsIdx, colsIdx}, "model/mask_distance");
            const std::string far = g_.op(
                "GreaterOrEqual", {distance, g_.int64s("const/window", {*config_.slidingWindow}, true)},
                "model/mask_outside_window");
            hidden = g_.op("Or", {hidden, far}, "model/mask_hidden");
        }
        mask_ = g_.op("Where",
                      {hidden, g_.floats("const/minus_infinity", {-std::numeric_limits<float>::infinity()}, {}),
                       g_.floats("const/zero_float", {0.0f}, {})},
                      "model/causal_mask");

        const int64_t rep = config_.heads / config_.kvHeads;
        queryShape_ = g_.op("Concat", {shape, g_.int64s("const/query_split", {config_.kvHeads, rep, config_.headDim})},
                            "model/query_shape", {GraphBuilder::integer("axis", 0)});
        keyShape_ = g_.op("Concat", {shape, g_.int64s("const/key_split", {config_.kvHeads, config_.headDim})},
                          "model/key_shape", {GraphBuilder::integer("axis", 0)});
        g_.int64s("const/rope_first_half", {0});
        g_.int64s("const/rope_half", {half});
        g_.int64s("const/rope_end", {config_.headDim});
        g_.int64s("const/last_axis", {-1});
        g_.int64s("const/axis_2", {2});
        g_.int64s("const/attention_rows", {-1, config_.heads * config_.headDim});
        g_.floats("const/attention_scale", {float(1.0 / std::sqrt(double(config_.headDim)))}, {});
    }

    std::string rmsNorm(const std::string& x, const std::string& module)
    {
        const std::string w = weight(module + ".weight", {config_.hiddenSize});
        const std::string square = g_.op("Mul", {x, x}, module + "/square");
        const std::string mean = g_.op("ReduceMean", {square}, module + "/mean_square",
                                       {GraphBuilder::ints("axes", {-1}), GraphBuilder::integer("keepdims", 1)});
        if (!model_.isInitializer("const/rms_eps"))
            g_.floats("const/rms_eps", {float(config_.rmsNormEps)}, {});
        const std::string shifted = g_.op("Add", {mean, "const/rms_eps"}, module + "/plus_eps");
        const std::string root = g_.op("Sqrt", {shifted}, module + "/root");
        const std::string inverse = g_.op("Reciprocal", {root}, module + "/inverse_root");
        const std::string normed = g_.op("Mul", {x, inverse}, module + "/normalized");
        return g_.op("Mul", {w, normed}, module + "/scaled");
    }

    std::string linear(const std::string& x, const std::string& module, int64_t out, int64_t in, bool bias)
    {
        std::vector<std::string> inputs{x, weight(module + ".weight", {out, in})};
        if (bias)
            inputs.push_back(weight(module + ".bias", {out}));
        return g_.op("Gemm", std::move(inputs), module, {GraphBuilder::integer("transB", 1)});
    }

    // x * cos + rotate_half(x) * sin over the last axis.
    std::string rotary(const std::string& x, const std::string& name)
    {
        auto slice = [&](const char* start, const char* end, const std::string& n) {
            return g_.op("Slice", {x, start, end, "const/last_axis"}, n);
        };
        const std::string first = slice("const/rope_first_half", "const/rope_half", name + "_first_half");
        const std::string second = slice("const/rope_half", "const/rope_end", name + "_second_half");
        const std::string negated = g_.op("Neg", {second}, name + "_negated_second_half");
        const std::string rotated =
            g_.op("Concat", {negated, first}, name + "_rotated", {GraphBuilder::integer("axis", -1)});
        const std::string a = g_.op("Mul", {x, cos_}, name + "_cos");
        const std::string b = g_.op("Mul", {rotated, sin_}, name + "_sin");
        return g_.op("Add", {a, b}, name + "_rotary");
    }

    std::string decoderLayer(const std::string& input, const std::string& prefix)
    {
        const int64_t H = config_.hiddenSize;
        const int64_t qOut = config_.heads * config_.headDim;
        const int64_t kvOut = config_.kvHeads * config_.headDim;
        const std::string attn = prefix + ".self_attn";
        const std::string x = rmsNorm(input, prefix + ".input_layernorm");
        const std::string q = linear(x, attn + ".q_proj", qOut, H, config_.qkvBias);
        const std::string k = linear(x, attn + ".k_proj", kvOut, H, config_.qkvBias);
        const std::string v = linear(x, attn + ".v_proj", kvOut, H, config_.qkvBias);

        // Query heads kv * rep + r read key/value head kv: [batch, kv, rep, sequence, head_dim].
        const std::string q5 = g_.op("Reshape", {q, queryShape_}, attn + "/query_heads");
        const std::string qT = g_.op("Transpose", {q5}, attn + "/query_by_head",
                                     {GraphBuilder::ints("perm", {0, 2, 3, 1, 4})});
        const std::string qR = rotary(qT, attn + "/query");
        // Keys and values: [batch, kv, 1, sequence, head_dim].
        const std::string k4 = g_.op("Reshape", {k, keyShape_}, attn + "/key_heads");
        const std::string kT =
            g_.op("Transpose", {k4}, attn + "/key_by_head", {GraphBuilder::ints("perm", {0, 2, 1, 3})});
        const std::string kR = rotary(kT, attn + "/key");
        const std::string kRt =
            g_.op("Transpose", {kR}, attn + "/key_transposed", {GraphBuilder::ints("perm", {0, 1, 3, 2})});
        const std::string k5 = g_.op("Unsqueeze", {kRt, "const/axis_2"}, attn + "/key_shared");
        const std::string v4 = g_.op("Reshape", {v, keyShape_}, attn + "/value_heads");
        const std::string vT =
            g_.op("Transpose", {v4}, attn + "/value_by_head", {GraphBuilder::ints("perm", {0, 2, 1, 3})});
        const std::string v5 = g_.op("Unsqueeze", {vT, "const/axis_2"}, attn + "/value_shared");

        const std::string scores = g_.op("MatMul", {qR, k5}, attn + "/scores");
        const std::string scaled = g_.op("Mul", {scores, "const/attention_scale"}, attn + "/scaled_scores");
        const std::string masked = g_.op("Add", {scaled, mask_}, attn + "/masked_scores");
        const std::string probs =
            g_.op("Softmax", {masked}, attn + "/probabilities", {GraphBuilder::integer("axis", -1)});
        const std::string context = g_.op("MatMul", {probs, v5}, attn + "/context");
        const std::string byPosition = g_.op("Transpose", {context}, attn + "/context_by_position",
                                             {GraphBuilder::ints("perm", {0, 3, 1, 2, 4})});
        const std::string rows = g_.op("Reshape", {byPosition, "const/attention_rows"}, attn + "/context_rows");
        const std::string o = linear(rows, attn + ".o_proj", H, qOut, config_.outputBias);
        const std::string h = g_.op("Add", {input, o}, prefix + "/attention_residual");

        const std::string mlp = prefix + ".mlp";
        const std::string y = rmsNorm(h, prefix + ".post_attention_layernorm");
        const int64_t I = config_.intermediateSize;
        const std::string gate = linear(y, mlp + ".gate_proj", I, H, config_.mlpBias);
        const std::string up = linear(y, mlp + ".up_proj", I, H, config_.mlpBias);
        const std::string sigmoid = g_.op("Sigmoid", {gate}, mlp + "/gate_sigmoid");
        const std::string silu = g_.op("Mul", {gate, sigmoid}, mlp + "/gate_silu");
        const std::string product = g_.op("Mul", {silu, up}, mlp + "/gated");
        const std::string down = linear(product, mlp + ".down_proj", H, I, config_.mlpBias);
        return g_.op("Add", {h, down}, prefix + "/mlp_residual");
    }

    Model& model_;
    const LlamaConfig& config_;
    const SafetensorsFile& weights_;
    GraphBuilder g_;
    std::string batchAndSequence_, cos_, sin_, mask_, queryShape_, keyShape_;
};

fs::path weightsPath(const fs::path& folder)
{
    std::error_code ec;
    for (const char* name : {"model.safetensors.index.json", "model.safetensors"})
        if (fs::is_regular_file(folder / name, ec))
            return folder / name;
    throw Error(folder.string() + ": has config.json but neither model.safetensors nor "
                                  "model.safetensors.index.json");
}

} // namespace

Model loadHuggingFaceFolder(const fs::path& folder)
{
    bool runnable = false;
    const LlamaConfig config = readLlamaConfig(folder / "config.json", runnable);
    const SafetensorsFile weights = SafetensorsFile::open(weightsPath(folder));
    if (!runnable) {
        Model model = checkpointModel(weights);
        model.sourcePath = folder;
        model.warnings.push_back(
            folder.string() + ": config.json's architecture " +
            (config.architecture.empty() ? std::string("(none given)") : "\"" + config.architecture + "\"") +
            " is not one Quantscope runs (LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM): "
            "opened as weights only, without activations or perplexity");
        return model;
    }
    Model model;
    model.sourcePath = folder;
    model.format = "huggingface";
    model.producer = config.architecture;
    model.metadata = weights.metadata();
    model.metadata["architecture"] = config.architecture;
    if (!config.modelType.empty())
        model.metadata["model_type"] = config.modelType;
    model.widenHalfInitializers = true;
    LlamaGraph(model, config, weights).build();
    for (const SafetensorsEntry& entry : weights.entries())
        if (!model.isInitializer(entry.name) && !(config.tieWordEmbeddings && entry.name == "lm_head.weight"))
            model.warnings.push_back(weights.path().string() + ": tensor \"" + entry.name +
                                     "\" is not part of the " + config.architecture + " graph and is ignored");
    model.layers = findGraphLayers(model); // a tied lm_head shares the embedding's quantizer
    return model;
}

} // namespace qs
