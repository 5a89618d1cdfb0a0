#pragma once
// Per-channel statistics of chosen values over a float run of calibration
// data: the first phase of the calibrations that rewrite the model before it
// is calibrated (SmoothQuant's max|X_j|, high-bias absorption's minima).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/cancellation.h"
#include "io/data_source.h"
#include "runtime/interpreter.h"

namespace qs {

// One value to watch: input 0 of `node` before it runs, or its output 0
// after it ran (every node as the model states it: no activation folded into
// it first). Its axis `channelAxis` (negative: from the end) must hold
// `channels` values.
struct ChannelWatch {
    size_t node = 0;
    bool output = false;
    std::string value; // its name: the result's key, and errors'
    int channelAxis = -1;
    int64_t channels = 0;
};

enum class ChannelReduction {
    AbsMax, // max |x| per channel, from 0
    Min,    // min x per channel, from +infinity
};

struct ChannelStatisticsRun {
    std::string field; // the rule field asking, which errors name ("smooth_alpha")
    std::string phase; // what progress and errors call the pass ("smoothing statistics")
};

// Runs `data` (rewound first; at most `maxBatches` batches) through
// `interpreter` in float and reduces every watched value per channel. Throws
// Error naming the data file and batch for a batch the model rejects, the
// value for one whose channel axis does not hold its channels or that holds
// NaN/Inf, and the data file when it has no batch and something is watched.
// Cancelled per batch and between nodes.
std::map<std::string, std::vector<double>>
channelStatistics(const Interpreter& interpreter, const std::vector<ChannelWatch>& watches, ChannelReduction reduction,
                  const ChannelStatisticsRun& about, DataSource& data, std::optional<int64_t> maxBatches,
                  const CancellationToken& cancel = {}, const ProgressCallback& progress = {});

} // namespace qs
