// The last rough edges of issue 23, part 5, on the bundled demo
// (resources/demo/digits), each with the test that would have caught it:
//  - the export save dialog itself defaults the suffix; the ONNX and LiteRT
//    options are asked, remembered, and reach the file (read back by Python's
//    onnx package, not by our reader); the report is logged a line per line;
//  - a bad module_path regex: the Inspector names the rule and field and puts
//    a caret under the position RE2 refuses; the rule table marks the cell;
//  - Help: the bundled user guide (the docs/ file, its screenshots loaded), the
//    shortcuts read from the actions, About with the libraries' versions.
#include <QtTest>

#include <QAction>
#include <QChart>
#include <QComboBox>
#include <QDockWidget>
#include <QFile>
#include <QFileDialog>
#include <QGraphicsScene>
#include <QGraphicsSimpleTextItem>
#include <QGraphicsTextItem>
#include <QHeaderView>
#include <QPainter>
#include <QProcess>
#include <QScrollBar>
#include <QSettings>
#include <QStandardPaths>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTextBrowser>
#include <QTextEdit>
#include <QToolBar>
#include <QToolButton>
#include <QTreeView>

#include <Eigen/Core>
#include <oneapi/tbb/version.h>
#include <zlib.h>

#include "gui/export_options_dialog.h"
#include "gui/help_dialogs.h"
#include "gui/main_window.h"
#include "gui/theme.h"
#include "gui/workspace.h"
#include "widgets/charts/chart_frame.h"
#include "widgets/charts/rule_comparison_view.h"
#include "widgets/frozen_column_tree_view.h"
#include "widgets/jobs/job_tracker.h"
#include "widgets/layer_tree_model.h"
#include "widgets/rule_table_model.h"
#include "gui_support.h"

using namespace qs;
using namespace gui_test;

namespace {


bool open(MainWindow& window)
{
    QSignalSpy loaded(window.workspace(), &Workspace::modelLoaded);
    window.openModel(kModel);
    if (!loaded.wait(30000))
        return false;
    Workspace& ws = *window.workspace();
    return waitFor([&] { return ws.weightsGeneration() == ws.generation(); }, 30000);
}

// What Python's onnx package reads from `path`: the default-domain opset, then
// the element types of the initializers (one line each: "opset N", "types a,b").
QStringList readWithPythonOnnx(const QString& path)
{
    QProcess p;
    p.start(QStringLiteral("/usr/bin/python3"), // Debian's, with python3-onnx
            {QStringLiteral("-c"),
             QStringLiteral("import sys, onnx\n"
                            "m = onnx.load(sys.argv[1])\n"
                            "print('opset', [o.version for o in m.opset_import if o.domain in ('', 'ai.onnx')][0])\n"
                            "print('types', ','.join(sorted({onnx.TensorProto.DataType.Name(i.data_type) "
                            "for i in m.graph.initializer})))\n"),
             path});
    if (!p.waitForFinished(120000) || p.exitCode() != 0)
        return {QString::fromUtf8(p.readAllStandardError())};
    return QString::fromUtf8(p.readAllStandardOutput()).split(QLatin1Char('\n'), Qt::SkipEmptyParts);
}

} // namespace

class TestGuiPolish : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() { QStandardPaths::setTestModeEnabled(true); }
    void saveDialogDefaultsTheSuffix();
    void exportOptionsAreRemembered();
    void exportOptionsReachTheFile();
    void badRegexIsPointedAt();
    void userGuideIsBundled();
    void shortcutsComeFromTheActions();
    void aboutNamesTheLibraryVersions();
    void darkThemeFromTheViewMenu();
    void monochromeIconsAreRedrawn();
    void layerColumnStaysWhileScrolling();
    void chartTextNotCutAtTheDefaultDockWidth();
    void usableAtTwiceTheScale();
    void scaledTwiceChild();
};

