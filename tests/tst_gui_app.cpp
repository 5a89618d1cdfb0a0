// The app on the bundled demo model (resources/demo/digits): loading fills the
// layer tree; a rule edit recomputes only the changed layers and never shows
// stale weights as current; undo brings back the rules and their results;
// calibration and evaluation run as jobs (and cancel cleanly); a corrupt model
// shows an error and the window lives on; a session round-trips; and the main
// window is rendered to docs/screenshots/main_window.png for people to look at.
#include <QtTest>

#include <QAbstractItemModelTester>
#include <QAction>
#include <QComboBox>
#include <QDir>
#include <QLabel>
#include <QSortFilterProxyModel>
#include <QStandardPaths>
#include <QTableView>
#include <QTemporaryDir>
#include <QToolBar>

#include <QTextBrowser>
#include <QTreeView>
#include <QUndoStack>
#include <map>
#include <thread>

#include "gui/data_dialog.h"
#include "gui/export_dialog.h"
#include "widgets/jobs/job_tracker.h"
#include "gui/stall_watchdog.h"
#include "io/synthetic_data.h"
#include "gui/main_window.h"
#include "gui/stall_watchdog.h"
#include "gui/workspace.h"
#include "io/synthetic_data.h"
#include "rules/ruleset.h"
#include "session/layer_errors.h"
#include "widgets/layer_tree_model.h"
#include "widgets/rule_editor.h"
#include "widgets/rule_table_model.h"
#include "gui_support.h"

using namespace qs;
using namespace gui_test;

namespace {


bool loadModel(Workspace& ws, const QString& path = kModel)
{
    QSignalSpy loaded(&ws, &Workspace::modelLoaded);
    ws.openModel(path);
    return loaded.wait(30000);
}

// Waits until the weights of the current rules are in.
bool weightsCurrent(Workspace& ws)
{
    QElapsedTimer t;
    t.start();
    while (ws.weightsGeneration() != ws.generation() && t.elapsed() < 30000)
        QTest::qWait(10);
    return ws.weightsGeneration() == ws.generation();
}

QModelIndex cell(Workspace& ws, size_t layer, int column)
{
    return ws.layers()->indexOfLayer(layer).siblingAtColumn(column);
}

} // namespace

class TestGuiApp : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() { QStandardPaths::setTestModeEnabled(true); }
    void loadingTheDemoFillsTheLayerTree();
    void editRecomputesOnlyChangedLayers();
    void undoRestoresRulesAndResults();
    void calibrateAndEvaluate();
    void cancellingAJobIsClean();
    void corruptModelShowsErrorAndWindowLives();
    void sessionRoundTrips();
    void exportsAreWrittenAndChecked();
    void syntheticDataIsSeededAndShapedLikeTheInputs();
    void watchdogLogsAStallOfTheGuiThread();
    void ruleEditorActionsEditTheTable();
    void dataDialogRoundTripsAndWarnsOnSyntheticData();
    void screenshotOfTheMainWindow();
};

void TestGuiApp::loadingTheDemoFillsTheLayerTree()
{
    Workspace ws;
    QAbstractItemModelTester tester(ws.layers(), QAbstractItemModelTester::FailureReportingMode::QtTest);
    QVERIFY(loadModel(ws));
    QCOMPARE(ws.layers()->layerCount(), size_t(5));
    QStringList paths;
    for (size_t i = 0; i < 5; ++i)
        paths << ws.layers()->indexOfLayer(i).data(LayerTreeModel::ModulePathRole).toString();
    QCOMPARE(paths,
             QStringList({"features/conv1", "features/conv2", "features/conv3", "classifier/fc1", "classifier/fc2"}));
    QCOMPARE(ws.layers()->rowCount(), 2); // features, classifier
    QVERIFY(ws.canRun());
    QVERIFY(ws.unsupportedOps().isEmpty());
    QCOMPARE(cell(ws, 0, LayerTreeModel::OpTypeColumn).data().toString(), QStringLiteral("Conv"));
    QCOMPARE(cell(ws, 0, LayerTreeModel::WeightQTypeColumn).data().toString(), QStringLiteral("float"));
}

