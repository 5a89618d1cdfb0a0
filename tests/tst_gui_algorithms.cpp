// Issue 20 in the app, on the bundled demo (resources/demo/digits) with every
// layer at int4 and algorithm gptq, checked against
// `quantscope-cli compare-methods --algorithms --json` on the same model, rules
// and calibration data (an independent path: no GUI code, no Workspace):
//  - the Methods chart's Algorithms mode says why it is empty before calibration,
//    then shows every variant of the selected layer with the CLI's weight and
//    output SQNR and the same skipped variants;
//  - the Inspector shows the layer's weight and output SQNR under RTN next to its
//    rule's algorithm (gptq), with the difference, computed by a job;
//  - Apply writes the selected variant into the layer's rule as one undoable edit
//    (awq + bias_correction; lut4 with the fields its variant resets), and the
//    Inspector follows the new algorithm with the CLI's figures for it.
// The Methods view in Algorithms mode is rendered to docs/screenshots/.
#include <QtTest>

#include <QAbstractItemModelTester>
#include <QDir>
#include <QDockWidget>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QStandardPaths>
#include <QTabWidget>
#include <QTableView>
#include <QTemporaryDir>
#include <QTextBrowser>
#include <QTreeView>
#include <QUndoStack>

#include <cmath>
#include <fstream>
#include <limits>
#include <map>

#include <nlohmann/json.hpp>

#include "gui/main_window.h"
#include "gui/workspace.h"
#include "gui_support.h"
#include "widgets/charts/algorithm_comparison_view.h"
#include "widgets/charts/algorithm_table_model.h"
#include "widgets/charts/chart_frame.h"
#include "widgets/charts/charts_panel.h"
#include "widgets/layer_tree_model.h"
#include "widgets/rule_table_model.h"

using namespace qs;
using namespace gui_test;

namespace {

constexpr size_t kConv2 = 1; // features/conv2, [32, 16, 3, 3]

// The CLI's rows by variant: weight and output SQNR (NaN for null, JSON's infinity).
struct CliRow {
    double weightSqnr = 0;
    double outputSqnr = 0;
};

double number(const nlohmann::json& v)
{
    return v.is_null() ? std::numeric_limits<double>::infinity() : v.get<double>();
}

// Same figures up to the order of the floating-point sums (the statistics are
// accumulated by the same engine code from the same batches of 64).
bool near(double a, double b)
{
    if (std::isinf(a) || std::isinf(b))
        return a == b;
    return std::abs(a - b) <= 1e-3;
}

QString dB(double v)
{
    return QString::number(v, 'f', 2);
}

bool waitIdle(AlgorithmComparisonView* view)
{
    return waitFor([&] { return view->comparison() && !view->busy(); }, 60000);
}

} // namespace

class TestGuiAlgorithms : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() { QStandardPaths::setTestModeEnabled(true); }
    void algorithmsMatchTheCliAndApply();
};

