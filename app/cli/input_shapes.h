#pragma once
// The shape options of the commands that run a model: --shape NAME=AxBxC
// (repeatable) gives an input's whole shape where the model leaves dimensions
// dynamic; --batch-size B the rows per batch (default: the model's fixed batch
// dimension). Declared once so run, bench-model and quantize agree.

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "cli/arguments.h"
#include "graph/model.h"
#include "io/data_source.h"

namespace qs::cli {

// The seed of the random values bench-model and run --shape make.
inline constexpr uint64_t kSyntheticSeed = 20240229;

// Every --shape value is at most this many elements (1 GiB of float32).
inline constexpr int64_t kMaxShapeElements = int64_t(1) << 28;

// --shape NAME=AxBxC, one per input: sizes >= 1 separated by 'x'. A malformed
// value or a name given twice is a UsageError; a name the model has no input
// of, or a shape of more than kMaxShapeElements, is a qs::Error naming it.
std::map<std::string, Shape> shapeOptions(const Arguments& args, const Model& model, const std::string& modelFile);

// --batch-size B (1 to 2^20), none when not given; a malformed value is a UsageError.
std::optional<int64_t> batchSizeArgument(const Arguments& args);

// batchSizingFor(model, requested, preferred) with errors about a `requested`
// size prefixed by "--batch-size B: ".
BatchSizing cliBatchSizing(const Model& model, std::optional<int64_t> requested, int64_t preferred = kDefaultBatchSize);

// "x=1x3x<h>x<w>": the input's fixed sizes, `batch` for a dynamic axis 0 and
// the names of its other dynamic dimensions.
std::string shapeExample(const ValueInfo& input, int64_t batch);

// What to tell a user whose input needs --shape: "give --shape x=1x3x<h>x<w>
// (a size for every axis)".
std::string shapeRemedy(const ValueInfo& input, int64_t batch);

// " (dimensions 0 (batch) and 2 (h) are dynamic)", or "" when every dimension is fixed.
std::string dynamicDimsText(const ValueInfo& input);

} // namespace qs::cli
