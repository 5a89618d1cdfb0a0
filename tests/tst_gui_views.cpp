// The explorer's views of issue 23 on the bundled demo (resources/demo/digits),
// each checked against quantscope-cli run on the same model, rules and data
// (an independent path through the engine: no GUI code, no Workspace):
//  - the summary bar's figures are the `quantize --report` figures, and it
//    marks itself stale after a rule edit;
//  - the A/B view's per-layer and output differences are `compare-rules --json`'s;
//  - the search, run as a job, evaluates the points `quantize --search` does,
//    applying a point sets its rules (undoable), and cancelling leaves nothing
//    running.
// Each view is rendered to docs/screenshots/ for the user guide.
#include <QtTest>

#include <QDir>
#include <QDockWidget>
#include <QLabel>
#include <QProcess>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QStandardPaths>
#include <QTableView>
#include <QTemporaryDir>
#include <QTreeWidget>
#include <QUndoStack>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "gui/main_window.h"
#include "gui/workspace.h"
#include "rules/ruleset.h"
#include "session/rule_search.h"
#include "widgets/charts/chart_frame.h"
#include "widgets/charts/rule_comparison_view.h"
#include "widgets/charts/search_curve_view.h"
#include "widgets/jobs/job_tracker.h"
#include "widgets/rule_comparison_model.h"
#include "widgets/rule_table_model.h"
#include "widgets/summary_bar.h"
#include "gui_support.h"

using namespace qs;
using namespace gui_test;

namespace {

const QString kW4 = kRoot + QStringLiteral("/resources/rules/w4_weight_only_tile32.json");

bool weightsCurrent(Workspace& ws)
{
    return waitFor([&] { return ws.weightsGeneration() == ws.generation(); }, 30000);
}

nlohmann::json readJson(const QString& path)
{
    std::ifstream in(path.toStdString());
    return nlohmann::json::parse(in);
}

// Opens the demo with `rules` and both data sets in a window, calibrates and evaluates.
bool openEvaluated(MainWindow& window, const QString& rules)
{
    Workspace& ws = *window.workspace();
    window.openRules(rules);
    QSignalSpy loaded(&ws, &Workspace::modelLoaded);
    window.openModel(kModel);
    if (!loaded.wait(30000) || !weightsCurrent(ws))
        return false;
    ws.setCalibrationData(fileData(kCalib));
    ws.setEvaluationData(fileData(kEval));
    QSignalSpy evaluated(&ws, &Workspace::evaluationChanged);
    window.runWhenReady(true, true);
    return evaluated.wait(120000);
}

bool near(double a, double b)
{
    return std::abs(a - b) <= 1e-6 * std::max(1.0, std::abs(b));
}

void saveShot(QWidget* w, const QString& name)
{
    QDir().mkpath(kScreenshots);
    QTest::qWait(100); // the layouts follow the last texts
    const QPixmap shot = w->grab();
    QVERIFY(!shot.isNull());
    QVERIFY(shot.save(kScreenshots + QLatin1Char('/') + name));
    qInfo("screenshot: %s", qPrintable(QDir::cleanPath(kScreenshots + QLatin1Char('/') + name)));
}

QDockWidget* dockOf(QWidget* w)
{
    for (QWidget* p = w; p; p = p->parentWidget())
        if (auto* d = qobject_cast<QDockWidget*>(p))
            return d;
    return nullptr;
}

} // namespace

class TestGuiViews : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() { QStandardPaths::setTestModeEnabled(true); }
    void summaryBarShowsTheReportsFigures();
    void comparisonEqualsCompareRules();
    void searchMatchesTheCliAndAppliesAPoint();
    void cancellingTheSearchLeavesNothingRunning();
};

