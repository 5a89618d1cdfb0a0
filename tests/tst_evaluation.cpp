// Model evaluation and sensitivity (session/evaluation.h) on the demo CNN:
// accumulated errors equal the metrics of the concatenated data, top-1/top-5
// equal a sort-based reference, isolated layer errors equal the layer's kernel
// run by hand on recorded float inputs, accuracies as the model card says
// (444/450 float), and sensitivity finds the layer given int2 weights.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <random>

#include <nlohmann/json.hpp>

#include "quant/metrics.h"
#include "io/model_loader.h"
#include "io/npz.h"
#include "runtime/quantization_hook.h"
#include "session/evaluation.h"

using namespace qs;

namespace {

const char* const kModel = QUANTSCOPE_TEST_DATA "/../../resources/demo/digits/digits_cnn.onnx";
const char* const kEval = QUANTSCOPE_TEST_DATA "/../../resources/demo/digits/digits_eval.npz";
const char* const kCalib = QUANTSCOPE_TEST_DATA "/../../resources/demo/digits/digits_calib.npz";
constexpr double kInf = std::numeric_limits<double>::infinity();

// Everything one evaluation needs, built from a rule file's text.
struct Setup {
    Interpreter interpreter;
    QuantizationPlan plan;
    WeightQuantizer weights;
    std::optional<ActivationStatistics> statistics;

    explicit Setup(const std::string& rulesJson) : interpreter(loadModel(kModel))
    {
        plan = QuantizationPlan::build(interpreter.model(), RuleSet::fromJson(rulesJson));
        weights.update(interpreter.model(), plan);
        if (!plan.observedActivations().empty()) {
            auto calib = openDataSource(kCalib, {}, &interpreter.model());
            statistics = calibrateActivations(interpreter, plan, *calib);
        }
    }
    const ActivationStatistics* stats() const { return statistics ? &*statistics : nullptr; }
    size_t layerIndex(const std::string& path) const
    {
        const auto& layers = interpreter.model().layers;
        for (size_t i = 0; i < layers.size(); ++i)
            if (layers[i].modulePath == path)
                return i;
        throw Error("no layer " + path);
    }
};

std::unique_ptr<DataSource> evalData(const Model& model, int64_t batchSize)
{
    DataSourceOptions o;
    o.batchSize = batchSize;
    return openDataSource(kEval, o, &model);
}

std::string rules(const std::string& body)
{
    return R"({"version": 1, "rules": [)" + body + "]}";
}

// Records every layer node's inputs and first output of one float run.
struct LayerRecorder : NodeObserver {
    std::map<size_t, std::vector<Tensor>> inputs;
    std::map<size_t, Tensor> outputs;
    void afterNode(NodeEvent& e) override
    {
        inputs[e.nodeIndex].assign(e.inputs.begin(), e.inputs.end());
        outputs[e.nodeIndex] = e.outputs[0];
    }
};

// Stable descending sort: the rank of the label among the scores.
int64_t referenceRank(const std::vector<float>& row, int64_t label)
{
    std::vector<int64_t> order(row.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return row[size_t(a)] > row[size_t(b)]; });
    return std::find(order.begin(), order.end(), label) - order.begin();
}

bool closeDb(double a, double b, double tolerance = 1e-6)
{
    if (std::isinf(a) || std::isinf(b))
        return a == b;
    return std::abs(a - b) <= tolerance * std::max(1.0, std::abs(a));
}

} // namespace

