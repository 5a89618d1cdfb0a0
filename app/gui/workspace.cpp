#include "gui/workspace.h"

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
    emit logMessage(tr("Loading %1 …").arg(path), false);
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
            emit logMessage(message, true);
            emit modelFailed(message);
        });
}

void Workspace::logWarnings(const std::vector<ExplorationWarning>& warnings)
{
    for (const ExplorationWarning& w : warnings)
        emit logMessage(QString::fromStdString(w.text), true);
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
    exploration_.setModel(std::move(loaded));
    const Model& model = exploration_.model();
    layers_->setLayers(model.layers);
    emit logMessage(tr("Loaded %1: %2 format, %3 quantizable layers, %4 parameters")
                        .arg(modelPath_, QString::fromStdString(model.format))
                        .arg(model.layers.size())
                        .arg(model.parameterCount()),
                    false);
    for (const ExplorationWarning& w : exploration_.warnings())
        if (w.kind == ExplorationWarning::Kind::Model || w.kind == ExplorationWarning::Kind::RuleConflict)
            emit logMessage(QString::fromStdString(w.text), true);
    if (!unsupported_.isEmpty())
        emit logMessage(tr("The runtime cannot run %1: calibration and evaluation are off; weight-only "
                           "quantization works.")
                            .arg(unsupported_.join(QStringLiteral(", "))),
                        true);
    else if (!whyNotRunnable.isEmpty() && !model.weightsOnly)
        emit logMessage(whyNotRunnable, true);
    Staleness stale;
    stale.plan = stale.weights = true;
    showPlan(stale); // setModel resolved the current rules against the new layers
    emit statisticsChanged();
    emit evaluationChanged();
    emit modelLoaded();
    restorePendingSession();
}

void Workspace::onRulesChanged()
{
    Staleness stale;
    try {
        stale = exploration_.setRules(rules_->effectiveRules());
    } catch (const Error& e) {
        // Rules that contradict themselves on a shared weight: the exploration
        // keeps the rules of before; the table keeps what was typed.
        emit logMessage(QString::fromUtf8(e.what()), true);
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
            // The algorithm that rounds the weight is part of what the layer gets ("int4 · gptq").
            a.weightQType = std::string(qtypeName(lq.weight->qtype));
            if (lq.weightAlgorithm.kind != WeightAlgorithmKind::Rtn)
                a.weightQType += " · " + lq.weightAlgorithm.toString();
        }
        if (lq.activation)
            a.actQType = std::string(qtypeName(lq.activation->target.qtype));
        a.problem = lq.problem;
    }
    layers_->setRules(rules_->effectiveRules(), std::move(assignments), exploration_.generation());
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
    std::function<WeightResult(const CancellationToken&, const ProgressCallback&)> work =
        [job](const CancellationToken& cancel, const ProgressCallback& progress) { return job.run(cancel, progress); };
    jobs_->start<WeightResult>(
        JobKind::Weights, tr("Quantizing weights"), work,
        [this, clock](WeightResult r) {
            const std::vector<size_t> recomputed = r.recomputed;
            if (!exploration_.apply(std::move(r)))
                return;
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
                                false);
            }
            lastRecomputed_ = recomputed;
            showWeights();
            for (const auto& [layer, why] : exploration_.weights()->problems())
                emit logMessage(tr("%1: %2").arg(QString::fromStdString(model.layers[layer].modulePath),
                                                 QString::fromStdString(why)),
                                true);
            emit weightsUpdated();
        },
        [this](const QString& message) { emit logMessage(message, true); });
}

void Workspace::loadRules(const QString& path)
{
    const RuleSet rules = RuleSet::load(path.toStdString());
    rules_->setRuleSet(rules, tr("Open rules %1").arg(QFileInfo(path).fileName()));
    emit logMessage(tr("Rules from %1: %n rule(s)", nullptr, int(rules.size())).arg(path), false);
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
    exploration_.setCalibrationData(std::move(config));
    markChanged();
}

void Workspace::setEvaluationData(std::optional<DataConfig> config)
{
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
        emit logMessage(QString::fromUtf8(e.what()), true);
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
        [this](const QString& message) { emit logMessage(message, true); });
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
                            false);
            markChanged();
            emit statisticsChanged();
            // An algorithm such as gptq rounds the weights from this calibration: they follow it.
            if (!exploration_.weightsCurrent())
                startWeightJob();
        });
}

void Workspace::runSensitivity(SensitivityKind kind)
{
    if (!exploration_.hasModel() || !exploration_.evaluationData() || !canRun())
        return;
    startStage<SensitivityJob>(
        JobKind::Sensitivity,
        kind == SensitivityKind::OneLayer ? tr("Sensitivity (one layer at a time)") : tr("Sensitivity (all but one)"),
        [this, kind] { return exploration_.sensitivityJob(kind); },
        [this] {
            const auto result = exploration_.sensitivity();
            if (!result->ranking.empty()) {
                const LayerSensitivity& first = result->ranking.front();
                QString text = tr("Sensitivity: %1 layers ranked; most sensitive %2 (output SQNR %3 dB")
                                   .arg(result->ranking.size())
                                   .arg(QString::fromStdString(exploration_.model().layers.at(first.layer).modulePath))
                                   .arg(first.output.sqnrDb, 0, 'f', 1);
                if (result->floatPerplexity && first.perplexity)
                    text += tr(", perplexity %1 against %2 in float")
                                .arg(*first.perplexity, 0, 'f', 3)
                                .arg(*result->floatPerplexity, 0, 'f', 3);
                emit logMessage(text + QStringLiteral(")"), false);
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
            emit logMessage(summary, false);
            if (!evaluation->outputSimulationNote.empty())
                emit logMessage(QString::fromStdString(evaluation->outputSimulationNote), true);
            markChanged();
            emit evaluationChanged();
        });
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
        emit logMessage(QString::fromStdString(line), true);
    if (exploration_.statistics())
        emit statisticsChanged();
    if (exploration_.evaluation()) {
        showEvaluation();
        emit evaluationChanged();
    }
    setModified(false);
    undo_->setClean();
    emit logMessage(tr("Session %1 restored").arg(sessionPath_), false);
}

} // namespace qs
