#pragma once
// The session file: the whole state of one exploration as JSON, so the app can
// save it, reopen it and offer it back after a crash (autosave). It holds the
// model's path and SHA-256 (a changed model is noticed on open), the rules as
// the editor holds them (a half-edited rule included), the calibration and
// evaluation data configuration, and cached results: the activation
// statistics (reused as calibration) and the last evaluation.
//
// {"quantscope_session": 1, "model": {"path": ..., "sha256": ...}, "mode": "ptq",
//  "rules": {"version": 1, "rules": [...]}, "calibration_data": {...} | null,
//  "evaluation_data": {...} | null, "results": {"activation_statistics": ...,
//  "evaluation": ..., "rules_of_results": ...}}

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/sha256.h" // sha256OfFile: callers hash the model with the session
#include "io/image_folder.h"

namespace qs {

// Where calibration or evaluation batches come from.
struct DataConfig {
    enum class Kind : uint8_t {
        File,        // .npz / .npy / HDF5 (io/data_source.h), or .txt for a language model
        ImageFolder, // a folder of images with `recipe` (io/image_folder.h)
        Synthetic,   // random normal inputs: not representative, shown with a warning
    };
    Kind kind = Kind::File;
    std::filesystem::path path; // the file or folder (unused for Synthetic)
    int64_t batchSize = 32;     // rows per batch, >= 1
    std::optional<int64_t> maxBatches; // none: every batch
    int64_t sequenceLength = 0;        // text files: tokens per row (0: io/text_data_source.h's default)
    ImageRecipe recipe;         // ImageFolder only
    int64_t syntheticSamples = 64; // Synthetic only: rows in all
    uint64_t syntheticSeed = 0;    // Synthetic only

    nlohmann::json toJson() const;
    // Throws Error naming `field` (e.g. "calibration_data.batch_size") for a malformed object.
    static DataConfig fromJson(const nlohmann::json& j, const std::string& field);
    bool operator==(const DataConfig&) const;
};
std::string_view dataKindName(DataConfig::Kind k); // "file", "image_folder", "synthetic"

struct SessionFile {
    static constexpr int kVersion = 1;
    // Session files larger than this are refused before they are read.
    static constexpr std::uintmax_t kMaxFileBytes = 256u << 20;

    std::filesystem::path modelPath; // absolute
    std::string modelSha256;         // lower-case hex of the model file's bytes
    std::string mode = "ptq";        // quantization mode ("ptq", "odml")
    nlohmann::ordered_json rules = nlohmann::ordered_json{{"version", 1}, {"rules", nlohmann::ordered_json::array()}};
    std::optional<DataConfig> calibrationData;
    std::optional<DataConfig> evaluationData;
    // Cached results; null when absent. `rulesOfResults` is the rules document
    // the results were computed from (results of other rules are stale).
    nlohmann::json activationStatistics; // ActivationStatistics::toJson()
    nlohmann::json evaluation;           // EvaluationResult::toJson()
    nlohmann::ordered_json rulesOfResults;

    std::string toJson() const;
    // Throws Error naming `sourceName` and the field for anything malformed.
    static SessionFile fromJson(std::string_view text, std::string_view sourceName = "<string>");
    // Atomic write (temporary file renamed into place).
    void save(const std::filesystem::path& file) const;
    static SessionFile load(const std::filesystem::path& file);
};

} // namespace qs