class TestEvaluation : public QObject {
    Q_OBJECT

private slots:
    void accumulatorEqualsMetricsOfConcatenation()
    {
        std::mt19937 rng(7);
        std::normal_distribution<float> normal(0.f, 1.f);
        std::vector<float> x(200000), q(200000);
        for (size_t i = 0; i < x.size(); ++i) {
            x[i] = normal(rng) * (i % 1000 == 0 ? 50.f : 1.f);
            q[i] = i % 3 == 0 ? x[i] : x[i] + 0.01f * normal(rng);
        }
        ErrorAccumulator acc;
        // Uneven pieces, one of them empty.
        const std::vector<size_t> bounds{0, 17, 17, 70000, 131073, x.size()};
        for (size_t i = 0; i + 1 < bounds.size(); ++i)
            acc.add(std::span(x).subspan(bounds[i], bounds[i + 1] - bounds[i]),
                    std::span(q).subspan(bounds[i], bounds[i + 1] - bounds[i]));
        QCOMPARE(acc.count(), int64_t(x.size()));
        const ErrorMetrics whole = errorMetrics(x, q);
        const ErrorMetrics m = acc.metrics();
        QVERIFY(closeDb(m.mse, whole.mse, 1e-12));
        QVERIFY(closeDb(m.sqnrDb, whole.sqnrDb, 1e-12));
        QCOMPARE(m.maxAbsError, whole.maxAbsError);
        QVERIFY(closeDb(m.cosine, whole.cosine, 1e-12));

        // Exact, all-zero reference, both zero.
        ErrorAccumulator exact, zeroRef, bothZero;
        exact.add(x, x);
        QCOMPARE(exact.metrics().sqnrDb, kInf);
        QCOMPARE(exact.metrics().mse, 0.0);
        const std::vector<float> zeros(10, 0.f), ones(10, 1.f);
        zeroRef.add(zeros, ones);
        QCOMPARE(zeroRef.metrics().sqnrDb, -kInf);
        QCOMPARE(zeroRef.metrics().cosine, 0.0);
        bothZero.add(zeros, zeros);
        QCOMPARE(bothZero.metrics().cosine, 1.0);
        QVERIFY_THROWS_EXCEPTION(Error, exact.add(zeros, std::span(ones).subspan(1)));
    }

    void classificationHitsEqualSortReference()
    {
        std::mt19937 rng(3);
        for (int64_t classes : {2, 5, 6, 10, 37}) {
            const int64_t n = 300;
            Tensor logits(DType::F32, {n, classes});
            Tensor labels(DType::I64, {n, 1});
            auto l = logits.mutableValues<float>();
            auto y = labels.mutableValues<int64_t>();
            std::uniform_int_distribution<int> coarse(0, 3); // many ties
            int64_t top1 = 0, top5 = 0;
            for (int64_t r = 0; r < n; ++r) {
                std::vector<float> row(static_cast<size_t>(classes));
                for (auto& v : row)
                    v = r % 2 ? float(coarse(rng)) : std::normal_distribution<float>()(rng);
                y[size_t(r)] = int64_t(rng() % uint32_t(classes));
                std::copy(row.begin(), row.end(), l.begin() + r * classes);
                const int64_t rank = referenceRank(row, y[size_t(r)]);
                top1 += rank < 1;
                top5 += rank < 5;
            }
            const ClassificationHits hits = classificationHits(logits, labels, "logits");
            QCOMPARE(hits.samples, n);
            QCOMPARE(hits.top1, top1);
            QCOMPARE(hits.top5.has_value(), classes > 5);
            if (hits.top5)
                QCOMPARE(*hits.top5, top5);
        }
        // A NaN score never hits; labels [N] work; a bad label names the row.
        const Tensor logits = Tensor::fromVector<float>(DType::F32, {2, 3}, {NAN, 0.f, 1.f, 0.f, 2.f, 1.f});
        const ClassificationHits hits =
            classificationHits(logits, Tensor::fromVector<int32_t>(DType::I32, {2}, {0, 1}), "out");
        QCOMPARE(hits.top1, int64_t(1));
        try {
            classificationHits(logits, Tensor::fromVector<int32_t>(DType::I32, {2}, {0, 3}), "out", "data.npz");
            QFAIL("label 3 of 3 classes accepted");
        } catch (const Error& e) {
            QVERIFY2(QString(e.what()).contains("data.npz") && QString(e.what()).contains("row 1"), e.what());
        }
        QVERIFY_THROWS_EXCEPTION(Error, classificationHits(logits, Tensor(DType::I32, {3}), "out"));
    }

