#include "gui/main_window.h"

#include <algorithm>
#include <cstdint>
#include <iterator>

#include <QApplication>
#include <QCheckBox>
#include <QCloseEvent>
#include <QCoreApplication>
#include <QDateTime>
#include <QDir>
#include <QDockWidget>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QHeaderView>
#include <QHBoxLayout>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QMenu>
#include <QMessageBox>
#include <QMimeData>
#include <QRegularExpression>
#include <QScreen>
#include <QSettings>
#include <QSortFilterProxyModel>
#include <QStandardPaths>
#include <QStatusBar>
#include <QTextBrowser>
#include <QTextEdit>
#include <QTime>
#include <QTimer>
#include <QTreeView>
#include <QUndoStack>
#include <QVBoxLayout>

#include "core/error.h"
#include "gui/data_dialog.h"
#include "gui/stall_watchdog.h"
#include "gui/theme.h"
#include "gui/workspace.h"
#include "rules/regex_syntax.h"
#include "runtime/activation_calibration.h"
#include "session/algorithm_comparison.h"
#if QUANTSCOPE_HAS_CHARTS
#include "widgets/charts/charts_panel.h"
#endif
#include "widgets/charts/rule_comparison_view.h"
#include "widgets/charts/search_curve_view.h"
#include "widgets/graph_view.h"
#include "widgets/jobs/job_tracker.h"
#include "widgets/frozen_column_tree_view.h"
#include "widgets/layer_inspector.h"
#include "widgets/layer_tree_model.h"
#include "widgets/rule_editor.h"
#include "widgets/rule_field_delegate.h"
#include "widgets/rule_table_model.h"
#include "widgets/summary_bar.h"

// The app's resources live in quantscope_gui, a static library: registered by hand.
static void initAppResources()
{
    Q_INIT_RESOURCE(app);
}

