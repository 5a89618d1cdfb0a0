#include "cli/quantize_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "cli/text_table.h"
#include "numerics/qtype.h"
#include "quantization/weight_bytes.h"

namespace qs::cli {
namespace {

std::string fixed(double v, const char* format = "%.2f")
{
    return formatNumber(v, format);
}

std::string sqnrText(const std::optional<ErrorMetrics>& m)
{
    if (!m)
        return "-";
    return std::isinf(m->sqnrDb) ? (m->sqnrDb > 0 ? "inf" : "-inf") : fixed(m->sqnrDb);
}

std::string percent(double fraction)
{
    return fixed(100.0 * fraction) + "%";
}

// The evaluation of a model layer, when the report has one.
const LayerEvaluation* evaluationOf(const QuantizeReport& r, size_t layer)
{
    if (!r.evaluation)
        return nullptr;
    for (const LayerEvaluation& l : r.evaluation->layers)
        if (l.layer == layer)
            return &l;
    return nullptr;
}

std::optional<ErrorMetrics> weightMetrics(const QuantizeReport& r, size_t layer)
{
    const LayerQuantization* lq = r.exploration->plan()->forLayer(layer);
    const auto w = r.exploration->weights()->find(layer);
    if (!lq || !lq->problem.empty() || !w)
        return std::nullopt;
    return w->metrics;
}

nlohmann::json optionalMetrics(const std::optional<ErrorMetrics>& m)
{
    return m ? errorMetricsJson(*m) : nlohmann::json();
}

// The algorithm that rounded the layer's weight ("rtn", "gptq", ...), "" when it stays float.
std::string weightAlgorithm(const LayerQuantization* lq)
{
    return lq && lq->weight && lq->problem.empty() ? lq->weightAlgorithm.toString() : "";
}

std::string weightQType(const LayerQuantization* lq)
{
    return lq && lq->problem.empty() && lq->weight ? std::string(qtypeName(lq->weight->qtype)) : "";
}

std::string actQType(const LayerQuantization* lq)
{
    if (!lq || !lq->problem.empty() || !lq->activation)
        return "";
    return std::string(qtypeName(lq->activation->target.qtype)) + (lq->activation->staticScale ? "" : " (dynamic)");
}

} // namespace

nlohmann::json quantizeReportJson(const QuantizeReport& r)
{
    const Exploration& q = *r.exploration;
    const Model& model = q.model();
    nlohmann::json j;
    j["version"] = kQuantizeReportVersion;
    j["tool_version"] = QUANTSCOPE_VERSION;
    j["model"] = {{"path", r.modelFile}, {"sha256", r.modelSha256}, {"format", model.format}};
    j["mode"] = std::string(quantizationModeName(q.plan()->mode()));
    const RuleResolution& resolution = q.plan()->resolution();
    j["rules"] = {{"file", r.rulesFile},
                  {"rules", nlohmann::json::parse(q.rules().toJson())["rules"]},
                  {"match_counts", resolution.matchCount},
                  {"unused", resolution.unusedRules}};
    j["calibration"] = r.calibFile.empty()
                           ? nlohmann::json()
                           : nlohmann::json{{"file", r.calibFile}, {"batches", q.statistics()->batches()}};
    j["equalization"] = nullptr;
    if (const auto eq = q.equalization()) {
        nlohmann::json pairs = nlohmann::json::array(), skipped = nlohmann::json::array();
        for (const EqualizedPair& p : eq->pairs) {
            const auto [low, high] = std::minmax_element(p.scales.begin(), p.scales.end());
            pairs.push_back({{"first", model.layers[p.first].modulePath},
                             {"second", model.layers[p.second].modulePath},
                             {"through", p.through},
                             {"channels", p.scales.size()},
                             {"min_scale", *low},
                             {"max_scale", *high}});
        }
        for (const SkippedPair& p : eq->skipped)
            skipped.push_back({{"layer", model.layers[p.first].modulePath}, {"reason", p.reason}});
        j["equalization"] = {{"pairs", pairs}, {"skipped", skipped}, {"sweeps", eq->sweeps}};
    }
    j["absorption"] = nullptr;
    if (const auto hb = q.absorption()) {
        nlohmann::json pairs = nlohmann::json::array(), skipped = nlohmann::json::array();
        for (const AbsorptionPair& p : hb->pairs) {
            const auto absorbed = std::count_if(p.absorbed.begin(), p.absorbed.end(), [](double c) { return c > 0; });
            const double largest = p.absorbed.empty() ? 0.0 : *std::max_element(p.absorbed.begin(), p.absorbed.end());
            pairs.push_back({{"first", model.layers[p.first].modulePath},
                             {"second", model.layers[p.second].modulePath},
                             {"pre_activation", p.preActivation},
                             {"channels", p.channels},
                             {"channels_absorbed", absorbed},
                             {"max_absorbed", largest}});
        }
        for (const SkippedPair& p : hb->skipped)
            skipped.push_back({{"layer", model.layers[p.first].modulePath}, {"reason", p.reason}});
        j["absorption"] = {{"pairs", pairs}, {"skipped", skipped}};
    }
    j["smoothing"] = nullptr;
    if (const auto sq = q.smoothing()) {
        nlohmann::json inputs = nlohmann::json::array(), skipped = nlohmann::json::array();
        for (const SmoothedInput& in : sq->inputs) {
            nlohmann::json layers = nlohmann::json::array();
            for (size_t l : in.layers)
                layers.push_back(model.layers[l].modulePath);
            nlohmann::json entry{{"activation", in.value},       {"layers", layers},  {"producer", in.producer},
                                 {"producer_op", in.producerOp}, {"alpha", in.alpha}, {"channels", in.channels}};
            if (!in.scales.empty()) {
                const auto [low, high] = std::minmax_element(in.scales.begin(), in.scales.end());
                entry["min_scale"] = *low;
                entry["max_scale"] = *high;
            }
            inputs.push_back(std::move(entry));
        }
        for (const SkippedSmoothing& k : sq->skipped)
            skipped.push_back({{"layer", model.layers[k.layer].modulePath}, {"reason", k.reason}});
        j["smoothing"] = {{"inputs", inputs}, {"skipped", skipped}};
    }
    j["layers"] = nlohmann::json::array();
    for (size_t i = 0; i < model.layers.size(); ++i) {
        const QuantizableLayer& layer = model.layers[i];
        const LayerQuantization* lq = q.plan()->forLayer(i);
        const LayerEvaluation* e = evaluationOf(r, i);
        const std::string wq = weightQType(lq), aq = lq && lq->activation && lq->problem.empty()
                                                         ? std::string(qtypeName(lq->activation->target.qtype))
                                                         : "";
        j["layers"].push_back(
            {{"index", i},
             {"module_path", layer.modulePath},
             {"op_type", layer.opType},
             {"shares_weight_of",
              layer.sharesWeightOf ? nlohmann::json(model.layers[*layer.sharesWeightOf].modulePath) : nlohmann::json()},
             {"rule", lq ? nlohmann::json(lq->rule) : nlohmann::json()},
             {"weight_qtype", wq.empty() ? nlohmann::json() : nlohmann::json(wq)},
             {"algorithm", weightAlgorithm(lq).empty() ? nlohmann::json() : nlohmann::json(weightAlgorithm(lq))},
             {"act_qtype", aq.empty() ? nlohmann::json() : nlohmann::json(aq)},
             {"act_static", lq && lq->activation ? nlohmann::json(lq->activation->staticScale) : nlohmann::json()},
             {"problem", lq && !lq->problem.empty() ? nlohmann::json(lq->problem) : nlohmann::json()},
             {"weight", optionalMetrics(weightMetrics(r, i))},
             {"isolated", optionalMetrics(e ? e->isolated : std::nullopt)},
             {"accumulated", optionalMetrics(e ? e->accumulated : std::nullopt)}});
        // The headline numbers again under flat names, for scripts and CI checks.
        nlohmann::json& row = j["layers"].back();
        row["rule_index"] = row["rule"];
        row["weight_sqnr_db"] = row["weight"].is_null() ? nlohmann::json() : row["weight"]["sqnr_db"];
        row["act_sqnr_db"] = row["isolated"].is_null() ? nlohmann::json() : row["isolated"]["sqnr_db"];
        row["accumulated_sqnr_db"] = row["accumulated"].is_null() ? nlohmann::json() : row["accumulated"]["sqnr_db"];
        const WeightBytes bytes = layerWeightBytes(model, *q.plan(), *q.weights(), i);
        row["weight_bytes_float"] = bytes.floatBytes;
        row["weight_bytes_quantized"] = bytes.quantizedBytes;
    }
    const WeightBytes total = totalWeightBytes(model, *q.plan(), *q.weights());
    j["weight_bytes_float"] = total.floatBytes;
    j["weight_bytes_quantized"] = total.quantizedBytes;
    if (r.evaluation) {
        const nlohmann::json e = r.evaluation->toJson();
        j["evaluation"] = {{"file", r.evalFile}, {"batches", e["batches"]}, {"samples", e["samples"]}};
        j["outputs"] = e["outputs"];
        j["accuracy"] = e["accuracy"];
        j["perplexity"] = e["perplexity"];
        j["top1_agreement"] = e["top1_agreement"];
        j["output_simulation"] = e["output_simulation"];
        if (e.contains("output_simulation_note"))
            j["output_simulation_note"] = e["output_simulation_note"];
        if (e.contains("output_simulation_arithmetic"))
            j["output_simulation_arithmetic"] = e["output_simulation_arithmetic"];
        if (e.contains("fake_quant_outputs"))
            j["fake_quant_outputs"] = e["fake_quant_outputs"];
    } else {
        j["top1_agreement"] = nullptr;
        j["evaluation"] = nullptr;
        j["outputs"] = nlohmann::json::array();
        j["accuracy"] = nullptr;
        j["perplexity"] = nullptr;
    }
    // Model-level headline numbers: the first output's SQNR, top-1 of both models.
    j["output_sqnr_db"] = j["outputs"].empty() ? nlohmann::json() : j["outputs"][0]["sqnr_db"];
    j["accuracy_float"] = j["accuracy"].is_null() ? nlohmann::json() : j["accuracy"]["float_top1"];
    j["accuracy_quantized"] = j["accuracy"].is_null() ? nlohmann::json() : j["accuracy"]["quantized_top1"];
    if (r.sensitivity) {
        nlohmann::json s = r.sensitivity->toJson();
        for (nlohmann::json& entry : s["ranking"])
            entry["module_path"] = model.layers.at(entry["layer"].get<size_t>()).modulePath;
        for (nlohmann::json& entry : s["kept_rounding"])
            entry["module_path"] = model.layers.at(entry["layer"].get<size_t>()).modulePath;
        j["sensitivity"] = s;
    } else {
        j["sensitivity"] = nullptr;
    }
    j["exports"] = r.exports;
    const StageTimes& t = r.times;
    j["timings"] = {{"load_s", t.load},
                    {"weights_s", t.weights},
                    {"calibration_s", t.calibration},
                    {"evaluation_s", r.evaluationSeconds},
                    {"sensitivity_s", r.sensitivitySeconds},
                    {"export_s", r.exportSeconds},
                    {"total_s", r.totalSeconds}};
    return j;
}

std::string quantizeReportText(const QuantizeReport& r)
{
    const Exploration& q = *r.exploration;
    const Model& model = q.model();
    std::string s =
        r.modelFile + " with " + r.rulesFile + " (" + std::string(quantizationModeName(q.plan()->mode())) + ")";
    if (r.evaluation)
        s += ", evaluated on " + std::to_string(r.evaluation->samples) + " samples of " + r.evalFile;
    s += "\n\n";
    std::vector<std::vector<std::string>> rows{{"#", "module path", "op", "rule", "weight", "algorithm", "act",
                                                "weight SQNR", "isolated SQNR", "accum. SQNR"}};
    for (size_t i = 0; i < model.layers.size(); ++i) {
        const LayerQuantization* lq = q.plan()->forLayer(i);
        const LayerEvaluation* e = evaluationOf(r, i);
        const std::string wq = weightQType(lq), aq = actQType(lq);
        rows.push_back({std::to_string(i), model.layers[i].modulePath, model.layers[i].opType,
                        lq ? std::to_string(lq->rule) : "-", wq.empty() ? "float" : wq,
                        weightAlgorithm(lq).empty() ? "-" : weightAlgorithm(lq), aq.empty() ? "float" : aq,
                        sqnrText(weightMetrics(r, i)), sqnrText(e ? e->isolated : std::nullopt),
                        sqnrText(e ? e->accumulated : std::nullopt)});
    }
    s += alignedTable(rows, {true, false, false, true, false, false, false, true, true, true});
    if (r.evaluation) {
        s += "\n";
        if (r.evaluation->outputSimulation == "integer")
            s += "output figures: the integer program of the LiteRT export" +
                 (r.evaluation->outputArithmetic.empty() || r.evaluation->outputArithmetic == "xnnpack"
                      ? std::string()
                      : ", " + r.evaluation->outputArithmetic + " arithmetic") +
                 " (per-layer figures: fake-quant)\n";
        else if (!r.evaluation->outputSimulationNote.empty())
            s += r.evaluation->outputSimulationNote + "\n";
        for (const OutputEvaluation& o : r.evaluation->outputs)
            s += "output " + o.name + ": SQNR " + sqnrText(o.metrics) + " dB, cosine " +
                 fixed(o.metrics.cosine, "%.6f") + ", max abs error " + fixed(o.metrics.maxAbsError, "%.4g") + "\n";
        if (const auto& a = r.evaluation->accuracy) {
            s += "top-1: float " + percent(a->floatTop1) + ", quantized " + percent(a->quantizedTop1) + " (" +
                 std::to_string(a->samples) + " samples)\n";
            if (a->floatTop5)
                s += "top-5: float " + percent(*a->floatTop5) + ", quantized " + percent(*a->quantizedTop5) + "\n";
        }
        if (const auto& a = r.evaluation->agreement)
            s += "top-1 agreement with float: " + percent(a->fraction()) + " (" + std::to_string(a->rows) + " rows)\n";
        if (const auto& p = r.evaluation->perplexity)
            s += "perplexity: float " + fixed(p->floatValue, "%.4f") + ", quantized " +
                 fixed(p->quantizedValue, "%.4f") + " (" + fixed(100.0 * (p->quantizedValue / p->floatValue - 1.0), "%+.2f") +
                 "%, " + std::to_string(p->tokens) + " predicted tokens)\n";
    }
    {
        const WeightBytes total = totalWeightBytes(model, *q.plan(), *q.weights());
        s += "weights: " + std::to_string(total.floatBytes) + " bytes float, " + std::to_string(total.quantizedBytes) +
             " quantized\n";
    }
    if (r.sensitivity) {
        const bool one = r.sensitivity->kind == SensitivityKind::OneLayer;
        s += std::string("\nsensitivity (") +
             (one ? "only this layer quantized" : "all layers but this one quantized") +
             (r.sensitivity->algorithm ? ", weights rounded by " + r.sensitivity->algorithm->toString() : "") +
             "), most sensitive first:\n";
        for (const KeptRounding& k : r.sensitivity->keptRounding)
            s += "  " + model.layers[k.layer].modulePath + " keeps its rule's rounding: " + k.reason + "\n";
        const std::optional<double> base = r.sensitivity->floatPerplexity;
        std::vector<std::vector<std::string>> ranking{
            {"rank", "module path", "output SQNR", base ? "perplexity" : "top-1"}};
        for (size_t i = 0; i < r.sensitivity->ranking.size(); ++i) {
            const LayerSensitivity& l = r.sensitivity->ranking[i];
            std::string last = l.top1 ? percent(*l.top1) : "-";
            if (base && l.perplexity)
                last = fixed(*l.perplexity, "%.4f") + " (" + fixed(100.0 * (*l.perplexity / *base - 1.0), "%+.2f") + "%)";
            ranking.push_back({std::to_string(i + 1), model.layers[l.layer].modulePath, sqnrText(l.output), last});
        }
        s += alignedTable(ranking, {true, false, true, true});
    }
    if (!r.exports.empty())
        s += "\n";
    for (const auto& [kind, summary] : r.exports.items()) {
        s += "exported " + kind + ": " + summary.value("path", std::string());
        if (summary.contains("float_bytes") && summary.contains("quantized_bytes")) {
            const auto floatBytes = summary["float_bytes"].get<int64_t>();
            const auto quantizedBytes = summary["quantized_bytes"].get<int64_t>();
            if (quantizedBytes == 0)
                s += " (no weight quantized)";
            else
                s += " (quantized weights " + std::to_string(floatBytes) + " bytes in the model, " +
                     std::to_string(quantizedBytes) + " in the file, " +
                     fixed(double(floatBytes) / double(quantizedBytes)) + "x smaller)";
        }
        s += "\n";
        if (summary.contains("eight_bit_form"))
            s += "  8-bit form '" + summary["eight_bit_form"].get<std::string>() +
                 "': " + summary.value("eight_bit_reason", std::string()) + "\n";
        if (summary.contains("warnings"))
            for (const auto& w : summary["warnings"])
                s += "  warning: " + w.get<std::string>() + "\n";
    }
    return s;
}

} // namespace qs::cli
