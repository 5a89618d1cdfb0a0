#include "session/layer_errors.h"

#include <algorithm>
#include <set>

#include "graph/model.h"
#include "session/evaluation.h"

namespace qs {
namespace {

std::optional<double> sqnrOf(const std::optional<ErrorMetrics>& m)
{
    return m ? std::optional<double>(m->sqnrDb) : std::nullopt;
}

std::string pathOf(const Model& model, size_t layer)
{
    return layer < model.layers.size() ? model.layers[layer].modulePath : "layer " + std::to_string(layer);
}

} // namespace

std::vector<const LayerErrorRow*> LayerErrorData::below(double thresholdDb) const
{
    std::vector<const LayerErrorRow*> out;
    for (const LayerErrorRow& r : rows)
        if (const auto s = r.markedSqnr(); s && *s < thresholdDb)
            out.push_back(&r);
    return out;
}

LayerErrorData layerErrors(const Model& model, const EvaluationResult* evaluation,
                           const std::map<size_t, ErrorMetrics>& weightMetrics, const SensitivityResult* sensitivity)
{
    LayerErrorData d;
    std::set<size_t> seen;
    if (evaluation)
        for (const LayerEvaluation& e : evaluation->layers) {
            LayerErrorRow r;
            r.layer = e.layer;
            r.modulePath = pathOf(model, e.layer);
            r.weightSqnr = sqnrOf(e.weight);
            if (!r.weightSqnr)
                if (const auto it = weightMetrics.find(e.layer); it != weightMetrics.end())
                    r.weightSqnr = it->second.sqnrDb;
            r.isolatedSqnr = sqnrOf(e.isolated);
            r.accumulatedSqnr = sqnrOf(e.accumulated);
            d.rows.push_back(std::move(r));
            seen.insert(e.layer);
        }
    for (const auto& [layer, metrics] : weightMetrics)
        if (!seen.count(layer)) {
            LayerErrorRow r;
            r.layer = layer;
            r.modulePath = pathOf(model, layer);
            r.weightSqnr = metrics.sqnrDb;
            d.rows.push_back(std::move(r));
        }
    std::stable_sort(d.rows.begin(), d.rows.end(),
                     [](const LayerErrorRow& a, const LayerErrorRow& b) { return a.layer < b.layer; });
    if (sensitivity) {
        d.allButOne = sensitivity->kind == SensitivityKind::AllButOne;
        d.sensitivityAlgorithm = sensitivity->algorithm ? sensitivity->algorithm->toString() : std::string();
        for (const LayerSensitivity& s : sensitivity->ranking)
            d.sensitivity.push_back({s.layer, pathOf(model, s.layer), s.output.sqnrDb, s.top1});
    }
    return d;
}

} // namespace qs
