#pragma once
// The main window: docks for Layers (tree by module path with rule and error
// columns, filterable), Rules (the rule editor), Inspector, Charts and Log; the
// File/Edit/Run/View/Help menus; a status bar with the running job's progress,
// time estimate and cancel button. It wires actions to the Workspace and shows
// what the Workspace holds; it computes nothing itself. The menus, toolbar,
// status bar and what enables their actions are in main_window_actions.cpp.

#include <memory>
#include <optional>
#include <string>

#include <QMainWindow>
#include <QStringList>

class QAction;
class QLabel;
class QLineEdit;
class QCheckBox;
class QMenu;
class QProgressBar;
class QSortFilterProxyModel;
class QTextBrowser;
class QTextEdit;
class QTimer;
class QToolButton;
class QTreeView;

namespace qs {

class Workspace;
enum class LogLevel;
enum class ExportFormat;
struct ExportChoices;
class RuleEditor;
class RuleComparisonView;
class SearchCurveView;
class GraphView;
class SummaryBar;
class StallWatchdog;
class JobSlot;
struct AlgorithmComparison;
struct LayerInspection;

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    // `askUser` false: no modal questions (recovery offer, unsaved changes);
    // the tests use it.
    explicit MainWindow(bool askUser = true, QWidget* parent = nullptr);
    ~MainWindow() override;

    Workspace* workspace() const { return workspace_; }
    QTreeView* layerView() const { return layerView_; }
    QSortFilterProxyModel* layerProxy() const { return proxy_; }
    RuleEditor* ruleEditor() const { return ruleEditor_; }
    QTextBrowser* inspector() const { return inspector_; }
    SummaryBar* summaryBar() const { return summary_; }
    RuleComparisonView* comparisonView() const { return comparison_; }
    SearchCurveView* searchView() const { return search_; }
    GraphView* graphView() const { return graph_; }
    QLabel* statusJobLabel() const { return statusJob_; }
    QTextEdit* logView() const { return log_; }

    // Opening a file by its kind: a session (.qssession), rules (.json) or a model.
    void openPath(const QString& path);
    void openModel(const QString& path);
    // Loads a rule file; an error goes to a dialog (or the log when not asking).
    void openRules(const QString& path);
    // Calibrate / Evaluate with data from a file (command line).
    void setCalibrationFile(const QString& path);
    void setEvaluationFile(const QString& path);
    // Runs calibration then evaluation, whichever has data, once the model and
    // the weights are ready (the command line's --calib / --eval).
    void runWhenReady(bool calibrate, bool evaluate);

    // Writes the export to `path` with `choices` as a job (what File ▸ Export does
    // after its options and save dialogs); its report goes to the log, a line per line.
    void exportTo(ExportFormat format, const QString& path, const ExportChoices& choices);

    // The autosave file and whether a previous run left one behind.
    static QString autosavePath();

protected:
    void closeEvent(QCloseEvent* event) override;
    void changeEvent(QEvent* event) override;
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;

private:
    enum class ChartsUpdate { Model, Plan, Statistics, Evaluation, Sensitivity, Selection };
    void createDocks();
    QWidget* createCharts();
    void updateCharts(ChartsUpdate what);
    void createActions();
    void createStatusBar();
    void createThemeMenu();
    // Every action's icon redrawn to stay visible on the current palette and sized for 2x screens
    // (theme.h: legibleIcon, iconAtEverySize).
    void updateIconsForPalette();
    void readSettings();
    void writeSettings();
    void updateActions();
    void updateTitle();
    void updateInspector();
    // The Inspector's algorithm against RTN for the selected layer: the comparison
    // when it is current, else starts its job (updateInspector again when it lands).
    void inspectAlgorithms(size_t layer, LayerInspection& in);
    void updateSummary();
    void createComparisonAndSearch();
    void createGraph();
    // The graph view's colours from the results the workspace holds now.
    void updateGraphColours();
    void addRecentFile(const QString& path);
    void rebuildRecentMenu();
    void log(const QString& text, LogLevel level);
    void showError(const QString& title, const QString& message);
    QString lastFolder(const QString& key) const;
    void setLastFolder(const QString& key, const QString& file);
    bool saveSession(const QString& path);
    bool saveSessionAs();
    bool confirmDiscard();
    void autosave();
    void offerRecovery();
    void editData(bool calibration);
    void maybeRunPending();
    // Asks for the export's options (where it has any) and its file, then exportTo.
    void startExport(ExportFormat format);
    std::optional<size_t> selectedLayer() const;

    bool askUser_;
    Workspace* workspace_;
    QTreeView* layerView_ = nullptr;
    QSortFilterProxyModel* proxy_ = nullptr;
    QLineEdit* filter_ = nullptr;
    QCheckBox* filterRegex_ = nullptr;
    RuleEditor* ruleEditor_ = nullptr;
    QTextBrowser* inspector_ = nullptr;
    QTextEdit* log_ = nullptr;
    QWidget* charts_ = nullptr; // the ChartsPanel, when the build has it
    SummaryBar* summary_ = nullptr;
    RuleComparisonView* comparison_ = nullptr;
    SearchCurveView* search_ = nullptr;
    GraphView* graph_ = nullptr;
    QString lastRulesFile_; // names A in the A/B view
    QMenu* recentMenu_ = nullptr;
    QMenu* viewMenu_ = nullptr;
    QLabel* statusJob_ = nullptr;
    QProgressBar* progress_ = nullptr;
    QToolButton* cancel_ = nullptr;
    QLabel* statusModel_ = nullptr;
    QTimer* autosaveTimer_ = nullptr;
    StallWatchdog* watchdog_ = nullptr;
    // The Inspector's algorithm comparison (JobKind::AlgorithmComparison on the workspace's tracker).
    std::unique_ptr<JobSlot> inspectorJob_;
    std::shared_ptr<const AlgorithmComparison> inspectorAlgorithms_;
    std::string inspectorAlgorithmsKey_; // layer, statistics and rule it is (or is being computed) for
    QString inspectorAlgorithmsNote_;    // without a comparison: "comparing…" or the job's error

    QAction* saveSession_ = nullptr;
    QAction* saveRules_ = nullptr;
    QAction* copyRules_ = nullptr;
    QAction* calibrate_ = nullptr;
    QAction* evaluate_ = nullptr;
    QAction* sensitivityOne_ = nullptr;
    QAction* sensitivityAllButOne_ = nullptr;
    QMenu* sensitivityAlgorithm_ = nullptr; // one action per algorithm but rtn
    QAction* cancelJobs_ = nullptr;
    QAction* calibData_ = nullptr;
    QAction* evalData_ = nullptr;
    QAction* exportCheckpoint_ = nullptr;
    QAction* exportOnnx_ = nullptr;
    QAction* exportOdml_ = nullptr;
    QAction* exportGguf_ = nullptr;
    QAction* exportTflite_ = nullptr;

    bool pendingCalibrate_ = false;
    bool pendingEvaluate_ = false;
    QByteArray defaultState_;
};

} // namespace qs
