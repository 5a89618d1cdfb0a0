// The rough edges of issue 23, part 5, each with the test that would have
// caught it, on the bundled demo (resources/demo/digits):
//  - a rule cell's combo box commits on a choice (not only on Enter), closes
//    without "closeEditor called with an editor that does not belong to this
//    view", keeps the edited rule selected, and weight_qtype offers float;
//  - opening another model starts clean (its own data settings and undo
//    history) and asks before dropping unsaved changes;
//  - warnings are logged as warnings (not "error:"), an error once;
//  - the status bar shows only jobs that run;
//  - exports that need a calibration are disabled, saying so, until it exists;
//    an export path without a suffix gets the format's.
// (Dragging the Layer-errors threshold only moves it: tst_charts.)
#include <QtTest>

#include <QAbstractButton>
#include <QAction>
#include <QComboBox>
#include <QDockWidget>
#include <QFile>
#include <QLabel>
#include <QMessageBox>
#include <QStandardPaths>
#include <QTableView>
#include <QTemporaryDir>
#include <QTextEdit>
#include <QUndoStack>

#include <fstream>

#include "gui/export_dialog.h"
#include "gui/main_window.h"
#include "gui/workspace.h"
#include "widgets/jobs/job_tracker.h"
#include "widgets/rule_editor.h"
#include "widgets/rule_table_model.h"
#include "gui_support.h"

using namespace qs;
using namespace gui_test;

namespace {


// Every message Qt and the app print while a test runs.
QStringList g_messages;
QtMessageHandler g_previous = nullptr;

void recordMessage(QtMsgType type, const QMessageLogContext& context, const QString& text)
{
    g_messages << text;
    if (g_previous)
        g_previous(type, context, text);
}

bool open(MainWindow& window, const QString& model = kModel)
{
    QSignalSpy loaded(window.workspace(), &Workspace::modelLoaded);
    window.openModel(model);
    if (!loaded.wait(30000))
        return false;
    Workspace& ws = *window.workspace();
    return waitFor([&] { return ws.weightsGeneration() == ws.generation(); }, 30000);
}

int columnOf(RuleTableModel* model, const QString& field)
{
    for (int c = 0; c < model->columnCount(); ++c)
        if (model->headerData(c, Qt::Horizontal).toString() == field)
            return c;
    return -1;
}

QAction* actionNamed(QWidget* window, const QString& text)
{
    for (QAction* a : window->findChildren<QAction*>())
        if (a->text() == text)
            return a;
    return nullptr;
}

} // namespace

class TestGuiRoughEdges : public QObject {
    Q_OBJECT
private slots:
    void initTestCase()
    {
        QStandardPaths::setTestModeEnabled(true);
        g_previous = qInstallMessageHandler(recordMessage);
    }
    void init() { g_messages.clear(); }
    void ruleComboCommitsOnChoice();
    void anotherModelStartsClean();
    void anotherModelAsksBeforeDroppingChanges();
    void warningsAreWarningsAndErrorsAreLoggedOnce();
    void statusBarShowsOnlyRunningJobs();
    void exportsWaitForACalibration();
};

void TestGuiRoughEdges::ruleComboCommitsOnChoice()
{
    MainWindow window(false);
    window.resize(1400, 900);
    window.show();
    window.openRules(kW8A8);
    QVERIFY(open(window));
    RuleTableModel* rules = window.workspace()->rules();
    QTableView* view = window.ruleEditor()->view();
    const int column = columnOf(rules, QStringLiteral("weight_qtype"));
    QVERIFY(column >= 0);
    // A second rule, so that "stays selected" can fail (a reset selects nothing, or row 0).
    rules->insertRule(0, {{"module_path", "classifier/fc2"}, {"weight_qtype", "int8"}}, QStringLiteral("Add rule"));
    window.ruleEditor()->selectRule(1);
    const QModelIndex cell = rules->index(1, column);
    view->setCurrentIndex(cell);
    view->edit(cell);
    QTest::qWait(20);
    auto* combo = view->viewport()->findChild<QComboBox*>();
    QVERIFY(combo);
    QVERIFY(combo->findText(QStringLiteral("float")) >= 0); // an explicit float, beside "(default)"
    const int int4 = combo->findText(QStringLiteral("int4"));
    QVERIFY(int4 >= 0);
    const int undoBefore = window.workspace()->undoStack()->count();
    // The user picks int4 from the list: no Enter.
    combo->setCurrentIndex(int4);
    emit combo->activated(int4);
    QTest::qWait(50);
    QCOMPARE(rules->index(1, column).data(Qt::EditRole).toString(), QStringLiteral("int4"));
    QCOMPARE(window.workspace()->undoStack()->count(), undoBefore + 1);
    QVERIFY(!view->viewport()->findChild<QComboBox*>() || !view->viewport()->findChild<QComboBox*>()->isVisible());
    QCOMPARE(window.ruleEditor()->currentRule(), std::optional<int>(1));
    // And float: the field goes (the weight stays float), said as such in the layer table.
    view->edit(cell);
    QTest::qWait(20);
    combo = nullptr;
    for (QComboBox* c : view->viewport()->findChildren<QComboBox*>())
        if (c->isVisible())
            combo = c;
    QVERIFY(combo);
    const int floatIndex = combo->findText(QStringLiteral("float"));
    combo->setCurrentIndex(floatIndex);
    emit combo->activated(floatIndex);
    QTest::qWait(50);
    QVERIFY(rules->effectiveRules().rules()[1].weightQType == std::nullopt);
    QCOMPARE(window.ruleEditor()->currentRule(), std::optional<int>(1));
    for (const QString& m : g_messages)
        QVERIFY2(!m.contains(QStringLiteral("closeEditor")) && !m.contains(QStringLiteral("does not belong")),
                 qPrintable(m));
}

