// The engine session (session/exploration.h) on the demo CNN: one resolution
// per rule edit; edits report what they made stale and no more (an activation
// field leaves the weights current, a weight field does not, an undo back to
// evaluated rules makes the evaluation current again); a superseded job's
// result is refused; jobs read their snapshot while the exploration is edited;
// the in-line stages give the numbers of the stage functions they wrap; a
// session file round-trips the data settings and cached results.
#include <QtTest>

#include <nlohmann/json.hpp>

#include "io/model_loader.h"
#include "session/exploration.h"

using namespace qs;

namespace {

const char* const kModel = QUANTSCOPE_TEST_DATA "/../../resources/demo/digits/digits_cnn.onnx";
const char* const kEval = QUANTSCOPE_TEST_DATA "/../../resources/demo/digits/digits_eval.npz";
const char* const kCalib = QUANTSCOPE_TEST_DATA "/../../resources/demo/digits/digits_calib.npz";

RuleSet rules(const char* json)
{
    return RuleSet::fromJson(json);
}

const char* const kW8 = R"({"version":1,"rules":[{"weight_qtype":"int8"}]})";
const char* const kW8A8 =
    R"({"version":1,"rules":[{"weight_qtype":"int8","act_qtype":"int8","act_static_scale":true}]})";
const char* const kW4A8 =
    R"({"version":1,"rules":[{"weight_qtype":"int4","act_qtype":"int8","act_static_scale":true}]})";

DataConfig file(const char* path)
{
    DataConfig c;
    c.path = path;
    return c;
}

Exploration demo()
{
    LoadOptions options;
    options.hash = true;
    Exploration e;
    e.setModel(loadExplorationModel(kModel, options));
    return e;
}

} // namespace

class TestExploration : public QObject {
    Q_OBJECT
private slots:
    void oneResolutionPerEdit()
    {
        Exploration e = demo();
        for (const char* json : {kW8, kW8A8, kW4A8, kW8}) {
            const uint64_t before = RuleSet::resolutionCount();
            e.setRules(rules(json));
            QCOMPARE(RuleSet::resolutionCount() - before, uint64_t(1));
        }
        // The plan's resolution is what the rule table shows: every layer matched by rule 0.
        QCOMPARE(e.plan()->resolution().matchCount, std::vector<size_t>{e.model().layers.size()});
    }

    void editsSayWhatIsStale()
    {
        Exploration e = demo();
        Staleness s = e.setRules(rules(kW8));
        QVERIFY(s.plan && s.weights);
        e.updateWeights();
        QVERIFY(e.weightsCurrent());
        const auto weights = e.weights();

        // An activation field changes no weight: the weights stay current, nothing to recompute.
        s = e.setRules(rules(kW8A8));
        QVERIFY(s.plan);
        QVERIFY(!s.weights);
        QVERIFY(e.weightsCurrent());
        QCOMPARE(e.weights(), weights);
        QVERIFY(e.needsCalibration());

        // A weight field does.
        s = e.setRules(rules(kW4A8));
        QVERIFY(s.weights);
        QVERIFY(!e.weightsCurrent());
        QVERIFY_THROWS_EXCEPTION(Error, e.evaluationJob()); // no data, and the weights are behind
        const WeightResult w = e.updateWeights();
        QCOMPARE(w.recomputed.size(), e.model().layers.size());
    }

    void evaluationStaleUntilRulesComeBack()
    {
        Exploration e = demo();
        e.setRules(rules(kW8A8));
        e.updateWeights();
        e.setCalibrationData(file(kCalib));
        e.setEvaluationData(file(kEval));
        e.calibrate(KeptHistograms::AsPlanNeeds);
        const EvaluationRun run = e.evaluate();
        QCOMPARE(run.result->samples, int64_t(450));
        QCOMPARE(e.evaluationGeneration(), e.generation());

        Staleness s = e.setRules(rules(kW4A8));
        QVERIFY(s.evaluation);
        QVERIFY(e.evaluationGeneration() != e.generation());
        s = e.setRules(rules(kW8A8)); // an undo back to the evaluated rules
        QVERIFY(!s.evaluation);
        QCOMPARE(e.evaluationGeneration(), e.generation());
        QCOMPARE(e.evaluation(), run.result);

        // A sensitivity ranking never outlives its rules.
        e.updateWeights();
        e.runSensitivity(SensitivityKind::OneLayer);
        QVERIFY(e.sensitivity());
        s = e.setRules(rules(kW8));
        QVERIFY(s.sensitivity);
        QVERIFY(!e.sensitivity());
    }

