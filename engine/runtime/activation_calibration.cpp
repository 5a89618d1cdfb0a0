#include "runtime/activation_calibration.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/block_layout.h"

namespace qs {

// Feeds each observed activation to its observer, once per run: at the first
// node (model order) that reads it as a quantized data input. A node inside a
// Loop or Scan body feeds it at every iteration: the statistics accumulate
// over iterations as over batches.
class ActivationCalibrator::Feeder : public NodeObserver {
public:
    void watch(size_t scope, size_t node, size_t input, Observer* observer)
    {
        watches_.push_back({scope, node, input, observer});
        markWatched(scope, node);
    }
    // The feeder reads only the inputs of quantized layers (Conv, Gemm, MatMul,
    // ...), which folding an activation into a Conv leaves as they are.
    bool needsEveryNode() const override { return false; }
    bool readsOutputs() const override { return false; }
    bool seesSubgraphs() const override { return true; }

    // The data input of a layer whose algorithm needs its Hessian.
    void watchHessian(const QuantizableLayer& layer, const Node& node, size_t input, InputHessian* hessian)
    {
        hessianWatches_.push_back({&layer, &node, input, hessian});
        markWatched(layer.scope, *layer.node);
    }
    bool observesNode(size_t scope, size_t nodeIndex) const override
    {
        return scope < watched_.size() && nodeIndex < watched_[scope].size() && watched_[scope][nodeIndex];
    }

    void beforeNode(NodeEvent& event) override
    {
        for (const Watch& w : watches_)
            if (w.node == event.nodeIndex && w.scope == event.scope && w.input < event.inputs.size())
                w.observer->observe(event.inputs[w.input]);
        for (const HessianWatch& w : hessianWatches_)
            if (*w.layer->node == event.nodeIndex && w.layer->scope == event.scope && w.input < event.inputs.size())
                accumulateLayerInput(*w.layer, *w.node, event.inputs[w.input], *w.hessian);
    }

private:
    struct Watch {
        size_t scope;
        size_t node;
        size_t input;
        Observer* observer;
    };
    struct HessianWatch {
        const QuantizableLayer* layer;
        const Node* node;
        size_t input;
        InputHessian* hessian;
    };
    void markWatched(size_t scope, size_t node)
    {
        if (watched_.size() <= scope)
            watched_.resize(scope + 1);
        if (watched_[scope].size() <= node)
            watched_[scope].resize(node + 1, false);
        watched_[scope][node] = true;
    }

    std::vector<Watch> watches_;
    std::vector<HessianWatch> hessianWatches_;
    std::vector<std::vector<bool>> watched_; // [scope][node]: what observesNode answers
};

const Observer* ActivationStatistics::find(const std::string& value) const
{
    auto it = observers_.find(value);
    return it == observers_.end() ? nullptr : &it->second;
}

bool ActivationStatistics::covers(const QuantizationPlan& plan) const
{
    for (const ObservedActivation& o : plan.observedActivations()) {
        bool needed = false, needsHistogram = false;
        for (size_t layer : o.layers) {
            const ActivationQuantization& a = *plan.forLayer(layer)->activation;
            needed = needed || a.staticScale;
            needsHistogram = needsHistogram || (a.staticScale && a.method.needsHistogram());
        }
        if (!needed)
            continue;
        const Observer* observer = find(o.value);
        if (!observer || observer->batches() == 0 || observer->config().batchAxes != o.config.batchAxes ||
            observer->config().channelAxis != o.config.channelAxis ||
            (needsHistogram && observer->config().histogramBinsPerSide == 0))
            return false;
    }
    for (const LayerQuantization& lq : plan.layers())
        if (lq.problem.empty() && lq.weight && lq.readsCalibrationInputs()) {
            const auto it = hessians_.find(lq.layer);
            if (it == hessians_.end() || it->second->rows() == 0)
                return false;
        }
    return true;
}

void ActivationStatistics::add(Observer observer)
{
    const std::string name = observer.name();
    observers_.insert_or_assign(name, std::move(observer));
}

nlohmann::json ActivationStatistics::toJson() const
{
    nlohmann::json observers = nlohmann::json::array();
    for (const auto& [name, observer] : observers_)
        observers.push_back(observer.toJson());
    return {{"version", 1}, {"batches", batches_}, {"observers", std::move(observers)}};
}

ActivationStatistics ActivationStatistics::fromJson(const nlohmann::json& j)
{
    auto fail = [](const std::string& field, const std::string& what) -> Error {
        return Error("activation statistics, field \"" + field + "\": " + what);
    };
    if (!j.is_object())
        throw Error("activation statistics: expected a JSON object, got " + std::string(j.type_name()));
    if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int64_t>() != 1)
        throw fail("version", "must be 1" + (j.contains("version") ? ", got " + j["version"].dump() : ""));
    if (!j.contains("batches") || !j["batches"].is_number_integer() || j["batches"].get<int64_t>() < 0)
        throw fail("batches", "must be a whole number of batches >= 0");
    if (!j.contains("observers") || !j["observers"].is_array())
        throw fail("observers", "must be a list of observers");
    for (const auto& [key, value] : j.items())
        if (key != "version" && key != "batches" && key != "observers")
            throw fail(key, "is not a field of activation statistics (version, batches, observers)");