void TestGuiRoughEdges::anotherModelStartsClean()
{
    QTemporaryDir dir;
    const QString other = dir.filePath(QStringLiteral("other.onnx"));
    QVERIFY(QFile::copy(kModel, other));
    MainWindow window(false);
    window.show();
    window.openRules(kW8A8);
    QVERIFY(open(window));
    Workspace& ws = *window.workspace();
    window.setCalibrationFile(kCalib);
    window.setEvaluationFile(kEval);
    ws.rules()->setField(0, "weight_qtype", "int4");
    QVERIFY(ws.undoStack()->count() > 0);
    QVERIFY(ws.isModified());
    QVERIFY(open(window, other));
    QCOMPARE(ws.modelPath(), QFileInfo(other).absoluteFilePath());
    QVERIFY(!ws.calibrationData()); // not the previous model's data
    QVERIFY(!ws.evaluationData());
    QCOMPARE(ws.undoStack()->count(), 0); // its own history
    QVERIFY(!ws.isModified());
    QCOMPARE(ws.rules()->effectiveRules().rules()[0].weightQType.has_value(), true); // the rules stay
    // Data given with the open (the command line's --calib) is for the new model: kept.
    window.openModel(kModel);
    window.setCalibrationFile(kCalib);
    QSignalSpy loaded(&ws, &Workspace::modelLoaded);
    QVERIFY(loaded.wait(30000));
    QVERIFY(ws.calibrationData());
}

void TestGuiRoughEdges::anotherModelAsksBeforeDroppingChanges()
{
    QTemporaryDir dir;
    const QString other = dir.filePath(QStringLiteral("other.onnx"));
    QVERIFY(QFile::copy(kModel, other));
    QFile::remove(MainWindow::autosavePath()); // no recovery question
    MainWindow window(true);
    window.show();
    QVERIFY(open(window));
    Workspace& ws = *window.workspace();
    window.openRules(kW8A8);
    QVERIFY(ws.isModified());
    // The question comes; Cancel keeps the model and its changes.
    bool asked = false;
    QTimer::singleShot(200, this, [&] {
        if (auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget())) {
            asked = box->text().contains(QStringLiteral("unsaved"));
            box->button(QMessageBox::Cancel)->click();
        }
    });
    window.openModel(other);
    QVERIFY(asked);
    QVERIFY(!ws.jobs()->isRunning(JobKind::Load));
    QCOMPARE(ws.modelPath(), QFileInfo(kModel).absoluteFilePath());
    QVERIFY(ws.isModified());
    // Discard: the other model opens.
    QTimer::singleShot(200, this, [&] {
        if (auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget()))
            box->button(QMessageBox::Discard)->click();
    });
    QSignalSpy loaded(&ws, &Workspace::modelLoaded);
    window.openModel(other);
    QVERIFY(loaded.wait(30000));
    QCOMPARE(ws.modelPath(), QFileInfo(other).absoluteFilePath());
    ws.setModified(false); // no question on close
}

