#include "session/evaluation.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "runtime/quantization_hook.h"
#include "runtime/tensor_cast.h"

namespace qs {
namespace {

// Float32 view of a value (a copy only when it is stored in another dtype).
Tensor asFloat(const Tensor& t)
{
    return t.dtype() == DType::F32 ? t : t.toFloat32();
}

// One analysed plan layer: a plan layer with a node.
struct TrackedLayer {
    size_t layer = 0;
    size_t node = 0;
    bool quantized = false; // the hook changes something at it (weight or activation)
};

std::vector<TrackedLayer> trackedLayers(const Model& model, const QuantizationPlan& plan,
                                        const WeightQuantizer& weights)
{
    std::vector<TrackedLayer> tracked;
    for (const LayerQuantization& lq : plan.layers()) {
        const QuantizableLayer& layer = model.layers.at(lq.layer);
        if (!layer.node || layer.scope != 0) // a subgraph layer's output is one per iteration: not recorded
            continue;
        const bool quantized = lq.problem.empty() && (weights.find(lq.layer) || lq.activation);
        tracked.push_back({lq.layer, *layer.node, quantized});
    }
    return tracked;
}

// Records, during the float run, the inputs and the first output of the
// tracked layers' nodes (shared storage: the run's values are never written
// after they are produced).
struct FloatRecorder : NodeObserver {
    FloatRecorder(size_t nodes, const std::vector<TrackedLayer>& tracked, bool keepInputs)
        : slotOfNode_(nodes, -1), inputs(tracked.size()), outputs(tracked.size()), keepInputs_(keepInputs)
    {
        for (size_t i = 0; i < tracked.size(); ++i)
            slotOfNode_[tracked[i].node] = int(i);
    }
    bool observesNode(size_t scope, size_t node) const override
    {
        return scope == 0 && node < slotOfNode_.size() && slotOfNode_[node] >= 0;
    }
    void afterNode(NodeEvent& event) override
    {
        const int slot = slotOfNode_[event.nodeIndex];
        if (slot < 0)
            return;
        if (keepInputs_)
            inputs[size_t(slot)].assign(event.inputs.begin(), event.inputs.end());
        outputs[size_t(slot)] = event.outputs[0];
    }
    void clear()
    {
        for (auto& i : inputs)
            i.clear();
        for (auto& o : outputs)
            o = Tensor();
    }

