#pragma once
// The first phase of a SmoothQuant calibration (quantization/smoothing.h): the
// float model runs over the calibration data and, for every activation whose
// readers are smoothed, the absolute maximum of each channel of its last axis
// is kept (max|X_j| over every row of every batch).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/cancellation.h"
#include "io/data_source.h"
#include "quantization/smoothing.h"
#include "runtime/interpreter.h"

namespace qs {

// Runs `data` (rewound first; at most `maxBatches` batches) through
// `interpreter` in float; per input of `targets`, max|X_j| per channel.
// Cancelled per batch and between nodes. Throws Error naming the data file
// and batch for a batch the model rejects, and the value for an activation
// whose last axis is not the layers' channel count or holds NaN/Inf.
std::map<std::string, std::vector<double>> inputChannelMaxima(const Interpreter& interpreter,
                                                              const SmoothQuant& targets, DataSource& data,
                                                              std::optional<int64_t> maxBatches,
                                                              const CancellationToken& cancel = {},
                                                              const ProgressCallback& progress = {});

} // namespace qs