    void floatRulesChangeNothing()
    {
        Setup s(rules(R"({"module_path": "nothing", "weight_qtype": "int8"})"));
        auto data = evalData(s.interpreter.model(), 64);
        const EvaluationResult r = evaluate(s.interpreter, s.plan, s.weights, nullptr, *data);
        QVERIFY(r.layers.empty());
        QCOMPARE(r.samples, int64_t(450));
        QCOMPARE(r.batches, int64_t(8));
        QCOMPARE(r.outputs.size(), size_t(1));
        QCOMPARE(r.outputs[0].metrics.sqnrDb, kInf);
        QVERIFY(r.accuracy);
        QCOMPARE(r.accuracy->samples, int64_t(450));
        QCOMPARE(r.accuracy->floatTop1, 444.0 / 450.0);
        QCOMPARE(r.accuracy->quantizedTop1, r.accuracy->floatTop1);
        QCOMPARE(*r.accuracy->quantizedTop5, *r.accuracy->floatTop5);
    }

    // Weight-only int8: each layer's isolated error is the layer's kernel on
    // the float inputs with the fake-quantized weight, computed here on the
    // whole data set in one batch; the last layer's accumulated error is the
    // output's; accuracy stays within a point.
    void weightOnlyInt8MatchesIndependentComputation()
    {
        Setup s(rules(R"({"weight_qtype": "int8", "granularity": "per_channel"})"));
        const Model& model = s.interpreter.model();
        auto data = evalData(model, 64);
        const EvaluationResult r = evaluate(s.interpreter, s.plan, s.weights, nullptr, *data);
        QCOMPARE(r.layers.size(), model.layers.size());

        NpzFile eval = NpzFile::open(kEval);
        LayerRecorder recorder;
        s.interpreter.run({{"input", eval.read("input")}}, {CancellationToken(), &recorder});
        for (const LayerEvaluation& l : r.layers) {
            const QuantizableLayer& layer = model.layers[l.layer];
            std::vector<Tensor> inputs = recorder.inputs.at(*layer.node);
            inputs[*layer.weightInput] = s.weights.find(l.layer)->fakeQuant;
            const Tensor out = s.interpreter.runNode(*layer.node, inputs)[0];
            const ErrorMetrics expected =
                errorMetrics(recorder.outputs.at(*layer.node).values<float>(), out.values<float>());
            QVERIFY(l.isolated && l.accumulated && l.weight);
            QVERIFY2(closeDb(l.isolated->sqnrDb, expected.sqnrDb, 1e-5), qPrintable(QString("%1: %2 vs %3")
                                                                                        .arg(layer.modulePath.c_str())
                                                                                        .arg(l.isolated->sqnrDb)
                                                                                        .arg(expected.sqnrDb)));
            QVERIFY(closeDb(l.isolated->mse, expected.mse, 1e-4));
            QCOMPARE(l.weight->sqnrDb, s.weights.find(l.layer)->metrics.sqnrDb);
            QVERIFY(l.isolated->sqnrDb > 25 && l.isolated->sqnrDb < 80);
            // Errors accumulate: never better downstream than the layer alone by much.
            QVERIFY(l.accumulated->sqnrDb <= l.isolated->sqnrDb + 3);
        }
        // The first layer sees the float input: accumulated is isolated.
        QVERIFY(closeDb(r.layers.front().accumulated->sqnrDb, r.layers.front().isolated->sqnrDb, 1e-9));
        // fc2's output is the graph output `logits`.
        const ErrorMetrics last = *r.layers.back().accumulated;
        QCOMPARE(last.sqnrDb, r.outputs[0].metrics.sqnrDb);
        QCOMPARE(last.mse, r.outputs[0].metrics.mse);
        QCOMPARE(r.accuracy->floatTop1, 444.0 / 450.0);
        QVERIFY(std::abs(r.accuracy->quantizedTop1 - r.accuracy->floatTop1) <= 0.01);
        qInfo("w8 per-channel: output SQNR %.2f dB, top-1 %.2f%% (float %.2f%%)", r.outputs[0].metrics.sqnrDb,
              100 * r.accuracy->quantizedTop1, 100 * r.accuracy->floatTop1);
    }

