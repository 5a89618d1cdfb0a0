#include "gui/workspace.h"

#include <cstdio>

#include <QDateTime>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QLocale>
#include <QUndoStack>

#include "core/error.h"
#include "rules/schema.h"
#include "widgets/jobs/job_tracker.h"
#include "widgets/layer_tree_model.h"
#include "widgets/qt_image_decoder.h"
#include "widgets/rule_table_model.h"

namespace qs {

namespace {

std::map<size_t, LayerTreeModel::ActivationResult> activationResults(const EvaluationResult& e)
{
    std::map<size_t, LayerTreeModel::ActivationResult> out;
    for (const LayerEvaluation& l : e.layers)
        out[l.layer] = {l.isolated, l.accumulated};
    return out;
}

} // namespace

Workspace::Workspace(QObject* parent)
    : QObject(parent), jobs_(new JobTracker(this)), undo_(new QUndoStack(this)),
      rules_(new RuleTableModel(undo_, this)), layers_(new LayerTreeModel(this)),
      exploration_(std::make_shared<QtImageDecoder>())
{
    connect(rules_, &RuleTableModel::rulesChanged, this, &Workspace::onRulesChanged);
    // Undoing back to the saved rules is unmodified again, unless something
    // outside the undo stack (data, results) changed since the save.
    connect(undo_, &QUndoStack::cleanChanged, this, [this](bool clean) { setModified(!clean || changedOutsideUndo_); });
}

Workspace::~Workspace()
{
    jobs_->cancelAll();
}

void Workspace::setModified(bool modified)
{
    if (!modified)
        changedOutsideUndo_ = false;
    if (modified_ == modified)
        return;
    modified_ = modified;
    emit modifiedChanged(modified);
}

void Workspace::openModel(const QString& path)
{
    // Another model starts clean once it is in (applyLoaded); data set from now on is for it.
    cleanOnLoad_ = {exploration_.hasModel(), exploration_.hasModel()};
    emit logMessage(tr("Loading %1 …").arg(path), LogLevel::Info);
    std::function<std::shared_ptr<LoadedModel>(const CancellationToken&, const ProgressCallback&)> work =
        [path](const CancellationToken& cancel, const ProgressCallback& progress) {
            LoadOptions options;
            options.hash = true; // session files compare it
            return std::make_shared<LoadedModel>(loadExplorationModel(path.toStdString(), options, cancel, progress));
        };
    jobs_->start<std::shared_ptr<LoadedModel>>(
        JobKind::Load, tr("Loading %1").arg(QFileInfo(path).fileName()), work,
        [this](std::shared_ptr<LoadedModel> loaded) { applyLoaded(std::move(*loaded)); },
        [this](const QString& message) {
            pendingSession_.reset();
            cleanOnLoad_ = {};         // the model of before stays, with its settings
            emit modelFailed(message); // the window logs it, once, with its dialog
        });
}

void Workspace::logWarnings(const std::vector<ExplorationWarning>& warnings)
{
    for (const ExplorationWarning& w : warnings)
        emit logMessage(QString::fromStdString(w.text), LogLevel::Warning);
}

void Workspace::applyLoaded(LoadedModel loaded)
{
    jobs_->cancel(JobKind::Weights);
    jobs_->cancel(JobKind::Calibrate);
    jobs_->cancel(JobKind::Evaluate);
    modelPath_ = QFileInfo(QString::fromStdString(loaded.path.string())).absoluteFilePath();
    unsupported_.clear();
    for (const std::string& op : loaded.unsupportedOps)
        unsupported_ << QString::fromStdString(op);
    const QString whyNotRunnable = QString::fromStdString(loaded.whyNotRunnable);
    jobs_->cancel(JobKind::Search);
    jobs_->cancel(JobKind::Comparison);
    jobs_->cancel(JobKind::GraphLayout);
    if (cleanOnLoad_.calibration || cleanOnLoad_.evaluation) {
        // Another model: no data settings of the last one (its data would not fit this model) unless
        // set since the open, no undo history of its edits, not modified. The rules stay. A session
        // being opened brings its own data settings (restorePendingSession).
        if (cleanOnLoad_.calibration)
            exploration_.setCalibrationData(std::nullopt);
        if (cleanOnLoad_.evaluation)
            exploration_.setEvaluationData(std::nullopt);
        undo_->clear();
        if (!pendingSession_)
            sessionPath_.clear();
        setModified(false);
        cleanOnLoad_ = {};
    }
    exploration_.setModel(std::move(loaded));
    weightBytes_.reset();
    searchResult_.reset();
    searchCandidates_.reset();
    searchModel_.reset();
    if (comparisonA_)
        clearA(); // A is of another model
    const Model& model = exploration_.model();
    layers_->setLayers(model.layers);
    emit logMessage(tr("Loaded %1: %2 format, %3 quantizable layers, %4 parameters")
                        .arg(modelPath_, QString::fromStdString(model.format))
                        .arg(model.layers.size())
                        .arg(model.parameterCount()),
                    LogLevel::Info);
    for (const ExplorationWarning& w : exploration_.warnings())
        if (w.kind == ExplorationWarning::Kind::Model || w.kind == ExplorationWarning::Kind::RuleConflict)
            emit logMessage(QString::fromStdString(w.text), LogLevel::Warning);
    if (!unsupported_.isEmpty())
        emit logMessage(tr("The runtime cannot run %1: calibration and evaluation are off; weight-only "
                           "quantization works.")
                            .arg(unsupported_.join(QStringLiteral(", "))),
                        LogLevel::Warning);
    else if (!whyNotRunnable.isEmpty() && !model.weightsOnly)
        emit logMessage(whyNotRunnable, LogLevel::Warning);
    Staleness stale;
    stale.plan = stale.weights = true;
    showPlan(stale); // setModel resolved the current rules against the new layers
    emit statisticsChanged();
    emit evaluationChanged();
    emit modelLoaded();
    repeatedRuns_ = findRepeatedRuns(model);
    graphLayout_.reset();
    emit graphLayoutChanged();
    if (!model.weightsOnly)
        layoutGraph({});
    restorePendingSession();
}

void Workspace::layoutGraph(const std::set<size_t>& folded)
{
    const std::shared_ptr<const Model> model = exploration_.modelPtr();
    if (!model)
        return;
    const auto runs = std::make_shared<const std::vector<RepeatedRun>>(repeatedRuns_);
    std::function<std::shared_ptr<const GraphLayout>(const CancellationToken&, const ProgressCallback&)> work =
        [model, runs, folded](const CancellationToken& cancel, const ProgressCallback& progress) {
            return std::make_shared<const GraphLayout>(qs::layoutGraph(*model, *runs, folded, cancel, progress));
        };
    jobs_->start<std::shared_ptr<const GraphLayout>>(
        JobKind::GraphLayout, tr("Laying out the graph"), work,
        [this, model](std::shared_ptr<const GraphLayout> layout) {
            if (model != exploration_.modelPtr())
                return; // another model was opened meanwhile
            graphLayout_ = std::move(layout);
            emit logMessage(tr("Graph laid out: %1 nodes, %2 edges in %3 s")
                                .arg(graphLayout_->nodes.size())
                                .arg(graphLayout_->edges.size())
                                .arg(graphLayout_->seconds, 0, 'f', 2),
                            LogLevel::Info);
            emit graphLayoutChanged();
        },
        [this](const QString& message) {
            emit logMessage(message, LogLevel::Warning);
            emit graphLayoutFailed(message);
        });
}

void Workspace::onRulesChanged()
{
    Staleness stale;
    try {
        stale = exploration_.setRules(rules_->effectiveRules());
    } catch (const Error& e) {
        // Rules that contradict themselves on a shared weight: the exploration
        // keeps the rules of before; the table keeps what was typed.
        emit logMessage(QString::fromUtf8(e.what()), LogLevel::Error);
        return;
    }
    showPlan(stale);
}

void Workspace::showPlan(const Staleness& stale)
{
    const auto plan = exploration_.plan();
    rules_->setResolution(plan ? std::optional(plan->resolution()) : std::nullopt);
    if (!plan) {
        layers_->setRules(rules_->effectiveRules(), {}, exploration_.generation());
        emit planChanged();
        return;
    }
    const Model& model = exploration_.model();
    std::vector<LayerTreeModel::Assignment> assignments(model.layers.size());
    const auto& ruleOfLayer = plan->resolution().ruleOfLayer;
    for (size_t i = 0; i < assignments.size() && i < ruleOfLayer.size(); ++i)
        assignments[i].rule = ruleOfLayer[i];
    for (const LayerQuantization& lq : plan->layers()) {
        auto& a = assignments[lq.layer];
        if (lq.weight) {
            // What changes the weight besides its type is part of what the layer gets: the
            // algorithm that rounds it, bias correction, and (below) the rewrites of the float
            // model it took part in ("int4 · gptq · bias corrected · equalized").
            a.weightQType = std::string(qtypeName(lq.weight->qtype));
            if (lq.weightAlgorithm.kind != WeightAlgorithmKind::Rtn)
                a.weightQType += " · " + lq.weightAlgorithm.toString();
            if (lq.biasCorrection)
                a.weightQType += " · bias corrected";
        }
        if (lq.activation)
            a.actQType = std::string(qtypeName(lq.activation->target.qtype));
        a.problem = lq.problem;
    }
    // The rewrites as the exploration made them: a rule asking for one the layer cannot take
    // leaves no mark (the layer's note says why).
    auto mark = [&](size_t layer, const std::string& what) {
        if (layer >= assignments.size())
            return;
        std::string& text = assignments[layer].weightQType;
        if (text.find(what) == std::string::npos)
            text += (text.empty() ? "float · " : " · ") + what;
    };
    if (const auto eq = exploration_.equalization())
        for (const EqualizedPair& p : eq->pairs) {
            mark(p.first, "equalized");
            mark(p.second, "equalized");
        }
    if (const auto hb = exploration_.absorption())
        for (const AbsorptionPair& p : hb->pairs) {
            mark(p.first, "bias absorbed");
            mark(p.second, "bias absorbed");
        }
    if (const auto sq = exploration_.smoothing())
        for (const SmoothedInput& in : sq->inputs) {
            char smoothed[48];
            std::snprintf(smoothed, sizeof smoothed, "smoothed %.3g", in.alpha);
            for (size_t layer : in.layers)
                mark(layer, smoothed);
        }
    layers_->setRules(rules_->effectiveRules(), std::move(assignments), exploration_.generation());
    if (comparisonA_) { // the comparison shown is of the rules of before until the next one is in
        ++comparisonRequest_;
        emit comparisonChanged();
    }
    if (stale.sensitivity)
        emit sensitivityChanged();
    if (exploration_.evaluation() && exploration_.evaluationGeneration() == exploration_.generation())
        showEvaluation();
    emit planChanged();
    if (stale.weights) {
        startWeightJob();
    } else {
        // No layer's weight quantization changed: the weights held are the current rules' weights.
        showWeights();
        emit weightsUpdated();
        startComparison(); // B's plan changed all the same (an activation's type, say)
    }
}

void Workspace::showWeights()
{
    const auto weights = exploration_.weights();
    if (!weights)
        return;
    std::map<size_t, ErrorMetrics> metrics;
    for (const auto& [layer, w] : weights->weights())
        metrics[layer] = w->metrics;
    layers_->setWeightResults(exploration_.weightsGeneration(), std::move(metrics), weights->problems());
}

void Workspace::showEvaluation()
{
    if (const auto evaluation = exploration_.evaluation())
        layers_->setActivationResults(exploration_.evaluationGeneration(), activationResults(*evaluation));
}

void Workspace::startWeightJob()
{
    auto clock = std::make_shared<QElapsedTimer>();
    clock->start();
    const WeightJob job = exploration_.weightJob();
    // The byte totals of the summary bar are counted here too, off the GUI thread.
    struct Output {
        WeightResult result;
        WeightBytes bytes;
    };
    std::function<Output(const CancellationToken&, const ProgressCallback&)> work =
        [job](const CancellationToken& cancel, const ProgressCallback& progress) {
            Output out{job.run(cancel, progress), {}};
            out.bytes = totalWeightBytes(*job.in.model, *job.in.plan, *out.result.weights);
            return out;
        };
    jobs_->start<Output>(
        JobKind::Weights, tr("Quantizing weights"), work,
        [this, clock](Output out) {
            WeightResult& r = out.result;
            const std::vector<size_t> recomputed = r.recomputed;
            if (!exploration_.apply(std::move(r)))
                return;
            weightBytes_ = out.bytes;
            const Model& model = exploration_.model();
            if (!recomputed.empty()) {
                int64_t parameters = 0;
                for (const size_t layer : recomputed)
                    if (!model.layers[layer].sharesWeightOf) // a shared weight counts once
                        parameters += model.layers[layer].parameterCount;
                emit logMessage(tr("Weights: %n layer(s) (%1 parameters) requantized; the table was current %2 ms "
                                   "after the edit",
                                   nullptr, int(recomputed.size()))
                                    .arg(QLocale().toString(qlonglong(parameters)))
                                    .arg(clock->elapsed()),
                                LogLevel::Info);
            }
            lastRecomputed_ = recomputed;
            showWeights();
            for (const auto& [layer, why] : exploration_.weights()->problems())
                emit logMessage(tr("%1: %2").arg(QString::fromStdString(model.layers[layer].modulePath),
                                                 QString::fromStdString(why)),
                                LogLevel::Warning);
            emit weightsUpdated();
            startComparison();
        },
        [this](const QString& message) { emit logMessage(message, LogLevel::Error); });
}

void Workspace::loadRules(const QString& path)
{
    const RuleSet rules = RuleSet::load(path.toStdString());
    rules_->setRuleSet(rules, tr("Open rules %1").arg(QFileInfo(path).fileName()));
    emit logMessage(tr("Rules from %1: %n rule(s)", nullptr, int(rules.size())).arg(path), LogLevel::Info);
}

void Workspace::saveRules(const QString& path) const
{
    if (!rules_->allValid())
        throw Error(rules_->firstError().toStdString());
    rules_->effectiveRules().save(path.toStdString());
}

void Workspace::markChanged()
{
    changedOutsideUndo_ = true;
    setModified(true);
}

void Workspace::setCalibrationData(std::optional<DataConfig> config)
{
    cleanOnLoad_.calibration = false;
    exploration_.setCalibrationData(std::move(config));
    markChanged();
}

void Workspace::setEvaluationData(std::optional<DataConfig> config)
{
    cleanOnLoad_.evaluation = false;
    exploration_.setEvaluationData(std::move(config));
    markChanged();
}

template <class Job>
void Workspace::startStage(JobKind kind, const QString& title, const std::function<Job()>& makeJob,
                           const std::function<void()>& applied)
{
    Job job;
    try {
        job = makeJob();
    } catch (const Error& e) { // what is missing (data, calibration, the current weights), said by the exploration
        emit logMessage(QString::fromUtf8(e.what()), LogLevel::Error);
        return;
    }
    using Result = decltype(job.run());
    std::function<Result(const CancellationToken&, const ProgressCallback&)> work =
        [job](const CancellationToken& cancel, const ProgressCallback& progress) { return job.run(cancel, progress); };
    jobs_->start<Result>(
        kind, title, work,
        [this, applied](Result r) {
            logWarnings(r.warnings);
            if (exploration_.apply(std::move(r)))
                applied();
        },
        [this](const QString& message) { emit logMessage(message, LogLevel::Error); });
}

void Workspace::calibrate()
{
    if (!exploration_.hasModel() || !exploration_.calibrationData() || !canRun())
        return;
    // Every histogram: the method can change, and the charts show them, without calibrating again.
    startStage<CalibrationJob>(
        JobKind::Calibrate, tr("Calibrating"), [this] { return exploration_.calibrationJob(KeptHistograms::All); },
        [this] {
            const auto statistics = exploration_.statistics();
            emit logMessage(tr("Calibrated %1 activations over %2 batches")
                                .arg(statistics->observers().size())
                                .arg(statistics->batches()),
                            LogLevel::Info);
            markChanged();
            emit statisticsChanged();
            // An algorithm such as gptq rounds the weights from this calibration: they follow it.
            if (!exploration_.weightsCurrent())
                startWeightJob();
        });
}

void Workspace::runSensitivity(SensitivityKind kind, std::optional<WeightAlgorithm> algorithm)
{
    if (!exploration_.hasModel() || !exploration_.evaluationData() || !canRun())
        return;
    QString title =
        kind == SensitivityKind::OneLayer ? tr("Sensitivity (one layer at a time") : tr("Sensitivity (all but one");
    if (algorithm)
        title += tr(", weights rounded by %1").arg(QString::fromStdString(algorithm->toString()));
    startStage<SensitivityJob>(
        JobKind::Sensitivity, title + QStringLiteral(")"),
        [this, kind, algorithm] { return exploration_.sensitivityJob(kind, algorithm); },
        [this] {
            const auto result = exploration_.sensitivity();
            for (const KeptRounding& k : result->keptRounding)
                emit logMessage(tr("Sensitivity: %1 keeps its rule's rounding: %2")
                                    .arg(QString::fromStdString(exploration_.model().layers.at(k.layer).modulePath),
                                         QString::fromStdString(k.reason)),
                                LogLevel::Info);
            if (!result->ranking.empty()) {
                const LayerSensitivity& first = result->ranking.front();
                QString text = tr("Sensitivity%1: %2 layers ranked; most sensitive %3 (output SQNR %4 dB")
                                   .arg(result->algorithm
                                            ? tr(" with %1").arg(QString::fromStdString(result->algorithm->toString()))
                                            : QString())
                                   .arg(result->ranking.size())
                                   .arg(QString::fromStdString(exploration_.model().layers.at(first.layer).modulePath))
                                   .arg(first.output.sqnrDb, 0, 'f', 1);
                if (result->floatPerplexity && first.perplexity)
                    text += tr(", perplexity %1 against %2 in float")
                                .arg(*first.perplexity, 0, 'f', 3)
                                .arg(*result->floatPerplexity, 0, 'f', 3);
                emit logMessage(text + QStringLiteral(")"), LogLevel::Info);
            }
            emit sensitivityChanged();
        });
}

void Workspace::evaluate()
{
    if (!exploration_.hasModel() || !exploration_.evaluationData() || !canRun())
        return;
    startStage<EvaluationJob>(
        JobKind::Evaluate, tr("Evaluating"), [this] { return exploration_.evaluationJob(); },
        [this] {
            showEvaluation();
            const auto evaluation = exploration_.evaluation();
            QString summary = tr("Evaluated %1 samples").arg(evaluation->samples);
            if (evaluation->accuracy)
                summary += tr(": top-1 float %1%, quantized %2%")
                               .arg(evaluation->accuracy->floatTop1 * 100, 0, 'f', 2)
                               .arg(evaluation->accuracy->quantizedTop1 * 100, 0, 'f', 2);
            if (evaluation->perplexity)
                summary += tr(": perplexity float %1, quantized %2 (%3 tokens)")
                               .arg(evaluation->perplexity->floatValue, 0, 'f', 3)
                               .arg(evaluation->perplexity->quantizedValue, 0, 'f', 3)
                               .arg(evaluation->perplexity->tokens);
            for (const OutputEvaluation& o : evaluation->outputs)
                summary += tr("; %1 SQNR %2 dB").arg(QString::fromStdString(o.name)).arg(o.metrics.sqnrDb, 0, 'f', 1);
            if (evaluation->outputSimulation == "integer")
                summary += tr(" (outputs: the integer program of the LiteRT export; layers: fake-quant)");
            emit logMessage(summary, LogLevel::Info);
            if (!evaluation->outputSimulationNote.empty())
                emit logMessage(QString::fromStdString(evaluation->outputSimulationNote), LogLevel::Warning);
            markChanged();
            emit evaluationChanged();
            startComparison();
        });
}

void Workspace::keepAsA(const QString& description)
{
    if (!exploration_.hasModel() || !exploration_.plan())
        throw Error("open a model first");
    if (exploration_.weightsGeneration() != exploration_.generation())
        throw Error("the weights of the current rules are still being computed: keep them as A when they are in");
    comparisonA_ = std::make_shared<const Exploration>(exploration_);
    aDescription_ = description;
    comparison_.reset();
    emit logMessage(tr("Kept as A: %1").arg(description), LogLevel::Info);
    startComparison();
}

void Workspace::clearA()
{
    jobs_->cancel(JobKind::Comparison);
    comparisonA_.reset();
    aDescription_.clear();
    comparison_.reset();
    ++comparisonRequest_;
    emit comparisonChanged();
}

void Workspace::startComparison()
{
    if (!comparisonA_ || !exploration_.plan() || exploration_.weightsGeneration() != exploration_.generation())
        return;
    const quint64 request = ++comparisonRequest_;
    // Both sides are snapshots (their results are shared, immutable): the job reads them while editing goes on.
    std::shared_ptr<const Exploration> a = comparisonA_;
    auto b = std::make_shared<const Exploration>(exploration_);
    std::function<std::shared_ptr<const RuleComparison>(const CancellationToken&, const ProgressCallback&)> work =
        [a, b](const CancellationToken&, const ProgressCallback&) {
            return std::make_shared<const RuleComparison>(compareRules(*a, *b));
        };
    jobs_->start<std::shared_ptr<const RuleComparison>>(
        JobKind::Comparison, tr("Comparing A and B"), work,
        [this, request, a](std::shared_ptr<const RuleComparison> c) {
            if (a != comparisonA_)
                return; // A changed meanwhile
            comparison_ = std::move(c);
            comparisonGeneration_ = request;
            emit comparisonChanged();
        },
        [this](const QString& message) { emit logMessage(message, LogLevel::Error); });
    emit comparisonChanged(); // shown as updating
}

void Workspace::runSearch(const QString& candidatesFile, const QString& targetText)
{
    if (!exploration_.hasModel())
        throw Error("open a model first");
    if (!canRun())
        throw Error("the runtime cannot run this model: the search evaluates it");
    if (!exploration_.evaluationData())
        throw Error("set the evaluation data first (Run ▸ Evaluation Data): the search evaluates every choice on it");
    if (candidatesFile.isEmpty())
        throw Error("choose a candidates file: {\"version\": 1, \"candidates\": [...]} (docs/search.md)");
    auto candidates = std::make_shared<const SearchCandidates>(SearchCandidates::load(candidatesFile.toStdString()));
    const SearchTarget target = SearchTarget::parse(targetText.toStdString());
    const LoadedModel loaded = exploration_.loaded();
    const auto calibration = exploration_.calibrationData();
    const auto evaluation = exploration_.evaluationData();
    const auto model = exploration_.modelPtr();
    std::function<std::shared_ptr<const RuleSearchResult>(const CancellationToken&, const ProgressCallback&)> work =
        [loaded, calibration, evaluation, candidates, target](const CancellationToken& cancel,
                                                              const ProgressCallback& progress) {
            // An exploration of its own: the user's rules and results are left as they are.
            Exploration x(std::make_shared<QtImageDecoder>());
            x.setModel(loaded);
            x.setCalibrationData(calibration);
            x.setEvaluationData(evaluation);
            return std::make_shared<const RuleSearchResult>(searchRules(x, *candidates, target, cancel, progress));
        };
    emit logMessage(tr("Searching the smallest rules that meet %1 with %2 …")
                        .arg(QString::fromStdString(target.text()), QFileInfo(candidatesFile).fileName()),
                    LogLevel::Info);
    jobs_->start<std::shared_ptr<const RuleSearchResult>>(
        JobKind::Search, tr("Searching rules"), work,
        [this, candidates, model](std::shared_ptr<const RuleSearchResult> result) {
            if (model != exploration_.modelPtr())
                return; // another model was opened meanwhile
            searchResult_ = std::move(result);
            searchCandidates_ = candidates;
            searchModel_ = model;
            emit logMessage(tr("Search: %1").arg(QString::fromStdString(searchResult_->message)),
                            searchResult_->met ? LogLevel::Info : LogLevel::Warning);
            emit searchFinished();
        },
        [this](const QString& message) {
            emit logMessage(message, LogLevel::Error);
            emit searchFailed(message);
        });
}

void Workspace::applySearchPoint(size_t index)
{
    if (!searchResult_ || index >= searchResult_->points.size())
        throw Error("no such search point");
    if (searchModel_ != exploration_.modelPtr())
        throw Error("the search was of another model");
    const SearchPoint& p = searchResult_->points[index];
    const RuleSet rules = searchChoiceRules(*searchModel_, *searchCandidates_, p.candidate);
    rules_->setRuleSet(rules, tr("Apply search point %1 (%2)").arg(index + 1).arg(QString::fromStdString(p.step)));
    emit logMessage(tr("Rules of search point %1 (%2, %3 bytes, %4 %5): %n rule(s)", nullptr, int(rules.size()))
                        .arg(index + 1)
                        .arg(QString::fromStdString(p.step))
                        .arg(p.weightBytes)
                        .arg(QString::fromUtf8(searchResult_->target.metricName().data(),
                                               qsizetype(searchResult_->target.metricName().size())))
                        .arg(p.value, 0, 'f', 4),
                    LogLevel::Info);
}

SessionFile Workspace::toSession() const
{
    return exploration_.sessionFile(nlohmann::ordered_json::parse(rules_->toJsonText()));
}

void Workspace::openSession(const QString& path)
{
    SessionFile session = SessionFile::load(path.toStdString());
    sessionPath_ = path;
    pendingSession_ = std::move(session);
    openModel(QString::fromStdString(pendingSession_->modelPath.string()));
}

void Workspace::restorePendingSession()
{
    if (!pendingSession_)
        return;
    SessionFile s = std::move(*pendingSession_);
    pendingSession_.reset();
    std::vector<nlohmann::ordered_json> rows;
    for (const auto& r : s.rules["rules"])
        rows.push_back(r);
    undo_->clear();
    rules_->restoreRows(std::move(rows)); // the exploration takes them through rulesChanged
    for (const std::string& line : exploration_.restoreResults(s))
        emit logMessage(QString::fromStdString(line), LogLevel::Warning);
    if (exploration_.statistics())
        emit statisticsChanged();
    if (exploration_.evaluation()) {
        showEvaluation();
        emit evaluationChanged();
    }
    setModified(false);
    undo_->setClean();
    emit logMessage(tr("Session %1 restored").arg(sessionPath_), LogLevel::Info);
}

} // namespace qs
