#include "session/session_file.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"

namespace qs {

namespace {

using Json = nlohmann::json;

// ---- SHA-256 (FIPS 180-4) --------------------------------------------------

constexpr std::array<uint32_t, 64> kRoundConstants{
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

class Sha256 {
public:
    void add(const uint8_t* data, size_t size)
    {
        length_ += size;
        while (size > 0) {
            const size_t take = std::min(size, block_.size() - filled_);
            std::memcpy(block_.data() + filled_, data, take);
            filled_ += take;
            data += take;
            size -= take;
            if (filled_ == block_.size()) {
                compress();
                filled_ = 0;
            }
        }
    }

    std::string hex()
    {
        const uint64_t bits = length_ * 8;
        const uint8_t one = 0x80, zero = 0;
        add(&one, 1);
        while (filled_ != 56)
            add(&zero, 1);
        for (int i = 7; i >= 0; --i) {
            const uint8_t b = uint8_t(bits >> (8 * i));
            add(&b, 1);
        }
        static const char* digits = "0123456789abcdef";
        std::string out;
        for (const uint32_t h : state_)
            for (int i = 3; i >= 0; --i) {
                const uint8_t b = uint8_t(h >> (8 * i));
                out += digits[b >> 4];
                out += digits[b & 15];
            }
        return out;
    }

private:
    static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

    void compress()
    {
        std::array<uint32_t, 64> w{};
        for (int i = 0; i < 16; ++i)
            w[size_t(i)] = uint32_t(block_[size_t(4 * i)]) << 24 | uint32_t(block_[size_t(4 * i + 1)]) << 16 |
                           uint32_t(block_[size_t(4 * i + 2)]) << 8 | uint32_t(block_[size_t(4 * i + 3)]);
        for (size_t i = 16; i < 64; ++i) {
            const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
            const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16] + s0 + w[i - 7] + s1;
        }
        auto v = state_;
        for (size_t i = 0; i < 64; ++i) {
            const uint32_t s1 = rotr(v[4], 6) ^ rotr(v[4], 11) ^ rotr(v[4], 25);
            const uint32_t ch = (v[4] & v[5]) ^ (~v[4] & v[6]);
            const uint32_t t1 = v[7] + s1 + ch + kRoundConstants[i] + w[i];
            const uint32_t s0 = rotr(v[0], 2) ^ rotr(v[0], 13) ^ rotr(v[0], 22);
            const uint32_t maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
            v = {t1 + s0 + maj, v[0], v[1], v[2], v[3] + t1, v[4], v[5], v[6]};
        }
        for (size_t i = 0; i < 8; ++i)
            state_[i] += v[i];
    }

    std::array<uint32_t, 8> state_{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    std::array<uint8_t, 64> block_{};
    size_t filled_ = 0;
    uint64_t length_ = 0;
};

// ---- JSON fields -----------------------------------------------------------

[[noreturn]] void fieldError(const std::string& field, const std::string& what)
{
    throw Error("field \"" + field + "\": " + what);
}

const Json& member(const Json& object, const std::string& key, const std::string& field)
{
    const auto it = object.find(key);
    if (it == object.end())
        fieldError(field + "." + key, "missing");
    return *it;
}

int64_t positiveInteger(const Json& v, const std::string& field)
{
    if (!v.is_number_integer() || v.get<int64_t>() < 1)
        fieldError(field, "expected an integer >= 1, got " + v.dump());
    return v.get<int64_t>();
}

std::string stringOf(const Json& v, const std::string& field)
{
    if (!v.is_string())
        fieldError(field, "expected a string, got " + v.dump());
    return v.get<std::string>();
}

Json recipeJson(const ImageRecipe& r)
{
    return {{"resize_shorter", r.resizeShorter},
            {"crop_height", r.cropHeight},
            {"crop_width", r.cropWidth},
            {"mean", r.mean},
            {"std", r.std},
            {"layout", r.layout == ImageLayout::NCHW ? "nchw" : "nhwc"},
            {"channels", r.channels == ChannelOrder::RGB ? "rgb" : "bgr"},
            {"labels_from_folders", r.labelsFromFolders}};
}

ImageRecipe recipeFromJson(const Json& j, const std::string& field)
{
    if (!j.is_object())
        fieldError(field, "expected an object");
    ImageRecipe r;
    try {
        r.resizeShorter = member(j, "resize_shorter", field).get<int64_t>();
        r.cropHeight = positiveInteger(member(j, "crop_height", field), field + ".crop_height");
        r.cropWidth = positiveInteger(member(j, "crop_width", field), field + ".crop_width");
        r.mean = member(j, "mean", field).get<std::array<float, 3>>();
        r.std = member(j, "std", field).get<std::array<float, 3>>();
        r.labelsFromFolders = member(j, "labels_from_folders", field).get<bool>();
    } catch (const nlohmann::json::exception& e) {
        fieldError(field, std::string("malformed recipe: ") + e.what());
    }
    const std::string layout = stringOf(member(j, "layout", field), field + ".layout");
    if (layout != "nchw" && layout != "nhwc")
        fieldError(field + ".layout", "expected \"nchw\" or \"nhwc\", got \"" + layout + "\"");
    r.layout = layout == "nchw" ? ImageLayout::NCHW : ImageLayout::NHWC;
    const std::string channels = stringOf(member(j, "channels", field), field + ".channels");
    if (channels != "rgb" && channels != "bgr")
        fieldError(field + ".channels", "expected \"rgb\" or \"bgr\", got \"" + channels + "\"");
    r.channels = channels == "rgb" ? ChannelOrder::RGB : ChannelOrder::BGR;
    return r;
}

} // namespace

std::string_view dataKindName(DataConfig::Kind k)
{
    switch (k) {
    case DataConfig::Kind::File:
        return "file";
    case DataConfig::Kind::ImageFolder:
        return "image_folder";
    case DataConfig::Kind::Synthetic:
        return "synthetic";
    }
    return "file";
}

Json DataConfig::toJson() const
{
    Json j{{"kind", dataKindName(kind)}, {"path", path.string()}, {"batch_size", batchSize}};
    j["max_batches"] = maxBatches ? Json(*maxBatches) : Json();
    if (kind == Kind::ImageFolder)
        j["recipe"] = recipeJson(recipe);
    if (kind == Kind::Synthetic) {
        j["samples"] = syntheticSamples;
        j["seed"] = syntheticSeed;
    }
    return j;
}

DataConfig DataConfig::fromJson(const Json& j, const std::string& field)
{
    if (!j.is_object())
        fieldError(field, "expected an object, got " + j.dump());
    DataConfig c;
    const std::string kind = stringOf(member(j, "kind", field), field + ".kind");
    if (kind == "file")
        c.kind = Kind::File;
    else if (kind == "image_folder")
        c.kind = Kind::ImageFolder;
    else if (kind == "synthetic")
        c.kind = Kind::Synthetic;
    else
        fieldError(field + ".kind", "expected \"file\", \"image_folder\" or \"synthetic\", got \"" + kind + "\"");
    c.path = stringOf(member(j, "path", field), field + ".path");
    c.batchSize = positiveInteger(member(j, "batch_size", field), field + ".batch_size");
    if (const auto it = j.find("max_batches"); it != j.end() && !it->is_null())
        c.maxBatches = positiveInteger(*it, field + ".max_batches");
    if (c.kind == Kind::ImageFolder)
        c.recipe = recipeFromJson(member(j, "recipe", field), field + ".recipe");
    if (c.kind == Kind::Synthetic) {
        c.syntheticSamples = positiveInteger(member(j, "samples", field), field + ".samples");
        const Json& seed = member(j, "seed", field);
        if (!seed.is_number_unsigned())
            fieldError(field + ".seed", "expected a non-negative integer, got " + seed.dump());
        c.syntheticSeed = seed.get<uint64_t>();
    }
    return c;
}

bool DataConfig::operator==(const DataConfig& o) const
{
    return toJson() == o.toJson();
}

std::string SessionFile::toJson() const
{
    nlohmann::ordered_json j;
    j["quantscope_session"] = kVersion;
    j["model"] = {{"path", modelPath.string()}, {"sha256", modelSha256}};
    j["mode"] = mode;
    j["rules"] = rules;
    j["calibration_data"] = calibrationData ? nlohmann::ordered_json(calibrationData->toJson()) : nullptr;
    j["evaluation_data"] = evaluationData ? nlohmann::ordered_json(evaluationData->toJson()) : nullptr;
    j["results"] = {{"activation_statistics", activationStatistics},
                    {"evaluation", evaluation},
                    {"rules_of_results", rulesOfResults}};
    return j.dump(2) + "\n";
}

SessionFile SessionFile::fromJson(std::string_view text, std::string_view sourceName)
{
    const std::string source(sourceName);
    nlohmann::ordered_json j;
    try {
        j = nlohmann::ordered_json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
        throw Error(source + ": not a session file (bad JSON at byte " + std::to_string(e.byte) + ")");
    }
    try {
        if (!j.is_object() || !j.contains("quantscope_session"))
            throw Error("not a session file (no \"quantscope_session\" version)");
        if (j["quantscope_session"] != kVersion)
            fieldError("quantscope_session", "unsupported version " + j["quantscope_session"].dump() +
                                                 " (this build reads " + std::to_string(kVersion) + ")");
        SessionFile s;
        const Json model = member(j, "model", "session");
        s.modelPath = stringOf(member(model, "path", "model"), "model.path");
        s.modelSha256 = stringOf(member(model, "sha256", "model"), "model.sha256");
        s.mode = stringOf(member(j, "mode", "session"), "mode");
        s.rules = j.at("rules");
        if (!s.rules.is_object() || !s.rules.contains("rules") || !s.rules["rules"].is_array())
            fieldError("rules", "expected a rule file object with a \"rules\" list");
        for (const auto& [key, target] : {std::pair{"calibration_data", &s.calibrationData},
                                          std::pair{"evaluation_data", &s.evaluationData}}) {
            const auto it = j.find(key);
            if (it != j.end() && !it->is_null())
                *target = DataConfig::fromJson(Json(*it), key);
        }
        if (const auto it = j.find("results"); it != j.end() && it->is_object()) {
            s.activationStatistics = Json(it->value("activation_statistics", nlohmann::ordered_json()));
            s.evaluation = Json(it->value("evaluation", nlohmann::ordered_json()));
            s.rulesOfResults = it->value("rules_of_results", nlohmann::ordered_json());
        }
        return s;
    } catch (const nlohmann::json::exception& e) {
        throw Error(source + ": malformed session: " + e.what());
    } catch (const Error& e) {
        throw Error(source + ": " + e.what());
    }
}

void SessionFile::save(const std::filesystem::path& file) const
{
    const std::string text = toJson();
    writeFileAtomically(file, text.data(), text.size());
}

SessionFile SessionFile::load(const std::filesystem::path& file)
{
    std::error_code ec;
    const auto size = std::filesystem::file_size(file, ec);
    if (ec)
        throw Error(file.string() + ": cannot read the session file (" + ec.message() + ")");
    if (size > kMaxFileBytes)
        throw Error(file.string() + ": " + std::to_string(size) + " bytes is larger than a session file may be (" +
                    std::to_string(kMaxFileBytes) + ")");
    std::ifstream in(file, std::ios::binary);
    std::string text(size, '\0');
    if (!in.read(text.data(), std::streamsize(size)))
        throw Error(file.string() + ": cannot read the session file");
    return fromJson(text, file.string());
}

std::string sha256Hex(std::span<const uint8_t> bytes)
{
    Sha256 h;
    h.add(bytes.data(), bytes.size());
    return h.hex();
}

std::string sha256OfFile(const std::filesystem::path& file)
{
    std::ifstream in(file, std::ios::binary);
    if (!in)
        throw Error(file.string() + ": cannot open the file to hash it");
    Sha256 h;
    std::vector<char> buffer(1 << 20);
    while (in) {
        in.read(buffer.data(), std::streamsize(buffer.size()));
        h.add(reinterpret_cast<const uint8_t*>(buffer.data()), size_t(in.gcount()));
    }
    if (in.bad())
        throw Error(file.string() + ": read error while hashing");
    return h.hex();
}

} // namespace qs