void TestGuiPolish::saveDialogDefaultsTheSuffix()
{
    QTemporaryDir dir;
    std::unique_ptr<QFileDialog> onnx(newExportFileDialog(ExportFormat::Onnx, dir.path(), nullptr));
    QCOMPARE(onnx->acceptMode(), QFileDialog::AcceptSave);
    QCOMPARE(onnx->defaultSuffix(), QStringLiteral("onnx"));
    // The dialog itself turns a bare name into one with the suffix (Qt's own dialog, as offscreen shows it).
    onnx->setOption(QFileDialog::DontUseNativeDialog);
    onnx->selectFile(QStringLiteral("model"));
    QCOMPARE(onnx->selectedFiles().value(0), QDir(dir.path()).filePath(QStringLiteral("model.onnx")));

    std::unique_ptr<QFileDialog> checkpoint(newExportFileDialog(ExportFormat::Checkpoint, dir.path(), nullptr));
    checkpoint->setOption(QFileDialog::DontUseNativeDialog);
    QCOMPARE(checkpoint->defaultSuffix(), QStringLiteral("safetensors"));
    QCOMPARE(checkpoint->nameFilters().size(), 2);
    // Choosing the HDF5 filter makes the default .h5.
    emit checkpoint->filterSelected(checkpoint->nameFilters().at(1));
    QCOMPARE(checkpoint->defaultSuffix(), QStringLiteral("h5"));
    for (const ExportFormat f : {ExportFormat::Odml, ExportFormat::Gguf, ExportFormat::Tflite}) {
        std::unique_ptr<QFileDialog> d(newExportFileDialog(f, dir.path(), nullptr));
        QCOMPARE(d->defaultSuffix(), exportSuffix(f));
        QVERIFY(d->nameFilters().first().contains(QStringLiteral("*.") + exportSuffix(f)));
    }
}

void TestGuiPolish::exportOptionsAreRemembered()
{
    QSettings().remove(QStringLiteral("export"));
    QCOMPARE(loadExportChoices(), ExportChoices{});
    QVERIFY(hasExportOptions(ExportFormat::Onnx) && hasExportOptions(ExportFormat::Tflite));
    QVERIFY(!hasExportOptions(ExportFormat::Checkpoint));

    ExportOptionsDialog onnx(ExportFormat::Onnx, loadExportChoices());
    QVERIFY(onnx.opsetBox() && onnx.int4FormBox() && onnx.eightBitFormBox());
    QVERIFY(!onnx.tfliteIoBox());                       // not an ONNX option
    QVERIFY(!onnx.opsetBox()->currentData().isValid()); // automatic
    onnx.opsetBox()->setCurrentIndex(onnx.opsetBox()->findText(QStringLiteral("21")));
    onnx.int4FormBox()->setCurrentIndex(onnx.int4FormBox()->findData(QStringLiteral("matmulnbits")));
    onnx.eightBitFormBox()->setCurrentIndex(onnx.eightBitFormBox()->findData(QStringLiteral("as-rules")));
    ExportChoices chosen = onnx.choices();
    QCOMPARE(chosen.onnxOpset, std::optional<int64_t>(21));
    QVERIFY(chosen.onnxInt4Form == Int4Form::MatMulNBits);
    QVERIFY(chosen.onnxEightBitForm == EightBitForm::AsRules);
    const OnnxExportOptions options = chosen.onnxOptions();
    QCOMPARE(options.opset, std::optional<int64_t>(21));
    QVERIFY(options.int4Form == Int4Form::MatMulNBits && options.eightBitForm == EightBitForm::AsRules);

    ExportOptionsDialog tflite(ExportFormat::Tflite, chosen);
    QVERIFY(tflite.tfliteIoBox() && !tflite.opsetBox());
    tflite.tfliteIoBox()->setCurrentIndex(tflite.tfliteIoBox()->findData(QStringLiteral("int8")));
    chosen = tflite.choices();
    QVERIFY(chosen.tfliteInt8Io);
    QCOMPARE(chosen.onnxOpset, std::optional<int64_t>(21)); // the other format's choices kept
    saveExportChoices(chosen);
    QCOMPARE(loadExportChoices(), chosen);
    // A new dialog opens on what was remembered.
    ExportOptionsDialog again(ExportFormat::Onnx, loadExportChoices());
    QCOMPARE(again.opsetBox()->currentText(), QStringLiteral("21"));
    QCOMPARE(again.eightBitFormBox()->currentData().toString(), QStringLiteral("as-rules"));
    // A settings value that names no option reads as the default, not as garbage.
    QSettings().setValue(QStringLiteral("export/onnx_int4_form"), QStringLiteral("int3"));
    QSettings().setValue(QStringLiteral("export/onnx_opset"), QStringLiteral("99"));
    QVERIFY(loadExportChoices().onnxInt4Form == Int4Form::Dequantize);
    QCOMPARE(loadExportChoices().onnxOpset, std::optional<int64_t>());
    QSettings().remove(QStringLiteral("export"));
}