void TestGuiAlgorithms::algorithmsMatchTheCliAndApply()
{
    QTemporaryDir dir;
    const QString rules = dir.filePath(QStringLiteral("gptq.json"));
    {
        std::ofstream out(rules.toStdString());
        out << R"({"version": 1, "rules": [{"op_types": ["Conv", "Gemm"], "weight_qtype": "int4", "algorithm": "gptq"}]})";
    }
    const QByteArray cliText = runCli({"compare-methods", kModel, "--tensor", "features/conv2", "--algorithms",
                                       "--rules", rules, "--calib", kCalib, "--batch-size", "64", "--json"});
    QVERIFY(!cliText.isEmpty());
    const nlohmann::json cli = nlohmann::json::parse(cliText.toStdString());
    std::map<std::string, CliRow> expected;
    for (const nlohmann::json& r : cli["algorithms"])
        expected[r["variant"].get<std::string>()] = {number(r["weight_sqnr_db"]), number(r["output_sqnr_db"])};
    QVERIFY(expected.count("rtn") && expected.count("gptq") && expected.count("awq + bias_correction") &&
            expected.count("lut4"));

    MainWindow window(false);
    window.resize(1600, 1000);
    window.show();
    Workspace& ws = *window.workspace();
    window.openRules(rules);
    QSignalSpy loaded(&ws, &Workspace::modelLoaded);
    window.openModel(kModel);
    QVERIFY(loaded.wait(30000));
    auto* charts = window.findChild<ChartsPanel*>();
    QVERIFY(charts);
    AlgorithmComparisonView* view = charts->algorithmComparisonView();
    // The table's model checked through every reset the test causes.
    QAbstractItemModelTester tester(view->tableModel(), QAbstractItemModelTester::FailureReportingMode::QtTest);
    charts->setCompareAlgorithms(true);
    window.layerView()->setCurrentIndex(window.layerProxy()->mapFromSource(ws.layers()->indexOfLayer(kConv2)));

    // Before calibration: empty, and says why.
    QVERIFY(waitFor([&] { return ws.weightsGeneration() == ws.generation(); }, 30000));
    QTest::qWait(100);
    QVERIFY(!view->comparison());
    QVERIFY2(view->chartFrame()->note().contains(QStringLiteral("Run calibration")),
             qPrintable(view->chartFrame()->note()));
    QVERIFY(!view->applyButton()->isEnabled());
    QVERIFY(window.inspector()->toPlainText().contains(QStringLiteral("gptq against RTN")));
    QVERIFY(window.inspector()->toPlainText().contains(QStringLiteral("Run calibration to compare with RTN")));

    ws.setCalibrationData(fileData(kCalib));
    QSignalSpy calibrated(&ws, &Workspace::statisticsChanged);
    window.runWhenReady(true, false);
    QVERIFY(calibrated.wait(120000));
    QVERIFY(waitIdle(view));

    // Every variant the CLI ran, with its figures; the same skipped ones.
    const AlgorithmComparison& c = *view->comparison();
    QCOMPARE(c.modulePath, std::string("features/conv2"));
    QCOMPARE(c.calibrationRows, cli["calibration_rows"].get<int64_t>());
    size_t ran = 0, skipped = 0;
    for (const AlgorithmRow& r : c.rows) {
        if (!r.skipped.empty()) {
            ++skipped;
            continue;
        }
        ++ran;
        QVERIFY2(expected.count(r.variant), r.variant.c_str());
        QVERIFY2(near(r.weight.sqnrDb, expected[r.variant].weightSqnr), r.variant.c_str());
        QVERIFY2(near(r.outputSqnrDb, expected[r.variant].outputSqnr), r.variant.c_str());
    }
    QCOMPARE(ran, cli["algorithms"].size());
    QCOMPARE(skipped, cli["skipped"].size());
    QCOMPARE(view->tableModel()->rowCount(), int(c.rows.size()));
    // What the user reads in the table.
    const int gptqRow = [&] {
        for (int i = 0; i < view->tableModel()->rowCount(); ++i)
            if (view->tableModel()->rows()[size_t(i)].variant == "gptq")
                return i;
        return -1;
    }();
    QVERIFY(gptqRow >= 0);
    QCOMPARE(view->tableModel()->index(gptqRow, AlgorithmTableModel::OutputSqnr).data().toString(),
             dB(expected["gptq"].outputSqnr));
    QVERIFY(view->chartFrame()->csv().count('\n') == int(c.rows.size()) + 1);

    // The Inspector: gptq against RTN, with the difference.
    const auto inspectorHas = [&](const QStringList& parts) {
        return waitFor(
            [&] {
                const QString text = window.inspector()->toPlainText();
                for (const QString& p : parts)
                    if (!text.contains(p))
                        return false;
                return true;
            },
            60000);
    };
    const CliRow rtn = expected["rtn"], gptq = expected["gptq"];
    const auto difference = [](double algorithm, double rtnDb) {
        return QString("%1%2 dB").arg(algorithm >= rtnDb ? "+" : "").arg(algorithm - rtnDb, 0, 'f', 2);
    };
    QVERIFY2(inspectorHas({QStringLiteral("gptq against RTN"), dB(rtn.weightSqnr) + " dB", dB(gptq.weightSqnr) + " dB",
                           dB(rtn.outputSqnr) + " dB", dB(gptq.outputSqnr) + " dB",
                           difference(gptq.weightSqnr, rtn.weightSqnr), difference(gptq.outputSqnr, rtn.outputSqnr)}),
             qPrintable(window.inspector()->toPlainText()));

    // The screenshot: the Methods tab in Algorithms mode, gptq selected.
    auto* tabs = charts->findChild<QTabWidget*>();
    QVERIFY(tabs);
    tabs->setCurrentIndex(1);
    // Floated and wide enough for the chart and the table side by side.
    auto* dock = qobject_cast<QDockWidget*>(charts->parentWidget());
    QVERIFY(dock);
    dock->setFloating(true);
    dock->resize(1300, 620);
    dock->raise();
    view->table()->selectRow(gptqRow);
    QDir().mkpath(kScreenshots);
    QTest::qWait(300);
    const QPixmap shot = charts->grab();
    QVERIFY(!shot.isNull());
    QVERIFY(shot.save(kScreenshots + QStringLiteral("/methods_algorithms.png")));
    dock->setFloating(false);

    // Apply awq + bias_correction: one undoable edit of rule 0.
    int awqRow = -1, lutRow = -1;
    for (int i = 0; i < view->tableModel()->rowCount(); ++i) {
        if (view->tableModel()->rows()[size_t(i)].variant == "awq + bias_correction")
            awqRow = i;
        if (view->tableModel()->rows()[size_t(i)].variant == "lut4")
            lutRow = i;
    }
    QVERIFY(awqRow >= 0 && lutRow >= 0);
    view->table()->selectRow(awqRow);
    const int undoBefore = ws.undoStack()->count();
    QVERIFY(view->applyButton()->isEnabled());
    view->applyButton()->click();
    QCOMPARE(ws.undoStack()->count(), undoBefore + 1);
    QCOMPARE(ws.rules()->rows()[0]["algorithm"].get<std::string>(), std::string("awq"));
    QCOMPARE(ws.rules()->rows()[0]["bias_correction"].get<bool>(), true);
    QCOMPARE(ws.rules()->rows()[0]["weight_qtype"].get<std::string>(), std::string("int4"));
    const CliRow awq = expected["awq + bias_correction"];
    QVERIFY2(inspectorHas({QStringLiteral("awq + bias_correction against RTN"), dB(awq.outputSqnr) + " dB",
                           dB(rtn.outputSqnr) + " dB"}),
             qPrintable(window.inspector()->toPlainText()));
    // The layer table says what rounds each weight: its algorithm and bias correction.
    auto weightCell = [&](size_t layer) {
        return ws.layers()->indexOfLayer(layer).siblingAtColumn(LayerTreeModel::WeightQTypeColumn).data().toString();
    };
    QCOMPARE(weightCell(kConv2), QStringLiteral("int4 · awq · bias corrected"));
    ws.undoStack()->undo();
    QCOMPARE(weightCell(kConv2), QStringLiteral("int4 · gptq"));
    QCOMPARE(ws.rules()->rows()[0]["algorithm"].get<std::string>(), std::string("gptq"));
    QVERIFY(!ws.rules()->rows()[0].contains("bias_correction"));

    // lut4: the qtype changes and the algorithm goes back to its default.
    QVERIFY(waitIdle(view));
    for (int i = 0; i < view->tableModel()->rowCount(); ++i)
        if (view->tableModel()->rows()[size_t(i)].variant == "lut4")
            view->table()->selectRow(i);
    view->apply();
    QCOMPARE(ws.rules()->rows()[0]["weight_qtype"].get<std::string>(), std::string("lut4"));
    QVERIFY(!ws.rules()->rows()[0].contains("algorithm"));
    QVERIFY(!ws.rules()->rows()[0].contains("bias_correction"));
    QVERIFY(ws.rules()->firstError().isEmpty());

    // And the rewrites of the float model the layer takes part in: the pairs equalization made.
    ws.rules()->setField(0, "equalize", true);
    QVERIFY(ws.rules()->firstError().isEmpty());
    const auto eq = ws.exploration().equalization();
    QVERIFY(eq && !eq->pairs.empty());
    for (size_t layer = 0; layer < ws.layers()->layerCount(); ++layer) {
        const bool paired = std::any_of(eq->pairs.begin(), eq->pairs.end(), [&](const EqualizedPair& p) {
            return p.first == layer || p.second == layer;
        });
        QCOMPARE(weightCell(layer).endsWith(QStringLiteral(" · equalized")), paired);
    }
    QCOMPARE(weightCell(kConv2), QStringLiteral("lut4 · equalized"));
}

QTEST_MAIN(TestGuiAlgorithms)
#include "tst_gui_algorithms.moc"
