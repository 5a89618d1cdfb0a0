// GPTQ through the whole pipeline on the demo digits CNN (resources/demo/digits):
// rules choose it per layer, calibration gathers the Hessians in its one run,
// the weights follow, and the model's output against float is better than
// round-to-nearest's at int4 per channel. The checkpoint and the ONNX QDQ
// exports hold exactly the weights the simulation ran with, decoded from the
// files element for element — GPTQ's and AdaRound's, which both round onto the
// rule's own grid.

#include <QtTest>

#include <onnx/onnx_pb.h>

#include <fstream>

#include "algorithm_support.h"
#include "export/checkpoint.h"
#include "export/checkpoint_reader.h"
#include "export/onnx_qdq.h"
#include "export/qdq_graph.h"
#include "quant/kernels.h"
#include "session/exploration.h"
#include "test_support.h"

using namespace qs;
using namespace qs::test;

class TestGptqModel : public QObject {
    Q_OBJECT

private slots:
    void gptqBeatsRoundToNearestOnTheDemoModel_data()
    {
        QTest::addColumn<QString>("extra");
        QTest::newRow("int4 per channel") << "";
        QTest::newRow("int4 per channel, asymmetric") << R"(, "weight_calibration": "minmax")";
    }

    void gptqBeatsRoundToNearestOnTheDemoModel()
    {
        QFETCH(QString, extra);
        const Outcome rtn = run(int4Rules("rtn", extra.toStdString()));
        const Outcome gptq = run(int4Rules("gptq", extra.toStdString()));
        qInfo("%s: output SQNR RTN %.2f dB, GPTQ %.2f dB (%+.2f dB); top-1 float %.2f%%, RTN %.2f%%, GPTQ %.2f%%",
              QTest::currentDataTag(), rtn.outputSqnrDb, gptq.outputSqnrDb, gptq.outputSqnrDb - rtn.outputSqnrDb,
              100 * rtn.floatTop1, 100 * rtn.top1, 100 * gptq.top1);
        QVERIFY2(gptq.outputSqnrDb > rtn.outputSqnrDb + 4.0, "GPTQ should lift the output SQNR by more than 4 dB");
        for (const auto& [layer, w] : gptq.weights->weights())
            QCOMPARE(w->algorithm.kind, WeightAlgorithmKind::Gptq);
    }

    void calibrationComesFirstAndANewOneMakesTheWeightsStale()
    {
        Exploration e;
        e.setModel(loadExplorationModel(kModel));
        e.setRules(int4Rules("gptq"));
        QVERIFY(e.needsCalibration() && e.weightsNeedCalibration());
        // Without calibration every GPTQ layer says what to do.
        e.updateWeights();
        QCOMPARE(e.weights()->weights().size(), size_t(0));
        QCOMPARE(e.weights()->problems().size(), e.model().layers.size());
        QVERIFY(e.weights()->problems().begin()->second.find("run calibration") != std::string::npos);

        e.setCalibrationData(file(kCalib));
        e.calibrate(KeptHistograms::AsPlanNeeds);
        QVERIFY(!e.weightsCurrent());
        QVERIFY(e.statistics()->covers(*e.plan()));
        QCOMPARE(e.statistics()->hessians().size(), e.model().layers.size());
        // conv1 reads 1 channel through 3x3 kernels: 9 features per im2col row.
        QCOMPARE(e.statistics()->hessians().at(0)->features(), int64_t(9));
        QCOMPARE(e.updateWeights().recomputed.size(), e.model().layers.size());
        QVERIFY(e.weightsCurrent());
        const auto first = e.weights()->find(3);
        QCOMPARE(e.updateWeights().recomputed.size(), size_t(0)); // nothing changed: nothing recomputed

        // Fewer calibration batches: other Hessians, every GPTQ layer recomputed, and different.
        DataConfig one = file(kCalib);
        one.maxBatches = 1;
        e.setCalibrationData(one);
        e.calibrate(KeptHistograms::AsPlanNeeds);
        QVERIFY(!e.weightsCurrent());
        QCOMPARE(e.updateWeights().recomputed.size(), e.model().layers.size());
        QVERIFY(bytesOf(e.weights()->find(3)->fakeQuant) != bytesOf(first->fakeQuant));

        // Back to rtn: the weights need no calibration and are the float weights rounded.
        e.setRules(int4Rules("rtn"));
        QVERIFY(!e.weightsNeedCalibration());
        e.updateWeights();
        QCOMPARE(e.weights()->find(3)->algorithm.kind, WeightAlgorithmKind::Rtn);
    }