void TestGuiPolish::exportOptionsReachTheFile()
{
    MainWindow window(false);
    window.show();
    window.openRules(kW8A8);
    QVERIFY(open(window));
    window.setCalibrationFile(kCalib);
    QSignalSpy calibrated(window.workspace(), &Workspace::statisticsChanged);
    window.workspace()->calibrate();
    QVERIFY(calibrated.wait(60000));
    QTemporaryDir dir;
    JobTracker* jobs = window.workspace()->jobs();

    const QString plain = dir.filePath(QStringLiteral("default.onnx"));
    window.exportTo(ExportFormat::Onnx, plain, ExportChoices{});
    QVERIFY(jobs->waitForIdle(120000));
    QTest::qWait(50);
    ExportChoices chosen;
    chosen.onnxOpset = 21;
    chosen.onnxEightBitForm = EightBitForm::AsRules;
    const QString asked = dir.filePath(QStringLiteral("opset21.onnx"));
    window.exportTo(ExportFormat::Onnx, asked, chosen);
    QVERIFY(jobs->waitForIdle(120000));
    QTest::qWait(50);

    const QStringList before = readWithPythonOnnx(plain);
    const QStringList after = readWithPythonOnnx(asked);
    QCOMPARE(after.size(), 2);
    QCOMPARE(before.size(), 2);
    QCOMPARE(after[0], QStringLiteral("opset 21"));
    QVERIFY2(before[0] != after[0], qPrintable(before[0])); // the demo's own opset is lower
    // unsigned (the default) writes no INT8 codes; as-rules writes the rules' int8.
    QVERIFY2(!before[1].contains(QStringLiteral("INT8")) || before[1].contains(QStringLiteral("UINT8")),
             qPrintable(before[1]));
    QVERIFY2(before[1].contains(QStringLiteral("UINT8")), qPrintable(before[1]));
    QVERIFY2(after[1].split(QLatin1Char(',')).contains(QStringLiteral("INT8")), qPrintable(after[1]));

    // The report is in the log a line per line: the title, the path, each check, each note.
    const QStringList lines = window.logView()->toPlainText().split(QLatin1Char('\n'));
    auto lineWith = [&lines](const QString& text) {
        for (const QString& l : lines)
            if (l.contains(text))
                return l;
        return QString();
    };
    QVERIFY(!lineWith(QStringLiteral("ONNX QDQ model")).isEmpty());
    QVERIFY(lineWith(QStringLiteral("ONNX QDQ model")).size() < 40); // the title alone, not a run-on report
    QVERIFY(lineWith(asked).endsWith(asked));
    QVERIFY(!lineWith(QStringLiteral("8-bit form 'as-rules'")).isEmpty());
    QVERIFY(!lineWith(QStringLiteral("int4 form 'dequantize'")).isEmpty());
    QVERIFY(!lineWith(QStringLiteral("8-bit form 'as-rules'")).contains(QStringLiteral("int4 form")));
    QVERIFY(!window.logView()->toPlainText().contains(QStringLiteral("&#39;")));
    QVERIFY(!window.logView()->toPlainText().contains(QStringLiteral("&quot;")));
}