    std::vector<int> slotOfNode_;
    std::vector<std::vector<Tensor>> inputs; // per tracked layer, this batch
    std::vector<Tensor> outputs;
    bool keepInputs_;
};

// Chained after the quantization hook: compares each tracked layer's output
// with the float run's.
class AccumulatedComparer : public NodeObserver {
public:
    AccumulatedComparer(size_t nodes, const std::vector<TrackedLayer>& tracked, const FloatRecorder& reference,
                        std::vector<ErrorAccumulator>& accumulators)
        : slotOfNode_(nodes, -1), reference_(reference), accumulators_(accumulators)
    {
        for (size_t i = 0; i < tracked.size(); ++i)
            slotOfNode_[tracked[i].node] = int(i);
    }
    bool observesNode(size_t scope, size_t node) const override
    {
        return scope == 0 && node < slotOfNode_.size() && slotOfNode_[node] >= 0;
    }
    void afterNode(NodeEvent& event) override
    {
        const int slot = slotOfNode_[event.nodeIndex];
        if (slot < 0)
            return;
        const Tensor measured = asFloat(event.outputs[0]);
        const Tensor expected = asFloat(reference_.outputs[size_t(slot)]);
        accumulators_[size_t(slot)].add(expected.values<float>(), measured.values<float>());
    }

private:
    std::vector<int> slotOfNode_;
    const FloatRecorder& reference_;
    std::vector<ErrorAccumulator>& accumulators_;
};

nlohmann::json optionalMetricsJson(const std::optional<ErrorMetrics>& m)
{
    return m ? errorMetricsJson(*m) : nlohmann::json();
}

} // namespace

void ErrorAccumulator::add(std::span<const float> reference, std::span<const float> measured)
{
    sums_.add(errorSums(reference, measured));
}

ClassificationHits classificationHits(const Tensor& logits, const Tensor& labels, const std::string& outputName,
                                      const std::string& labelsName)
{
    if (labels.rank() < 1 || labels.rank() > 2 || (labels.rank() == 2 && labels.dim(1) != 1))
        throw Error(labelsName + ": labels must have shape [N] or [N, 1], got " + shapeToString(labels.shape()));
    const int64_t n = labels.dim(0);
    if (logits.rank() < 2 || logits.dim(0) != n)
        throw Error("output '" + outputName + "': scoring " + std::to_string(n) + " labels needs logits of shape [" +
                    std::to_string(n) + ", classes], got " + shapeToString(logits.shape()));
    const int64_t classes = n ? logits.numel() / n : 0;
    if (classes < 1)
        throw Error("output '" + outputName + "': no classes in shape " + shapeToString(logits.shape()));
    const Tensor scores = asFloat(logits);
    const Tensor targets = asFloat(labels);
    const std::span<const float> s = scores.values<float>();
    const std::span<const float> y = targets.values<float>();
    ClassificationHits hits;
    hits.samples = n;
    int64_t top5 = 0;
    for (int64_t row = 0; row < n; ++row) {
        const float label = y[size_t(row)];
        if (!(label >= 0 && label < float(classes)) || std::floor(label) != label)
            throw Error(labelsName + ": row " + std::to_string(row) + " holds label " + std::to_string(label) +
                        "; expected a class index in [0, " + std::to_string(classes) + ") of output '" + outputName +
                        "'");
        const auto target = int64_t(label);
        const float* r = s.data() + row * classes;
        const float mine = r[target];
        int64_t above = std::isnan(mine) ? classes : 0; // a NaN score never hits
        for (int64_t c = 0; c < classes && above < 5; ++c)
            above += r[c] > mine || (r[c] == mine && c < target);
        hits.top1 += above < 1;
        top5 += above < 5;
    }
    if (classes > 5)
        hits.top5 = top5;
    return hits;
}

void addTopOneAgreement(TopOneAgreement& agreement, const Tensor& floatOut, const Tensor& quantizedOut,
                        int64_t classes, const std::string& outputName)
{
    if (floatOut.shape() != quantizedOut.shape())
        throw Error("output '" + outputName + "': the quantized model's shape " +
                    shapeToString(quantizedOut.shape()) + " differs from the float model's " +
                    shapeToString(floatOut.shape()));
    if (classes < 1 || floatOut.numel() % classes != 0)
        throw Error("output '" + outputName + "': shape " + shapeToString(floatOut.shape()) +
                    " does not split into rows of " + std::to_string(classes) + " classes");
    const Tensor f = asFloat(floatOut), q = asFloat(quantizedOut);
    const std::span<const float> fv = f.values<float>(), qv = q.values<float>();
    // The first largest value; a row with a NaN has none (-1).
    auto top1 = [classes](const float* r) {
        int64_t best = 0;
        for (int64_t c = 0; c < classes; ++c) {
            if (std::isnan(r[c]))
                return int64_t(-1);
            if (r[c] > r[best])
                best = c;
        }
        return best;
    };
    const int64_t rows = f.numel() / classes;
    for (int64_t row = 0; row < rows; ++row) {
        const int64_t a = top1(fv.data() + row * classes), b = top1(qv.data() + row * classes);
        agreement.agreeing += a >= 0 && a == b;
    }
    agreement.rows += rows;
}

nlohmann::json errorMetricsJson(const ErrorMetrics& m)
{
    return {{"mse", m.mse},
            {"sqnr_db", std::isinf(m.sqnrDb) ? nlohmann::json() : nlohmann::json(m.sqnrDb)},
            {"max_abs_error", m.maxAbsError},
            {"cosine", m.cosine}};
}

nlohmann::json EvaluationResult::toJson() const
{
    nlohmann::json j{{"batches", batches}, {"samples", samples}};
    j["layers"] = nlohmann::json::array();
    for (const LayerEvaluation& l : layers)
        j["layers"].push_back({{"layer", l.layer},
                               {"weight", optionalMetricsJson(l.weight)},
                               {"isolated", optionalMetricsJson(l.isolated)},
                               {"accumulated", optionalMetricsJson(l.accumulated)}});
    j["outputs"] = nlohmann::json::array();
    for (const OutputEvaluation& o : outputs) {
        nlohmann::json m = errorMetricsJson(o.metrics);
        m["name"] = o.name;
        j["outputs"].push_back(m);
    }
    if (accuracy) {
        auto optional = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); };
        j["accuracy"] = {{"samples", accuracy->samples},
                         {"float_top1", accuracy->floatTop1},
                         {"quantized_top1", accuracy->quantizedTop1},
                         {"float_top5", optional(accuracy->floatTop5)},
                         {"quantized_top5", optional(accuracy->quantizedTop5)}};
    } else {
        j["accuracy"] = nullptr;
    }
    if (agreement)
        j["top1_agreement"] = {
            {"rows", agreement->rows}, {"agreeing", agreement->agreeing}, {"fraction", agreement->fraction()}};
    else
        j["top1_agreement"] = nullptr;
    if (perplexity)
        j["perplexity"] = {{"float", perplexity->floatValue},
                           {"quantized", perplexity->quantizedValue},
                           {"tokens", perplexity->tokens}};
    else
        j["perplexity"] = nullptr;
    j["output_simulation"] = outputSimulation;
    if (!outputSimulationNote.empty())
        j["output_simulation_note"] = outputSimulationNote;
    if (!outputArithmetic.empty())
        j["output_simulation_arithmetic"] = outputArithmetic;
    if (!fakeQuantOutputs.empty()) {
        j["fake_quant_outputs"] = nlohmann::json::array();
        for (const OutputEvaluation& o : fakeQuantOutputs) {
            nlohmann::json m = errorMetricsJson(o.metrics);
            m["name"] = o.name;
            j["fake_quant_outputs"].push_back(m);
        }
    }
    return j;
}