    void exportsHoldTheAlgorithmsWeightsBitForBit_data()
    {
        QTest::addColumn<QString>("algorithm");
        QTest::newRow("gptq") << "gptq";
        QTest::newRow("adaround") << "adaround";
    }

    void exportsHoldTheAlgorithmsWeightsBitForBit()
    {
        QFETCH(QString, algorithm);
        Exploration e;
        e.setModel(loadExplorationModel(kModel));
        e.setRules(int4Rules(algorithm.toStdString()));
        e.setCalibrationData(file(kCalib));
        e.calibrate(KeptHistograms::AsPlanNeeds);
        e.updateWeights();
        const Model& model = e.model();
        const WeightQuantizer& weights = *e.weights();
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const std::filesystem::path folder = dir.path().toStdString();

        // The round-to-nearest weights, to show the files hold something else.
        WeightQuantizer rtn;
        rtn.update(model, QuantizationPlan::build(model, int4Rules("rtn")));

        exportCheckpoint(model, *e.plan(), weights, e.rules(), folder / "w.safetensors");
        const QuantizedCheckpoint checkpoint = QuantizedCheckpoint::open(folder / "w.safetensors");
        QVERIFY(checkpoint.manifest().find("\"algorithm\":\"" + algorithm.toStdString() + "\"") != std::string::npos);

        exportOnnxQdq(model, *e.plan(), weights, {}, folder / "q.onnx");
        const onnx::ModelProto qdq = readProto(folder / "q.onnx");

        QCOMPARE(weights.weights().size(), size_t(5));
        for (const auto& [layer, w] : weights.weights()) {
            QCOMPARE(std::string(w->algorithm.name()), algorithm.toStdString());
            const std::string& name = model.layers[layer].weightName;
            const QByteArray simulated = bytesOf(w->fakeQuant);
            QCOMPARE(bytesOf(checkpoint.dequantized(name)), simulated);

            // DequantizeLinear by hand on the ONNX file: (code − zero point) · scale[channel].
            const onnx::NodeProto* dq = nullptr;
            for (const auto& node : qdq.graph().node())
                if (node.op_type() == "DequantizeLinear" && node.output(0) == name)
                    dq = &node;
            QVERIFY2(dq, name.c_str());
            int64_t axis = 1;
            for (const auto& a : dq->attribute())
                if (a.name() == "axis")
                    axis = a.i();
            const auto codes = readIntegerTensor(initializerOf(qdq, dq->input(0)));
            const auto scales = readFloatTensor(initializerOf(qdq, dq->input(1)));
            QVERIFY(codes && scales);
            QCOMPARE(codes->elementType, kOnnxInt4);
            std::vector<int32_t> zeros(scales->size(), 0);
            if (dq->input_size() > 2 && !dq->input(2).empty())
                zeros = readIntegerTensor(initializerOf(qdq, dq->input(2)))->values;
            const Shape& shape = w->fakeQuant.shape();
            const int64_t inner = shapeElementCount(Shape(shape.begin() + axis + 1, shape.end()));
            const auto fq = w->fakeQuant.values<float>();
            const auto rounded = rtn.find(layer)->fakeQuant.values<float>();
            int64_t differFromRtn = 0;
            for (size_t k = 0; k < fq.size(); ++k) {
                const size_t channel = size_t((int64_t(k) / inner) % shape[size_t(axis)]);
                const float v = float(codes->values[k] - zeros[channel]) * (*scales)[channel];
                QCOMPARE(v, fq[k]);
                differFromRtn += fq[k] != rounded[k];
            }
            qInfo("%s: %.1f%% of the exported codes differ from round-to-nearest's", name.c_str(),
                  100.0 * double(differFromRtn) / double(fq.size()));
            QVERIFY(differFromRtn > 0);
        }
    }
};

QTEST_APPLESS_MAIN(TestGptqModel)
#include "tst_gptq_model.moc"
