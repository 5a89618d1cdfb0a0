#pragma once
// The statistics of high-bias absorption (quantization/high_bias_absorption.h):
// the float (equalized) model runs over the calibration data and, for the first
// layer of every absorption pair, the minimum of each channel of its output
// before the Relu is kept (over every sample and, for a Conv, every position).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/cancellation.h"
#include "io/data_source.h"
#include "quantization/high_bias_absorption.h"
#include "runtime/interpreter.h"

namespace qs {

// Runs `data` (rewound first; at most `maxBatches` batches) through
// `interpreter` in float; per pre-activation of `targets`, its minimum per
// channel. Cancelled per batch and between nodes. Throws Error naming the data
// file and batch for a batch the model rejects, and the value for an output
// whose channel axis is not the layer's channel count or that holds NaN/Inf.
std::map<std::string, std::vector<double>> preActivationMinima(const Interpreter& interpreter,
                                                               const HighBiasAbsorption& targets, DataSource& data,
                                                               std::optional<int64_t> maxBatches,
                                                               const CancellationToken& cancel = {},
                                                               const ProgressCallback& progress = {});

} // namespace qs