void TestGuiRoughEdges::warningsAreWarningsAndErrorsAreLoggedOnce()
{
    MainWindow window(false);
    window.show();
    QVERIFY(open(window));
    Workspace& ws = *window.workspace();
    g_messages.clear();
    // A corrupt model: one error, logged once (the window's dialog path logs it; the workspace does not again).
    QTemporaryDir dir;
    const QString bad = dir.filePath(QStringLiteral("corrupt.onnx"));
    QFile f(bad);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(QByteArray("\x08\x07\x12\xff\xff\xff\xff garbage", 20));
    f.close();
    QSignalSpy failed(&ws, &Workspace::modelFailed);
    window.openModel(bad);
    QVERIFY(failed.wait(30000));
    const QString message = failed.first().first().toString();
    int printed = 0;
    for (const QString& m : g_messages)
        if (m.contains(message))
            ++printed;
    QCOMPARE(printed, 1);
    QCOMPARE(window.logView()->toPlainText().count(message), 1);
    QVERIFY(g_messages.filter(QStringLiteral("error: ")).size() == 1);

    // Calibrating on synthetic data: the exploration's warning is logged as a warning, never "error: ".
    g_messages.clear();
    window.openRules(kW8A8);
    QVERIFY(waitFor([&] { return ws.weightsGeneration() == ws.generation(); }, 30000));
    DataConfig synthetic;
    synthetic.kind = DataConfig::Kind::Synthetic;
    ws.setCalibrationData(synthetic);
    QSignalSpy calibrated(&ws, &Workspace::statisticsChanged);
    ws.calibrate();
    QVERIFY(calibrated.wait(60000));
    QVERIFY2(!g_messages.filter(QStringLiteral("warning: ")).isEmpty(), qPrintable(g_messages.join('\n')));
    QVERIFY2(g_messages.filter(QStringLiteral("error: ")).isEmpty(), qPrintable(g_messages.join('\n')));
}

void TestGuiRoughEdges::statusBarShowsOnlyRunningJobs()
{
    QTemporaryDir dir;
    const QString candidates = dir.filePath(QStringLiteral("c.json"));
    {
        std::ofstream c(candidates.toStdString());
        c << R"({"version": 1, "candidates": [{"weight_qtype": "int4"}, {"weight_qtype": "int8"}, {}]})";
    }
    MainWindow window(false);
    window.show();
    window.openRules(kW8A8);
    QVERIFY(open(window));
    Workspace& ws = *window.workspace();
    window.setCalibrationFile(kCalib);
    window.setEvaluationFile(kEval);
    ws.calibrate();
    ws.runSearch(candidates, QStringLiteral("output_sqnr_db>=30"));
    QVERIFY(ws.jobs()->isRunning(JobKind::Calibrate));
    QVERIFY(window.statusJobLabel()->text().startsWith(QStringLiteral("Searching")));
    // The search ends (cancelled) while the calibration runs on: the label names the calibration.
    ws.jobs()->cancel(JobKind::Search);
    QVERIFY2(!window.statusJobLabel()->text().contains(QStringLiteral("Searching")),
             qPrintable(window.statusJobLabel()->text()));
    QVERIFY(window.statusJobLabel()->text().startsWith(QStringLiteral("Calibrating")));
    QVERIFY(ws.jobs()->waitForIdle(60000));
    QTest::qWait(150); // a progress poll would come within 100 ms
    QVERIFY(window.statusJobLabel()->text().isEmpty());
}

void TestGuiRoughEdges::exportsWaitForACalibration()
{
    QCOMPARE(withDefaultSuffix(QStringLiteral("/tmp/x/model"), QStringLiteral("onnx")),
             QStringLiteral("/tmp/x/model.onnx"));
    QCOMPARE(withDefaultSuffix(QStringLiteral("/tmp/x/model.h5"), QStringLiteral("safetensors")),
             QStringLiteral("/tmp/x/model.h5"));
    MainWindow window(false);
    window.show();
    window.openRules(kW8A8); // static activation scales: the QDQ model and ODML need a calibration
    QVERIFY(open(window));
    QAction* onnx = actionNamed(&window, QStringLiteral("ONNX &QDQ Model…"));
    QAction* odml = actionNamed(&window, QStringLiteral("&ODML Annotations…"));
    QAction* checkpoint = actionNamed(&window, QStringLiteral("Quantized &Checkpoint…"));
    QVERIFY(onnx && odml && checkpoint);
    QVERIFY(checkpoint->isEnabled()); // weights only
    QVERIFY(!onnx->isEnabled());
    QVERIFY2(onnx->toolTip().contains(QStringLiteral("calibration")), qPrintable(onnx->toolTip()));
    QVERIFY(!odml->isEnabled());
    window.setCalibrationFile(kCalib);
    QVERIFY(!odml->isEnabled()); // the data alone is not a calibration
    QVERIFY2(odml->toolTip().contains(QStringLiteral("Calibrate")), qPrintable(odml->toolTip()));
    QSignalSpy calibrated(window.workspace(), &Workspace::statisticsChanged);
    window.workspace()->calibrate();
    QVERIFY(calibrated.wait(60000));
    QVERIFY(onnx->isEnabled());
    QVERIFY(odml->isEnabled());
}

QTEST_MAIN(TestGuiRoughEdges)
#include "tst_gui_rough_edges.moc"