void TestGuiApp::editRecomputesOnlyChangedLayers()
{
    Workspace ws;
    QVERIFY(loadModel(ws));
    ws.loadRules(kW8A8);
    QVERIFY(weightsCurrent(ws));
    QCOMPARE(ws.weights()->weights().size(), size_t(5));
    QCOMPARE(ws.lastRecomputed().size(), size_t(5));
    std::vector<std::shared_ptr<const QuantizedWeight>> before;
    for (size_t i = 0; i < 5; ++i)
        before.push_back(ws.weights()->find(i));
    const double fc2Before = cell(ws, 4, LayerTreeModel::WeightSqnrColumn).data(LayerTreeModel::SortRole).toDouble();
    QVERIFY(fc2Before > 30); // int8 per channel

    // fc2 gets int4 per tensor in a rule of its own, ahead of the w8a8 rule.
    nlohmann::ordered_json rule{
        {"module_path", "classifier/fc2"}, {"weight_qtype", "int4"}, {"granularity", "per_tensor"}};
    ws.rules()->insertRule(0, rule, QStringLiteral("fc2 int4"));
    // Until the job is back, every weight cell is stale, none current.
    if (ws.weightsGeneration() != ws.generation())
        for (size_t i = 0; i < 5; ++i)
            QVERIFY(cell(ws, i, LayerTreeModel::WeightSqnrColumn).data(LayerTreeModel::StaleRole).toBool());
    QVERIFY(weightsCurrent(ws));
    QCOMPARE(ws.lastRecomputed(), std::vector<size_t>{4});
    for (size_t i = 0; i < 4; ++i)
        QCOMPARE(ws.weights()->find(i), before[i]); // the very same cached result
    QVERIFY(ws.weights()->find(4) != before[4]);
    for (size_t i = 0; i < 5; ++i)
        QVERIFY(!cell(ws, i, LayerTreeModel::WeightSqnrColumn).data(LayerTreeModel::StaleRole).toBool());
    const double fc2After = cell(ws, 4, LayerTreeModel::WeightSqnrColumn).data(LayerTreeModel::SortRole).toDouble();
    QVERIFY2(fc2After < fc2Before - 10, qPrintable(QStringLiteral("%1 vs %2").arg(fc2After).arg(fc2Before)));
    QCOMPARE(cell(ws, 4, LayerTreeModel::WeightQTypeColumn).data().toString(), QStringLiteral("int4"));
    QCOMPARE(cell(ws, 4, LayerTreeModel::RuleColumn).data().toString(), QStringLiteral("0"));

    // One edit through the rule table costs one resolution of the rules, done by the
    // engine's exploration (the table gets the plan's counts), and no model reset.
    QSignalSpy reset(ws.rules(), &QAbstractItemModel::modelReset);
    const uint64_t resolutions = RuleSet::resolutionCount();
    ws.rules()->setField(0, "weight_qtype", "int3");
    QCOMPARE(RuleSet::resolutionCount() - resolutions, uint64_t(1));
    QCOMPARE(reset.count(), 0);
    QCOMPARE(ws.rules()->index(0, RuleTableModel::kMatchesColumn).data().toString(), QStringLiteral("1"));
    // An activation-only edit keeps the weights: nothing is requantized.
    const uint64_t weightsBefore = ws.weightsGeneration();
    QVERIFY(weightsCurrent(ws));
    const auto int3 = ws.weights()->find(4);
    ws.rules()->setField(0, "act_calibration", "minmax");
    QCOMPARE(ws.weightsGeneration(), ws.generation());
    QVERIFY(ws.weightsGeneration() > weightsBefore);
    QCOMPARE(ws.weights()->find(4), int3);
    QVERIFY(!cell(ws, 4, LayerTreeModel::WeightSqnrColumn).data(LayerTreeModel::StaleRole).toBool());

    // Rapid edits: jobs of superseded generations never land; the last one does.
    for (const char* qtype : {"int2", "int3", "int6"})
        ws.rules()->setField(0, "weight_qtype", qtype);
    QVERIFY(weightsCurrent(ws));
    QCOMPARE(ws.weights()->find(4)->spec.qtype, *parseQType("int6"));
    QCOMPARE(cell(ws, 4, LayerTreeModel::WeightQTypeColumn).data().toString(), QStringLiteral("int6"));
}