    ActivationStatistics s;
    s.batches_ = j["batches"].get<int64_t>();
    const nlohmann::json& list = j["observers"];
    for (size_t i = 0; i < list.size(); ++i) {
        const std::string field = "observers[" + std::to_string(i) + "]";
        Observer o = [&] {
            try {
                return Observer::fromJson(list[i]);
            } catch (const Error& e) {
                throw fail(field, e.what());
            }
        }();
        if (s.observers_.count(o.name()))
            throw fail(field, "a second observer of activation '" + o.name() + "'");
        s.observers_.emplace(o.name(), std::move(o));
    }
    return s;
}

void ActivationStatistics::save(const std::filesystem::path& file) const
{
    const std::string text = toJson().dump();
    writeFileAtomically(file, text.data(), text.size());
}

ActivationStatistics ActivationStatistics::load(const std::filesystem::path& file)
{
    std::ifstream in(file, std::ios::binary);
    if (!in)
        throw Error(file.string() + ": cannot open the activation statistics file");
    std::stringstream text;
    text << in.rdbuf();
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text.str());
    } catch (const nlohmann::json::exception& e) {
        throw Error(file.string() + ": not JSON: " + e.what());
    }
    try {
        return fromJson(j);
    } catch (const Error& e) {
        throw Error(file.string() + ": " + e.what());
    }
}

ActivationCalibrator::ActivationCalibrator(const Interpreter& interpreter, const QuantizationPlan& plan,
                                           int histogramBinsPerSide, KeptHistograms kept)
    : interpreter_(interpreter), feeder_(std::make_unique<Feeder>())
{
    const Model& model = interpreter.model();
    const std::vector<ObservedActivation> observed = plan.observedActivations();
    for (const ObservedActivation& o : observed) {
        // A dynamic layer's method counts too: its statistics then serve the
        // same method if the rule turns static.
        const bool needed = std::any_of(o.layers.begin(), o.layers.end(), [&](size_t layer) {
            return plan.forLayer(layer)->activation->method.needsHistogram();
        });
        ObserverConfig config = o.config;
        config.histogramBinsPerSide = kept == KeptHistograms::All || needed ? histogramBinsPerSide : 0;
        observers_.emplace(o.value, Observer(o.value, config));
    }
    for (const ObservedActivation& o : observed) {
        const LayerQuantization* lq = plan.forLayer(o.layers.front());
        const QuantizableLayer& layer = model.layers.at(lq->layer);
        feeder_->watch(layer.scope, *layer.node, lq->activation->input, &observers_.at(o.value));
    }
    for (const LayerQuantization& lq : plan.layers()) {
        if (!lq.problem.empty() || !lq.weight || !lq.readsCalibrationInputs())
            continue;
        const QuantizableLayer& layer = model.layers.at(lq.layer);
        // A grouped Conv's statistics: the means of every group's inputs and one Hessian per group.
        auto hessian = std::make_shared<InputHessian>(calibrationFeatures(layer), true, calibrationGroups(layer));
        feeder_->watchHessian(layer, model.scopeGraph(layer.scope).nodes.at(*layer.node), lq.weightAlgorithmInput,
                              hessian.get());
        hessians_.emplace(lq.layer, std::move(hessian));
    }
}

