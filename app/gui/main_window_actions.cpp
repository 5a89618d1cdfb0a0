#include "gui/main_window.h"

// The main window's menus, toolbar and status bar: the actions, what enables
// them, the job progress shown for the user's jobs, and the export action.

#include <QAction>
#include <QActionGroup>
#include <QApplication>
#include <QClipboard>
#include <QDockWidget>
#include <QFileDialog>
#include <QFileInfo>
#include <QKeySequence>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QProgressBar>
#include <QRegularExpression>
#include <QStatusBar>
#include <QStyle>
#include <QToolBar>
#include <QToolButton>
#include <QTreeView>
#include <QUndoStack>

#include "core/error.h"
#include "gui/export_dialog.h"
#include "gui/export_options_dialog.h"
#include "gui/help_dialogs.h"
#include "gui/theme.h"
#include "gui/workspace.h"
#include "widgets/charts/rule_comparison_view.h"
#include "widgets/charts/search_curve_view.h"
#include "widgets/jobs/job_tracker.h"
#include "widgets/rule_table_model.h"

namespace qs {

void MainWindow::createActions()
{
    QMenu* file = menuBar()->addMenu(tr("&File"));
    QAction* open = file->addAction(QIcon::fromTheme(QStringLiteral("document-open"), style()->standardIcon(QStyle::SP_DialogOpenButton)),
                                    tr("&Open Model…"), this, [this] {
                                        const QString path = QFileDialog::getOpenFileName(
                                            this, tr("Open model"), lastFolder(QStringLiteral("model")),
                                            tr("Models (*.onnx *.safetensors *.index.json *.h5 *.hdf5 *.keras *.npz "
                                               "*.npy);;Sessions (*.qssession);;All files (*)"));
                                        if (!path.isEmpty())
                                            openPath(path);
                                    });
    open->setShortcut(QKeySequence::Open);
    file->addAction(tr("Open &Folder…"), this, [this] {
        // A Hugging Face checkpoint folder: config.json beside its safetensors files.
        const QString path = QFileDialog::getExistingDirectory(this, tr("Open Hugging Face folder"),
                                                               lastFolder(QStringLiteral("model")));
        if (!path.isEmpty())
            openPath(path);
    });
    recentMenu_ = file->addMenu(tr("Open &Recent"));
    file->addSeparator();
    file->addAction(tr("Open &Session…"), this, [this] {
        const QString path = QFileDialog::getOpenFileName(this, tr("Open session"), lastFolder(QStringLiteral("session")),
                                                          tr("Sessions (*.qssession)"));
        if (!path.isEmpty())
            openPath(path);
    });
    saveSession_ = file->addAction(QIcon::fromTheme(QStringLiteral("document-save"), style()->standardIcon(QStyle::SP_DialogSaveButton)), tr("&Save Session"), this, [this] {
        if (workspace_->sessionPath().isEmpty())
            saveSessionAs();
        else
            saveSession(workspace_->sessionPath());
    });
    saveSession_->setShortcut(QKeySequence::Save);
    file->addAction(tr("Save Session &As…"), this, [this] { saveSessionAs(); })->setShortcut(QKeySequence::SaveAs);
    file->addSeparator();
    file->addAction(tr("Open R&ules…"), this, [this] {
        const QString path = QFileDialog::getOpenFileName(this, tr("Open rules"), lastFolder(QStringLiteral("rules")),
                                                          tr("Rule files (*.json)"));
        if (!path.isEmpty())
            openRules(path);
    });
    saveRules_ = file->addAction(tr("Save Rules As…"), this, [this] {
        const QString path = QFileDialog::getSaveFileName(this, tr("Save rules"), lastFolder(QStringLiteral("rules")),
                                                          tr("Rule files (*.json)"));
        if (path.isEmpty())
            return;
        try {
            workspace_->saveRules(path);
            setLastFolder(QStringLiteral("rules"), path);
            statusBar()->showMessage(tr("Rules saved to %1").arg(path), 4000);
        } catch (const Error& e) {
            showError(tr("Cannot save the rules"), QString::fromUtf8(e.what()));
        }
    });
    file->addSeparator();
    QMenu* exportMenu = file->addMenu(tr("&Export"));
    exportCheckpoint_ = exportMenu->addAction(tr("Quantized &Checkpoint…"), this, [this] { startExport(ExportFormat::Checkpoint); });
    exportOnnx_ = exportMenu->addAction(tr("ONNX &QDQ Model…"), this, [this] { startExport(ExportFormat::Onnx); });
    exportOdml_ = exportMenu->addAction(tr("&ODML Annotations…"), this, [this] { startExport(ExportFormat::Odml); });
    exportGguf_ = exportMenu->addAction(tr("&GGUF for llama.cpp…"), this, [this] { startExport(ExportFormat::Gguf); });
    exportTflite_ = exportMenu->addAction(tr("&LiteRT Model (.tflite)…"), this, [this] { startExport(ExportFormat::Tflite); });
    file->addSeparator();
    QAction* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
    quit->setShortcut(QKeySequence::Quit);
    quit->setMenuRole(QAction::QuitRole);

    QMenu* edit = menuBar()->addMenu(tr("&Edit"));
    QAction* undo = workspace_->undoStack()->createUndoAction(this, tr("&Undo"));
    undo->setShortcut(QKeySequence::Undo);
    undo->setIcon(QIcon::fromTheme(QStringLiteral("edit-undo"), style()->standardIcon(QStyle::SP_ArrowBack)));
    QAction* redo = workspace_->undoStack()->createRedoAction(this, tr("&Redo"));
    redo->setShortcut(QKeySequence::Redo);
    redo->setIcon(QIcon::fromTheme(QStringLiteral("edit-redo"), style()->standardIcon(QStyle::SP_ArrowForward)));
    edit->addAction(undo);
    edit->addAction(redo);
    edit->addSeparator();
    copyRules_ = edit->addAction(tr("&Copy Rules as JSON"), this, [this] {
        QApplication::clipboard()->setText(QString::fromStdString(workspace_->rules()->toJsonText()));
        statusBar()->showMessage(tr("Rules copied to the clipboard as JSON"), 3000);
    });
    copyRules_->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_C));
    edit->addAction(tr("Find Layer"), this, [this] { filter_->setFocus(); })->setShortcut(QKeySequence::Find);

    QMenu* run = menuBar()->addMenu(tr("&Run"));
    calibData_ = run->addAction(QIcon::fromTheme(QStringLiteral("document-properties"), style()->standardIcon(QStyle::SP_FileDialogDetailedView)), tr("Calibration &Data…"), this, [this] { editData(true); });
    evalData_ = run->addAction(QIcon::fromTheme(QStringLiteral("document-properties"), style()->standardIcon(QStyle::SP_FileDialogDetailedView)), tr("&Evaluation Data…"), this, [this] { editData(false); });
    run->addSeparator();
    calibrate_ = run->addAction(QIcon::fromTheme(QStringLiteral("system-run"), style()->standardIcon(QStyle::SP_MediaSeekForward)), tr("&Calibrate"), this,
                                [this] { workspace_->calibrate(); });
    calibrate_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_K));
    evaluate_ = run->addAction(QIcon::fromTheme(QStringLiteral("media-playback-start"), style()->standardIcon(QStyle::SP_MediaPlay)), tr("E&valuate"), this,
                               [this] { workspace_->evaluate(); });
    evaluate_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_E));
    sensitivityOne_ = run->addAction(tr("&Sensitivity: One Layer at a Time"), this,
                                     [this] { workspace_->runSensitivity(SensitivityKind::OneLayer); });
    sensitivityAllButOne_ = run->addAction(tr("Sensitivity: &All but One"), this,
                                           [this] { workspace_->runSensitivity(SensitivityKind::AllButOne); });
    // The one-layer ranking again with every layer rounded by an algorithm instead of its rule's: which layers it
    // rescues.
    sensitivityAlgorithm_ = run->addMenu(tr("Sensitivity &with an Algorithm"));
    for (const WeightAlgorithmInfo& info : allWeightAlgorithms()) {
        if (info.kind == WeightAlgorithmKind::Rtn)
            continue;
        const std::string name(info.name);
        QAction* a = sensitivityAlgorithm_->addAction(
            tr("One Layer at a Time, Rounded by %1").arg(QString::fromStdString(name)), this,
            [this, name] { workspace_->runSensitivity(SensitivityKind::OneLayer, WeightAlgorithm::parse(name)); });
        a->setToolTip(QString::fromUtf8(info.summary.data(), qsizetype(info.summary.size())));
    }
    sensitivityAlgorithm_->setToolTipsVisible(true);
    cancelJobs_ = run->addAction(QIcon::fromTheme(QStringLiteral("process-stop"), style()->standardIcon(QStyle::SP_BrowserStop)),
                                 tr("Ca&ncel Jobs"), this, [this] {
                                     workspace_->jobs()->cancelUserFacing();
                                     pendingCalibrate_ = pendingEvaluate_ = false;
                                 });
    cancelJobs_->setShortcut(QKeySequence(Qt::Key_Escape));
    cancelJobs_->setShortcutContext(Qt::WindowShortcut);

    viewMenu_ = menuBar()->addMenu(tr("&View"));
    for (QDockWidget* dock : findChildren<QDockWidget*>())
        viewMenu_->addAction(dock->toggleViewAction());
    viewMenu_->addSeparator();
    viewMenu_->addAction(tr("Reset Layout"), this, [this] { restoreState(defaultState_); });
    viewMenu_->addAction(tr("Expand All Layers"), this, [this] { layerView_->expandAll(); });
    createThemeMenu();

    QMenu* help = menuBar()->addMenu(tr("&Help"));
    help->addAction(tr("&User Guide"), this, [this] {
        auto* guide = new UserGuideDialog(this);
        guide->setAttribute(Qt::WA_DeleteOnClose);
        guide->show();
    })->setShortcut(QKeySequence::HelpContents);
    help->addAction(tr("&Keyboard Shortcuts"), this, [this] {
        QMessageBox box(this);
        box.setWindowTitle(tr("Keyboard Shortcuts"));
        box.setTextFormat(Qt::RichText);
        box.setText(shortcutsHtml(this));
        box.exec();
    });
    help->addSeparator();
    help->addAction(tr("&About Quantscope"), this, [this] {
        QMessageBox::about(this, tr("About Quantscope"), aboutHtml());
    })->setMenuRole(QAction::AboutRole);
    help->addAction(tr("About &Qt"), qApp, &QApplication::aboutQt)->setMenuRole(QAction::AboutQtRole);

    auto* bar = addToolBar(tr("Main"));
    bar->setObjectName(QStringLiteral("MainToolBar"));
    bar->addAction(open);
    bar->addAction(saveSession_);
    bar->addSeparator();
    bar->addAction(undo);
    bar->addAction(redo);
    bar->addSeparator();
    bar->addAction(calibData_);
    bar->addAction(calibrate_);
    bar->addAction(evalData_);
    bar->addAction(evaluate_);
    bar->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
    rebuildRecentMenu();
}