namespace {

// Field readers for results read back from a session file: a missing member or
// a value of the wrong kind is an Error naming the field ("evaluation.layers[2].weight.mse").
const nlohmann::json& member(const nlohmann::json& object, const char* key, const std::string& field)
{
    if (!object.is_object())
        throw Error(field + ": expected an object, got " + object.dump());
    const auto it = object.find(key);
    if (it == object.end())
        throw Error(field + "." + key + ": missing");
    return *it;
}

double numberOf(const nlohmann::json& v, const std::string& field)
{
    if (!v.is_number())
        throw Error(field + ": expected a number, got " + v.dump());
    return v.get<double>();
}

int64_t countOf(const nlohmann::json& v, const std::string& field)
{
    if (!v.is_number_unsigned())
        throw Error(field + ": expected a count (an integer >= 0), got " + v.dump());
    return int64_t(std::min<uint64_t>(v.get<uint64_t>(), uint64_t(INT64_MAX)));
}

const nlohmann::json& arrayOf(const nlohmann::json& v, const std::string& field)
{
    if (!v.is_array())
        throw Error(field + ": expected a list, got " + v.dump());
    return v;
}

std::optional<double> optionalNumber(const nlohmann::json& v, const std::string& field)
{
    return v.is_null() ? std::nullopt : std::optional<double>(numberOf(v, field));
}

} // namespace

ErrorMetrics errorMetricsFromJson(const nlohmann::json& j, const std::string& field)
{
    ErrorMetrics m;
    m.mse = numberOf(member(j, "mse", field), field + ".mse");
    const nlohmann::json& sqnr = member(j, "sqnr_db", field);
    constexpr double inf = std::numeric_limits<double>::infinity();
    m.sqnrDb = sqnr.is_null() ? (m.mse == 0 ? inf : -inf) : numberOf(sqnr, field + ".sqnr_db");
    m.maxAbsError = numberOf(member(j, "max_abs_error", field), field + ".max_abs_error");
    m.cosine = numberOf(member(j, "cosine", field), field + ".cosine");
    return m;
}

