#include "runtime/input_channel_maxima.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace qs {
namespace {

// Reads each smoothed activation at its first smoothed reader (node, input 0).
class ChannelMaximaObserver : public NodeObserver {
public:
    ChannelMaximaObserver(const Model& model, const SmoothQuant& targets)
    {
        for (const SmoothedInput& in : targets.inputs) {
            const size_t node = *model.layers.at(in.layers.front()).node;
            watches_.push_back({node, in.value, std::vector<double>(size_t(in.channels), 0.0)});
        }
    }
    bool needsEveryNode() const override { return false; }

    void beforeNode(NodeEvent& event) override
    {
        if (event.scope != 0)
            return;
        for (Watch& w : watches_) {
            if (w.node != event.nodeIndex || event.inputs.empty())
                continue;
            const Tensor x = event.inputs[0].toFloat32();
            const int64_t k = int64_t(w.maxima.size());
            if (x.rank() < 1 || x.shape().back() != k)
                throw Error("smooth_alpha: activation '" + w.value + "' has shape " + shapeToString(x.shape()) +
                            "; its last axis must be the " + std::to_string(k) + " input channels of its layers");
            const auto v = x.values<float>();
            for (size_t e = 0; e < v.size(); ++e) {
                const double a = std::abs(double(v[e]));
                if (!std::isfinite(a))
                    throw Error("smooth_alpha: activation '" + w.value +
                                "' holds a value that is not finite at index " + std::to_string(e));
                double& m = w.maxima[e % size_t(k)];
                m = std::max(m, a);
            }
        }
    }

    std::map<std::string, std::vector<double>> take()
    {
        std::map<std::string, std::vector<double>> out;
        for (Watch& w : watches_)
            out.emplace(w.value, std::move(w.maxima));
        return out;
    }

private:
    struct Watch {
        size_t node;
        std::string value;
        std::vector<double> maxima;
    };
    std::vector<Watch> watches_;
};

} // namespace

std::map<std::string, std::vector<double>>
inputChannelMaxima(const Interpreter& interpreter, const SmoothQuant& targets, DataSource& data,
                   std::optional<int64_t> maxBatches, const CancellationToken& cancel, const ProgressCallback& progress)
{
    ChannelMaximaObserver observer(interpreter.model(), targets);
    data.rewind();
    int64_t total = data.batchCount();
    if (maxBatches)
        total = std::min(total, std::max<int64_t>(*maxBatches, 0));
    for (int64_t done = 0; done < total; ++done) {
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
            throw Error("calibration data '" + data.path().string() + "', batch " + std::to_string(done + 1) +
                        " (smoothing statistics): " + e.what());
        }
        if (progress)
            progress(double(done + 1) / double(total),
                     "smoothing statistics, batch " + std::to_string(done + 1) + "/" + std::to_string(total));
    }
    return observer.take();
}

} // namespace qs