void TestGuiViews::summaryBarShowsTheReportsFigures()
{
    QTemporaryDir dir;
    const QString report = dir.filePath(QStringLiteral("r.json"));
    QVERIFY(!runCli({"quantize", kModel, "--rules", kW8A8, "--calib", kCalib, "--eval", kEval, "--batch-size", "64",
                     "--report", report})
                 .isNull());
    const nlohmann::json r = readJson(report);

    MainWindow window(false);
    window.resize(1600, 1000);
    window.show();
    SummaryBar* bar = window.summaryBar();
    QVERIFY(bar->isVisible());
    QVERIFY(!bar->figures().evaluated);
    QVERIFY(openEvaluated(window, kW8A8));
    const SummaryFigures& f = bar->figures();
    QVERIFY(f.evaluated);
    QVERIFY(!bar->isStale());
    QVERIFY(f.quantizedTop1 && f.floatTop1 && f.top1Agreement && f.weightBytes);
    QVERIFY(near(*f.floatTop1, r["accuracy_float"].get<double>()));
    QVERIFY(near(*f.quantizedTop1, r["accuracy_quantized"].get<double>()));
    QVERIFY(near(*f.top1Agreement, r["top1_agreement"]["fraction"].get<double>()));
    QCOMPARE(f.outputSqnrDb.size(), r["outputs"].size());
    QVERIFY(near(f.outputSqnrDb[0].second, r["output_sqnr_db"].get<double>()));
    QCOMPARE(f.weightBytes->floatBytes, r["weight_bytes_float"].get<int64_t>());
    QCOMPARE(f.weightBytes->quantizedBytes, r["weight_bytes_quantized"].get<int64_t>());
    QVERIFY(!f.quantizedPerplexity); // an image classifier
    // What the user reads: the figures as percentages, dB and sizes.
    const QString text = bar->text();
    QVERIFY2(text.contains(QStringLiteral("%1%").arg(r["accuracy_quantized"].get<double>() * 100, 0, 'f', 2)),
             qPrintable(text));
    QVERIFY2(text.contains(QStringLiteral("%1 dB").arg(r["output_sqnr_db"].get<double>(), 0, 'f', 1)),
             qPrintable(text));
    QVERIFY2(text.contains(byteSizeText(r["weight_bytes_quantized"].get<int64_t>())), qPrintable(text));
    QVERIFY(!text.contains(QStringLiteral("stale")));
    saveShot(bar, QStringLiteral("summary_bar.png"));

    // A rule edit: the evaluation is of the rules of before (stale), the bytes follow the new weights.
    Workspace& ws = *window.workspace();
    ws.rules()->setField(0, "weight_qtype", "int4");
    QVERIFY(bar->figures().evaluationStale);
    QVERIFY(bar->text().contains(QStringLiteral("stale")));
    QVERIFY(weightsCurrent(ws));
    QTest::qWait(50);
    QVERIFY(!bar->figures().weightBytesStale);
    QVERIFY(bar->figures().weightBytes->quantizedBytes < r["weight_bytes_quantized"].get<int64_t>());
    // Undo: the same rules as the evaluation's, current again.
    ws.undoStack()->undo();
    QVERIFY(weightsCurrent(ws));
    QTest::qWait(50);
    QVERIFY(!bar->isStale());
    QCOMPARE(bar->figures().weightBytes->quantizedBytes, r["weight_bytes_quantized"].get<int64_t>());
}