EvaluationResult EvaluationResult::fromJson(const nlohmann::json& j)
{
    const std::string root = "evaluation";
    const auto optionalMetrics = [](const nlohmann::json& v, const std::string& field) {
        return v.is_null() ? std::optional<ErrorMetrics>() : std::optional<ErrorMetrics>(errorMetricsFromJson(v, field));
    };
    EvaluationResult r;
    r.batches = countOf(member(j, "batches", root), root + ".batches");
    r.samples = countOf(member(j, "samples", root), root + ".samples");
    const nlohmann::json& layers = arrayOf(member(j, "layers", root), root + ".layers");
    for (size_t i = 0; i < layers.size(); ++i) {
        const std::string field = root + ".layers[" + std::to_string(i) + "]";
        const nlohmann::json& l = layers[i];
        LayerEvaluation e;
        e.layer = size_t(countOf(member(l, "layer", field), field + ".layer"));
        e.weight = optionalMetrics(member(l, "weight", field), field + ".weight");
        e.isolated = optionalMetrics(member(l, "isolated", field), field + ".isolated");
        e.accumulated = optionalMetrics(member(l, "accumulated", field), field + ".accumulated");
        r.layers.push_back(e);
    }
    const nlohmann::json& outputs = arrayOf(member(j, "outputs", root), root + ".outputs");
    for (size_t i = 0; i < outputs.size(); ++i) {
        const std::string field = root + ".outputs[" + std::to_string(i) + "]";
        const nlohmann::json& name = member(outputs[i], "name", field);
        if (!name.is_string())
            throw Error(field + ".name: expected a string, got " + name.dump());
        r.outputs.push_back({name.get<std::string>(), errorMetricsFromJson(outputs[i], field)});
    }
    if (const nlohmann::json& a = member(j, "accuracy", root); !a.is_null()) {
        const std::string field = root + ".accuracy";
        Accuracy acc;
        acc.samples = countOf(member(a, "samples", field), field + ".samples");
        acc.floatTop1 = numberOf(member(a, "float_top1", field), field + ".float_top1");
        acc.quantizedTop1 = numberOf(member(a, "quantized_top1", field), field + ".quantized_top1");
        acc.floatTop5 = optionalNumber(member(a, "float_top5", field), field + ".float_top5");
        acc.quantizedTop5 = optionalNumber(member(a, "quantized_top5", field), field + ".quantized_top5");
        r.accuracy = acc;
    }
    // Absent in session files written before top-1 agreement was reported.
    if (auto a = j.find("top1_agreement"); a != j.end() && !a->is_null()) {
        const std::string field = root + ".top1_agreement";
        TopOneAgreement agreement;
        agreement.rows = countOf(member(*a, "rows", field), field + ".rows");
        agreement.agreeing = countOf(member(*a, "agreeing", field), field + ".agreeing");
        if (agreement.agreeing > agreement.rows)
            throw Error(field + ".agreeing: more than its rows");
        r.agreement = agreement;
    }
    // Absent in session files written before perplexity was reported.
    if (auto p = j.find("perplexity"); p != j.end() && !p->is_null()) {
        const std::string field = root + ".perplexity";
        Perplexity perplexity;
        perplexity.floatValue = numberOf(member(*p, "float", field), field + ".float");
        perplexity.quantizedValue = numberOf(member(*p, "quantized", field), field + ".quantized");
        perplexity.tokens = countOf(member(*p, "tokens", field), field + ".tokens");
        r.perplexity = perplexity;
    }
    // Absent in session files written before ODML evaluations ran the integer program.
    if (auto s = j.find("output_simulation"); s != j.end()) {
        if (!s->is_string() || (*s != "fake_quant" && *s != "integer"))
            throw Error(root + ".output_simulation: expected \"fake_quant\" or \"integer\", got " + s->dump());
        r.outputSimulation = s->get<std::string>();
    }
    if (auto n = j.find("output_simulation_note"); n != j.end()) {
        if (!n->is_string())
            throw Error(root + ".output_simulation_note: expected a string, got " + n->dump());
        r.outputSimulationNote = n->get<std::string>();
    }
    if (auto a = j.find("output_simulation_arithmetic"); a != j.end()) {
        if (!a->is_string())
            throw Error(root + ".output_simulation_arithmetic: expected a string, got " + a->dump());
        r.outputArithmetic = a->get<std::string>();
    }
    if (auto f = j.find("fake_quant_outputs"); f != j.end()) {
        const nlohmann::json& list = arrayOf(*f, root + ".fake_quant_outputs");
        for (size_t i = 0; i < list.size(); ++i) {
            const std::string field = root + ".fake_quant_outputs[" + std::to_string(i) + "]";
            const nlohmann::json& name = member(list[i], "name", field);
            if (!name.is_string())
                throw Error(field + ".name: expected a string, got " + name.dump());
            r.fakeQuantOutputs.push_back({name.get<std::string>(), errorMetricsFromJson(list[i], field)});
        }
    }
    return r;
}