ActivationCalibrator::~ActivationCalibrator() = default;

std::map<std::string, Tensor> ActivationCalibrator::observe(std::map<std::string, Tensor> inputs,
                                                            const CancellationToken& cancel)
{
    RunOptions run;
    run.cancel = cancel;
    run.observer = feeder_.get();
    std::map<std::string, Tensor> outputs = interpreter_.run(std::move(inputs), run);
    ++batches_;
    return outputs;
}

ActivationStatistics ActivationCalibrator::finish()
{
    ActivationStatistics statistics;
    for (auto& [name, observer] : observers_)
        statistics.add(std::move(observer));
    observers_.clear();
    LayerHessians hessians;
    for (auto& [layer, hessian] : hessians_)
        hessians.emplace(layer, std::move(hessian));
    hessians_.clear();
    statistics.setHessians(std::move(hessians));
    statistics.setBatches(batches_);
    return statistics;
}

ActivationStatistics calibrateActivations(const Interpreter& interpreter, const QuantizationPlan& plan,
                                          DataSource& data, const CalibrationOptions& options,
                                          const CancellationToken& cancel, const ProgressCallback& progress)
{
    ActivationCalibrator calibrator(interpreter, plan, options.histogramBinsPerSide, options.histograms);
    data.rewind();
    int64_t total = data.batchCount();
    if (options.maxBatches)
        total = std::min(total, std::max<int64_t>(*options.maxBatches, 0));
    for (int64_t done = 0; done < total; ++done) {
        cancel.check();
        std::optional<Batch> batch = data.next();
        if (!batch)
            break;
        try {
            calibrator.observe(std::move(batch->inputs), cancel);
        } catch (const Cancelled&) {
            throw;
        } catch (const Error& e) {
            throw Error("calibration data '" + data.path().string() + "', batch " + std::to_string(done + 1) +
                        " (rows " + std::to_string(batch->firstRow) + " to " +
                        std::to_string(batch->firstRow + batch->rows - 1) + "): " + e.what());
        }
        if (progress)
            progress(double(done + 1) / double(total),
                     "calibrating batch " + std::to_string(done + 1) + "/" + std::to_string(total));
    }
    return calibrator.finish();
}

StaticActivation staticActivationFrom(const Observer& observer, const ActivationQuantization& a)
{
    StaticActivation s;
    s.range = observer.ranges(a.method, a.target).at(0);
    s.params = quantParamsFromRanges(a.target.qtype, BlockLayout::perTensor({}), std::span(&s.range, 1),
                                     calibrationSymmetric(a.method, a.target), a.target.options, a.value);
    return s;
}

std::map<size_t, StaticActivation> staticActivations(const QuantizationPlan& plan,
                                                     const ActivationStatistics& statistics)
{
    std::map<size_t, StaticActivation> out;
    for (const LayerQuantization& lq : plan.layers()) {
        if (!lq.activation || !lq.activation->staticScale || !lq.problem.empty())
            continue;
        const ActivationQuantization& a = *lq.activation;
        const Observer* observer = statistics.find(a.value);
        if (!observer)
            throw Error("activation '" + a.value +
                        "' has a static scale but the calibration statistics do not hold it; it needs "
                        "calibration: run activation calibration with the current rules");
        out.emplace(lq.layer, staticActivationFrom(*observer, a));
    }
    return out;
}

} // namespace qs