    void w8a8StaticWithinOnePoint()
    {
        Setup s(rules(R"({"weight_qtype": "int8", "act_qtype": "int8", "act_static_scale": true})"));
        auto data = evalData(s.interpreter.model(), 50);
        const EvaluationResult r = evaluate(s.interpreter, s.plan, s.weights, s.stats(), *data);
        qInfo("w8a8 static: output SQNR %.2f dB, top-1 %.2f%% (float %.2f%%)", r.outputs[0].metrics.sqnrDb,
              100 * r.accuracy->quantizedTop1, 100 * r.accuracy->floatTop1);
        QVERIFY(std::abs(r.accuracy->quantizedTop1 - 444.0 / 450.0) <= 0.01);
        for (const LayerEvaluation& l : r.layers)
            QVERIFY(l.isolated && std::isfinite(l.isolated->sqnrDb));
        // Without statistics the static activations are an error naming what needs calibration.
        try {
            evaluate(s.interpreter, s.plan, s.weights, nullptr, *data);
            QFAIL("static activations evaluated without statistics");
        } catch (const Error& e) {
            QVERIFY2(QString(e.what()).contains("calibration") && QString(e.what()).contains("features/conv1"),
                     e.what());
        }
    }

    void int2EverywhereDegradesClearly()
    {
        Setup s(rules(R"({"weight_qtype": "int2", "act_qtype": "int2"})"));
        auto data = evalData(s.interpreter.model(), 128);
        const EvaluationResult r = evaluate(s.interpreter, s.plan, s.weights, nullptr, *data);
        qInfo("int2: output SQNR %.2f dB, top-1 %.2f%%", r.outputs[0].metrics.sqnrDb, 100 * r.accuracy->quantizedTop1);
        QVERIFY(r.accuracy->quantizedTop1 < r.accuracy->floatTop1 - 0.2);
        QVERIFY(r.outputs[0].metrics.sqnrDb < 10);
    }