namespace qs {

namespace {

constexpr int kMaxRecentFiles = 8;
const char* const kSessionSuffix = "qssession";

bool isSessionFile(const QString& path)
{
    return path.endsWith(QLatin1Char('.') + QLatin1String(kSessionSuffix));
}

bool isRuleFile(const QString& path)
{
    return path.endsWith(QLatin1String(".json")) && !path.endsWith(QLatin1String(".index.json"));
}

} // namespace

MainWindow::MainWindow(bool askUser, QWidget* parent)
    : QMainWindow(parent), askUser_(askUser), workspace_(new Workspace(this))
{
    initAppResources();
    setObjectName(QStringLiteral("MainWindow"));
    setWindowIcon(QIcon(QStringLiteral(":/icons/quantscope.svg")));
    setAcceptDrops(true);
    setDockNestingEnabled(true);
    applyTheme(loadThemeChoice());
    createDocks();
    createActions();
    createStatusBar();
    updateIconsForPalette();
    defaultState_ = saveState();
    readSettings();

    connect(workspace_, &Workspace::logMessage, this, &MainWindow::log);
    connect(workspace_, &Workspace::modelLoaded, this, [this] {
        // The settings file is written after this turn: opening a model keeps the GUI thread short.
        QTimer::singleShot(0, this, [this, path = workspace_->modelPath()] { addRecentFile(path); });
        layerView_->expandAll();
        for (int c = 0; c < LayerTreeModel::ColumnCount; ++c)
            layerView_->resizeColumnToContents(c);
        // Result columns fill in later: leave room for "48.4 dB (stale)"; highlighted rows are bold.
        const int result = layerView_->fontMetrics().horizontalAdvance(QStringLiteral("00.0 dB (stale)")) + 12;
        for (const int c : {int(LayerTreeModel::WeightSqnrColumn), int(LayerTreeModel::IsolatedSqnrColumn),
                            int(LayerTreeModel::AccumulatedSqnrColumn)})
            layerView_->setColumnWidth(c, std::max(layerView_->columnWidth(c), result));
        for (const int c : {int(LayerTreeModel::NameColumn), int(LayerTreeModel::OpTypeColumn), int(LayerTreeModel::ShapeColumn)})
            layerView_->setColumnWidth(c, layerView_->columnWidth(c) + 16);
        // A very long path does not push the figures out of view: the layer column takes at most what the key
        // columns leave (and never under 200 px); its text is elided in the middle, the full path in the tooltip.
        int keyColumns = 0;
        for (const int c : {int(LayerTreeModel::WeightQTypeColumn), int(LayerTreeModel::ActQTypeColumn),
                            int(LayerTreeModel::WeightSqnrColumn), int(LayerTreeModel::IsolatedSqnrColumn),
                            int(LayerTreeModel::AccumulatedSqnrColumn)})
            keyColumns += layerView_->columnWidth(c);
        const int room = std::max(200, layerView_->viewport()->width() - keyColumns);
        layerView_->setColumnWidth(LayerTreeModel::NameColumn, std::min(layerView_->columnWidth(LayerTreeModel::NameColumn), room));
        const auto model = workspace_->model();
        statusModel_->setText(tr("%1 · %2 layers · %3 parameters%4")
                                  .arg(QFileInfo(workspace_->modelPath()).fileName())
                                  .arg(model->layers.size())
                                  .arg(QLocale().toString(qlonglong(model->parameterCount())))
                                  .arg(workspace_->unsupportedOps().isEmpty()
                                           ? QString()
                                           : tr(" · unsupported ops: %1 (weight-only)")
                                                 .arg(workspace_->unsupportedOps().join(QStringLiteral(", ")))));
        statusBar()->showMessage(tr("Model loaded"), 4000);
        updateCharts(ChartsUpdate::Model);
        updateActions();
        updateTitle();
        updateInspector();
        updateSummary();
        search_->setResult(nullptr, nullptr);
    });
    connect(workspace_, &Workspace::modelFailed, this,
            [this](const QString& message) { showError(tr("Cannot open the model"), message); });
    // A rule edit shows (or clears) its error in the Inspector at once, whether or not a plan follows.
    connect(workspace_->rules(), &RuleTableModel::rulesChanged, this, &MainWindow::updateInspector);
    connect(workspace_, &Workspace::planChanged, this, [this] {
        updateInspector();
        updateActions();
        updateSummary();
    });
    connect(workspace_, &Workspace::weightsUpdated, this, [this] {
        updateSummary();
        updateInspector();
        updateActions();
        updateCharts(ChartsUpdate::Plan);
        maybeRunPending();
    });
    connect(workspace_, &Workspace::statisticsChanged, this, [this] {
        updateInspector(); // the algorithm against RTN reads the layer's input statistics
        updateActions();   // the exports that need a calibration
        updateCharts(ChartsUpdate::Statistics);
        maybeRunPending();
    });
    connect(workspace_, &Workspace::evaluationChanged, this, [this] {
        updateSummary();
        updateCharts(ChartsUpdate::Evaluation);
        updateInspector();
    });
    connect(workspace_, &Workspace::sensitivityChanged, this, [this] { updateCharts(ChartsUpdate::Sensitivity); });
    connect(workspace_, &Workspace::modifiedChanged, this, &MainWindow::updateTitle);

    autosaveTimer_ = new QTimer(this);
    autosaveTimer_->setInterval(60 * 1000);
    connect(autosaveTimer_, &QTimer::timeout, this, &MainWindow::autosave);
    autosaveTimer_->start();
    if (StallWatchdog::wanted())
        watchdog_ = new StallWatchdog(std::chrono::milliseconds(50), this);
    updateActions();
    updateTitle();
    if (askUser_)
        QTimer::singleShot(0, this, &MainWindow::offerRecovery);
}

MainWindow::~MainWindow() = default;

void MainWindow::createDocks()
{
    // Layers: the main view, in the centre.
    auto* layers = new QWidget(this);
    filter_ = new QLineEdit(layers);
    filter_->setPlaceholderText(tr("Filter layers by module path…"));
    filter_->setClearButtonEnabled(true);
    filterRegex_ = new QCheckBox(tr("Regex"), layers);
    auto* filterRow = new QHBoxLayout;
    filterRow->addWidget(filter_, 1);
    filterRow->addWidget(filterRegex_);
    proxy_ = new QSortFilterProxyModel(this);
    proxy_->setSourceModel(workspace_->layers());
    proxy_->setRecursiveFilteringEnabled(true);
    proxy_->setFilterRole(LayerTreeModel::ModulePathRole);
    proxy_->setSortRole(LayerTreeModel::SortRole);
    proxy_->setFilterCaseSensitivity(Qt::CaseInsensitive);
    layerView_ = new FrozenColumnTreeView(layers); // the layer column stays while the figures scroll sideways
    layerView_->setObjectName(QStringLiteral("LayerView"));
    layerView_->setModel(proxy_);
    layerView_->setTextElideMode(Qt::ElideMiddle); // a long path keeps its start and its layer name
    // The key columns first: the layer, its types and its errors; what describes it (rule, op, shape, size) after.
    {
        QHeaderView* header = layerView_->header();
        const int order[] = {LayerTreeModel::NameColumn,         LayerTreeModel::WeightQTypeColumn,
                             LayerTreeModel::ActQTypeColumn,     LayerTreeModel::WeightSqnrColumn,
                             LayerTreeModel::IsolatedSqnrColumn, LayerTreeModel::AccumulatedSqnrColumn,
                             LayerTreeModel::RuleColumn,         LayerTreeModel::OpTypeColumn,
                             LayerTreeModel::ShapeColumn,        LayerTreeModel::ParametersColumn};
        for (int visual = 0; visual < int(std::size(order)); ++visual)
            header->moveSection(header->visualIndex(order[visual]), visual);
    }
    layerView_->setSortingEnabled(true);
    layerView_->sortByColumn(-1, Qt::AscendingOrder); // model order until the user sorts
    layerView_->setAlternatingRowColors(true);
    layerView_->setUniformRowHeights(true);
    // Fitting a column to its contents measures the rows in view and this many more (Qt's default
    // is 1000): a model of hundreds of layers opens without holding the GUI thread for each column.
    layerView_->header()->setResizeContentsPrecision(50);
    layerView_->setSelectionBehavior(QAbstractItemView::SelectRows);
    // The figures a user came for, always in view above the layer table.
    summary_ = new SummaryBar(layers);
    summary_->setAutoFillBackground(true);
    summary_->setBackgroundRole(QPalette::AlternateBase);
    auto* layersLayout = new QVBoxLayout(layers);
    layersLayout->setContentsMargins(2, 2, 2, 2);
    layersLayout->addWidget(summary_);
    layersLayout->addLayout(filterRow);
    layersLayout->addWidget(layerView_, 1);
    setCentralWidget(layers);

    auto applyFilter = [this] {
        const QString text = filter_->text();
        QRegularExpression re(filterRegex_->isChecked() ? text : QRegularExpression::escape(text),
                              QRegularExpression::CaseInsensitiveOption);
        const bool valid = re.isValid();
        filter_->setStyleSheet(valid ? QString() : QStringLiteral("QLineEdit { background: #ffd0d0; }"));
        filter_->setToolTip(valid ? QString()
                                  : tr("%1 at offset %2").arg(re.errorString()).arg(re.patternErrorOffset()));
        if (valid)
            proxy_->setFilterRegularExpression(re);
        layerView_->expandAll();
    };
    connect(filter_, &QLineEdit::textChanged, this, applyFilter);
    connect(filterRegex_, &QCheckBox::toggled, this, applyFilter);
    connect(layerView_->selectionModel(), &QItemSelectionModel::currentRowChanged, this, [this] {
        updateInspector();
        updateCharts(ChartsUpdate::Selection);
        if (graph_)
            graph_->selectLayer(selectedLayer()); // emits nothing back
    });

    auto makeDock = [this](const QString& title, const QString& name, QWidget* w, Qt::DockWidgetArea area) {
        auto* dock = new QDockWidget(title, this);
        dock->setObjectName(name);
        dock->setWidget(w);
        addDockWidget(area, dock);
        return dock;
    };

    ruleEditor_ = new RuleEditor(workspace_->rules(), this);
    auto* rulesDock = makeDock(tr("Rules"), QStringLiteral("RulesDock"), ruleEditor_, Qt::BottomDockWidgetArea);
    connect(ruleEditor_, &RuleEditor::ruleSelected, this,
            [this](std::optional<size_t> rule) { workspace_->layers()->setHighlightedRule(rule); });
    connect(ruleEditor_->delegate(), &RuleFieldDelegate::regexStatus, this, [this](const QString& message) {
        if (!message.isEmpty())
            statusBar()->showMessage(message, 5000);
    });

    log_ = new QTextEdit(this);
    log_->setReadOnly(true);
    auto* logDock = makeDock(tr("Log"), QStringLiteral("LogDock"), log_, Qt::BottomDockWidgetArea);
    tabifyDockWidget(rulesDock, logDock);
    rulesDock->raise();

    inspector_ = new QTextBrowser(this);
    inspector_->setOpenLinks(false);
    auto* inspectorDock = makeDock(tr("Inspector"), QStringLiteral("InspectorDock"), inspector_, Qt::RightDockWidgetArea);
    QDockWidget* chartsDock = makeDock(tr("Charts"), QStringLiteral("ChartsDock"), createCharts(), Qt::RightDockWidgetArea);
    tabifyDockWidget(inspectorDock, chartsDock);
    createComparisonAndSearch();
    createGraph();
    for (const char* name : {"ComparisonDock", "SearchDock", "GraphDock"})
        if (auto* dock = findChild<QDockWidget*>(QLatin1String(name)))
            tabifyDockWidget(chartsDock, dock);
    inspectorDock->raise();

    resizeDocks({inspectorDock}, {480}, Qt::Horizontal);
    resizeDocks({rulesDock}, {230}, Qt::Vertical);
}

void MainWindow::createComparisonAndSearch()
{
    comparison_ = new RuleComparisonView(this);
    auto* comparisonDock = new QDockWidget(tr("A/B"), this);
    comparisonDock->setObjectName(QStringLiteral("ComparisonDock"));
    comparisonDock->setWidget(comparison_);
    addDockWidget(Qt::RightDockWidgetArea, comparisonDock);
    connect(comparison_, &RuleComparisonView::keepAsARequested, this, [this] {
        const QString rules = lastRulesFile_.isEmpty()
                                  ? tr("%n rule(s)", nullptr, int(workspace_->rules()->effectiveRules().size()))
                                  : QFileInfo(lastRulesFile_).fileName();
        try {
            workspace_->keepAsA(
                tr("%1, kept %2").arg(rules, QTime::currentTime().toString(QStringLiteral("HH:mm:ss"))));
        } catch (const Error& e) {
            showError(tr("Cannot keep A"), QString::fromUtf8(e.what()));
        }
    });
    connect(comparison_, &RuleComparisonView::clearARequested, this, [this] { workspace_->clearA(); });
    connect(workspace_, &Workspace::comparisonChanged, this, [this] {
        comparison_->setADescription(workspace_->aDescription());
        comparison_->setComparison(workspace_->comparison(), !workspace_->comparisonCurrent());
    });

    search_ = new SearchCurveView(this);
    auto* searchDock = new QDockWidget(tr("Search"), this);
    searchDock->setObjectName(QStringLiteral("SearchDock"));
    searchDock->setWidget(search_);
    addDockWidget(Qt::RightDockWidgetArea, searchDock);
    const QString example = QDir::cleanPath(QCoreApplication::applicationDirPath() +
                                            QStringLiteral("/../share/quantscope/rules/search/int4_int8_float.json"));
    if (QFileInfo::exists(example))
        search_->setCandidatesFile(example);
    connect(search_, &SearchCurveView::searchRequested, this, [this](const QString& file, const QString& target) {
        try {
            workspace_->runSearch(file, target);
            search_->setStatus(tr("Searching… (the status bar shows the progress; Esc cancels)"));
        } catch (const Error& e) {
            search_->setStatus(QString::fromUtf8(e.what()));
            showError(tr("Cannot run the search"), QString::fromUtf8(e.what()));
        }
        updateActions();
    });
    connect(search_, &SearchCurveView::pointApplied, this, [this](size_t index) {
        try {
            workspace_->applySearchPoint(index);
        } catch (const Error& e) {
            showError(tr("Cannot apply the point"), QString::fromUtf8(e.what()));
        }
    });
    connect(workspace_, &Workspace::searchFinished, this, [this] {
        search_->setResult(workspace_->searchResult(), workspace_->searchCandidates());
        search_->setStatus(QString::fromStdString(workspace_->searchResult()->message));
    });
    connect(workspace_, &Workspace::searchFailed, this,
            [this](const QString& message) { search_->setStatus(message); });
    connect(workspace_->jobs(), &JobTracker::jobEnded, this, [this](JobKind kind, const QString&, bool cancelled) {
        if (kind == JobKind::Search && cancelled)
            search_->setStatus(tr("Search cancelled."));
    });
}

void MainWindow::createGraph()
{
    graph_ = new GraphView(this);
    graph_->setObjectName(QStringLiteral("GraphView"));
    auto* dock = new QDockWidget(tr("Graph"), this);
    dock->setObjectName(QStringLiteral("GraphDock"));
    dock->setWidget(graph_);
    addDockWidget(Qt::RightDockWidgetArea, dock);
    connect(graph_, &GraphView::layerSelected, this, [this](size_t layer) {
        const QModelIndex index = proxy_->mapFromSource(workspace_->layers()->indexOfLayer(layer));
        if (index.isValid()) {
            layerView_->setCurrentIndex(index);
            layerView_->scrollTo(index);
        }
    });
    connect(graph_, &GraphView::foldRequested, this, [this](const std::set<size_t>& runs) {
        graph_->setStatus(runs.empty() ? tr("Unfolding…") : tr("Folding %n run(s) of blocks…", nullptr, int(runs.size())));
        workspace_->layoutGraph(runs);
    });
    connect(workspace_, &Workspace::graphLayoutChanged, this, [this] {
        const auto layout = workspace_->graphLayout();
        graph_->setStatus(layout || !workspace_->model() || workspace_->model()->weightsOnly
                              ? QString()
                              : tr("Laying out the graph… (the status bar shows the progress)"));
        if (workspace_->model() && workspace_->model()->weightsOnly)
            graph_->setStatus(tr("A checkpoint of named tensors has no graph to draw."));
        graph_->setGraph(layout, workspace_->model(), workspace_->repeatedRuns());
        updateGraphColours();
        graph_->selectLayer(selectedLayer());
    });
    connect(workspace_, &Workspace::graphLayoutFailed, this, [this](const QString& message) { graph_->setStatus(message); });
    connect(workspace_->jobs(), &JobTracker::jobEnded, this, [this](JobKind kind, const QString&, bool cancelled) {
        if (kind == JobKind::GraphLayout && cancelled)
            graph_->setStatus(tr("Layout cancelled."));
    });
    for (auto signal : {&Workspace::planChanged, &Workspace::weightsUpdated, &Workspace::statisticsChanged,
                        &Workspace::evaluationChanged, &Workspace::sensitivityChanged})
        connect(workspace_, signal, this, &MainWindow::updateGraphColours);
}

void MainWindow::updateGraphColours()
{
    const auto model = workspace_->model();
    if (!graph_ || !model || !workspace_->graphLayout()) // a new layout brings its colours
        return;
    graph_->setColouring(graphColouring(*model, workspace_->plan().get(), workspace_->weights().get(),
                                        workspace_->evaluation().get(), workspace_->sensitivity().get(),
                                        workspace_->statistics().get()));
}

void MainWindow::updateSummary()
{
    summary_->setFigures(
        summaryFigures(workspace_->exploration(), workspace_->weightBytes(), workspace_->weightsGeneration()));
}

QWidget* MainWindow::createCharts()
{
#if QUANTSCOPE_HAS_CHARTS
    auto* charts = new ChartsPanel(this);
    connect(charts, &ChartsPanel::layerClicked, this, [this](size_t layer) {
        const QModelIndex source = workspace_->layers()->indexOfLayer(layer);
        const QModelIndex index = proxy_->mapFromSource(source);
        if (index.isValid())
            layerView_->setCurrentIndex(index);
    });
    connect(charts, &ChartsPanel::methodApplied, this, [this](size_t layer, const QString& method, bool activation) {
        const auto& rule = workspace_->plan() ? workspace_->plan()->resolution().ruleOfLayer : std::vector<std::optional<size_t>>{};
        if (layer < rule.size() && rule[layer])
            workspace_->rules()->setField(int(*rule[layer]), activation ? "act_calibration" : "weight_calibration",
                                          method.toStdString());
    });
    connect(charts, &ChartsPanel::algorithmApplied, this, [this](size_t layer, const nlohmann::ordered_json& fields) {
        const auto& rule = workspace_->plan() ? workspace_->plan()->resolution().ruleOfLayer : std::vector<std::optional<size_t>>{};
        if (layer < rule.size() && rule[layer])
            workspace_->rules()->setFields(int(*rule[layer]), fields,
                                           tr("Set the algorithm of rule %1").arg(*rule[layer]));
    });
    connect(charts, &ChartsPanel::keepFloatProposed, this, [this](const QStringList& paths) {
        if (paths.isEmpty())
            return;
        QStringList escaped;
        for (const QString& p : paths)
            escaped << QString::fromStdString(escapeModulePath(p.toStdString())); // RE2 syntax, as rules are
        nlohmann::ordered_json rule = nlohmann::ordered_json::object();
        rule["module_path"] = (escaped.size() == 1 ? escaped.first() : QStringLiteral("(%1)").arg(escaped.join(QLatin1Char('|')))).toStdString();
        workspace_->rules()->insertRule(0, rule, tr("Keep %n layer(s) float", nullptr, int(paths.size())));
    });

    charts_ = charts;
    return charts;
#else
    auto* label = new QLabel(tr("The charts module is not part of this build."), this);
    label->setAlignment(Qt::AlignCenter);
    label->setEnabled(false);
    return label;
#endif
}

void MainWindow::updateCharts(ChartsUpdate what)
{
#if QUANTSCOPE_HAS_CHARTS
    auto* charts = static_cast<ChartsPanel*>(charts_);
    switch (what) {
    case ChartsUpdate::Model:
        charts->setModel(workspace_->model());
        break;
    case ChartsUpdate::Plan:
        charts->setPlan(workspace_->plan(), workspace_->weights(),
                        std::make_shared<const RuleSet>(workspace_->rules()->effectiveRules()));
        break;
    case ChartsUpdate::Statistics:
        charts->setActivationStatistics(workspace_->statistics());
        break;
    case ChartsUpdate::Evaluation:
        charts->setEvaluation(workspace_->evaluation());
        break;
    case ChartsUpdate::Sensitivity:
        charts->setSensitivity(workspace_->sensitivity());
        break;
    case ChartsUpdate::Selection:
        charts->setSelectedLayer(selectedLayer());
        break;
    }
#else
    (void)what;
#endif
}

void MainWindow::updateTitle()
{
    QString name = workspace_->sessionPath().isEmpty() ? QFileInfo(workspace_->modelPath()).fileName()
                                                       : QFileInfo(workspace_->sessionPath()).fileName();
    if (name.isEmpty())
        name = tr("No model");
    setWindowTitle(QStringLiteral("%1[*] — Quantscope").arg(name));
    setWindowModified(workspace_->isModified());
}

std::optional<size_t> MainWindow::selectedLayer() const
{
    const QModelIndex index = layerView_->currentIndex();
    if (!index.isValid())
        return std::nullopt;
    const int layer = proxy_->mapToSource(index).siblingAtColumn(0).data(LayerTreeModel::LayerRole).toInt();
    return layer >= 0 ? std::optional<size_t>(size_t(layer)) : std::nullopt;
}

void MainWindow::updateInspector()
{
    // A rule the table cannot use comes first, pointing at the field (and in a regex, the position) at fault.
    std::vector<RuleProblem> problems;
    const RuleTableModel* table = workspace_->rules();
    for (int row = 0; row < table->rowCount(); ++row) {
        const QString error = table->index(row, 0).data(RuleTableModel::ErrorRole).toString();
        if (error.isEmpty())
            continue;
        RuleProblem p{size_t(row), table->errorField(row), {}, error.toStdString()};
        const auto& json = table->rows()[size_t(row)];
        if (p.field == "module_path" && json.contains("module_path") && json["module_path"].is_string())
            p.pattern = json["module_path"].get<std::string>();
        problems.push_back(std::move(p));
    }
    const QString problemsHtml = ruleProblemsHtml(problems);
    const auto model = workspace_->model();
    const auto layer = selectedLayer();
    if (!model || !layer) {
        inspector_->setHtml(problemsHtml + layerInspectionHtml({}));
        return;
    }
    LayerInspection in;
    in.model = model.get();
    in.layer = *layer;
    const RuleSet& rules = workspace_->rules()->effectiveRules();
    in.rules = &rules;
    in.plan = workspace_->plan().get();
    std::shared_ptr<const QuantizedWeight> weight;
    if (workspace_->weights())
        weight = workspace_->weights()->find(*layer);
    in.weight = weight.get();
    in.weightStale = workspace_->weightsGeneration() != workspace_->generation();
    if (const auto eval = workspace_->evaluation()) {
        for (const LayerEvaluation& l : eval->layers)
            if (l.layer == *layer)
                in.evaluation = &l;
        in.evaluationStale = workspace_->evaluationGeneration() != workspace_->generation();
    }
    inspectAlgorithms(*layer, in);
    inspector_->setHtml(problemsHtml + layerInspectionHtml(in));
}

void MainWindow::inspectAlgorithms(size_t layer, LayerInspection& in)
{
    const auto model = workspace_->model();
    const QuantizableLayer& l = model->layers[layer];
    const RuleSet& rules = workspace_->rules()->effectiveRules();
    const std::optional<size_t> index = rules.firstMatch(l.modulePath, l.opType);
    if (!index || !rules.rules()[*index].weightQType || !roundsBeyondRtn(rules.rules()[*index]))
        return;
    const auto stats = workspace_->statistics();
    const std::string key = std::to_string(layer) + '/' + std::to_string(reinterpret_cast<uintptr_t>(stats.get())) +
                            '/' + RuleSet(std::vector<QuantizationRule>{rules.rules()[*index]}).toJson();
    if (key == inspectorAlgorithmsKey_) {
        in.algorithms = inspectorAlgorithms_.get();
        in.algorithmsNote = inspectorAlgorithmsNote_;
        return;
    }
    const auto found = stats ? stats->hessians().find(layer) : LayerHessians::const_iterator();
    if (!stats || found == stats->hessians().end() || found->second->rows() == 0) {
        in.algorithmsNote = tr("Run calibration to compare with RTN: the comparison reads the layer's inputs.");
        return;
    }
    if (!inspectorJob_)
        inspectorJob_ = std::make_unique<JobSlot>(workspace_->jobs(), JobKind::AlgorithmComparison);
    inspectorAlgorithmsKey_ = key;
    inspectorAlgorithms_.reset();
    inspectorAlgorithmsNote_ = tr("Comparing with RTN…");
    in.algorithmsNote = inspectorAlgorithmsNote_;
    const auto ruleSet = std::make_shared<const RuleSet>(rules);
    const std::shared_ptr<const InputHessian> inputs = found->second;
    inspectorJob_->start<std::shared_ptr<const AlgorithmComparison>>(
        tr("Comparing algorithms"),
        [model, ruleSet, layer, inputs](const CancellationToken& cancel) {
            return std::make_shared<const AlgorithmComparison>(
                compareAlgorithms(*model, *ruleSet, layer, *inputs, cancel));
        },
        [this, key](std::shared_ptr<const AlgorithmComparison> c) {
            if (key != inspectorAlgorithmsKey_)
                return;
            inspectorAlgorithms_ = std::move(c);
            inspectorAlgorithmsNote_.clear();
            updateInspector();
        },
        [this, key](const QString& error) {
            if (key != inspectorAlgorithmsKey_)
                return;
            inspectorAlgorithmsNote_ = error;
            updateInspector();
        });
}

void MainWindow::log(const QString& text, LogLevel level)
{
    // Also on stderr, so a session can be followed from a terminal or a bug report.
    const char* prefix = level == LogLevel::Error ? "error: " : level == LogLevel::Warning ? "warning: " : "";
    qInfo("%s%s", prefix, qPrintable(text));
    const QString time = QDateTime::currentDateTime().toString(QStringLiteral("HH:mm:ss"));
    const QString colour = level == LogLevel::Error ? QStringLiteral("#c62828") : QStringLiteral("#b26a00");
    log_->append(
        QStringLiteral("<span style='color:gray'>%1</span> %2")
            .arg(time, level == LogLevel::Info
                           ? text.toHtmlEscaped()
                           : QStringLiteral("<span style='color:%1'>%2</span>").arg(colour, text.toHtmlEscaped())));
    if (level != LogLevel::Info)
        statusBar()->showMessage(text, 6000);
}

void MainWindow::showError(const QString& title, const QString& message)
{
    log(message, LogLevel::Error);
    if (askUser_)
        QMessageBox::warning(this, title, message);
}

QString MainWindow::lastFolder(const QString& key) const
{
    return QSettings().value(QStringLiteral("folders/") + key, QDir::homePath()).toString();
}

void MainWindow::setLastFolder(const QString& key, const QString& file)
{
    QSettings().setValue(QStringLiteral("folders/") + key, QFileInfo(file).absolutePath());
}

void MainWindow::openPath(const QString& path)
{
    if (isSessionFile(path)) {
        if (!confirmDiscard())
            return;
        try {
            workspace_->openSession(path);
            setLastFolder(QStringLiteral("session"), path);
            addRecentFile(path);
        } catch (const Error& e) {
            showError(tr("Cannot open the session"), QString::fromUtf8(e.what()));
        }
    } else if (isRuleFile(path)) {
        openRules(path);
    } else {
        openModel(path);
    }
}

void MainWindow::openModel(const QString& path)
{
    if (workspace_->model() && !confirmDiscard()) // another model replaces the session: save it first?
        return;
    setLastFolder(QStringLiteral("model"), path);
    workspace_->openModel(path);
}

void MainWindow::openRules(const QString& path)
{
    try {
        workspace_->loadRules(path);
        lastRulesFile_ = path;
        setLastFolder(QStringLiteral("rules"), path);
    } catch (const Error& e) {
        showError(tr("Cannot open the rules"), QString::fromUtf8(e.what()));
    }
}

void MainWindow::setCalibrationFile(const QString& path)
{
    DataConfig c;
    c.path = QFileInfo(path).absoluteFilePath().toStdString();
    workspace_->setCalibrationData(c);
    updateActions();
}

void MainWindow::setEvaluationFile(const QString& path)
{
    DataConfig c;
    c.path = QFileInfo(path).absoluteFilePath().toStdString();
    workspace_->setEvaluationData(c);
    updateActions();
}

void MainWindow::runWhenReady(bool calibrate, bool evaluate)
{
    pendingCalibrate_ = calibrate;
    pendingEvaluate_ = evaluate;
    maybeRunPending();
}

void MainWindow::maybeRunPending()
{
    if (!workspace_->model() || workspace_->weightsGeneration() != workspace_->generation())
        return;
    if (pendingCalibrate_ && workspace_->calibrationData() && workspace_->canRun()) {
        pendingCalibrate_ = false;
        workspace_->calibrate();
        return; // evaluation follows statisticsChanged
    }
    if (pendingEvaluate_ && !workspace_->jobs()->isRunning(JobKind::Calibrate) &&
        workspace_->evaluationData() && workspace_->canRun()) {
        pendingEvaluate_ = false;
        workspace_->evaluate();
    }
}

void MainWindow::editData(bool calibration)
{
    DataDialog dialog(calibration ? tr("Calibration data") : tr("Evaluation data"),
                      calibration ? workspace_->calibrationData() : workspace_->evaluationData(),
                      lastFolder(QStringLiteral("data")), this);
    if (dialog.exec() != QDialog::Accepted)
        return;
    const DataConfig config = dialog.config();
    // Opened once here so a wrong file or a mismatch with the model is said now, not at run time.
    try {
        std::vector<ExplorationWarning> warnings;
        auto data = workspace_->exploration().snapshot().openData(config, &warnings);
        log(tr("%1 data: %2 rows in %3 batches%4")
                .arg(calibration ? tr("Calibration") : tr("Evaluation"))
                .arg(data->rowCount())
                .arg(data->batchCount())
                .arg(data->labels() ? tr(", with labels") : QString()),
            LogLevel::Info);
        for (const ExplorationWarning& w : warnings) // rows a fixed batch dimension leaves out
            log(QString::fromStdString(w.text), LogLevel::Warning);
    } catch (const Error& e) {
        showError(tr("Cannot use this data"), QString::fromUtf8(e.what()));
        return;
    }
    if (config.kind == DataConfig::Kind::Synthetic)
        log(tr("Synthetic data: results are not representative of real inputs."), LogLevel::Warning);
    else
        setLastFolder(QStringLiteral("data"), QString::fromStdString(config.path.string()));
    if (calibration)
        workspace_->setCalibrationData(config);
    else
        workspace_->setEvaluationData(config);
    updateActions();
}

bool MainWindow::saveSession(const QString& path)
{
    try {
        workspace_->toSession().save(path.toStdString());
    } catch (const Error& e) {
        showError(tr("Cannot save the session"), QString::fromUtf8(e.what()));
        return false;
    }
    workspace_->setSessionPath(path);
    workspace_->setModified(false);
    workspace_->undoStack()->setClean();
    setLastFolder(QStringLiteral("session"), path);
    addRecentFile(path);
    QFile::remove(autosavePath());
    statusBar()->showMessage(tr("Session saved to %1").arg(path), 4000);
    updateTitle();
    return true;
}

bool MainWindow::saveSessionAs()
{
    QString path = QFileDialog::getSaveFileName(this, tr("Save session"), lastFolder(QStringLiteral("session")),
                                                tr("Sessions (*.qssession)"));
    if (path.isEmpty())
        return false;
    if (!isSessionFile(path))
        path += QLatin1Char('.') + QLatin1String(kSessionSuffix);
    return saveSession(path);
}

bool MainWindow::confirmDiscard()
{
    if (!workspace_->isModified() || !askUser_)
        return true;
    const auto answer = QMessageBox::warning(this, tr("Unsaved changes"),
                                             tr("The session has unsaved changes. Save them?"),
                                             QMessageBox::Save | QMessageBox::Discard | QMessageBox::Cancel);
    if (answer == QMessageBox::Save)
        return workspace_->sessionPath().isEmpty() ? saveSessionAs() : saveSession(workspace_->sessionPath());
    return answer == QMessageBox::Discard;
}

QString MainWindow::autosavePath()
{
    const QString folder = QStandardPaths::writableLocation(QStandardPaths::AppDataLocation);
    QDir().mkpath(folder);
    return folder + QStringLiteral("/autosave.") + QLatin1String(kSessionSuffix);
}

void MainWindow::autosave()
{
    if (!workspace_->isModified() || !workspace_->model())
        return;
    try {
        workspace_->toSession().save(autosavePath().toStdString());
    } catch (const Error& e) {
        log(tr("Autosave failed: %1").arg(QString::fromUtf8(e.what())), LogLevel::Error);
    }
}

void MainWindow::offerRecovery()
{
    const QString path = autosavePath();
    if (!QFileInfo::exists(path))
        return;
    const auto answer = QMessageBox::question(
        this, tr("Recover session"),
        tr("Quantscope did not close cleanly last time. Recover the autosaved session from %1?")
            .arg(QFileInfo(path).lastModified().toString()),
        QMessageBox::Yes | QMessageBox::Discard);
    if (answer == QMessageBox::Yes) {
        try {
            workspace_->openSession(path);
            workspace_->setSessionPath({}); // saving asks where: the autosave file is not the user's
        } catch (const Error& e) {
            showError(tr("Cannot recover the session"), QString::fromUtf8(e.what()));
        }
    } else {
        QFile::remove(path);
    }
}

void MainWindow::addRecentFile(const QString& path)
{
    QSettings settings;
    QStringList files = settings.value(QStringLiteral("recentFiles")).toStringList();
    const QString absolute = QFileInfo(path).absoluteFilePath();
    files.removeAll(absolute);
    files.prepend(absolute);
    while (files.size() > kMaxRecentFiles)
        files.removeLast();
    settings.setValue(QStringLiteral("recentFiles"), files);
    rebuildRecentMenu();
}

void MainWindow::rebuildRecentMenu()
{
    recentMenu_->clear();
    const QStringList files = QSettings().value(QStringLiteral("recentFiles")).toStringList();
    for (const QString& f : files)
        recentMenu_->addAction(QFileInfo(f).fileName(), this, [this, f] { openPath(f); })->setToolTip(f);
    recentMenu_->setEnabled(!files.isEmpty());
    if (!files.isEmpty()) {
        recentMenu_->addSeparator();
        recentMenu_->addAction(tr("Clear List"), this, [this] {
            QSettings().remove(QStringLiteral("recentFiles"));
            rebuildRecentMenu();
        });
    }
}

void MainWindow::readSettings()
{
    QSettings settings;
    if (!restoreGeometry(settings.value(QStringLiteral("window/geometry")).toByteArray())) {
        // First run: most of the screen, so the layer table and the side docks both fit.
        QSize size(1600, 1000);
        if (const QScreen* screen = QGuiApplication::primaryScreen())
            size = size.boundedTo(screen->availableSize() * 0.92);
        resize(size);
    }
    restoreState(settings.value(QStringLiteral("window/state")).toByteArray());
}

void MainWindow::writeSettings()
{
    QSettings settings;
    settings.setValue(QStringLiteral("window/geometry"), saveGeometry());
    settings.setValue(QStringLiteral("window/state"), saveState());
}

void MainWindow::changeEvent(QEvent* event)
{
    QMainWindow::changeEvent(event);
    // The theme changed (View ▸ Theme, or the desktop's): icons that would vanish on the new window colour are redrawn.
    if (event->type() == QEvent::PaletteChange && viewMenu_)
        updateIconsForPalette();
}

void MainWindow::closeEvent(QCloseEvent* event)
{
    if (!confirmDiscard()) {
        event->ignore();
        return;
    }
    writeSettings();
    workspace_->jobs()->cancelAll();
    QFile::remove(autosavePath()); // a clean exit leaves nothing to recover
    event->accept();
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event)
{
    if (event->mimeData()->hasUrls())
        event->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* event)
{
    for (const QUrl& url : event->mimeData()->urls())
        if (url.isLocalFile())
            openPath(url.toLocalFile());
    event->acceptProposedAction();
}

} // namespace qs