void TestGuiPolish::badRegexIsPointedAt()
{
    MainWindow window(false);
    window.show();
    window.openRules(kW8A8);
    QVERIFY(open(window));
    RuleTableModel* rules = window.workspace()->rules();
    QVERIFY(window.inspector()->toPlainText().indexOf(QStringLiteral("Rule ")) < 0);
    // An unclosed group in the second rule: position 9 (the "(").
    rules->insertRule(1, {{"module_path", "features/(conv1"}, {"weight_qtype", "int4"}}, QStringLiteral("Add rule"));
    QVERIFY(!rules->allValid());
    const QString text = window.inspector()->toPlainText();
    QVERIFY2(text.contains(QStringLiteral("Rule 2, field module_path")), qPrintable(text));
    // The pattern, and under it a caret in the column of the "(" (9 characters in).
    QVERIFY2(text.contains(QStringLiteral("features/(conv1\n         ^")), qPrintable(text));
    QVERIFY2(text.contains(QStringLiteral("position 10")), qPrintable(text)); // the engine's message, counted from 1
    // The refused character is marked in the HTML too.
    QVERIFY(window.inspector()->toHtml().contains(QStringLiteral("background-color:#c62828")));
    // The rule table marks that cell, and only it.
    const int column = RuleTableModel::columnOfField("module_path");
    QVERIFY(rules->index(1, column).data(Qt::BackgroundRole).isValid());
    QVERIFY(!rules->index(1, RuleTableModel::columnOfField("weight_qtype")).data(Qt::BackgroundRole).isValid());
    QVERIFY(!rules->index(0, column).data(Qt::BackgroundRole).isValid());
    // Fixed: the Inspector says nothing of it any more.
    rules->setField(1, "module_path", "features/conv1");
    QVERIFY(rules->allValid());
    QVERIFY(!window.inspector()->toPlainText().contains(QStringLiteral("Rule 2")));
    // A long pattern: the excerpt around the error, the caret still under it.
    const std::string longPattern = std::string(100, 'a') + "(?=b)" + std::string(100, 'c');
    rules->setField(1, "module_path", longPattern);
    const QString longText = window.inspector()->toPlainText();
    const qsizetype caretLine = longText.indexOf(QStringLiteral("\n") + QString(31, QLatin1Char(' ')) + "^");
    QVERIFY2(caretLine > 0, qPrintable(longText));
    const QString excerpt = longText.mid(longText.lastIndexOf(QLatin1Char('\n'), caretLine - 1) + 1,
                                         caretLine - longText.lastIndexOf(QLatin1Char('\n'), caretLine - 1) - 1);
    QVERIFY2(excerpt.startsWith(QStringLiteral("…")) && excerpt.endsWith(QStringLiteral("…")), qPrintable(excerpt));
    QCOMPARE(excerpt.mid(31, 3), QStringLiteral("(?="));
}

void TestGuiPolish::userGuideIsBundled()
{
    QFile bundled(QString::fromLatin1(kUserGuideResource));
    QVERIFY(bundled.open(QIODevice::ReadOnly));
    QFile source(kRoot + QStringLiteral("/docs/user-guide.md"));
    QVERIFY(source.open(QIODevice::ReadOnly));
    QCOMPARE(bundled.readAll(), source.readAll());
    UserGuideDialog guide;
    // Rendered from Markdown: the heading's text without its "#", links and images resolved.
    const QString text = guide.browser()->toPlainText();
    QVERIFY(text.startsWith(QStringLiteral("Quantscope user guide")));
    QVERIFY(!text.contains(QStringLiteral("## ")));
    const QVariant image = guide.browser()->document()->resource(QTextDocument::ImageResource,
                                                                 QUrl(QStringLiteral("screenshots/main_window.png")));
    QVERIFY(image.isValid());
    QVERIFY(!qvariant_cast<QImage>(image).isNull() || !qvariant_cast<QPixmap>(image).isNull() ||
            !image.toByteArray().isEmpty());
}

void TestGuiPolish::shortcutsComeFromTheActions()
{
    MainWindow window(false);
    const QString html = shortcutsHtml(&window);
    int withShortcut = 0;
    for (const QAction* a : window.findChildren<QAction*>())
        for (const QKeySequence& k : a->shortcuts()) {
            ++withShortcut;
            QVERIFY2(html.contains(k.toString(QKeySequence::NativeText).toHtmlEscaped()),
                     qPrintable(a->text() + QStringLiteral(": ") + k.toString()));
        }
    QVERIFY(withShortcut >= 10);
    QVERIFY(html.contains(QStringLiteral("Calibrate")) && !html.contains(QStringLiteral("&amp;Calibrate")));
    // An action added later is listed: the table is read from the window, not kept by hand.
    auto* extra = new QAction(QStringLiteral("Frobnicate Layers"), &window);
    extra->setShortcut(QKeySequence(Qt::CTRL | Qt::ALT | Qt::Key_F));
    QVERIFY(shortcutsHtml(&window).contains(QStringLiteral("Frobnicate Layers")));
    QVERIFY(window.findChildren<QAction*>().size() > 1);
    // Help ▸ User Guide has F1 (the platform's help key).
    bool guide = false;
    for (const QAction* a : window.findChildren<QAction*>())
        guide |=
            a->text() == QStringLiteral("&User Guide") && a->shortcut() == QKeySequence(QKeySequence::HelpContents);
    QVERIFY(guide);
}

