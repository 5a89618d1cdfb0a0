#include "runtime/input_channel_maxima.h"

#include "runtime/channel_statistics.h"

namespace qs {

std::map<std::string, std::vector<double>>
inputChannelMaxima(const Interpreter& interpreter, const SmoothQuant& targets, DataSource& data,
                   std::optional<int64_t> maxBatches, const CancellationToken& cancel, const ProgressCallback& progress)
{
    // Each smoothed activation at its first smoothed reader (input 0), its channels on the last axis.
    std::vector<ChannelWatch> watches;
    for (const SmoothedInput& in : targets.inputs)
        watches.push_back({*interpreter.model().layers.at(in.layers.front()).node, false, in.value, -1, in.channels});
    return channelStatistics(interpreter, watches, ChannelReduction::AbsMax, {"smooth_alpha", "smoothing statistics"},
                             data, maxBatches, cancel, progress);
}

} // namespace qs