void NextTokenLoss::add(const Tensor& logits, const Tensor& ids, const std::string& outputName,
                        const std::string& idsName)
{
    if (ids.rank() != 2 || (ids.dtype() != DType::I64 && ids.dtype() != DType::I32))
        throw Error(idsName + ": token ids must be int64 [N, T], got " + std::string(dtypeName(ids.dtype())) + " " +
                    shapeToString(ids.shape()));
    const int64_t n = ids.dim(0), t = ids.dim(1);
    if (logits.rank() != 3 || logits.dim(0) != n || logits.dim(1) != t)
        throw Error("output '" + outputName + "': perplexity needs logits [" + std::to_string(n) + ", " +
                    std::to_string(t) + ", vocab] for ids " + shapeToString(ids.shape()) + ", got " +
                    shapeToString(logits.shape()));
    const int64_t vocab = logits.dim(2);
    const Tensor x = logits.toFloat32();
    const Tensor id = ids.dtype() == DType::I64 ? ids : castTensor(ids, DType::I64);
    const float* values = x.values<float>().data();
    const int64_t* idValues = id.values<int64_t>().data();
    for (int64_t row = 0; row < n; ++row)
        for (int64_t pos = 0; pos + 1 < t; ++pos) {
            const int64_t next = idValues[row * t + pos + 1];
            if (next < 0 || next >= vocab)
                throw Error(idsName + ": row " + std::to_string(row) + " position " + std::to_string(pos + 1) +
                            " holds id " + std::to_string(next) + ", outside the vocabulary [0, " +
                            std::to_string(vocab) + ")");
            const float* v = values + (row * t + pos) * vocab;
            double largest = v[0];
            for (int64_t c = 1; c < vocab; ++c)
                largest = std::max(largest, double(v[c]));
            double total = 0.0;
            for (int64_t c = 0; c < vocab; ++c)
                total += std::exp(double(v[c]) - largest);
            sum += largest + std::log(total) - double(v[next]);
            ++tokens;
        }
}

double NextTokenLoss::perplexity() const
{
    return tokens > 0 ? std::exp(sum / double(tokens)) : std::numeric_limits<double>::quiet_NaN();
}

std::map<size_t, StaticActivation> requiredStaticActivations(const Model& model, const QuantizationPlan& plan,
                                                             const ActivationStatistics* statistics)
{
    for (const LayerQuantization& lq : plan.layers()) {
        if (!lq.problem.empty() || !lq.activation || !lq.activation->staticScale)
            continue;
        if (!statistics || !statistics->find(lq.activation->value))
            throw Error("rule " + std::to_string(lq.rule) + " asks for a static activation scale at layer '" +
                        model.layers.at(lq.layer).modulePath + "' (value '" + lq.activation->value +
                        "'): it needs calibration data");
    }
    return statistics ? staticActivations(plan, *statistics) : std::map<size_t, StaticActivation>{};
}