void TestGuiPolish::aboutNamesTheLibraryVersions()
{
    const QString html = aboutHtml();
    // Each version as this test's own headers and runtime give it.
    QVERIFY2(html.contains(QStringLiteral("Qt %1").arg(QString::fromLatin1(qVersion()))), qPrintable(html));
    QVERIFY(html.contains(QStringLiteral(QUANTSCOPE_VERSION)));
    QVERIFY(html.contains(QStringLiteral("oneTBB</td><td>") + QStringLiteral(TBB_VERSION_STRING)));
    QVERIFY(html.contains(QStringLiteral("Eigen</td><td>%1.%2.%3")
                              .arg(EIGEN_WORLD_VERSION)
                              .arg(EIGEN_MAJOR_VERSION)
                              .arg(EIGEN_MINOR_VERSION)));
    QVERIFY(html.contains(QStringLiteral("zlib</td><td>") + QString::fromLatin1(zlibVersion())));
    for (const char* name :
         {"HDF5</td><td>1.", "ONNX</td><td>1.", "protobuf</td><td>3.", "ICU</td><td>", "nlohmann_json</td><td>3."})
        QVERIFY2(html.contains(QString::fromLatin1(name)), name);
    QVERIFY(!html.contains(QStringLiteral("<td></td>"))); // every library has a version
}

void TestGuiPolish::darkThemeFromTheViewMenu()
{
    QSettings().remove(QStringLiteral("view/theme"));
    QCOMPARE(loadThemeChoice(), ThemeChoice::System);
    MainWindow window(false);
    window.resize(1600, 1000);
    window.show();
    // Following the desktop sets nothing: Qt resolves every role from the platform theme (and follows its changes).
    QCOMPARE(QApplication::palette().resolveMask(), QPalette::ResolveMask(0));
    QAction* dark = nullptr;
    QAction* system = nullptr;
    for (QAction* a : window.findChildren<QAction*>()) {
        if (a->data().toString() == QStringLiteral("dark"))
            dark = a;
        if (a->data().toString() == QStringLiteral("system"))
            system = a;
    }
    QVERIFY(dark && system);
    QVERIFY(system->isChecked());
    dark->trigger();
    QVERIFY(dark->isChecked() && !system->isChecked());
    QCOMPARE(loadThemeChoice(), ThemeChoice::Dark);
    QVERIFY(isDarkPalette(QApplication::palette()));
    QTRY_VERIFY(isDarkPalette(window.palette())); // the widgets take it as its change event reaches them
    // The charts take the palette: the A/B chart's frame is dark.
    const auto frames = window.comparisonView()->findChildren<ChartFrame*>();
    QVERIFY(!frames.isEmpty());
    QVERIFY(frames.first()->darkPalette());
    // Every toolbar icon stands out from the window colour.
    const QColor windowColour = window.palette().color(QPalette::Window);
    double lowest = 1;
    for (QToolBar* bar : window.findChildren<QToolBar*>())
        for (QAction* a : bar->actions()) {
            if (a->icon().isNull())
                continue;
            const double contrast = iconContrast(a->icon(), windowColour);
            lowest = std::min(lowest, contrast);
            QVERIFY2(contrast >= 0.2, qPrintable(QStringLiteral("%1: %2").arg(a->text()).arg(contrast)));
        }
    qInfo("lowest toolbar icon contrast on the dark window: %.2f", lowest);

    // The demo, calibrated and evaluated, rendered in the dark theme for docs/user-guide.md.
    window.openRules(kW8A8);
    QVERIFY(open(window));
    window.setCalibrationFile(kCalib);
    window.setEvaluationFile(kEval);
    QSignalSpy evaluated(window.workspace(), &Workspace::evaluationChanged);
    window.runWhenReady(true, true);
    QVERIFY(evaluated.wait(120000));
    const QModelIndex features = window.layerView()->model()->index(0, 0);
    window.layerView()->setCurrentIndex(window.layerView()->model()->index(1, 0, features)); // features/conv2
    QTest::qWait(300);
    QVERIFY(window.inspector()->toPlainText().contains(QStringLiteral("features/conv2")));
    QDir().mkpath(kScreenshots);
    const QImage shot = window.grab().toImage();
    QVERIFY(shot.save(kScreenshots + QStringLiteral("/dark_theme.png")));
    qInfo("screenshot: %s", qPrintable(QDir::cleanPath(kScreenshots + QStringLiteral("/dark_theme.png"))));
    // Mostly dark pixels: the theme reached the widgets, not only the palette object.
    int darkPixels = 0, samples = 0;
    for (int y = 0; y < shot.height(); y += 7)
        for (int x = 0; x < shot.width(); x += 7, ++samples)
            darkPixels += QColor(shot.pixel(x, y)).lightnessF() < 0.35;
    QVERIFY2(darkPixels > samples * 6 / 10, qPrintable(QStringLiteral("%1 of %2").arg(darkPixels).arg(samples)));

    system->trigger();
    QCOMPARE(loadThemeChoice(), ThemeChoice::System);
    QCOMPARE(QApplication::palette().resolveMask(), QPalette::ResolveMask(0));
    QTRY_VERIFY(!isDarkPalette(window.palette())); // the offscreen platform's palette is light
    window.workspace()->setModified(false);
}

