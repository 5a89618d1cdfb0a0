#include "session/rule_comparison.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <nlohmann/json.hpp>

#include "numerics/qtype.h"
#include "session/exploration.h"

namespace qs {
namespace {

bool finite(const std::optional<double>& v)
{
    return v && std::isfinite(*v);
}

std::optional<double> difference(const std::optional<double>& a, const std::optional<double>& b)
{
    if (!finite(a) || !finite(b))
        return std::nullopt;
    return *b - *a;
}

// A side's figures for layer `i` of its model, as the quantize report reads them.
ComparedLayerSide sideOf(const Exploration& x, size_t i)
{
    ComparedLayerSide s;
    s.present = true;
    const Model& model = x.model();
    const LayerQuantization* lq = x.plan()->forLayer(i);
    if (lq) {
        s.rule = lq->rule;
        s.problem = lq->problem;
    }
    if (lq && lq->problem.empty()) {
        if (lq->weight)
            s.weightQType = std::string(qtypeName(lq->weight->qtype));
        if (lq->activation)
            s.actQType = std::string(qtypeName(lq->activation->target.qtype)) +
                         (lq->activation->staticScale ? "" : " (dynamic)");
        if (const auto w = x.weights()->find(i))
            s.weightSqnr = w->metrics.sqnrDb;
    }
    if (const auto e = x.evaluation(); e && x.evaluationGeneration() == x.generation())
        for (const LayerEvaluation& l : e->layers)
            if (l.layer == i) {
                if (l.isolated)
                    s.isolatedSqnr = l.isolated->sqnrDb;
                if (l.accumulated)
                    s.accumulatedSqnr = l.accumulated->sqnrDb;
            }
    s.weightBytes = layerWeightBytes(model, *x.plan(), *x.weights(), i).quantizedBytes;
    return s;
}

const EvaluationResult* currentEvaluation(const Exploration& x)
{
    return x.evaluation() && x.evaluationGeneration() == x.generation() ? x.evaluation().get() : nullptr;
}

nlohmann::json number(const std::optional<double>& v)
{
    return finite(v) ? nlohmann::json(*v) : nlohmann::json();
}

nlohmann::json figureJson(const ComparedFigure& f)
{
    return {{"a", number(f.a)}, {"b", number(f.b)}, {"delta", number(f.delta())}};
}

nlohmann::json sideJson(const ComparedLayerSide& s)
{
    if (!s.present)
        return nullptr;
    return {{"rule", s.rule ? nlohmann::json(*s.rule) : nlohmann::json()},
            {"weight_qtype", s.weightQType.empty() ? nlohmann::json() : nlohmann::json(s.weightQType)},
            {"act_qtype", s.actQType.empty() ? nlohmann::json() : nlohmann::json(s.actQType)},
            {"problem", s.problem.empty() ? nlohmann::json() : nlohmann::json(s.problem)},
            {"weight_bytes", s.weightBytes}};
}

} // namespace

std::string ComparedLayerSide::summary() const
{
    if (!present)
        return "-";
    if (!quantized())
        return "float";
    return (weightQType.empty() ? "float" : weightQType) + " / " + (actQType.empty() ? "float" : actQType);
}

std::optional<double> ComparedFigure::delta() const
{
    return difference(a, b);
}

RuleComparison compareRules(const Exploration& a, const Exploration& b)
{
    RuleComparison c;
    std::map<std::string, size_t> rowOf;
    auto addSide = [&](const Exploration& x, bool isA) {
        const Model& model = x.model();
        for (size_t i = 0; i < model.layers.size(); ++i) {
            const QuantizableLayer& layer = model.layers[i];
            auto [it, added] = rowOf.emplace(layer.modulePath, c.layers.size());
            if (added) {
                LayerComparison row;
                row.modulePath = layer.modulePath;
                row.opType = layer.opType;
                row.order = c.layers.size();
                c.layers.push_back(row);
            }
            (isA ? c.layers[it->second].a : c.layers[it->second].b) = sideOf(x, i);
        }
    };
    addSide(a, true);
    addSide(b, false);
    for (LayerComparison& row : c.layers) {
        row.deltaWeightSqnr = difference(row.a.weightSqnr, row.b.weightSqnr);
        row.deltaIsolatedSqnr = difference(row.a.isolatedSqnr, row.b.isolatedSqnr);
        row.deltaAccumulatedSqnr = difference(row.a.accumulatedSqnr, row.b.accumulatedSqnr);
        if (row.a.present && row.b.present)
            row.deltaWeightBytes = row.b.weightBytes - row.a.weightBytes;
        if (!row.b.present)
            row.note = "only in A";
        else if (!row.a.present)
            row.note = "only in B";
        else if (!row.a.quantized() && !row.b.quantized())
            row.note = "float in both";
        else if (!row.a.quantized())
            row.note = "float in A";
        else if (!row.b.quantized())
            row.note = "float in B";
    }

    const EvaluationResult* ea = currentEvaluation(a);
    const EvaluationResult* eb = currentEvaluation(b);
    c.evaluatedA = ea != nullptr;
    c.evaluatedB = eb != nullptr;
    if (ea)
        for (const OutputEvaluation& o : ea->outputs) {
            OutputComparison oc;
            oc.name = o.name;
            oc.sqnrDb.a = o.metrics.sqnrDb;
            if (eb)
                for (const OutputEvaluation& ob : eb->outputs)
                    if (ob.name == o.name)
                        oc.sqnrDb.b = ob.metrics.sqnrDb;
            c.outputs.push_back(oc);
        }
    auto figures = [&c](const EvaluationResult* e, bool isA) {
        if (!e)
            return;
        auto set = [isA](ComparedFigure& f, std::optional<double> v) { (isA ? f.a : f.b) = v; };
        if (e->accuracy) {
            set(c.floatTop1, e->accuracy->floatTop1);
            set(c.quantizedTop1, e->accuracy->quantizedTop1);
        }
        if (e->agreement)
            set(c.top1Agreement, e->agreement->fraction());
        if (e->perplexity) {
            set(c.floatPerplexity, e->perplexity->floatValue);
            set(c.quantizedPerplexity, e->perplexity->quantizedValue);
        }
    };
    figures(ea, true);
    figures(eb, false);
    c.totalA = totalWeightBytes(a.model(), *a.plan(), *a.weights());
    c.totalB = totalWeightBytes(b.model(), *b.plan(), *b.weights());
    return c;
}

nlohmann::json RuleComparison::toJson() const
{
    nlohmann::json j;
    j["layers"] = nlohmann::json::array();
    for (const LayerComparison& row : layers) {
        j["layers"].push_back(
            {{"module_path", row.modulePath},
             {"op_type", row.opType},
             {"a", sideJson(row.a)},
             {"b", sideJson(row.b)},
             {"note", row.note.empty() ? nlohmann::json() : nlohmann::json(row.note)},
             {"weight_sqnr_db_a", number(row.a.weightSqnr)},
             {"weight_sqnr_db_b", number(row.b.weightSqnr)},
             {"act_sqnr_db_a", number(row.a.isolatedSqnr)},
             {"act_sqnr_db_b", number(row.b.isolatedSqnr)},
             {"accumulated_sqnr_db_a", number(row.a.accumulatedSqnr)},
             {"accumulated_sqnr_db_b", number(row.b.accumulatedSqnr)},
             {"weight_bytes_a", row.a.present ? nlohmann::json(row.a.weightBytes) : nlohmann::json()},
             {"weight_bytes_b", row.b.present ? nlohmann::json(row.b.weightBytes) : nlohmann::json()},
             {"delta_weight_sqnr_db", number(row.deltaWeightSqnr)},
             {"delta_act_sqnr_db", number(row.deltaIsolatedSqnr)},
             {"delta_accumulated_sqnr_db", number(row.deltaAccumulatedSqnr)},
             {"delta_weight_bytes", row.deltaWeightBytes ? nlohmann::json(*row.deltaWeightBytes) : nlohmann::json()}});
    }
    j["outputs"] = nlohmann::json::array();
    for (const OutputComparison& o : outputs) {
        nlohmann::json f = figureJson(o.sqnrDb);
        j["outputs"].push_back(
            {{"name", o.name}, {"sqnr_db_a", f["a"]}, {"sqnr_db_b", f["b"]}, {"delta_sqnr_db", f["delta"]}});
    }
    j["float_top1"] = figureJson(floatTop1);
    j["quantized_top1"] = figureJson(quantizedTop1);
    j["top1_agreement"] = figureJson(top1Agreement);
    j["float_perplexity"] = figureJson(floatPerplexity);
    j["quantized_perplexity"] = figureJson(quantizedPerplexity);
    j["weight_bytes"] = {{"float", totalA.floatBytes},
                         {"a", totalA.quantizedBytes},
                         {"b", totalB.quantizedBytes},
                         {"delta", totalB.quantizedBytes - totalA.quantizedBytes}};
    j["evaluated"] = {{"a", evaluatedA}, {"b", evaluatedB}};
    return j;
}

std::optional<ComparisonColumn> parseComparisonColumn(std::string_view name)
{
    static const std::pair<std::string_view, ComparisonColumn> names[] = {
        {"order", ComparisonColumn::Order},
        {"path", ComparisonColumn::Path},
        {"weight", ComparisonColumn::WeightSqnr},
        {"isolated", ComparisonColumn::IsolatedSqnr},
        {"accumulated", ComparisonColumn::AccumulatedSqnr},
        {"bytes", ComparisonColumn::WeightBytes},
    };
    for (const auto& [n, c] : names)
        if (n == name)
            return c;
    return std::nullopt;
}

std::string comparisonColumnNames()
{
    return "order, path, weight, isolated, accumulated, bytes";
}

void sortLayers(std::vector<LayerComparison>& layers, ComparisonColumn column)
{
    auto key = [column](const LayerComparison& r) -> std::optional<double> {
        switch (column) {
        case ComparisonColumn::WeightSqnr:
            return r.deltaWeightSqnr;
        case ComparisonColumn::IsolatedSqnr:
            return r.deltaIsolatedSqnr;
        case ComparisonColumn::AccumulatedSqnr:
            return r.deltaAccumulatedSqnr;
        case ComparisonColumn::WeightBytes:
            return r.deltaWeightBytes ? std::optional<double>(double(*r.deltaWeightBytes)) : std::nullopt;
        default:
            return std::nullopt;
        }
    };
    std::stable_sort(layers.begin(), layers.end(), [&](const LayerComparison& x, const LayerComparison& y) {
        if (column == ComparisonColumn::Order)
            return x.order < y.order;
        if (column == ComparisonColumn::Path)
            return x.modulePath < y.modulePath;
        const std::optional<double> kx = key(x), ky = key(y);
        if (kx && ky && *kx != *ky)
            return *kx < *ky;
        if (kx.has_value() != ky.has_value())
            return kx.has_value();
        return x.order < y.order;
    });
}

} // namespace qs