void MainWindow::createThemeMenu()
{
    QMenu* menu = viewMenu_->addMenu(tr("&Theme"));
    auto* group = new QActionGroup(this);
    const ThemeChoice current = loadThemeChoice();
    const std::pair<ThemeChoice, QString> choices[] = {{ThemeChoice::System, tr("Follow the &Desktop")},
                                                       {ThemeChoice::Light, tr("&Light")},
                                                       {ThemeChoice::Dark, tr("&Dark")}};
    for (const auto& [choice, label] : choices) {
        QAction* a = menu->addAction(label, this, [choice = choice] {
            saveThemeChoice(choice);
            applyTheme(choice);
        });
        a->setCheckable(true);
        a->setChecked(choice == current);
        a->setData(themeChoiceName(choice));
        group->addAction(a);
    }
}

void MainWindow::updateIconsForPalette()
{
    static const char* const kOriginal = "qsOriginalIcon";
    for (QAction* a : findChildren<QAction*>()) {
        QVariant original = a->property(kOriginal);
        if (!original.isValid()) {
            if (a->icon().isNull())
                continue;
            original = QVariant::fromValue(a->icon());
            a->setProperty(kOriginal, original);
        }
        a->setIcon(legibleIcon(iconAtEverySize(original.value<QIcon>()), palette()));
    }
}