void TestGuiPolish::monochromeIconsAreRedrawn()
{
    // A black glyph, as an icon theme draws it for light desktops.
    QPixmap glyph(32, 32);
    glyph.fill(Qt::transparent);
    {
        QPainter p(&glyph);
        p.fillRect(8, 4, 16, 24, Qt::black);
    }
    const QIcon black(glyph);
    const QPalette dark = darkPalette();
    const QColor window = dark.color(QPalette::Window);
    QVERIFY(iconContrast(black, window) < 0.2);
    const QIcon redrawn = legibleIcon(black, dark);
    QVERIFY2(iconContrast(redrawn, window) > 0.6, qPrintable(QString::number(iconContrast(redrawn, window))));
    // The shape is kept: transparent where the glyph was transparent.
    const QImage image = redrawn.pixmap(32, 32).toImage();
    QCOMPARE(qAlpha(image.pixel(2, 2)), 0);
    QVERIFY(qAlpha(image.pixel(16, 16)) > 200);
    // On a light palette the same icon already stands out: unchanged.
    QCOMPARE(legibleIcon(black, lightPalette()).cacheKey(), black.cacheKey());
    // A coloured icon keeps its hue: a light green stays as drawn; the rule editor's dark red − is lightened.
    auto filled = [](QColor colour) {
        QPixmap pixmap(32, 32);
        pixmap.fill(Qt::transparent);
        QPainter p(&pixmap);
        p.fillRect(8, 4, 16, 24, colour);
        p.end();
        return QIcon(pixmap);
    };
    const QIcon lightGreen = filled(QColor(102, 187, 106));
    QCOMPARE(legibleIcon(lightGreen, dark).cacheKey(), lightGreen.cacheKey());
    const QIcon red = filled(QColor(198, 40, 40));
    QVERIFY(iconContrast(red, window) < 0.2);
    const QIcon lighter = legibleIcon(red, dark);
    QVERIFY2(iconContrast(lighter, window) >= 0.3, qPrintable(QString::number(iconContrast(lighter, window))));
    const QColor centre = QColor::fromRgba(lighter.pixmap(32, 32).toImage().pixel(16, 16));
    QVERIFY(centre.hslHue() <= 5 || centre.hslHue() >= 355); // still red
    QVERIFY(centre.hslSaturationF() > 0.4);
}

