#include "runtime/pre_activation_minima.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace qs {
namespace {

// Reads each first layer's output after its node ran (every node as the model
// states it, so no Relu is folded into the layer before the output is seen).
class MinimaObserver : public NodeObserver {
public:
    MinimaObserver(const Model& model, const HighBiasAbsorption& targets)
    {
        for (const AbsorptionPair& p : targets.pairs)
            watches_.push_back({*model.layers.at(p.first).node, p.preActivation, p.channelAxis,
                                std::vector<double>(size_t(p.channels), std::numeric_limits<double>::infinity())});
    }
    bool needsEveryNode() const override { return true; }

    void afterNode(NodeEvent& event) override
    {
        if (event.scope != 0)
            return;
        for (Watch& w : watches_) {
            if (w.node != event.nodeIndex || event.outputs.empty())
                continue;
            const Tensor z = event.outputs[0].toFloat32();
            const int64_t k = int64_t(w.minima.size());
            const int axis = w.channelAxis < 0 ? z.rank() + w.channelAxis : w.channelAxis;
            if (axis < 0 || axis >= z.rank() || z.shape()[size_t(axis)] != k)
                throw Error("high_bias_absorption: output '" + w.value + "' has shape " + shapeToString(z.shape()) +
                            "; its channel axis must hold the layer's " + std::to_string(k) + " output channels");
            int64_t inner = 1;
            for (int a = axis + 1; a < z.rank(); ++a)
                inner *= z.shape()[size_t(a)];
            const auto v = z.values<float>();
            for (size_t e = 0; e < v.size(); ++e) {
                const double x = v[e];
                if (!std::isfinite(x))
                    throw Error("high_bias_absorption: output '" + w.value +
                                "' holds a value that is not finite at index " + std::to_string(e));
                double& m = w.minima[size_t((int64_t(e) / inner) % k)];
                m = std::min(m, x);
            }
        }
    }

    std::map<std::string, std::vector<double>> take()
    {
        std::map<std::string, std::vector<double>> out;
        for (Watch& w : watches_)
            out.emplace(w.value, std::move(w.minima));
        return out;
    }

private:
    struct Watch {
        size_t node;
        std::string value;
        int channelAxis;
        std::vector<double> minima;
    };
    std::vector<Watch> watches_;
};

} // namespace

std::map<std::string, std::vector<double>> preActivationMinima(const Interpreter& interpreter,
                                                               const HighBiasAbsorption& targets, DataSource& data,
                                                               std::optional<int64_t> maxBatches,
                                                               const CancellationToken& cancel,
                                                               const ProgressCallback& progress)
{
    MinimaObserver observer(interpreter.model(), targets);
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
            throw Error("calibration data '" + data.path().string() + "', batch " + std::to_string(done + 1) +
                        " (high-bias absorption statistics): " + e.what());
        }
        if (progress)
            progress(double(done + 1) / double(total), "high-bias absorption statistics, batch " +
                                                           std::to_string(done + 1) + "/" + std::to_string(total));
    }
    if (done == 0 && !targets.pairs.empty())
        throw Error("calibration data '" + data.path().string() + "' has no batch for high-bias absorption");
    return observer.take();
}

} // namespace qs
