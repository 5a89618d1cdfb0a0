#include "session/session_file.h"

#include <array>
#include <fstream>

#include "core/atomic_file.h"
#include "core/error.h"

namespace qs {

namespace {

using Json = nlohmann::json;

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
    if (sequenceLength > 0)
        j["sequence_length"] = sequenceLength;
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
    if (const auto it = j.find("sequence_length"); it != j.end() && !it->is_null())
        c.sequenceLength = positiveInteger(*it, field + ".sequence_length");
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

} // namespace qs
