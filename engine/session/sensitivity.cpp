#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "runtime/quantization_hook.h"
#include "session/evaluation.h"

namespace qs {

nlohmann::json SensitivityResult::toJson() const
{
    nlohmann::json j{{"kind", kind == SensitivityKind::OneLayer ? "one_layer" : "all_but_one"},
                     {"ranking", nlohmann::json::array()}};
    for (const LayerSensitivity& l : ranking)
        j["ranking"].push_back({{"layer", l.layer},
                                {"output", errorMetricsJson(l.output)},
                                {"top1", l.top1 ? nlohmann::json(*l.top1) : nlohmann::json()},
                                {"perplexity", l.perplexity ? nlohmann::json(*l.perplexity) : nlohmann::json()}});
    j["float_perplexity"] = floatPerplexity ? nlohmann::json(*floatPerplexity) : nlohmann::json();
    // null: each layer rounded as its rule says; else the algorithm every layer that takes it was rounded by.
    j["algorithm"] = algorithm ? nlohmann::json(algorithm->toString()) : nlohmann::json();
    j["kept_rounding"] = nlohmann::json::array();
    for (const KeptRounding& k : keptRounding)
        j["kept_rounding"].push_back({{"layer", k.layer}, {"reason", k.reason}});
    return j;
}

SensitivityResult sensitivity(const Interpreter& interpreter, const QuantizationPlan& plan,
                              const WeightQuantizer& weights, const ActivationStatistics* statistics, DataSource& data,
                              SensitivityKind kind, const EvaluationOptions& options, const CancellationToken& cancel,
                              const ProgressCallback& progress)
{
    const Model& model = interpreter.model();
    if (model.weightsOnly)
        throw Error(model.sourcePath.string() + ": a weights-only checkpoint has no graph to run; sensitivity needs "
                                                "a model the interpreter runs (ONNX)");
    const std::string scored = scoredOutput(model, options.labelsOutput);
    const std::map<size_t, StaticActivation> statics = requiredStaticActivations(model, plan, statistics);

    // The layers the hook changes: a layer that stays float has no sensitivity.
    std::vector<size_t> layers;
    for (const LayerQuantization& lq : plan.layers())
        if (model.layers.at(lq.layer).node && lq.problem.empty() && (weights.find(lq.layer) || lq.activation))
            layers.push_back(lq.layer);

    QuantizationHook hook(model, plan, weights, statics);
    struct Tally {
        ErrorAccumulator error; // at the scored output, against float
        int64_t hits = 0;       // quantized top-1 hits
        NextTokenLoss loss;     // a causal language model's quantized next-token loss
    };
    const std::optional<CausalLanguageModel> lm = causalLanguageModel(model);
    NextTokenLoss floatLoss;
    std::vector<Tally> tallies(layers.size());
    int64_t labelledSamples = 0;
    bool labelled = true;

    data.rewind();
    const int64_t total = std::min(data.batchCount(), options.maxBatches.value_or(data.batchCount()));
    const double steps = double(std::max<size_t>(layers.size(), 1)) * double(std::max<int64_t>(total, 1));
    // Batches outside, layers inside: the float run of a batch is shared by every layer's run.
    for (int64_t b = 0; b < total && !layers.empty(); ++b) {
        cancel.check();
        std::optional<Batch> batch = data.next();
        if (!batch)
            break;
        const std::map<std::string, Tensor> floatOut = interpreter.run(batch->inputs, {cancel, nullptr});
        const Tensor reference = floatOut.at(scored).toFloat32();
        const std::string idsName = lm ? data.path().string() + ": " + lm->tokens : std::string();
        if (lm)
            floatLoss.add(floatOut.at(lm->logits), batch->inputs.at(lm->tokens), lm->logits, idsName);
        labelled = labelled && batch->labels.has_value();
        labelledSamples += labelled ? batch->rows : 0;
        for (size_t i = 0; i < layers.size(); ++i) {
            cancel.check();
            if (progress)
                progress((double(b) * double(layers.size()) + double(i)) / steps,
                         "sensitivity: layer " + std::to_string(i + 1) + "/" + std::to_string(layers.size()) + " (" +
                             model.layers[layers[i]].modulePath + "), batch " + std::to_string(b + 1) + "/" +
                             std::to_string(total));
            std::vector<bool> enabled(model.layers.size(), kind == SensitivityKind::AllButOne);
            enabled[layers[i]] = kind == SensitivityKind::OneLayer;
            hook.setEnabledLayers(enabled);
            const std::map<std::string, Tensor> out = interpreter.run(batch->inputs, {cancel, &hook});
            const Tensor measured = out.at(scored).toFloat32();
            tallies[i].error.add(reference.values<float>(), measured.values<float>());
            if (lm)
                tallies[i].loss.add(out.at(lm->logits), batch->inputs.at(lm->tokens), lm->logits, idsName);
            if (labelled)
                tallies[i].hits +=
                    classificationHits(measured, *batch->labels, scored, data.path().string() + ": labels").top1;
        }
    }
    if (progress)
        progress(1.0, "sensitivity done");

    SensitivityResult result;
    result.kind = kind;
    for (size_t i = 0; i < layers.size(); ++i) {
        LayerSensitivity s;
        s.layer = layers[i];
        s.output = tallies[i].error.metrics();
        if (labelled && labelledSamples > 0)
            s.top1 = double(tallies[i].hits) / double(labelledSamples);
        if (lm && tallies[i].loss.tokens > 0)
            s.perplexity = tallies[i].loss.perplexity();
        result.ranking.push_back(s);
    }
    if (lm && floatLoss.tokens > 0)
        result.floatPerplexity = floatLoss.perplexity();
    // Most sensitive first; equal values keep model order.
    const bool byPerplexity = result.floatPerplexity.has_value();
    std::stable_sort(result.ranking.begin(), result.ranking.end(),
                     [kind, byPerplexity](const LayerSensitivity& a, const LayerSensitivity& b) {
                         if (byPerplexity)
                             return kind == SensitivityKind::OneLayer ? *a.perplexity > *b.perplexity
                                                                      : *a.perplexity < *b.perplexity;
                         return kind == SensitivityKind::OneLayer ? a.output.sqnrDb < b.output.sqnrDb
                                                                  : a.output.sqnrDb > b.output.sqnrDb;
                     });
    return result;
}

} // namespace qs