void MainWindow::createStatusBar()
{
    statusModel_ = new QLabel(tr("No model — File ▸ Open, or drop a model here"), this);
    statusJob_ = new QLabel(this);
    progress_ = new QProgressBar(this);
    progress_->setMaximumWidth(180);
    progress_->setRange(0, 1000);
    progress_->setTextVisible(true);
    cancel_ = new QToolButton(this);
    cancel_->setDefaultAction(cancelJobs_);
    cancel_->setAutoRaise(true);
    statusBar()->addWidget(statusModel_, 1);
    statusBar()->addPermanentWidget(statusJob_);
    statusBar()->addPermanentWidget(progress_);
    statusBar()->addPermanentWidget(cancel_);
    progress_->hide();
    cancel_->hide();
    JobTracker* jobs = workspace_->jobs();
    connect(jobs, &JobTracker::jobStarted, this, [this](JobKind kind, const QString& title) {
        if (!jobKindInfo(kind).userFacing)
            return; // quick and frequent (weights): no progress bar
        statusJob_->setText(title + QStringLiteral("…"));
        progress_->setValue(0);
        progress_->show();
        cancel_->show();
        updateActions();
    });
    connect(jobs, &JobTracker::jobProgress, this,
            [this](JobKind kind, const QString& title, double fraction, const QString& step, double left) {
                if (!jobKindInfo(kind).userFacing)
                    return;
                progress_->setValue(int(fraction * 1000));
                QString text = title;
                if (!step.isEmpty())
                    text += QStringLiteral(": ") + step;
                if (left >= 0)
                    text += tr(" — about %1 s left").arg(qRound(left));
                statusJob_->setText(text);
            });
    connect(jobs, &JobTracker::jobEnded, this, [this, jobs](JobKind kind, const QString& title, bool cancelled) {
        if (cancelled && jobKindInfo(kind).userFacing)
            log(tr("%1: cancelled").arg(title), LogLevel::Info);
        if (!jobs->isUserFacingRunning()) {
            progress_->hide();
            cancel_->hide();
            statusJob_->clear();
        } else {
            // Another job runs on: show it, never the one that just ended (until the next poll).
            statusJob_->setText(jobs->userFacingTitle() + QStringLiteral("…"));
        }
        updateActions();
    });
}