    void sensitivityRanksTheInt2LayerFirst()
    {
        Setup s(rules(R"({"module_path": "features/conv2", "weight_qtype": "int2"},
                         {"weight_qtype": "int8"})"));
        const size_t conv2 = s.layerIndex("features/conv2");
        auto data = evalData(s.interpreter.model(), 150);
        std::vector<double> fractions;
        const ProgressCallback progress = [&](double f, std::string_view) { fractions.push_back(f); };
        for (SensitivityKind kind : {SensitivityKind::OneLayer, SensitivityKind::AllButOne}) {
            fractions.clear();
            const SensitivityResult r =
                sensitivity(s.interpreter, s.plan, s.weights, nullptr, *data, kind, {}, {}, progress);
            QCOMPARE(r.ranking.size(), size_t(5));
            QCOMPARE(r.ranking.front().layer, conv2);
            QVERIFY(r.ranking.front().top1.has_value());
            for (size_t i = 1; i < r.ranking.size(); ++i)
                QVERIFY(kind == SensitivityKind::OneLayer
                            ? r.ranking[i - 1].output.sqnrDb <= r.ranking[i].output.sqnrDb
                            : r.ranking[i - 1].output.sqnrDb >= r.ranking[i].output.sqnrDb);
            QVERIFY(std::is_sorted(fractions.begin(), fractions.end()));
            QCOMPARE(fractions.back(), 1.0);
            QCOMPARE(fractions.size(), size_t(3 * 5 + 1)); // 3 batches x 5 layers, then done
            const nlohmann::json j = r.toJson();
            QCOMPARE(j["ranking"][0]["layer"].get<size_t>(), conv2);
        }
        // The one-layer run of conv2 equals an evaluation with only conv2's rule.
        Setup only(rules(R"({"module_path": "features/conv2", "weight_qtype": "int2"})"));
        const EvaluationResult e = evaluate(only.interpreter, only.plan, only.weights, nullptr, *data);
        const SensitivityResult one =
            sensitivity(s.interpreter, s.plan, s.weights, nullptr, *data, SensitivityKind::OneLayer);
        QVERIFY(closeDb(one.ranking.front().output.sqnrDb, e.outputs[0].metrics.sqnrDb, 1e-12));
        QCOMPARE(*one.ranking.front().top1, e.accuracy->quantizedTop1);
    }

    void progressAndCancellation()
    {
        Setup s(rules(R"({"weight_qtype": "int8"})"));
        auto data = evalData(s.interpreter.model(), 100);
        std::vector<double> fractions;
        CancellationToken cancel;
        EvaluationOptions options;
        options.maxBatches = 2;
        const EvaluationResult r = evaluate(s.interpreter, s.plan, s.weights, nullptr, *data, options, cancel,
                                            [&](double f, std::string_view) { fractions.push_back(f); });
        QCOMPARE(r.batches, int64_t(2));
        QCOMPARE(r.samples, int64_t(200));
        QCOMPARE(fractions, (std::vector<double>{0.0, 0.5, 1.0}));
        // Cancelled after the first batch's progress report.
        const ProgressCallback cancelling = [&](double f, std::string_view) {
            if (f > 0)
                cancel.cancel();
        };
        QVERIFY_THROWS_EXCEPTION(Cancelled,
                                 evaluate(s.interpreter, s.plan, s.weights, nullptr, *data, {}, cancel, cancelling));
        QVERIFY_THROWS_EXCEPTION(Cancelled, sensitivity(s.interpreter, s.plan, s.weights, nullptr, *data,
                                                        SensitivityKind::OneLayer, {}, cancel));
    }

    // A model exported with a fixed batch (torch.onnx's default is 1; 16
    // here) is evaluated in batches of exactly that size by default: 450 rows
    // are 28 batches of 16, the last 2 rows left out. Batches of the old
    // default size are what the model refuses.
    void fixedBatchModelIsEvaluatedInItsBatchSize()
    {
        Model model = loadModel(kModel);
        model.inputs[0].shape->front() = Dim::fixed(16);
        const Interpreter interpreter(std::move(model));
        const QuantizationPlan plan = QuantizationPlan::build(
            interpreter.model(), RuleSet::fromJson(rules(R"({"weight_qtype": "int8", "act_qtype": "int8"})")));
        WeightQuantizer weights;
        weights.update(interpreter.model(), plan);

        const BatchSizing sizing = batchSizingFor(interpreter.model(), std::nullopt);
        QCOMPARE(sizing.batchSize, int64_t(16));
        QCOMPARE(sizing.fixedBy, std::string("input"));
        auto data = openDataSource(kEval, sizing.apply(), &interpreter.model());
        QCOMPARE(data->batchCount(), int64_t(28));
        QCOMPARE(data->droppedRows(), int64_t(2));
        const EvaluationResult r = evaluate(interpreter, plan, weights, nullptr, *data);
        QCOMPARE(r.batches, int64_t(28));
        QCOMPARE(r.samples, int64_t(448));
        QCOMPARE(r.accuracy->samples, int64_t(448));
        QVERIFY(r.accuracy->floatTop1 > 0.95);
        const SensitivityResult one =
            sensitivity(interpreter, plan, weights, nullptr, *data, SensitivityKind::OneLayer);
        QCOMPARE(one.ranking.size(), interpreter.model().layers.size());
        CalibrationOptions calibration;
        calibration.maxBatches = 3;
        QCOMPARE(calibrateActivations(interpreter, plan, *data, calibration).batches(), int64_t(3));

        auto unsized = evalData(interpreter.model(), kDefaultBatchSize);
        try {
            evaluate(interpreter, plan, weights, nullptr, *unsized);
            QFAIL("batches of 32 ran on a model fixed at 16");
        } catch (const Error& e) {
            QVERIFY2(QString(e.what()).contains("expected shape float32[16"), e.what());
        }
    }

    void resultJson()
    {
        Setup s(rules(R"({"module_path": "classifier/.*", "weight_qtype": "int4"})"));
        auto data = evalData(s.interpreter.model(), 450);
        const EvaluationResult r = evaluate(s.interpreter, s.plan, s.weights, nullptr, *data);
        const nlohmann::json j = nlohmann::json::parse(r.toJson().dump());
        QCOMPARE(j["layers"].size(), size_t(2));
        QCOMPARE(j["layers"][0]["layer"].get<size_t>(), s.layerIndex("classifier/fc1"));
        QCOMPARE(j["layers"][1]["isolated"]["sqnr_db"].get<double>(), r.layers[1].isolated->sqnrDb);
        QCOMPARE(j["outputs"][0]["name"].get<std::string>(), std::string("logits"));
        QCOMPARE(j["outputs"][0]["mse"].get<double>(), r.outputs[0].metrics.mse);
        QCOMPARE(j["accuracy"]["float_top1"].get<double>(), 444.0 / 450.0);
        QVERIFY(j["accuracy"]["float_top5"].is_number());
        QCOMPARE(j["batches"].get<int64_t>(), int64_t(1));
        // An exact result has no finite SQNR: null.
        QVERIFY(errorMetricsJson(ErrorMetrics{0, kInf, 0, 1, 0})["sqnr_db"].is_null());

        // Read back (session files): the same document, field for field.
        const EvaluationResult back = EvaluationResult::fromJson(j);
        QCOMPARE(back.toJson(), r.toJson());
        QCOMPARE(back.layers[1].isolated->sqnrDb, r.layers[1].isolated->sqnrDb);
        QCOMPARE(back.accuracy->quantizedTop1, r.accuracy->quantizedTop1);
        // A null SQNR is +inf where nothing differs, −inf where the signal was zero.
        QCOMPARE(errorMetricsFromJson(errorMetricsJson(ErrorMetrics{0, kInf, 0, 1, 0}), "x").sqnrDb, kInf);
        QCOMPARE(errorMetricsFromJson(errorMetricsJson(ErrorMetrics{0.5, -kInf, 1, 0, 0}), "x").sqnrDb, -kInf);
        // A malformed document names the field and what is wrong, in our words (not nlohmann's).
        const auto errorOf = [&](const std::function<void(nlohmann::json&)>& breakIt) -> std::string {
            nlohmann::json broken = j;
            breakIt(broken);
            try {
                EvaluationResult::fromJson(broken);
            } catch (const Error& e) {
                return e.what();
            }
            return "(read without an error)";
        };
        QCOMPARE(errorOf([](nlohmann::json& b) { b["outputs"][0].erase("cosine"); }),
                 std::string("evaluation.outputs[0].cosine: missing"));
        QCOMPARE(errorOf([](nlohmann::json& b) { b["layers"][1]["isolated"]["mse"] = "small"; }),
                 std::string("evaluation.layers[1].isolated.mse: expected a number, got \"small\""));
        QCOMPARE(errorOf([](nlohmann::json& b) { b["layers"][0]["layer"] = -3; }),
                 std::string("evaluation.layers[0].layer: expected a count (an integer >= 0), got -3"));
        QCOMPARE(errorOf([](nlohmann::json& b) { b["layers"] = 7; }),
                 std::string("evaluation.layers: expected a list, got 7"));
        QCOMPARE(errorOf([](nlohmann::json& b) { b["accuracy"] = nlohmann::json::array(); }),
                 std::string("evaluation.accuracy: expected an object, got []"));
    }
};

QTEST_APPLESS_MAIN(TestEvaluation)
#include "tst_evaluation.moc"