void TestGuiApp::undoRestoresRulesAndResults()
{
    Workspace ws;
    QVERIFY(loadModel(ws));
    ws.loadRules(kW8A8);
    QVERIFY(weightsCurrent(ws));
    const auto rows = ws.rules()->rows();
    std::vector<double> sqnr;
    for (size_t i = 0; i < 5; ++i)
        sqnr.push_back(cell(ws, i, LayerTreeModel::WeightSqnrColumn).data(LayerTreeModel::SortRole).toDouble());
    ws.rules()->setField(0, "weight_qtype", "int4");
    ws.rules()->setField(0, "granularity", "per_tensor");
    QVERIFY(weightsCurrent(ws));
    QVERIFY(cell(ws, 1, LayerTreeModel::WeightSqnrColumn).data(LayerTreeModel::SortRole).toDouble() < sqnr[1]);
    ws.undoStack()->undo();
    ws.undoStack()->undo();
    QCOMPARE(ws.rules()->rows(), rows);
    QVERIFY(weightsCurrent(ws));
    for (size_t i = 0; i < 5; ++i)
        QCOMPARE(cell(ws, i, LayerTreeModel::WeightSqnrColumn).data(LayerTreeModel::SortRole).toDouble(), sqnr[i]);
}

void TestGuiApp::calibrateAndEvaluate()
{
    Workspace ws;
    QVERIFY(loadModel(ws));
    ws.loadRules(kW8A8);
    QVERIFY(weightsCurrent(ws));
    ws.setCalibrationData(fileData(kCalib));
    ws.setEvaluationData(fileData(kEval));
    QSignalSpy stats(&ws, &Workspace::statisticsChanged);
    ws.calibrate();
    QVERIFY(stats.wait(60000));
    QVERIFY(ws.statistics());
    QVERIFY(ws.statistics()->batches() > 0);
    QSignalSpy evaluated(&ws, &Workspace::evaluationChanged);
    ws.evaluate();
    QVERIFY(evaluated.wait(120000));
    QVERIFY(ws.evaluation());
    QVERIFY(ws.evaluation()->accuracy);
    QVERIFY(ws.evaluation()->accuracy->quantizedTop1 > 0.9);
    const QModelIndex acc = cell(ws, 2, LayerTreeModel::AccumulatedSqnrColumn);
    QVERIFY(!acc.data().toString().isEmpty());
    QVERIFY(!acc.data(LayerTreeModel::StaleRole).toBool());
    // An edit makes the evaluation stale; undoing it makes it current again.
    ws.rules()->setField(0, "weight_qtype", "int4");
    QVERIFY(acc.data(LayerTreeModel::StaleRole).toBool());
    ws.undoStack()->undo();
    QVERIFY(!acc.data(LayerTreeModel::StaleRole).toBool());

    // A saved session brings the evaluation back whole and current (same rules).
    {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("e.qssession"));
        ws.toSession().save(path.toStdString());
        Workspace reopened;
        QSignalSpy restored(&reopened, &Workspace::evaluationChanged);
        reopened.openSession(path);
        QVERIFY(restored.wait(30000));
        QVERIFY(reopened.evaluation());
        QCOMPARE(reopened.evaluation()->toJson(), ws.evaluation()->toJson());
        QCOMPARE(reopened.evaluationGeneration(), reopened.generation());
    }

    // Sensitivity ranks every quantized layer, most sensitive first; an edit
    // drops the ranking rather than show it against other rules.
    QVERIFY(weightsCurrent(ws)); // the undo re-ran the weight job
    QSignalSpy ranked(&ws, &Workspace::sensitivityChanged);
    ws.runSensitivity(SensitivityKind::OneLayer);
    QVERIFY(ranked.wait(120000));
    QVERIFY(ws.sensitivity());
    QCOMPARE(ws.sensitivity()->kind, SensitivityKind::OneLayer);
    QCOMPARE(ws.sensitivity()->ranking.size(), size_t(5));
    for (size_t i = 1; i < ws.sensitivity()->ranking.size(); ++i)
        QVERIFY(ws.sensitivity()->ranking[i - 1].output.sqnrDb <= ws.sensitivity()->ranking[i].output.sqnrDb);
    QVERIFY(!ws.sensitivity()->algorithm);

    // Again with GPTQ switched on (Run > Sensitivity with an Algorithm), on a worker: every layer
    // is re-rounded from the calibration inputs, the ranking says so and the session's own
    // weights stay as the rules made them. (The figures themselves are checked against
    // independent quantize runs in tst_cli_model.)
    const auto plain = ws.sensitivity();
    const auto ownWeights = ws.exploration().weights();
    QStringList log;
    const auto logged = connect(&ws, &Workspace::logMessage, [&log](const QString& text) { log << text; });
    ws.runSensitivity(SensitivityKind::OneLayer, WeightAlgorithm::parse("gptq"));
    QVERIFY(ws.jobs()->isRunning(JobKind::Sensitivity));
    QVERIFY(ranked.wait(120000));
    const auto withGptq = ws.sensitivity();
    QVERIFY(withGptq && withGptq != plain);
    QCOMPARE(withGptq->algorithm->toString(), std::string("gptq"));
    QVERIFY(withGptq->keptRounding.empty());
    QCOMPARE(withGptq->ranking.size(), size_t(5));
    std::map<size_t, double> plainSqnr;
    for (const LayerSensitivity& l : plain->ranking)
        plainSqnr[l.layer] = l.output.sqnrDb;
    int changed = 0;
    for (const LayerSensitivity& l : withGptq->ranking)
        changed += l.output.sqnrDb != plainSqnr.at(l.layer);
    QVERIFY(changed > 0);
    QCOMPARE(ws.exploration().weights(), ownWeights);
    disconnect(logged);
    QVERIFY2(!log.filter(QStringLiteral("Sensitivity with gptq: 5 layers ranked")).isEmpty(),
             qPrintable(log.join('\n')));
    const LayerErrorData chart = layerErrors(ws.exploration().model(), ws.evaluation().get(), {}, withGptq.get());
    QCOMPARE(chart.sensitivityAlgorithm, std::string("gptq"));

    ws.rules()->setField(0, "weight_qtype", "int4");
    QVERIFY(!ws.sensitivity());
}