void TestGuiPolish::layerColumnStaysWhileScrolling()
{
    MainWindow window(false);
    window.resize(1600, 1000);
    window.show();
    window.openRules(kW8A8);
    QVERIFY(open(window));
    window.setCalibrationFile(kCalib);
    window.setEvaluationFile(kEval);
    QSignalSpy evaluated(window.workspace(), &Workspace::evaluationChanged);
    window.runWhenReady(true, true);
    QVERIFY(evaluated.wait(120000));
    QTest::qWait(200);
    auto* view = qobject_cast<FrozenColumnTreeView*>(window.layerView());
    QVERIFY(view);
    QHeaderView* header = view->header();
    // At 1600 px the layer, its qtypes and its three SQNR columns are all in view without scrolling.
    const int width = view->viewport()->width();
    for (const int c : {int(LayerTreeModel::NameColumn), int(LayerTreeModel::WeightQTypeColumn),
                        int(LayerTreeModel::ActQTypeColumn), int(LayerTreeModel::WeightSqnrColumn),
                        int(LayerTreeModel::IsolatedSqnrColumn), int(LayerTreeModel::AccumulatedSqnrColumn)}) {
        QVERIFY2(header->sectionViewportPosition(c) + header->sectionSize(c) <= width,
                 qPrintable(QStringLiteral("column %1 ends at %2 of %3")
                                .arg(c)
                                .arg(header->sectionViewportPosition(c) + header->sectionSize(c))
                                .arg(width)));
        // No key header is cut: its title fits its section.
        const QString title = view->model()->headerData(c, Qt::Horizontal).toString();
        QVERIFY2(header->sectionSize(c) >= view->fontMetrics().horizontalAdvance(title), qPrintable(title));
    }
    QDir().mkpath(kScreenshots);
    QVERIFY(window.grab().save(kScreenshots + QStringLiteral("/layout_1600.png")));
    qInfo("screenshot: %s", qPrintable(QDir::cleanPath(kScreenshots + QStringLiteral("/layout_1600.png"))));

    // Narrow the table until it scrolls sideways, then scroll to the far right: the layer column stays.
    window.resize(900, 800);
    QTest::qWait(100);
    QScrollBar* sideways = view->horizontalScrollBar();
    QVERIFY(sideways->maximum() > 0);
    QVERIFY(!view->frozenView()->isVisible()); // nothing to freeze before scrolling
    sideways->setValue(sideways->maximum());
    QTest::qWait(50);
    QTreeView* frozen = view->frozenView();
    QVERIFY(frozen->isVisible());
    QCOMPARE(frozen->columnWidth(0), view->columnWidth(0));
    QCOMPARE(frozen->geometry().left(), view->frameWidth());
    QVERIFY(header->sectionViewportPosition(LayerTreeModel::NameColumn) < 0); // the real column is scrolled away
    // The overlay shows the same rows at the same heights, also after scrolling down and collapsing a branch.
    const QModelIndex last = view->model()->index(view->model()->rowCount() - 1, 0);
    view->scrollTo(last);
    QTest::qWait(50);
    QCOMPARE(frozen->verticalScrollBar()->value(), view->verticalScrollBar()->value());
    const QModelIndex first = view->model()->index(0, 0);
    QVERIFY(view->model()->hasChildren(first));
    view->collapse(first);
    QVERIFY(!frozen->isExpanded(first));
    view->expandAll(); // QTreeView's, which emits no expanded(): the overlay follows all the same
    QTest::qWait(50);
    QVERIFY(frozen->isExpanded(first));
    const QModelIndex child = view->model()->index(0, 0, first);
    QCOMPARE(frozen->visualRect(child).top(), view->visualRect(child).top());
    // Clicking a name in the overlay selects that layer in the table (and so the Inspector).
    QTest::mouseClick(frozen->viewport(), Qt::LeftButton, {}, frozen->visualRect(child).center());
    QCOMPARE(view->currentIndex().siblingAtColumn(0), child);
    QVERIFY(window.inspector()->toPlainText().contains(child.data().toString()));
    window.workspace()->setModified(false);
}

void TestGuiPolish::chartTextNotCutAtTheDefaultDockWidth()
{
    MainWindow window(false);
    window.resize(1600, 1000);
    window.show();
    window.openRules(kW8A8);
    QVERIFY(open(window));
    window.setCalibrationFile(kCalib);
    window.setEvaluationFile(kEval);
    QSignalSpy evaluated(window.workspace(), &Workspace::evaluationChanged);
    window.runWhenReady(true, true);
    QVERIFY(evaluated.wait(120000));
    const QModelIndex features = window.layerView()->model()->index(0, 0);
    window.layerView()->setCurrentIndex(window.layerView()->model()->index(1, 0, features));
    auto* chartsDock = window.findChild<QDockWidget*>(QStringLiteral("ChartsDock"));
    QVERIFY(chartsDock);
    chartsDock->raise();
    QTest::qWait(300);
    QStringList cut, legendCut;
    auto* tabs = chartsDock->findChild<QTabWidget*>();
    const int pages = tabs ? tabs->count() : 1;
    for (int page = 0; page < pages; ++page) {
        if (tabs)
            tabs->setCurrentIndex(page);
        QVERIFY(window.workspace()->jobs()->waitForIdle(60000));
        QTest::qWait(300);
        for (ChartFrame* frame : chartsDock->findChildren<ChartFrame*>()) {
            if (!frame->isVisible())
                continue;
            // Qt Charts elides what does not fit (axis labels and titles, chart titles, legend entries) with "...".
            for (QGraphicsItem* item : frame->chart()->scene()->items()) {
                if (!item->isVisible())
                    continue;
                QString text;
                if (auto* t = dynamic_cast<QGraphicsTextItem*>(item))
                    text = t->toPlainText();
                else if (auto* t = dynamic_cast<QGraphicsSimpleTextItem*>(item))
                    text = t->text();
                if (!text.endsWith(QStringLiteral("...")))
                    continue;
                bool inLegend = false;
                for (QGraphicsItem* p = item; p && !inLegend; p = p->parentItem())
                    inLegend = p == frame->chart()->legend();
                const QString where = QStringLiteral("%1 (%2 px wide)").arg(text).arg(frame->width());
                if (inLegend && frame->chart()->legend()->showToolTips())
                    legendCut << where; // a legend entry longer than the legend: its tooltip has it whole
                else
                    cut << where;
            }
        }
    }
    QVERIFY2(cut.isEmpty(), qPrintable(cut.join(QLatin1Char('\n'))));
    qInfo("legend entries elided (whole in their tooltips): %s", qPrintable(legendCut.join(QStringLiteral("; "))));
    window.workspace()->setModified(false);
}