std::string scoredOutput(const Model& model, const std::string& labelsOutput)
{
    if (model.outputs.empty())
        throw Error(model.sourcePath.string() + ": the model has no graph outputs to evaluate");
    if (labelsOutput.empty())
        return model.outputs.front().name;
    for (const ValueInfo& o : model.outputs)
        if (o.name == labelsOutput)
            return labelsOutput;
    throw Error("labels output '" + labelsOutput + "' is not a graph output of " + model.sourcePath.string());
}

EvaluationResult evaluate(const Interpreter& interpreter, const QuantizationPlan& plan, const WeightQuantizer& weights,
                          const ActivationStatistics* statistics, DataSource& data, const EvaluationOptions& options,
                          const CancellationToken& cancel, const ProgressCallback& progress)
{
    const Model& model = interpreter.model();
    if (model.weightsOnly)
        throw Error(model.sourcePath.string() + ": a weights-only checkpoint has no graph to run; evaluation needs "
                                                "a model the interpreter runs (ONNX)");
    const std::string scored = scoredOutput(model, options.labelsOutput);
    const std::map<size_t, StaticActivation> statics = requiredStaticActivations(model, plan, statistics);
    const std::vector<TrackedLayer> tracked = trackedLayers(model, plan, weights);
    const int64_t opset = model.opsetImports.count("") ? model.opsetImports.at("") : 0;

    std::vector<ErrorAccumulator> isolated(tracked.size()), accumulated(tracked.size());
    std::map<std::string, ErrorAccumulator> outputs;
    FloatRecorder recorder(model.nodes.size(), tracked, options.isolated);
    AccumulatedComparer comparer(model.nodes.size(), tracked, recorder, accumulated);
    QuantizationHook hook(model, plan, weights, statics);
    if (options.accumulated)
        hook.setNext(&comparer);
    // The isolated view: the same hook, shown one node at a time with the float run's inputs.
    QuantizationHook isolatedHook(model, plan, weights, statics);

    data.rewind();
    const int64_t total = std::min(data.batchCount(), options.maxBatches.value_or(data.batchCount()));
    EvaluationResult result;
    const std::optional<CausalLanguageModel> lm = causalLanguageModel(model);
    NextTokenLoss floatLoss, quantizedLoss;
    bool labelled = true, top5 = true;
    int64_t floatTop1 = 0, quantizedTop1 = 0, floatTop5 = 0, quantizedTop5 = 0, labelledSamples = 0;
    TopOneAgreement agreement;
    bool agreementMeasured = true;
    for (int64_t b = 0; b < total; ++b) {
        cancel.check();
        if (progress)
            progress(double(b) / double(std::max<int64_t>(total, 1)),
                     "evaluating batch " + std::to_string(b + 1) + "/" + std::to_string(total));
        std::optional<Batch> batch = data.next();
        if (!batch)
            break;
        const bool needFloatNodes = !tracked.empty() && (options.isolated || options.accumulated);
        const std::map<std::string, Tensor> floatOut =
            interpreter.run(batch->inputs, {cancel, needFloatNodes ? &recorder : nullptr});

        if (options.isolated) {
            for (size_t i = 0; i < tracked.size(); ++i) {
                if (!tracked[i].quantized)
                    continue;
                cancel.check();
                std::vector<Tensor> inputs = recorder.inputs[i];
                NodeEvent event;
                event.nodeIndex = tracked[i].node;
                event.node = &model.nodes[tracked[i].node];
                event.opset = opset;
                event.inputs = inputs;
                isolatedHook.beforeNode(event);
                const std::vector<Tensor> out = interpreter.runNode(tracked[i].node, inputs, cancel);
                const Tensor measured = asFloat(out.at(0));
                const Tensor expected = asFloat(recorder.outputs[i]);
                isolated[i].add(expected.values<float>(), measured.values<float>());
            }
        }

        const std::map<std::string, Tensor> quantizedOut = interpreter.run(batch->inputs, {cancel, &hook});
        recorder.clear();
        for (const ValueInfo& o : model.outputs) {
            const Tensor expected = asFloat(floatOut.at(o.name));
            const Tensor measured = asFloat(quantizedOut.at(o.name));
            outputs[o.name].add(expected.values<float>(), measured.values<float>());
        }
        if (lm) {
            const std::string idsName = data.path().string() + ": " + lm->tokens;
            const Tensor& ids = batch->inputs.at(lm->tokens);
            floatLoss.add(floatOut.at(lm->logits), ids, lm->logits, idsName);
            quantizedLoss.add(quantizedOut.at(lm->logits), ids, lm->logits, idsName);
        }
        if (agreementMeasured) {
            // The logits of a causal language model by token; any other output by sample.
            const Tensor& f = floatOut.at(lm ? lm->logits : scored);
            const int64_t rows = lm ? (f.rank() >= 1 ? f.numel() / std::max<int64_t>(f.dim(f.rank() - 1), 1) : 0)
                                    : (f.rank() >= 2 ? f.dim(0) : 0);
            const int64_t classes = rows > 0 ? f.numel() / rows : 0;
            if (classes >= 2 && rows * classes == f.numel())
                addTopOneAgreement(agreement, f, quantizedOut.at(lm ? lm->logits : scored), classes,
                                   lm ? lm->logits : scored);
            else
                agreementMeasured = false;
        }
        if (batch->labels && labelled) {
            const std::string labelsName = data.path().string() + ": labels";
            const ClassificationHits f = classificationHits(floatOut.at(scored), *batch->labels, scored, labelsName);
            const ClassificationHits q =
                classificationHits(quantizedOut.at(scored), *batch->labels, scored, labelsName);
            labelledSamples += f.samples;
            floatTop1 += f.top1;
            quantizedTop1 += q.top1;
            top5 = top5 && f.top5.has_value();
            floatTop5 += f.top5.value_or(0);
            quantizedTop5 += q.top5.value_or(0);
        } else {
            labelled = false;
        }
        ++result.batches;
        result.samples += batch->rows;
    }
    if (progress)
        progress(1.0, "evaluated " + std::to_string(result.batches) + " batches");

    for (size_t i = 0; i < tracked.size(); ++i) {
        LayerEvaluation l;
        l.layer = tracked[i].layer;
        if (const auto w = weights.find(tracked[i].layer); w && plan.forLayer(tracked[i].layer)->problem.empty())
            l.weight = w->metrics;
        if (options.isolated && tracked[i].quantized && result.batches)
            l.isolated = isolated[i].metrics();
        if (options.accumulated && result.batches)
            l.accumulated = accumulated[i].metrics();
        result.layers.push_back(l);
    }
    // Layers inside If/Loop/Scan bodies: their weight's metrics; the model's
    // outputs above include their quantization (the hook runs in the bodies).
    for (const LayerQuantization& lq : plan.layers()) {
        if (model.layers.at(lq.layer).scope == 0)
            continue;
        LayerEvaluation l;
        l.layer = lq.layer;
        if (const auto w = weights.find(lq.layer); w && lq.problem.empty())
            l.weight = w->metrics;
        result.layers.push_back(l);
    }
    for (const ValueInfo& o : model.outputs)
        result.outputs.push_back({o.name, outputs[o.name].metrics()});
    if (labelled && labelledSamples > 0) {
        Accuracy a;
        a.samples = labelledSamples;
        a.floatTop1 = double(floatTop1) / double(labelledSamples);
        a.quantizedTop1 = double(quantizedTop1) / double(labelledSamples);
        if (top5) {
            a.floatTop5 = double(floatTop5) / double(labelledSamples);
            a.quantizedTop5 = double(quantizedTop5) / double(labelledSamples);
        }
        result.accuracy = a;
    }
    if (agreementMeasured && agreement.rows > 0)
        result.agreement = agreement;
    if (lm && floatLoss.tokens > 0)
        result.perplexity = Perplexity{floatLoss.perplexity(), quantizedLoss.perplexity(), floatLoss.tokens};
    return result;
}

} // namespace qs