void TestGuiApp::cancellingAJobIsClean()
{
    Workspace ws;
    QVERIFY(loadModel(ws));
    ws.loadRules(kW8A8);
    QVERIFY(weightsCurrent(ws));
    DataConfig synthetic;
    synthetic.kind = DataConfig::Kind::Synthetic;
    synthetic.syntheticSamples = 200000;
    synthetic.batchSize = 64;
    ws.setCalibrationData(synthetic);
    QSignalSpy ended(ws.jobs(), &JobTracker::jobEnded);
    QSignalSpy stats(&ws, &Workspace::statisticsChanged);
    ws.calibrate();
    QVERIFY(ws.jobs()->isRunning(JobKind::Calibrate));
    QTest::qWait(100);
    ws.jobs()->cancel(JobKind::Calibrate);
    QVERIFY(!ws.jobs()->isRunning(JobKind::Calibrate));
    QCOMPARE(ended.count(), 1);
    QCOMPARE(ended.first().at(2).toBool(), true); // cancelled
    QVERIFY(ws.jobs()->waitForIdle(10000));
    QTest::qWait(200);
    QCOMPARE(stats.count(), 0); // the cancelled job's result, if any, is dropped
    QVERIFY(!ws.statistics());
}

void TestGuiApp::corruptModelShowsErrorAndWindowLives()
{
    QTemporaryDir dir;
    const QString bad = dir.filePath(QStringLiteral("corrupt.onnx"));
    QFile f(bad);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(QByteArray("\x08\x07\x12\xff\xff\xff\xff garbage", 20));
    f.close();
    MainWindow window(false);
    window.show();
    window.openModel(kModel);
    QSignalSpy loaded(window.workspace(), &Workspace::modelLoaded);
    QVERIFY(loaded.wait(30000));
    QSignalSpy failed(window.workspace(), &Workspace::modelFailed);
    window.openModel(bad);
    QVERIFY(failed.wait(30000));
    QVERIFY2(failed.first().first().toString().contains(QStringLiteral("corrupt.onnx")),
             qPrintable(failed.first().first().toString()));
    QVERIFY(window.isVisible());
    // The previous model stays open and usable.
    QCOMPARE(window.workspace()->layers()->layerCount(), size_t(5));
    window.openRules(kW8A8);
    QVERIFY(weightsCurrent(*window.workspace()));
}

