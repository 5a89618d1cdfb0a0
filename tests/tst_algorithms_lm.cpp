// GPTQ on a trained language model, the perplexity targets of issue 20:
// the tiny Llama of the LLM fixtures (tests/llm/make_llama.py, llama_f32), its
// decoder linears quantized weights-only (embeddings and lm_head stay float),
// calibrated on one half of the held-out text after reference/eval.txt and
// evaluated on the other half (tests/llm/heldout_text.py: two disjoint slices
// of standard-library sources no fixture model was trained on), in rows of 64
// tokens. Float, round-to-nearest and the algorithm come from the same run, so
// the fraction of RTN's perplexity increase an algorithm recovers,
// (ppl_rtn - ppl_alg) / (ppl_rtn - ppl_float), is measured here, not recalled.
// The figures are docs/algorithms.md's "Language model" table; what holds there
// with a margin is asserted; what does not (AWQ on llama_f32, GPTQ in tiles of 32
// at int4) is reported there and not run here.
// The same runs on llama_outlier (tests/llm/make_outlier.py: llama_f32 with 4
// input channels per RMSNorm made 32 times larger and the weights reading them
// 32 times smaller, the same function), where per-channel RTN loses those
// channels: GPTQ and AWQ (with its clipping search) each recover well over half
// of RTN's increase at int4 and int3 per channel.

#include <QtTest>

#include <string>

#include "rules/ruleset.h"
#include "session/exploration.h"

using namespace qs;

namespace {

const char* const kModel = QUANTSCOPE_LLM_DIR "/llama_f32";
const char* const kOutlierModel = QUANTSCOPE_LLM_DIR "/llama_outlier";
const char* const kCalib = QUANTSCOPE_LLM_DIR "/heldout/calib.txt";
const char* const kEval = QUANTSCOPE_LLM_DIR "/heldout/eval.txt";
constexpr int64_t kSequence = 64; // the fixtures' training rows

struct LmOutcome {
    double floatPerplexity = 0, perplexity = 0;
    int64_t tokens = 0;
    double outputSqnrDb = 0;
    double agreement = 0; // top-1 agreement with float, per token position
    double increase() const { return perplexity / floatPerplexity - 1; }
};

DataConfig text(const char* path)
{
    DataConfig c;
    c.path = path;
    c.batchSize = 32;
    c.sequenceLength = kSequence;
    return c;
}

// Every decoder Gemm/MatMul under one rule, as quantscope-cli quantize runs it:
// calibration (when the algorithm reads it), weights, evaluation.
LmOutcome runLm(const std::string& qtype, const std::string& algorithm, const std::string& extra = "",
                const char* model = kModel)
{
    Exploration e;
    e.setModel(loadExplorationModel(model));
    e.setRules(RuleSet::fromJson(
        R"({"version":1,"rules":[{"module_path":"model/layers/.*","op_types":["Gemm","MatMul"],"weight_qtype":")" +
        qtype + R"(","algorithm":")" + algorithm + "\"" + extra + "}]}"));
    e.setCalibrationData(text(kCalib));
    e.setEvaluationData(text(kEval));
    if (e.needsCalibration())
        e.calibrate(KeptHistograms::AsPlanNeeds);
    e.updateWeights();
    if (!e.weights()->problems().empty())
        throw Error(e.weights()->problems().begin()->second);
    if (e.weights()->weights().size() != 14) // 2 layers × q, k, v, o, gate, up, down
        throw Error("expected the 14 decoder linears to be quantized");
    const EvaluationRun r = e.evaluate();
    if (!r.result->perplexity || !r.result->agreement)
        throw Error("no perplexity for the language model");
    return {r.result->perplexity->floatValue, r.result->perplexity->quantizedValue, r.result->perplexity->tokens,
            r.result->outputs.at(0).metrics.sqnrDb, r.result->agreement->fraction()};
}

double recovered(const LmOutcome& rtn, const LmOutcome& alg)
{
    return (rtn.perplexity - alg.perplexity) / (rtn.perplexity - rtn.floatPerplexity);
}

void print(const char* what, const LmOutcome& o)
{
    qInfo("%s: perplexity %.4f (float %.4f, %+.2f%%, %lld predicted tokens), logits SQNR %.2f dB, top-1 agreement "
          "%.2f%%",
          what, o.perplexity, o.floatPerplexity, 100 * o.increase(), static_cast<long long>(o.tokens), o.outputSqnrDb,
          100 * o.agreement);
}

} // namespace