    void supersededResultsAreRefused()
    {
        Exploration e = demo();
        e.setRules(rules(kW8));
        const WeightJob first = e.weightJob();
        e.setRules(rules(kW4A8));
        const WeightJob second = e.weightJob();
        // The second job finishes first; the first one's result comes later and is dropped.
        QVERIFY(e.apply(second.run()));
        const auto current = e.weights();
        QVERIFY(!e.apply(first.run()));
        QCOMPARE(e.weights(), current);
        QVERIFY(e.weightsCurrent());
        // The job read its own snapshot: int4 weights, not the int8 the first plan asked for.
        QCOMPARE(e.weights()->find(0)->spec.qtype, QType::Int4);
    }

    void inlineStagesMatchTheStageFunctions()
    {
        Exploration e = demo();
        e.setRules(rules(kW8A8));
        e.setCalibrationData(file(kCalib));
        e.setEvaluationData(file(kEval));
        e.updateWeights();
        e.calibrate(KeptHistograms::AsPlanNeeds);
        const EvaluationRun run = e.evaluate();

        // The same stages by hand, on the engine functions the exploration drives.
        Interpreter interpreter(loadModel(kModel));
        const QuantizationPlan plan = QuantizationPlan::build(interpreter.model(), rules(kW8A8));
        WeightQuantizer weights;
        weights.update(interpreter.model(), plan);
        auto calib = openDataSource(kCalib, {}, &interpreter.model());
        const ActivationStatistics stats = calibrateActivations(interpreter, plan, *calib);
        auto eval = openDataSource(kEval, {}, &interpreter.model());
        const EvaluationResult reference = evaluate(interpreter, plan, weights, &stats, *eval);
        QCOMPARE(run.result->outputs.size(), reference.outputs.size());
        QCOMPARE(run.result->outputs[0].metrics.sqnrDb, reference.outputs[0].metrics.sqnrDb);
        QCOMPARE(run.result->accuracy->quantizedTop1, reference.accuracy->quantizedTop1);
    }

    void warningsAreStructured()
    {
        Exploration e = demo();
        e.setRules(rules(R"({"version":1,"rules":[{"module_path":"nothing","weight_qtype":"int8"},
                                                  {"weight_qtype":"mxfp4","weight_calibration":"percentile,99.9"}]})"),
                   "r.json");
        bool unused = false, problem = false;
        for (const ExplorationWarning& w : e.warnings()) {
            if (w.kind == ExplorationWarning::Kind::UnusedRule) {
                unused = true;
                QCOMPARE(w.rule, std::optional<size_t>(0));
                QCOMPARE(w.field, std::string("module_path"));
                QCOMPARE(w.text, std::string("r.json: rule 0 (module_path 'nothing') matches no layer"));
            }
            if (w.kind == ExplorationWarning::Kind::LayerProblem) {
                problem = true;
                QVERIFY(w.layer.has_value());
                QCOMPARE(w.rule, std::optional<size_t>(1));
                QVERIFY2(w.text.find("stays float") != std::string::npos, w.text.c_str());
            }
        }
        QVERIFY(unused);
        QVERIFY(problem);
    }

    void sessionFileRoundTrip()
    {
        Exploration e = demo();
        e.setRules(rules(kW8A8));
        e.setCalibrationData(file(kCalib));
        e.setEvaluationData(file(kEval));
        e.updateWeights();
        e.calibrate(KeptHistograms::All);
        e.evaluate();
        const SessionFile saved =
            SessionFile::fromJson(e.sessionFile(nlohmann::ordered_json::parse(e.rules().toJson())).toJson());

        Exploration restored = demo();
        restored.setRules(RuleSet::fromJson(saved.rules.dump()));
        QVERIFY(restored.restoreResults(saved).empty());
        QCOMPARE(restored.calibrationData(), e.calibrationData());
        QVERIFY(restored.statistics() && restored.statistics()->covers(*restored.plan()));
        QCOMPARE(restored.evaluationGeneration(), restored.generation()); // of these rules: current
        QCOMPARE(restored.evaluation()->outputs[0].metrics.sqnrDb, e.evaluation()->outputs[0].metrics.sqnrDb);

        // A changed model file: the cached results go, and the log says why.
        SessionFile changed = saved;
        changed.modelSha256 = std::string(64, '0');
        Exploration other = demo();
        const std::vector<std::string> log = other.restoreResults(changed);
        QCOMPARE(log.size(), size_t(1));
        QVERIFY(!other.statistics() && !other.evaluation());
    }
};

QTEST_GUILESS_MAIN(TestExploration)
#include "tst_exploration.moc"