void TestGuiApp::sessionRoundTrips()
{
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("s.qssession"));
    SessionFile saved;
    {
        Workspace ws;
        QVERIFY(loadModel(ws));
        ws.loadRules(kW8A8);
        ws.rules()->insertRule(1, {{"module_path", "(broken"}}, QStringLiteral("half-edited"));
        ws.setCalibrationData(fileData(kCalib));
        DataConfig eval = fileData(kEval);
        eval.maxBatches = 2;
        ws.setEvaluationData(eval);
        QVERIFY(ws.isModified());
        saved = ws.toSession();
        saved.save(path.toStdString());
    }
    QCOMPARE(SessionFile::load(path.toStdString()).toJson(), saved.toJson());
    Workspace ws;
    QSignalSpy loaded(&ws, &Workspace::modelLoaded);
    ws.openSession(path);
    QVERIFY(loaded.wait(30000));
    QCOMPARE(ws.rules()->rowCount(), 2);
    QCOMPARE(ws.rules()->rows()[1]["module_path"], "(broken"); // kept as typed, flagged
    QVERIFY(!ws.rules()->allValid());
    QCOMPARE(*ws.calibrationData(), *saved.calibrationData);
    QCOMPARE(ws.evaluationData()->maxBatches, std::optional<int64_t>(2));
    QVERIFY(!ws.isModified());
    QCOMPARE(ws.toSession().toJson(), saved.toJson());

    // Undoing back to the saved rules is unmodified again; a data change is not undone by it.
    ws.rules()->setField(0, "weight_qtype", "int4");
    QVERIFY(ws.isModified());
    ws.undoStack()->undo();
    QVERIFY(!ws.isModified());
    ws.setCalibrationData(fileData(kEval));
    ws.rules()->setField(0, "weight_qtype", "int4");
    ws.undoStack()->undo();
    QVERIFY(ws.isModified());
}

void TestGuiApp::exportsAreWrittenAndChecked()
{
    Workspace ws;
    QVERIFY(loadModel(ws));
    ws.loadRules(kW8A8);
    QVERIFY(weightsCurrent(ws));
    ws.setCalibrationData(fileData(kCalib));
    QSignalSpy stats(&ws, &Workspace::statisticsChanged);
    ws.calibrate();
    QVERIFY(stats.wait(60000));
    ExportInputs in;
    in.model = ws.model();
    in.plan = ws.plan();
    in.weights = ws.weights();
    in.rules = std::make_shared<const RuleSet>(ws.rules()->effectiveRules());
    in.statistics = ws.statistics();
    in.interpreter = ws.interpreter();
    in.calibration = ws.calibrationData();
    QTemporaryDir dir;

    const ExportOutcome checkpoint =
        exportCheckpointChecked(in, dir.filePath(QStringLiteral("digits.safetensors")), {}, {});
    QVERIFY2(checkpoint.allChecksPassed(), qPrintable(checkpoint.checks.join(QLatin1Char('\n'))));
    QCOMPARE(checkpoint.checks.size(), 2);
    QVERIFY(checkpoint.floatBytes > 3 * checkpoint.quantizedBytes); // int8 vs float32, plus scales
    const QString html = ExportResultDialog::summaryHtml(checkpoint);
    QVERIFY(html.contains(QStringLiteral("compression")));

    const ExportOutcome onnx = exportOnnxChecked(in, dir.filePath(QStringLiteral("digits_qdq.onnx")), {}, {});
    QVERIFY2(onnx.allChecksPassed(), qPrintable(onnx.checks.join(QLatin1Char('\n'))));
    QVERIFY(onnx.checks.size() >= 2);

    // The LiteRT model is written from an ODML-mode plan: the same model and rules opened in ODML mode.
    const LoadedModel odmlModel = loadExplorationModel(kModel.toStdString(), {.mode = QuantizationMode::Odml});
    ExportInputs odml = in;
    odml.model = odmlModel.model;
    odml.interpreter = odmlModel.interpreter;
    odml.plan = std::make_shared<const QuantizationPlan>(
        QuantizationPlan::build(*odmlModel.model, *in.rules, QuantizationMode::Odml));
    auto odmlWeights = std::make_shared<WeightQuantizer>();
    odmlWeights->update(*odmlModel.model, *odml.plan);
    odml.weights = odmlWeights;
    const ExportOutcome tflite = exportTfliteChecked(odml, dir.filePath(QStringLiteral("digits.tflite")), {}, {});
    QVERIFY2(tflite.allChecksPassed(), qPrintable(tflite.checks.join(QLatin1Char('\n'))));
    QCOMPARE(tflite.checks.size(), 1);
    QVERIFY(tflite.quantizedBytes > 0 && tflite.quantizedBytes < tflite.floatBytes);
    QVERIFY(QFile::exists(dir.filePath(QStringLiteral("digits.tflite"))));
    // A PTQ plan is refused with a message, nothing written.
    bool refused = false;
    try {
        exportTfliteChecked(in, dir.filePath(QStringLiteral("ptq.tflite")), {}, {});
    } catch (const Error&) {
        refused = true;
    }
    QVERIFY(refused);
    QVERIFY(!QFile::exists(dir.filePath(QStringLiteral("ptq.tflite"))));
}