void MainWindow::updateActions()
{
    const bool model = workspace_->model() != nullptr;
    const bool runnable = model && workspace_->canRun();
    JobTracker* jobs = workspace_->jobs();
    calibData_->setEnabled(runnable);
    evalData_->setEnabled(runnable);
    calibrate_->setEnabled(runnable && workspace_->calibrationData() && !jobs->isRunning(JobKind::Calibrate));
    evaluate_->setEnabled(runnable && workspace_->evaluationData() && !jobs->isRunning(JobKind::Evaluate));
    for (QAction* sensitivity : {sensitivityOne_, sensitivityAllButOne_}) {
        sensitivity->setEnabled(runnable && workspace_->evaluationData() &&
                                !jobs->isRunning(JobKind::Sensitivity));
        sensitivity->setToolTip(tr("Rank the layers by output degradation on the evaluation data"));
    }
    sensitivityAlgorithm_->setEnabled(runnable && workspace_->evaluationData() && workspace_->calibrationData() &&
                                      !jobs->isRunning(JobKind::Sensitivity));
    sensitivityAlgorithm_->setToolTip(workspace_->calibrationData()
                                          ? tr("Rank the layers with each one's weights rounded by the algorithm")
                                          : tr("Set the calibration data first: the algorithms round from it"));
    const QString why = !model ? tr("Open a model first") : !runnable ? tr("The runtime cannot run this model") : QString();
    calibrate_->setToolTip(why.isEmpty() ? (workspace_->calibrationData() ? tr("Run the model on the calibration data")
                                                                          : tr("Set the calibration data first"))
                                         : why);
    evaluate_->setToolTip(why.isEmpty() ? (workspace_->evaluationData() ? tr("Run float and quantized side by side")
                                                                        : tr("Set the evaluation data first"))
                                        : why);
    saveSession_->setEnabled(model);
    search_->setRunEnabled(runnable && workspace_->evaluationData() && !jobs->isRunning(JobKind::Search),
                           !model                          ? tr("Open a model first")
                           : !runnable                     ? tr("The runtime cannot run this model")
                           : !workspace_->evaluationData() ? tr("Set the evaluation data first")
                                                           : tr("A search is running"));
    const bool weightsCurrent = model && workspace_->plan() && workspace_->weightsGeneration() == workspace_->generation() &&
                                workspace_->rules()->allValid();
    const bool idle = !jobs->isRunning(JobKind::Export);
    comparison_->setKeepEnabled(
        model && workspace_->plan() && workspace_->weightsGeneration() == workspace_->generation(),
        !model ? tr("Open a model first") : tr("The weights of the current rules are being computed"));
    exportCheckpoint_->setEnabled(weightsCurrent && idle);
    exportOnnx_->setEnabled(weightsCurrent && idle && workspace_->model()->format == "onnx");
    // Exports that write activation scales need a calibration of the current plan, not only its data.
    const bool calibrated = model && workspace_->plan() && workspace_->statistics() &&
                            workspace_->statistics()->covers(*workspace_->plan());
    const bool onnxNeedsCalibration = model && workspace_->exploration().needsCalibration() && !calibrated;
    exportOnnx_->setEnabled(exportOnnx_->isEnabled() && !onnxNeedsCalibration);
    exportOdml_->setEnabled(weightsCurrent && idle && runnable && calibrated);
    exportGguf_->setEnabled(weightsCurrent && idle && workspace_->model()->format == "huggingface");
    const bool odml = model && workspace_->exploration().mode() == QuantizationMode::Odml;
    exportTflite_->setEnabled(weightsCurrent && idle && runnable && odml && calibrated);
    const QString calibrateFirst = !workspace_->calibrationData()
                                       ? tr("Needs a calibration: set the calibration data, then Run ▸ Calibrate")
                                       : tr("Needs a calibration of the current rules: Run ▸ Calibrate");
    const QString exportWhy = !model ? tr("Open a model first")
                              : !workspace_->rules()->allValid() ? tr("Fix the rule errors first")
                              : !weightsCurrent ? tr("The weights of the current rules are being computed")
                                                : QString();
    exportCheckpoint_->setToolTip(exportWhy);
    exportOnnx_->setToolTip(exportWhy.isEmpty() && model && workspace_->model()->format != "onnx"
                                ? tr("Only ONNX models can be exported as QDQ")
                            : exportWhy.isEmpty() && onnxNeedsCalibration ? calibrateFirst
                                                                          : exportWhy);
    exportOdml_->setToolTip(exportWhy.isEmpty() && !calibrated ? calibrateFirst : exportWhy);
    exportGguf_->setToolTip(exportWhy.isEmpty() && model && workspace_->model()->format != "huggingface"
                                ? tr("GGUF is written from a Llama-family Hugging Face folder")
                                : exportWhy);
    exportTflite_->setToolTip(!exportWhy.isEmpty() ? exportWhy
                              : !odml ? tr("The LiteRT model is written in ODML mode: open the model in ODML mode")
                              : !calibrated ? calibrateFirst
                                            : QString());
}