void TestGuiViews::comparisonEqualsCompareRules()
{
    const QByteArray out = runCli(
        {"compare-rules", kModel, kW8A8, kW4, "--calib", kCalib, "--eval", kEval, "--batch-size", "64", "--json"});
    QVERIFY(!out.isNull());
    const nlohmann::json cli = nlohmann::json::parse(out.toStdString());

    MainWindow window(false);
    window.resize(1600, 1000);
    window.show();
    QVERIFY(openEvaluated(window, kW8A8));
    Workspace& ws = *window.workspace();
    RuleComparisonView* view = window.comparisonView();
    QVERIFY(view->keepButton()->isEnabled());
    QSignalSpy compared(&ws, &Workspace::comparisonChanged);
    view->keepButton()->click();
    QVERIFY(ws.hasA());
    QVERIFY(waitFor([&] { return ws.comparisonCurrent(); }, 30000));
    // A against itself: no difference anywhere.
    for (const LayerComparison& row : ws.comparison()->layers)
        QVERIFY(!row.deltaWeightSqnr || *row.deltaWeightSqnr == 0);

    // B: another rule file, evaluated.
    window.openRules(kW4);
    QVERIFY(weightsCurrent(ws));
    QVERIFY(!ws.comparisonCurrent() || ws.comparison()->evaluatedB == false);
    QSignalSpy evaluated(&ws, &Workspace::evaluationChanged);
    window.runWhenReady(true, true);
    QVERIFY(evaluated.wait(120000));
    QVERIFY(waitFor([&] { return ws.comparisonCurrent() && ws.comparison()->evaluatedB; }, 30000));
    QTest::qWait(50);

    // The table holds the CLI's rows, figure for figure.
    RuleComparisonModel* model = view->model();
    QAbstractItemModelTester tester(model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QCOMPARE(size_t(model->rowCount()), cli["layers"].size());
    std::map<std::string, const nlohmann::json*> cliRows;
    for (const auto& row : cli["layers"])
        cliRows[row["module_path"].get<std::string>()] = &row;
    const std::pair<int, const char*> columns[] = {
        {RuleComparisonModel::DeltaWeightSqnrColumn, "delta_weight_sqnr_db"},
        {RuleComparisonModel::DeltaIsolatedSqnrColumn, "delta_act_sqnr_db"},
        {RuleComparisonModel::DeltaAccumulatedSqnrColumn, "delta_accumulated_sqnr_db"},
        {RuleComparisonModel::DeltaBytesColumn, "delta_weight_bytes"}};
    int compared_figures = 0;
    for (int i = 0; i < model->rowCount(); ++i) {
        const std::string path = model->index(i, RuleComparisonModel::PathColumn).data().toString().toStdString();
        QVERIFY2(cliRows.count(path), path.c_str());
        const nlohmann::json& c = *cliRows[path];
        for (const auto& [column, key] : columns) {
            const QVariant v = model->index(i, column).data(RuleComparisonModel::SortRole);
            QVERIFY2(c.contains(key), key);
            if (c[key].is_null()) {
                QVERIFY(std::isnan(v.toDouble()));
            } else {
                QVERIFY2(near(v.toDouble(), c[key].get<double>()), qPrintable(QStringLiteral("%1 %2: %3 vs %4")
                                                                                  .arg(path.c_str(), key)
                                                                                  .arg(v.toDouble())
                                                                                  .arg(c[key].get<double>())));
                ++compared_figures;
            }
        }
        QCOMPARE(model->index(i, RuleComparisonModel::NoteColumn).data().toString().toStdString(),
                 c["note"].is_null() ? std::string() : c["note"].get<std::string>());
    }
    QVERIFY(compared_figures >= 10); // weight, isolated and accumulated of the quantized layers, and bytes
    // The output SQNR difference is the CLI's.
    const auto& outputs = ws.comparison()->outputs;
    QCOMPARE(outputs.size(), cli["outputs"].size());
    QVERIFY(near(*outputs[0].sqnrDb.delta(), cli["outputs"][0]["delta_sqnr_db"].get<double>()));
    QVERIFY(view->figuresText().contains(QStringLiteral("%1%2")
                                             .arg(*outputs[0].sqnrDb.delta() >= 0 ? "+" : "")
                                             .arg(*outputs[0].sqnrDb.delta(), 0, 'f', 2)));

    // Sorting by Δ accumulated SQNR: ascending numbers, rows without the figure last.
    view->table()->sortByColumn(RuleComparisonModel::DeltaAccumulatedSqnrColumn, Qt::AscendingOrder);
    double last = -INFINITY;
    bool missingSeen = false;
    for (int i = 0; i < view->proxy()->rowCount(); ++i) {
        const double v = view->proxy()
                             ->index(i, RuleComparisonModel::DeltaAccumulatedSqnrColumn)
                             .data(RuleComparisonModel::SortRole)
                             .toDouble();
        if (std::isnan(v)) {
            missingSeen = true;
            continue;
        }
        QVERIFY(!missingSeen);
        QVERIFY(v >= last);
        last = v;
    }
    // The chart's data are the table's.
    const QString csv = view->chartFrame()->csv();
    QCOMPARE(csv.count(QLatin1Char('\n')), model->rowCount() + 1);
    view->table()->sortByColumn(-1, Qt::AscendingOrder);
    QDockWidget* dock = dockOf(view);
    QVERIFY(dock);
    dock->raise();
    QTest::qWait(200);
    view->table()->resizeColumnsToContents();
    saveShot(dock, QStringLiteral("ab_view.png"));
}

void TestGuiViews::searchMatchesTheCliAndAppliesAPoint()
{
    QTemporaryDir dir;
    const QString candidates = dir.filePath(QStringLiteral("candidates.json"));
    {
        std::ofstream c(candidates.toStdString());
        c << R"({"version": 1, "candidates": [{"weight_qtype": "int4"}, {"weight_qtype": "int8"}, {}]})";
    }
    // All int4 misses it on the demo, all int8 meets it: the search has a path to walk.
    const QString target = QStringLiteral("output_sqnr_db>=30");
    const QString rulesOut = dir.filePath(QStringLiteral("r.json"));
    const QString pointsOut = dir.filePath(QStringLiteral("p.json"));
    QVERIFY(!runCli({"quantize", kModel, "--search", candidates, "--target", target, "--eval", kEval, "--batch-size",
                     "64", "--out-rules", rulesOut, "--search-points", pointsOut})
                 .isNull());
    const nlohmann::json cliPoints = readJson(pointsOut);

    MainWindow window(false);
    window.resize(1600, 1000);
    window.show();
    Workspace& ws = *window.workspace();
    SearchCurveView* view = window.searchView();
    QSignalSpy loaded(&ws, &Workspace::modelLoaded);
    window.openModel(kModel);
    QVERIFY(loaded.wait(30000));
    QVERIFY(weightsCurrent(ws));
    QVERIFY(!view->runButton()->isEnabled()); // no evaluation data yet
    ws.setEvaluationData(fileData(kEval));
    window.setEvaluationFile(kEval); // updates the actions
    ws.setEvaluationData(fileData(kEval));
    QTest::qWait(20);
    QVERIFY(view->runButton()->isEnabled());
    const std::string rulesBefore = ws.rules()->effectiveRules().toJson();
    view->setCandidatesFile(candidates);
    view->setTargetText(target);
    QSignalSpy finished(&ws, &Workspace::searchFinished);
    QSignalSpy started(ws.jobs(), &JobTracker::jobStarted);
    view->runButton()->click();
    QVERIFY(!started.isEmpty());
    QCOMPARE(started.first().at(0).value<JobKind>(), JobKind::Search);
    QVERIFY(window.statusJobLabel()->text().contains(QStringLiteral("Searching")));
    QVERIFY(finished.wait(300000));
    QVERIFY(window.statusJobLabel()->text().isEmpty()); // not shown as running once finished
    // The search ran on an exploration of its own: the user's rules are untouched.
    QCOMPARE(ws.rules()->effectiveRules().toJson(), rulesBefore);

    const auto result = ws.searchResult();
    QVERIFY(result->met);
    QCOMPARE(result->points.size(), cliPoints["points"].size());
    for (size_t i = 0; i < result->points.size(); ++i) {
        const auto& c = cliPoints["points"][i];
        QCOMPARE(result->points[i].step, c["step"].get<std::string>());
        QCOMPARE(result->points[i].weightBytes, c["weight_bytes"].get<int64_t>());
        if (c["value"].is_null()) // exact (float everywhere): +inf dB
            QVERIFY(std::isinf(result->points[i].value));
        else
            QVERIFY(near(result->points[i].value, c["value"].get<double>()));
        QCOMPARE(result->points[i].meets, c["meets"].get<bool>());
    }
    QCOMPARE(view->pointTable()->topLevelItemCount(), int(result->points.size()));
    QVERIFY(view->chartFrame()->csv().count(QLatin1Char('\n')) == int(result->points.size()) + 1);

    // Applying the chosen ("final") point sets the rules the CLI wrote; undo restores the rules of before.
    QCOMPARE(view->selectedPoint(), std::optional<size_t>(result->points.size() - 1));
    view->applyButton()->click();
    QCOMPARE(ws.rules()->effectiveRules().toJson(), RuleSet::load(rulesOut.toStdString()).toJson());
    QVERIFY(weightsCurrent(ws));
    QTest::qWait(50);
    QCOMPARE(window.summaryBar()->figures().weightBytes->quantizedBytes, result->chosen->weightBytes);
    // Another point (the smallest): its layers take its candidates.
    view->selectPoint(0);
    view->applyButton()->click();
    QVERIFY(weightsCurrent(ws));
    QTest::qWait(50);
    QCOMPARE(window.summaryBar()->figures().weightBytes->quantizedBytes, result->points[0].weightBytes);
    ws.undoStack()->undo();
    ws.undoStack()->undo();
    QCOMPARE(ws.rules()->effectiveRules().toJson(), rulesBefore);

    view->selectPoint(result->points.size() - 1);
    QDockWidget* dock = dockOf(view);
    QVERIFY(dock);
    dock->raise();
    QTest::qWait(200);
    saveShot(dock, QStringLiteral("search_curve.png"));
}

void TestGuiViews::cancellingTheSearchLeavesNothingRunning()
{
    QTemporaryDir dir;
    const QString candidates = dir.filePath(QStringLiteral("candidates.json"));
    {
        std::ofstream c(candidates.toStdString());
        c << R"({"version": 1, "candidates": [{"weight_qtype": "int2"}, {"weight_qtype": "int4"}, {"weight_qtype": "int8"}, {}]})";
    }
    MainWindow window(false);
    window.show();
    Workspace& ws = *window.workspace();
    QSignalSpy loaded(&ws, &Workspace::modelLoaded);
    window.openModel(kModel);
    QVERIFY(loaded.wait(30000));
    QVERIFY(weightsCurrent(ws));
    window.setEvaluationFile(kEval);
    SearchCurveView* view = window.searchView();
    view->setCandidatesFile(candidates);
    view->setTargetText(QStringLiteral("output_sqnr_db>=60"));
    QSignalSpy ended(ws.jobs(), &JobTracker::jobEnded);
    view->runButton()->click();
    QVERIFY(ws.jobs()->isRunning(JobKind::Search));
    QVERIFY(!view->runButton()->isEnabled());
    ws.jobs()->cancelUserFacing();
    QVERIFY(waitFor([&] { return !ended.isEmpty(); }, 60000));
    QCOMPARE(ended.first().at(0).value<JobKind>(), JobKind::Search);
    QVERIFY(ended.first().at(2).toBool()); // cancelled
    QVERIFY(!ws.jobs()->isRunning(JobKind::Search));
    QVERIFY(window.statusJobLabel()->text().isEmpty());
    QVERIFY(!ws.searchResult());
    QCOMPARE(view->status(), QStringLiteral("Search cancelled."));
    QVERIFY(view->runButton()->isEnabled());
    // A bad target is said in one line, naming what is accepted; nothing starts.
    view->setTargetText(QStringLiteral("accuracy>=3"));
    view->runButton()->click();
    QVERIFY(!ws.jobs()->isRunning(JobKind::Search));
    QVERIFY2(view->status().contains(QStringLiteral("output_sqnr_db")), qPrintable(view->status()));
}

QTEST_MAIN(TestGuiViews)
#include "tst_gui_views.moc"
