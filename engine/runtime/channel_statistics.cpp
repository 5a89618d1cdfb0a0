#include "runtime/channel_statistics.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace qs {
namespace {

class ChannelObserver : public NodeObserver {
public:
    ChannelObserver(const std::vector<ChannelWatch>& watches, ChannelReduction reduction, const std::string& field)
        : reduction_(reduction), field_(field)
    {
        const double start = reduction == ChannelReduction::Min ? std::numeric_limits<double>::infinity() : 0.0;
        for (const ChannelWatch& w : watches) {
            watches_.push_back({w, std::vector<double>(size_t(w.channels), start)});
            everyNode_ = everyNode_ || w.output;
        }
    }
    bool needsEveryNode() const override { return everyNode_; }

    void beforeNode(NodeEvent& event) override { see(event, false); }
    void afterNode(NodeEvent& event) override { see(event, true); }

    std::map<std::string, std::vector<double>> take()
    {
        std::map<std::string, std::vector<double>> out;
        for (Watched& w : watches_)
            out.emplace(w.watch.value, std::move(w.values));
        return out;
    }

private:
    struct Watched {
        ChannelWatch watch;
        std::vector<double> values;
    };

    void see(NodeEvent& event, bool after)
    {
        if (event.scope != 0)
            return;
        for (Watched& w : watches_) {
            const auto tensors = after ? event.outputs : event.inputs;
            if (w.watch.node != event.nodeIndex || w.watch.output != after || tensors.empty())
                continue;
            reduce(w, tensors[0].toFloat32());
        }
    }

    void reduce(Watched& w, const Tensor& x) const
    {
        const int64_t k = w.watch.channels;
        const int axis = w.watch.channelAxis < 0 ? x.rank() + w.watch.channelAxis : w.watch.channelAxis;
        if (axis < 0 || axis >= x.rank() || x.shape()[size_t(axis)] != k)
            throw Error(field_ + ": value '" + w.watch.value + "' has shape " + shapeToString(x.shape()) +
                        "; its axis " + std::to_string(w.watch.channelAxis) + " must hold the layer's " +
                        std::to_string(k) + " channels");
        int64_t inner = 1;
        for (int a = axis + 1; a < x.rank(); ++a)
            inner *= x.shape()[size_t(a)];
        const auto v = x.values<float>();
        for (size_t e = 0; e < v.size(); ++e) {
            const double value = v[e];
            if (!std::isfinite(value))
                throw Error(field_ + ": value '" + w.watch.value + "' holds a value that is not finite at index " +
                            std::to_string(e));
            double& m = w.values[size_t((int64_t(e) / inner) % k)];
            m = reduction_ == ChannelReduction::Min ? std::min(m, value) : std::max(m, std::abs(value));
        }
    }

    std::vector<Watched> watches_;
    ChannelReduction reduction_;
    std::string field_;
    bool everyNode_ = false;
};

} // namespace

std::map<std::string, std::vector<double>>
channelStatistics(const Interpreter& interpreter, const std::vector<ChannelWatch>& watches, ChannelReduction reduction,
                  const ChannelStatisticsRun& about, DataSource& data, std::optional<int64_t> maxBatches,
                  const CancellationToken& cancel, const ProgressCallback& progress)
{
    ChannelObserver observer(watches, reduction, about.field);
    data.rewind();
    int64_t total = data.batchCount();
    if (maxBatches)
        total = std::min(total, std::max<int64_t>(*maxBatches, 0));
    int64_t done = 0;
    for (; done < total; ++done) {
        cancel.check();
        std::optional<Batch> batch = data.next();
        if (!batch)
            break;
        RunOptions run;
        run.cancel = cancel;
        run.observer = &observer;
        try {
            interpreter.run(std::move(batch->inputs), run);
        } catch (const Cancelled&) {
            throw;
        } catch (const Error& e) {
            throw Error("calibration data '" + data.path().string() + "', batch " + std::to_string(done + 1) + " (" +
                        about.phase + "): " + e.what());
        }
        if (progress)
            progress(double(done + 1) / double(total),
                     about.phase + ", batch " + std::to_string(done + 1) + "/" + std::to_string(total));
    }
    if (done == 0 && !watches.empty())
        throw Error("calibration data '" + data.path().string() + "' has no batch for the " + about.phase);
    return observer.take();
}

} // namespace qs