void MainWindow::startExport(ExportFormat format)
{
    ExportChoices choices = loadExportChoices();
    if (hasExportOptions(format)) {
        ExportOptionsDialog options(format, choices, this);
        if (options.exec() != QDialog::Accepted)
            return;
        choices = options.choices();
        saveExportChoices(choices);
    }
    QFileDialog* dialog = newExportFileDialog(format, lastFolder(QStringLiteral("export")), this);
    dialog->setAttribute(Qt::WA_DeleteOnClose, false);
    const bool accepted = dialog->exec() == QDialog::Accepted && !dialog->selectedFiles().isEmpty();
    const QString chosen = accepted ? dialog->selectedFiles().first() : QString();
    delete dialog;
    if (chosen.isEmpty())
        return;
    // A native dialog may ignore the default suffix: the format's is added to a bare name here too.
    exportTo(format, withDefaultSuffix(chosen, exportSuffix(format)), choices);
}

void MainWindow::exportTo(ExportFormat format, const QString& path, const ExportChoices& choices)
{
    setLastFolder(QStringLiteral("export"), path);
    const ExportInputs in = workspace_->exploration().snapshot();
    std::function<ExportOutcome(const CancellationToken&, const ProgressCallback&)> work =
        [format, in, path, choices](const CancellationToken& cancel, const ProgressCallback& progress) {
            switch (format) {
            case ExportFormat::Checkpoint:
                return exportCheckpointChecked(in, path, cancel, progress);
            case ExportFormat::Onnx:
                return exportOnnxChecked(in, path, cancel, progress, choices.onnxOptions());
            case ExportFormat::Gguf:
                return exportGgufChecked(in, path, cancel, progress);
            case ExportFormat::Tflite:
                return exportTfliteChecked(in, path, cancel, progress, choices.tfliteInt8Io);
            case ExportFormat::Odml:
                break;
            }
            return exportOdmlChecked(in, path, cancel, progress);
        };
    workspace_->jobs()->start<ExportOutcome>(
        JobKind::Export, tr("Exporting %1").arg(QFileInfo(path).fileName()), work,
        [this](ExportOutcome outcome) {
            // One log line per line of the report (its paragraphs, list items and rows), not one run-on line.
            QString text = ExportResultDialog::summaryHtml(outcome);
            text.replace(QRegularExpression(QStringLiteral("<(br|/p|/li|/tr|/h[1-6])[^>]*>"),
                                            QRegularExpression::CaseInsensitiveOption),
                         QStringLiteral("\n"));
            text.remove(QRegularExpression(QStringLiteral("<[^>]*>")));
            // The report's text was escaped for HTML (toHtmlEscaped); the log takes it as written.
            text.replace(QStringLiteral("&lt;"), QStringLiteral("<"))
                .replace(QStringLiteral("&gt;"), QStringLiteral(">"))
                .replace(QStringLiteral("&quot;"), QStringLiteral("\""))
                .replace(QStringLiteral("&amp;"), QStringLiteral("&"));
            const LogLevel level = outcome.allChecksPassed() ? LogLevel::Info : LogLevel::Warning;
            for (const QString& line : text.split(QLatin1Char('\n'), Qt::SkipEmptyParts))
                if (!line.trimmed().isEmpty())
                    log(line.trimmed(), level);
            if (askUser_) {
                ExportResultDialog dialog(outcome, this);
                dialog.exec();
            }
        },
        [this](const QString& message) { showError(tr("Export failed"), message); });
}

} // namespace qs
