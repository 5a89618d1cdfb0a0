#include "widgets/graph_colouring.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <QObject>

#include "graph/model.h"
#include "numerics/qtype.h"
#include "quantization/quantization_plan.h"
#include "quantization/weight_quantizer.h"
#include "runtime/activation_calibration.h"
#include "session/evaluation.h"
#include "session/layer_errors.h"

namespace qs {

QString graphMetricName(GraphMetric metric)
{
    switch (metric) {
    case GraphMetric::WeightSqnr:
        return QObject::tr("Weight SQNR");
    case GraphMetric::IsolatedSqnr:
        return QObject::tr("Isolated SQNR");
    case GraphMetric::AccumulatedSqnr:
        return QObject::tr("Accumulated SQNR");
    case GraphMetric::Sensitivity:
        return QObject::tr("Sensitivity");
    case GraphMetric::Algorithm:
        return QObject::tr("Algorithm");
    }
    return {};
}

std::optional<double> GraphColouring::value(GraphMetric metric, size_t layer) const
{
    auto at = [layer](const std::vector<std::optional<double>>& v) {
        return layer < v.size() ? v[layer] : std::nullopt;
    };
    switch (metric) {
    case GraphMetric::WeightSqnr:
        return at(weightSqnr);
    case GraphMetric::IsolatedSqnr:
        return at(isolatedSqnr);
    case GraphMetric::AccumulatedSqnr:
        return at(accumulatedSqnr);
    case GraphMetric::Sensitivity:
        return at(sensitivity);
    case GraphMetric::Algorithm:
        return std::nullopt;
    }
    return std::nullopt;
}

QColor GraphColouring::colour(GraphMetric metric, size_t layer) const
{
    if (metric == GraphMetric::Algorithm)
        return algorithmColour(layer < algorithm.size() ? algorithm[layer] : std::string());
    const auto v = value(metric, layer);
    return v ? sqnrColour(*v) : noValueColour();
}

QColor sqnrColour(double db)
{
    // NaN (no signal) counts as the worst; +inf (exact) as the best.
    const double t =
        std::isnan(db) ? 0.0 : std::clamp((db - kSqnrColourLow) / (kSqnrColourHigh - kSqnrColourLow), 0.0, 1.0);
    return QColor::fromHsv(int(std::lround(120 * t)), 150, 240);
}

QColor algorithmColour(const std::string& algorithm)
{
    if (algorithm.empty())
        return QColor(0xd8, 0xd8, 0xd8);
    if (algorithm == "rtn")
        return QColor(0x9e, 0xc9, 0xf0);
    if (algorithm == "gptq")
        return QColor(0xf5, 0xb9, 0x6e);
    if (algorithm == "awq")
        return QColor(0xb8, 0xe0, 0x9a);
    if (algorithm == "adaround")
        return QColor(0xf0, 0xa8, 0xc8);
    return QColor(0xd6, 0xb4, 0xf0);
}

QColor noValueColour()
{
    return QColor(0xd8, 0xd8, 0xd8);
}

QColor nonLayerColour()
{
    return QColor(0xf7, 0xf7, 0xf7);
}

GraphColouring graphColouring(const Model& model, const QuantizationPlan* plan, const WeightQuantizer* weights,
                              const EvaluationResult* evaluation, const SensitivityResult* sensitivity,
                              const ActivationStatistics* statistics)
{
    const size_t n = model.layers.size();
    GraphColouring c;
    c.weightSqnr.assign(n, std::nullopt);
    c.isolatedSqnr.assign(n, std::nullopt);
    c.accumulatedSqnr.assign(n, std::nullopt);
    c.sensitivity.assign(n, std::nullopt);
    c.algorithm.assign(n, std::string());
    c.weightSharedWith.assign(n, {});

    std::map<size_t, ErrorMetrics> weightMetrics;
    if (weights)
        for (const auto& [layer, w] : weights->weights())
            weightMetrics[layer] = w->metrics;
    const LayerErrorData errors = layerErrors(model, evaluation, weightMetrics, sensitivity);
    for (const LayerErrorRow& row : errors.rows) {
        if (row.layer >= n)
            continue;
        c.weightSqnr[row.layer] = row.weightSqnr;
        c.isolatedSqnr[row.layer] = row.isolatedSqnr;
        c.accumulatedSqnr[row.layer] = row.accumulatedSqnr;
    }
    for (const SensitivityRow& row : errors.sensitivity)
        if (row.layer < n)
            c.sensitivity[row.layer] = row.outputSqnr;
    c.sensitivityAllButOne = errors.allButOne;

    for (size_t l = 0; l < n; ++l)
        if (const auto& of = model.layers[l].sharesWeightOf; of && *of < n) {
            // Everyone reading the weight of `root`, each told of the others.
            const size_t root = *of;
            std::vector<size_t> group{root};
            for (size_t k = 0; k < n; ++k)
                if (model.layers[k].sharesWeightOf == root)
                    group.push_back(k);
            for (const size_t a : group) {
                c.weightSharedWith[a].clear();
                for (const size_t b : group)
                    if (a != b)
                        c.weightSharedWith[a].push_back(b);
            }
        }

    if (!plan)
        return c;
    std::map<std::string, std::vector<size_t>> layersOfValue;
    for (const LayerQuantization& lq : plan->layers()) {
        if (lq.layer >= n || !lq.problem.empty())
            continue;
        if (lq.weight)
            c.algorithm[lq.layer] =
                std::string(lq.weightAlgorithm.toString().substr(0, lq.weightAlgorithm.toString().find(',')));
        if (!lq.activation)
            continue;
        const ActivationQuantization& a = *lq.activation;
        QuantizationPoint p;
        p.value = a.value;
        p.layer = lq.layer;
        p.qtype = std::string(qtypeName(a.target.qtype));
        p.staticScale = a.staticScale;
        p.method = a.method.toString();
        // Ranges of the histogram methods are searches (mse, entropy): not redone on the GUI thread.
        if (statistics && !a.method.needsHistogram())
            if (const Observer* o = statistics->find(a.value); o && o->batches() > 0) {
                try {
                    const auto ranges = o->ranges(a.method, a.target);
                    if (!ranges.empty())
                        p.range = ranges.front();
                } catch (const std::exception&) {
                    // A range the observer cannot give (a microscaling type): the tooltip says none.
                }
            }
        layersOfValue[a.value].push_back(lq.layer);
        c.points.push_back(std::move(p));
    }
    for (QuantizationPoint& p : c.points)
        for (const size_t l : layersOfValue[p.value])
            if (l != p.layer)
                p.sharedWith.push_back(l);
    return c;
}

} // namespace qs