class TestAlgorithmsLm : public QObject {
    Q_OBJECT

private slots:
    void gptqRecoversMostOfRoundToNearestsIncrease_data()
    {
        QTest::addColumn<QString>("qtype");
        QTest::addColumn<QString>("extra");          // more rule fields
        QTest::addColumn<double>("rtnAtLeast");      // RTN's increase: a precondition, so the fraction means something
        QTest::addColumn<double>("recoversAtLeast"); // GPTQ's recovered fraction
        QTest::addColumn<double>("sqnrGainAtLeast"); // GPTQ over RTN, logits SQNR in dB
        // Measured (docs/algorithms.md): int4 RTN +0.31%, GPTQ recovers 75%, +6.5 dB;
        // int3 RTN +1.34%, GPTQ recovers 76%, +7.0 dB; int3 in tiles of 32: RTN +1.10%,
        // GPTQ recovers 80%, +7.1 dB.
        QTest::newRow("int4 per channel") << QStringLiteral("int4") << QString() << 0.0015 << 0.6 << 4.0;
        QTest::newRow("int3 per channel") << QStringLiteral("int3") << QString() << 0.008 << 0.6 << 4.0;
        QTest::newRow("int3 tiles of 32")
            << QStringLiteral("int3") << QStringLiteral(R"(,"tile_size":32)") << 0.008 << 0.6 << 4.0;
    }

    void gptqRecoversMostOfRoundToNearestsIncrease()
    {
        QFETCH(QString, qtype);
        QFETCH(QString, extra);
        QFETCH(double, rtnAtLeast);
        QFETCH(double, recoversAtLeast);
        QFETCH(double, sqnrGainAtLeast);
        const LmOutcome rtn = runLm(qtype.toStdString(), "rtn", extra.toStdString());
        const LmOutcome gptq = runLm(qtype.toStdString(), "gptq", extra.toStdString());
        print("rtn", rtn);
        print("gptq", gptq);
        qInfo("GPTQ recovers %.1f%% of RTN's increase, %+.2f dB logits SQNR", 100 * recovered(rtn, gptq),
              gptq.outputSqnrDb - rtn.outputSqnrDb);
        QCOMPARE(rtn.floatPerplexity, gptq.floatPerplexity); // one float model, one evaluation text
        QVERIFY(rtn.tokens > 30000);
        QVERIFY2(rtn.increase() >= rtnAtLeast, "round to nearest should raise the perplexity here");
        QVERIFY2(recovered(rtn, gptq) >= recoversAtLeast, "GPTQ should recover most of RTN's perplexity increase");
        QVERIFY(gptq.outputSqnrDb >= rtn.outputSqnrDb + sqnrGainAtLeast);
        QVERIFY(gptq.agreement > rtn.agreement);
    }

    void gptqAndAwqRecoverMostOfItWithOutlierChannels_data()
    {
        QTest::addColumn<QString>("qtype");
        QTest::addColumn<double>("rtnAtLeast");  // RTN's increase
        QTest::addColumn<double>("gptqAtLeast"); // GPTQ's recovered fraction
        QTest::addColumn<double>("awqAtLeast");  // AWQ's (with clipping, the default)
        // Measured (docs/algorithms.md, "Language model with activation outliers"): int4 RTN
        // +4.11%, GPTQ recovers 71% (+7.5 dB), AWQ 95% (+16.3 dB); int3 RTN +5.89%, GPTQ 73%
        // (+8.1 dB), AWQ 89% (+10.4 dB).
        QTest::newRow("int4 per channel") << QStringLiteral("int4") << 0.03 << 0.6 << 0.8;
        QTest::newRow("int3 per channel") << QStringLiteral("int3") << 0.04 << 0.6 << 0.8;
    }

    void gptqAndAwqRecoverMostOfItWithOutlierChannels()
    {
        QFETCH(QString, qtype);
        QFETCH(double, rtnAtLeast);
        QFETCH(double, gptqAtLeast);
        QFETCH(double, awqAtLeast);
        const LmOutcome rtn = runLm(qtype.toStdString(), "rtn", "", kOutlierModel);
        const LmOutcome gptq = runLm(qtype.toStdString(), "gptq", "", kOutlierModel);
        const LmOutcome awq = runLm(qtype.toStdString(), "awq", "", kOutlierModel);
        print("rtn", rtn);
        print("gptq", gptq);
        print("awq", awq);
        qInfo("GPTQ recovers %.1f%% of RTN's increase (%+.2f dB logits SQNR), AWQ %.1f%% (%+.2f dB)",
              100 * recovered(rtn, gptq), gptq.outputSqnrDb - rtn.outputSqnrDb, 100 * recovered(rtn, awq),
              awq.outputSqnrDb - rtn.outputSqnrDb);
        QCOMPARE(rtn.floatPerplexity, awq.floatPerplexity);
        QVERIFY(rtn.tokens > 30000);
        QVERIFY2(rtn.increase() >= rtnAtLeast, "per-channel RTN should lose the outlier channels here");
        QVERIFY2(recovered(rtn, gptq) >= gptqAtLeast, "GPTQ should recover most of RTN's perplexity increase");
        QVERIFY2(recovered(rtn, awq) >= awqAtLeast, "AWQ should recover most of RTN's perplexity increase");
        QVERIFY(gptq.outputSqnrDb >= rtn.outputSqnrDb + 4);
        QVERIFY(awq.outputSqnrDb >= rtn.outputSqnrDb + 4);
        QVERIFY(gptq.agreement > rtn.agreement && awq.agreement > rtn.agreement);
    }
};

QTEST_GUILESS_MAIN(TestAlgorithmsLm)
#include "tst_algorithms_lm.moc"