void TestGuiApp::syntheticDataIsSeededAndShapedLikeTheInputs()
{
    Workspace ws;
    QVERIFY(loadModel(ws));
    DataConfig c;
    c.kind = DataConfig::Kind::Synthetic;
    c.syntheticSamples = 70;
    c.syntheticSeed = 7;
    c.batchSize = 32;
    auto a = ws.exploration().snapshot().openData(c);
    QCOMPARE(a->batchCount(), int64_t(3));
    const Batch first = *a->next();
    QCOMPARE(first.inputs.at("input").shape(), (Shape{32, 1, 8, 8}));
    QVERIFY(!first.labels);
    a->next();
    QCOMPARE(a->next()->rows, int64_t(6));
    QVERIFY(!a->next());
    // The same seed gives the same batches, after a rewind and in a new source.
    a->rewind();
    const Batch again = *a->next();
    auto b = ws.exploration().snapshot().openData(c);
    const Batch other = *b->next();
    const auto x = first.inputs.at("input").values<float>();
    QVERIFY(std::equal(x.begin(), x.end(), again.inputs.at("input").values<float>().begin()));
    QVERIFY(std::equal(x.begin(), x.end(), other.inputs.at("input").values<float>().begin()));
    double sum = 0, squares = 0;
    for (const float v : x) {
        sum += v;
        squares += double(v) * v;
    }
    QVERIFY(std::abs(sum / double(x.size())) < 0.1);
    QVERIFY(std::abs(squares / double(x.size()) - 1.0) < 0.15);
    c.syntheticSeed = 8;
    const Batch seeded = *ws.exploration().snapshot().openData(c)->next();
    QVERIFY(!std::equal(x.begin(), x.end(), seeded.inputs.at("input").values<float>().begin()));
}

void TestGuiApp::watchdogLogsAStallOfTheGuiThread()
{
    StallWatchdog watchdog(std::chrono::milliseconds(50));
    QTest::qWait(100);                                           // the event loop runs: watching starts
    const int before = watchdog.stalls();                        // 0, unless the machine itself stalled the process
    std::this_thread::sleep_for(std::chrono::milliseconds(200)); // the GUI thread blocked
    QTest::ignoreMessage(QtWarningMsg, QRegularExpression(QStringLiteral("GUI thread was blocked for \\d+ ms")));
    QTRY_VERIFY_WITH_TIMEOUT(watchdog.stalls() > before, 2000);
}

void TestGuiApp::ruleEditorActionsEditTheTable()
{
    MainWindow window(false);
    window.show();
    window.openRules(kW8A8);
    RuleEditor* editor = window.ruleEditor();
    RuleTableModel* rules = window.workspace()->rules();
    auto action = [editor](const QString& text) {
        for (QAction* a : editor->findChildren<QAction*>())
            if (a->text() == text)
                return a;
        return static_cast<QAction*>(nullptr);
    };
    QVERIFY(action(QStringLiteral("Add")) && action(QStringLiteral("Up")));
    QVERIFY(!action(QStringLiteral("Delete"))->isEnabled()); // nothing selected
    editor->selectRule(0);
    action(QStringLiteral("Duplicate"))->trigger();
    QCOMPARE(rules->rowCount(), 2);
    QCOMPARE(*editor->currentRule(), 1);
    QVERIFY(!action(QStringLiteral("Down"))->isEnabled());
    action(QStringLiteral("Add"))->trigger();
    QCOMPARE(rules->rowCount(), 3);
    QCOMPARE(rules->rows()[2]["module_path"], ".*");
    action(QStringLiteral("Up"))->trigger();
    QCOMPARE(*editor->currentRule(), 1);
    QCOMPARE(rules->rows()[1]["module_path"], ".*");
    QVERIFY(!rules->rows()[1].contains("weight_qtype"));
    action(QStringLiteral("Delete"))->trigger();
    QCOMPARE(rules->rowCount(), 2);
    QCOMPARE(window.workspace()->undoStack()->count(), 5); // open, duplicate, add, up, delete
    while (window.workspace()->undoStack()->canUndo())
        window.workspace()->undoStack()->undo();
    QCOMPARE(rules->rowCount(), 0);
}

