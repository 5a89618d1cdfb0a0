#include "runtime/pre_activation_minima.h"

#include "runtime/channel_statistics.h"

namespace qs {

std::map<std::string, std::vector<double>> preActivationMinima(const Interpreter& interpreter,
                                                               const HighBiasAbsorption& targets, DataSource& data,
                                                               std::optional<int64_t> maxBatches,
                                                               const CancellationToken& cancel,
                                                               const ProgressCallback& progress)
{
    // Each first layer's output after its node ran.
    std::vector<ChannelWatch> watches;
    for (const AbsorptionPair& p : targets.pairs)
        watches.push_back(
            {*interpreter.model().layers.at(p.first).node, true, p.preActivation, p.channelAxis, p.channels});
    return channelStatistics(interpreter, watches, ChannelReduction::Min,
                             {"high_bias_absorption", "high-bias absorption statistics"}, data, maxBatches, cancel,
                             progress);
}

} // namespace qs