void TestGuiPolish::usableAtTwiceTheScale()
{
    // Qt applies QT_SCALE_FACTOR when the application starts: run this test's child in a process of its own.
    QProcess child;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert(QStringLiteral("QT_SCALE_FACTOR"), QStringLiteral("2"));
    env.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
    env.insert(QStringLiteral("QUANTSCOPE_SCALED_CHILD"), QStringLiteral("1"));
    child.setProcessEnvironment(env);
    child.setProcessChannelMode(QProcess::MergedChannels);
    child.start(QCoreApplication::applicationFilePath(), {QStringLiteral("scaledTwiceChild")});
    QVERIFY(child.waitForFinished(300000));
    const QString output = QString::fromUtf8(child.readAll());
    QVERIFY2(child.exitCode() == 0, qPrintable(output));
    QVERIFY2(output.contains(QStringLiteral("PASS   : TestGuiPolish::scaledTwiceChild")), qPrintable(output));
}

void TestGuiPolish::scaledTwiceChild()
{
    if (qEnvironmentVariableIsEmpty("QUANTSCOPE_SCALED_CHILD"))
        QSKIP("run by usableAtTwiceTheScale with QT_SCALE_FACTOR=2");
    MainWindow window(false);
    window.resize(1440, 900); // 2880 x 1800 device pixels, a common 2x laptop screen
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QCOMPARE(window.devicePixelRatio(), 2.0);
    window.openRules(kW8A8);
    QVERIFY(open(window));
    QTest::qWait(200);
    // The toolbar: every action shown (no overflow menu), each button at least its size hint (no clipped text).
    for (QToolBar* bar : window.findChildren<QToolBar*>()) {
        if (!bar->isVisible())
            continue;
        for (QToolButton* button : bar->findChildren<QToolButton*>()) {
            if (button->objectName() == QStringLiteral("qt_toolbar_ext_button")) {
                QVERIFY2(!button->isVisible(), "the toolbar overflows at 2x");
                continue;
            }
            if (!button->isVisible())
                continue;
            QVERIFY2(button->width() >= button->sizeHint().width() && button->height() >= button->sizeHint().height(),
                     qPrintable(button->text()));
            // Its icon is drawn at the screen's density: a pixmap of twice the logical size.
            if (!button->icon().isNull()) {
                const QPixmap pixmap = button->icon().pixmap(bar->iconSize(), 2.0);
                QVERIFY2(pixmap.width() >= bar->iconSize().width() * 2 - 1, qPrintable(button->text()));
            }
        }
    }
    // The layer tree: rows as tall as their text, the layer names not elided.
    QTreeView* view = window.layerView();
    const QFontMetrics fm = view->fontMetrics();
    const QModelIndex first = view->model()->index(0, 0);
    QVERIFY(view->visualRect(first).height() >= fm.height());
    const QModelIndex child = view->model()->index(0, 0, first);
    const QRect cell = view->visualRect(child);
    QVERIFY2(cell.width() >= fm.horizontalAdvance(child.data().toString()),
             qPrintable(QStringLiteral("%1 in %2 px").arg(child.data().toString()).arg(cell.width())));
    QDir().mkpath(kScreenshots);
    const QImage shot = window.grab().toImage();
    QCOMPARE(shot.width(), 2 * window.width());
    QVERIFY(shot.save(kScreenshots + QStringLiteral("/scaled_2x.png")));
    qInfo("screenshot: %s", qPrintable(QDir::cleanPath(kScreenshots + QStringLiteral("/scaled_2x.png"))));
    window.workspace()->setModified(false);
}

QTEST_MAIN(TestGuiPolish)
#include "tst_gui_polish.moc"
