#pragma once
// What `quantscope-cli quantize` reports: the human table on stdout and
// REPORT.json (layout in docs/cli.md, "quantize report"), both from one value.

#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/model_quantization.h"
#include "session/evaluation.h"

namespace qs::cli {

struct QuantizeReport {
    const Exploration* exploration = nullptr; // the quantized model, its rules, weights and statistics
    StageTimes times;
    std::string modelFile;
    std::string modelSha256;
    std::string rulesFile;
    std::string calibFile;                                // empty when not calibrated
    std::string evalFile;                                 // empty without --eval
    std::shared_ptr<const EvaluationResult> evaluation;   // with --eval
    std::shared_ptr<const SensitivityResult> sensitivity; // with --sensitivity
    nlohmann::json exports = nlohmann::json::object();    // what each --export-* wrote
    double evaluationSeconds = 0, sensitivitySeconds = 0, exportSeconds = 0, totalSeconds = 0;
};

// The report layout's version, written as "version".
inline constexpr int kQuantizeReportVersion = 1;

nlohmann::json quantizeReportJson(const QuantizeReport& report);
std::string quantizeReportText(const QuantizeReport& report);

} // namespace qs::cli