void TestGuiApp::dataDialogRoundTripsAndWarnsOnSyntheticData()
{
    DataConfig images;
    images.kind = DataConfig::Kind::ImageFolder;
    images.path = "/data/imagenet/val";
    images.batchSize = 16;
    images.maxBatches = 5;
    images.recipe.mean = {0.485f, 0.456f, 0.406f};
    images.recipe.std = {0.229f, 0.224f, 0.225f};
    images.recipe.layout = ImageLayout::NHWC;
    images.recipe.channels = ChannelOrder::BGR;
    DataDialog dialog(QStringLiteral("Calibration data"), images, QDir::tempPath());
    dialog.show();
    QCOMPARE(dialog.config(), images);
    auto warnings = [&dialog] {
        int visible = 0;
        for (QLabel* l : dialog.findChildren<QLabel*>())
            visible += l->isVisible() && l->text().contains(QStringLiteral("not representative"));
        return visible;
    };
    QCOMPARE(warnings(), 0);
    auto* kind = dialog.findChildren<QComboBox*>().first();
    kind->setCurrentIndex(int(DataConfig::Kind::Synthetic));
    QCOMPARE(warnings(), 1);
    QCOMPARE(dialog.config().kind, DataConfig::Kind::Synthetic);
}

void TestGuiApp::screenshotOfTheMainWindow()
{
    MainWindow window(false);
    window.resize(1600, 1000);
    window.show();
    window.openRules(kW8A8);
    window.openModel(kModel);
    QSignalSpy loaded(window.workspace(), &Workspace::modelLoaded);
    QVERIFY(loaded.wait(30000));
    QVERIFY(weightsCurrent(*window.workspace()));
    // A second rule so the editor shows precedence, match counts and an unused rule.
    window.workspace()->rules()->insertRule(
        0, {{"module_path", "classifier/fc2"}, {"op_types", {"Gemm"}}, {"weight_qtype", "int4"}, {"tile_size", 16}},
        QStringLiteral("Add rule 0"));
    window.workspace()->rules()->insertRule(2, {{"module_path", "decoder/.*"}, {"weight_qtype", "nf4"}},
                                            QStringLiteral("Add rule 2"));
    window.workspace()->setCalibrationData(fileData(kCalib));
    window.workspace()->setEvaluationData(fileData(kEval));
    QVERIFY(weightsCurrent(*window.workspace()));
    QSignalSpy evaluated(window.workspace(), &Workspace::evaluationChanged);
    window.runWhenReady(true, true);
    QVERIFY(evaluated.wait(120000));
    const QModelIndex conv2 = window.layerProxy()->mapFromSource(window.workspace()->layers()->indexOfLayer(1));
    window.layerView()->setCurrentIndex(conv2);
    window.ruleEditor()->selectRule(1);
    QTest::qWait(300);
    QVERIFY(window.inspector()->toPlainText().contains(QStringLiteral("features/conv2")));
    const QString out = kRoot + QStringLiteral("/docs/screenshots");
    QDir().mkpath(out);
    const QPixmap shot = window.grab();
    QVERIFY(!shot.isNull());
    QVERIFY(shot.save(out + QStringLiteral("/main_window.png")));
    qInfo("screenshot: %s", qPrintable(QDir::cleanPath(out + QStringLiteral("/main_window.png"))));
}

QTEST_MAIN(TestGuiApp)
#include "tst_gui_app.moc"
