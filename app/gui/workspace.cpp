#include "gui/workspace.h"

#include <limits>

#include <QElapsedTimer>
#include <QFileInfo>
#include <QLocale>
#include <QUndoStack>

#include "core/error.h"
#include "widgets/jobs/job_tracker.h"
#include "io/image_folder.h"
#include "io/model_loader.h"
#include "io/synthetic_data.h"
#include "rules/schema.h"
#include "runtime/op_registry.h"
#include "widgets/layer_tree_model.h"
#include "widgets/qt_image_decoder.h"
#include "widgets/rule_table_model.h"

namespace qs {

// What the load job hands back to the GUI thread.
struct Workspace::Loaded {
    QString path;
    std::shared_ptr<const Model> model;
    std::shared_ptr<const Interpreter> interpreter; // null when the runtime cannot run the model
    QStringList unsupported;
    QString interpreterError;
    std::string sha256;
};

namespace {

struct WeightJobResult {
    uint64_t generation = 0;
    std::shared_ptr<const WeightQuantizer> weights;
    std::vector<size_t> recomputed;
};

std::map<size_t, LayerTreeModel::ActivationResult> activationResults(const EvaluationResult& e)
{
    std::map<size_t, LayerTreeModel::ActivationResult> out;
    for (const LayerEvaluation& l : e.layers)
        out[l.layer] = {l.isolated, l.accumulated};
    return out;
}

} // namespace

Workspace::Workspace(QObject* parent)
    : QObject(parent), jobs_(new JobTracker(this)), undo_(new QUndoStack(this)), rules_(new RuleTableModel(undo_, this)),
      layers_(new LayerTreeModel(this))
{
    connect(rules_, &RuleTableModel::rulesChanged, this, &Workspace::onRulesChanged);
    // Undoing back to the saved rules is unmodified again, unless something
    // outside the undo stack (data, results) changed since the save.
    connect(undo_, &QUndoStack::cleanChanged, this,
            [this](bool clean) { setModified(!clean || changedOutsideUndo_); });
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
    std::function<std::shared_ptr<Loaded>(const CancellationToken&, const ProgressCallback&)> work =
        [path](const CancellationToken& cancel, const ProgressCallback& progress) {
            auto loaded = std::make_shared<Loaded>();
            loaded->path = QFileInfo(path).absoluteFilePath();
            progress(0.05, "reading the model");
            auto model = std::make_shared<Model>(loadModel(path.toStdString()));
            cancel.check();
            progress(0.6, "checking the ops");
            if (!model->weightsOnly) {
                for (const std::string& op : qs::unsupportedOps(*model))
                    loaded->unsupported << QString::fromStdString(op);
                if (loaded->unsupported.isEmpty()) {
                    try {
                        loaded->interpreter = std::make_shared<const Interpreter>(*model);
                    } catch (const Error& e) {
                        loaded->interpreterError = QString::fromStdString(e.what());
                    }
                }
            }
            cancel.check();
            progress(0.8, "hashing the file");
            loaded->sha256 = sha256OfFile(path.toStdString());
            loaded->model = std::move(model);
            return loaded;
        };
    jobs_->start<std::shared_ptr<Loaded>>(
        JobKind::Load, tr("Loading %1").arg(QFileInfo(path).fileName()), work,
        [this](std::shared_ptr<Loaded> loaded) { applyLoaded(std::move(loaded)); },
        [this](const QString& message) {
            pendingSession_.reset();
            emit logMessage(message, true);
            emit modelFailed(message);
        });
}

void Workspace::applyLoaded(std::shared_ptr<Loaded> loaded)
{
    jobs_->cancel(JobKind::Weights);
    jobs_->cancel(JobKind::Calibrate);
    jobs_->cancel(JobKind::Evaluate);
    model_ = loaded->model;
    interpreter_ = loaded->interpreter;
    modelPath_ = loaded->path;
    modelSha256_ = loaded->sha256;
    unsupported_ = loaded->unsupported;
    weights_ = std::make_shared<const WeightQuantizer>();
    weightsGeneration_ = 0;
    statistics_.reset();
    evaluation_.reset();
    evaluationRules_.clear();
    layers_->setLayers(model_->layers);
    emit logMessage(tr("Loaded %1: %2 format, %3 quantizable layers, %4 parameters")
                        .arg(modelPath_, QString::fromStdString(model_->format))
                        .arg(model_->layers.size())
                        .arg(model_->parameterCount()),
                    false);
    for (const std::string& w : model_->warnings)
        emit logMessage(QString::fromStdString(w), true);
    if (!unsupported_.isEmpty())
        emit logMessage(tr("The runtime cannot run %1: calibration and evaluation are off; weight-only "
                           "quantization works.")
                            .arg(unsupported_.join(QStringLiteral(", "))),
                        true);
    if (!loaded->interpreterError.isEmpty())
        emit logMessage(loaded->interpreterError, true);
    std::vector<RuleTarget> targets;
    for (const QuantizableLayer& l : model_->layers)
        targets.push_back({l.modulePath, l.opType});
    rules_->setTargets(std::move(targets)); // rebuilds the plan through rulesChanged
    emit statisticsChanged();
    emit evaluationChanged();
    emit modelLoaded();
    restorePendingSession();
}

void Workspace::onRulesChanged()
{
    ++generation_;
    if (!model_) {
        layers_->setRules(rules_->effectiveRules(), {}, generation_);
        emit planChanged();
        return;
    }
    plan_ = std::make_shared<const QuantizationPlan>(QuantizationPlan::build(*model_, rules_->effectiveRules()));
    std::vector<LayerTreeModel::Assignment> assignments(model_->layers.size());
    const auto& ruleOfLayer = plan_->resolution().ruleOfLayer;
    for (size_t i = 0; i < assignments.size() && i < ruleOfLayer.size(); ++i)
        assignments[i].rule = ruleOfLayer[i];
    for (const LayerQuantization& lq : plan_->layers()) {
        auto& a = assignments[lq.layer];
        if (lq.weight)
            a.weightQType = std::string(qtypeName(lq.weight->qtype));
        if (lq.activation)
            a.actQType = std::string(qtypeName(lq.activation->target.qtype));
        a.problem = lq.problem;
    }
    layers_->setRules(rules_->effectiveRules(), std::move(assignments), generation_);
    // A sensitivity ranking is of the rules it ran with; after an edit it would
    // be shown as current, so it goes.
    if (sensitivity_) {
        sensitivity_.reset();
        emit sensitivityChanged();
    }
    // An evaluation of exactly these rules (an undo back to them) is current again.
    if (evaluation_ && evaluationRules_ == rules_->effectiveRules().toJson()) {
        evaluationGeneration_ = generation_;
        layers_->setActivationResults(generation_, activationResults(*evaluation_));
    }
    emit planChanged();
    startWeightJob();
}

void Workspace::startWeightJob()
{
    const auto model = model_;
    const auto plan = plan_;
    const auto base = weights_;
    const uint64_t generation = generation_;
    auto clock = std::make_shared<QElapsedTimer>();
    clock->start();
    std::function<WeightJobResult(const CancellationToken&, const ProgressCallback&)> work =
        [model, plan, base, generation](const CancellationToken& cancel, const ProgressCallback& progress) {
            auto next = std::make_shared<WeightQuantizer>(*base); // shares the unchanged layers' results
            WeightJobResult r;
            r.recomputed = next->update(*model, *plan, cancel, progress);
            r.generation = generation;
            r.weights = std::move(next);
            return r;
        };
    jobs_->start<WeightJobResult>(
        JobKind::Weights, tr("Quantizing weights"), work,
        [this, clock](WeightJobResult r) {
            if (r.generation < weightsGeneration_)
                return;
            if (!r.recomputed.empty()) {
                int64_t parameters = 0;
                for (const size_t layer : r.recomputed)
                    if (!model_->layers[layer].sharesWeightOf) // a shared weight counts once
                        parameters += model_->layers[layer].parameterCount;
                emit logMessage(tr("Weights: %n layer(s) (%1 parameters) requantized; the table was current %2 ms "
                                   "after the edit",
                                   nullptr, int(r.recomputed.size()))
                                    .arg(QLocale().toString(qlonglong(parameters)))
                                    .arg(clock->elapsed()),
                                false);
            }
            weights_ = r.weights;
            weightsGeneration_ = r.generation;
            lastRecomputed_ = r.recomputed;
            std::map<size_t, ErrorMetrics> metrics;
            for (const auto& [layer, w] : weights_->weights())
                metrics[layer] = w->metrics;
            layers_->setWeightResults(r.generation, std::move(metrics), weights_->problems());
            for (const auto& [layer, why] : weights_->problems())
                emit logMessage(tr("%1: %2").arg(QString::fromStdString(model_->layers[layer].modulePath),
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
    calibrationData_ = std::move(config);
    markChanged();
}

void Workspace::setEvaluationData(std::optional<DataConfig> config)
{
    evaluationData_ = std::move(config);
    markChanged();
}

std::unique_ptr<DataSource> Workspace::openData(const DataConfig& config, const Model* model)
{
    // A model whose inputs fix the batch dimension gets batches of that size, whatever the dialog's size.
    DataSourceOptions options;
    options.batchSize = config.batchSize;
    if (model)
        options = batchSizingFor(*model, std::nullopt, config.batchSize).apply(options);
    switch (config.kind) {
    case DataConfig::Kind::File:
        return openDataSource(config.path, options, model);
    case DataConfig::Kind::ImageFolder:
        return std::make_unique<ImageFolderSource>(config.path, config.recipe, std::make_shared<QtImageDecoder>(),
                                                   options, model);
    case DataConfig::Kind::Synthetic:
        if (!model)
            throw Error("synthetic data needs a model");
        return std::make_unique<SyntheticDataSource>(*model, config.syntheticSamples, config.syntheticSeed, options);
    }
    throw Error("unknown data kind");
}

void Workspace::calibrate()
{
    if (!model_ || !interpreter_ || !calibrationData_ || !plan_)
        return;
    if (calibrationData_->kind == DataConfig::Kind::Synthetic)
        emit logMessage(tr("Calibrating on synthetic data: the ranges are not representative of real inputs."), true);
    const auto interpreter = interpreter_;
    const auto plan = plan_;
    const auto model = model_;
    const DataConfig config = *calibrationData_;
    std::function<std::shared_ptr<const ActivationStatistics>(const CancellationToken&, const ProgressCallback&)>
        work = [interpreter, plan, model, config](const CancellationToken& cancel, const ProgressCallback& progress) {
            auto data = openData(config, model.get());
            CalibrationOptions options;
            options.maxBatches = config.maxBatches;
            // Every histogram: the method can change, and the charts show them, without calibrating again.
            options.histograms = KeptHistograms::All;
            return std::make_shared<const ActivationStatistics>(
                calibrateActivations(*interpreter, *plan, *data, options, cancel, progress));
        };
    jobs_->start<std::shared_ptr<const ActivationStatistics>>(
        JobKind::Calibrate, tr("Calibrating"), work,
        [this](std::shared_ptr<const ActivationStatistics> stats) {
            statistics_ = std::move(stats);
            emit logMessage(tr("Calibrated %1 activations over %2 batches")
                                .arg(statistics_->observers().size())
                                .arg(statistics_->batches()),
                            false);
            markChanged();
            emit statisticsChanged();
        },
        [this](const QString& message) { emit logMessage(message, true); });
}

std::optional<Workspace::EvaluationInputs> Workspace::evaluationInputs()
{
    if (!model_ || !interpreter_ || !evaluationData_ || !plan_ || !weights_)
        return std::nullopt;
    if (weightsGeneration_ != generation_) {
        emit logMessage(tr("The weights of the current rules are still being computed; try again in a moment."),
                        true);
        return std::nullopt;
    }
    if (!statistics_ && !plan_->observedActivations().empty()) {
        bool anyStatic = false;
        for (const auto& l : plan_->layers())
            anyStatic = anyStatic || (l.activation && l.activation->staticScale);
        if (anyStatic) {
            emit logMessage(tr("These rules quantize activations with static scales: run Calibrate first."), true);
            return std::nullopt;
        }
    }
    return EvaluationInputs{interpreter_, plan_, model_, weights_, statistics_, *evaluationData_};
}

void Workspace::runSensitivity(SensitivityKind kind)
{
    const auto inputs = evaluationInputs();
    if (!inputs)
        return;
    std::function<std::shared_ptr<const SensitivityResult>(const CancellationToken&, const ProgressCallback&)> work =
        [inputs = *inputs, kind](const CancellationToken& cancel, const ProgressCallback& progress) {
            auto data = openData(inputs.data, inputs.model.get());
            return std::make_shared<const SensitivityResult>(
                qs::sensitivity(*inputs.interpreter, *inputs.plan, *inputs.weights, inputs.statistics.get(), *data,
                                kind, inputs.options(), cancel, progress));
        };
    jobs_->start<std::shared_ptr<const SensitivityResult>>(
        JobKind::Sensitivity,
        kind == SensitivityKind::OneLayer ? tr("Sensitivity (one layer at a time)") : tr("Sensitivity (all but one)"),
        work,
        [this](std::shared_ptr<const SensitivityResult> result) {
            sensitivity_ = std::move(result);
            if (!sensitivity_->ranking.empty()) {
                const LayerSensitivity& first = sensitivity_->ranking.front();
                emit logMessage(tr("Sensitivity: %1 layers ranked; most sensitive %2 (output SQNR %3 dB)")
                                    .arg(sensitivity_->ranking.size())
                                    .arg(QString::fromStdString(model_->layers.at(first.layer).modulePath))
                                    .arg(first.output.sqnrDb, 0, 'f', 1),
                                false);
            }
            emit sensitivityChanged();
        },
        [this](const QString& message) { emit logMessage(message, true); });
}

void Workspace::evaluate()
{
    const auto inputs = evaluationInputs();
    if (!inputs)
        return;
    const uint64_t generation = generation_;
    const std::string rulesText = rules_->effectiveRules().toJson();
    std::function<std::shared_ptr<const EvaluationResult>(const CancellationToken&, const ProgressCallback&)> work =
        [inputs = *inputs](const CancellationToken& cancel, const ProgressCallback& progress) {
            auto data = openData(inputs.data, inputs.model.get());
            return std::make_shared<const EvaluationResult>(qs::evaluate(*inputs.interpreter, *inputs.plan,
                                                                         *inputs.weights, inputs.statistics.get(),
                                                                         *data, inputs.options(), cancel, progress));
        };
    jobs_->start<std::shared_ptr<const EvaluationResult>>(
        JobKind::Evaluate, tr("Evaluating"), work,
        [this, generation, rulesText](std::shared_ptr<const EvaluationResult> result) {
            evaluation_ = std::move(result);
            evaluationRules_ = rulesText;
            // Rules edited while it ran: the result is kept, shown stale.
            evaluationGeneration_ = rulesText == rules_->effectiveRules().toJson() ? generation_ : generation;
            layers_->setActivationResults(evaluationGeneration_, activationResults(*evaluation_));
            QString summary = tr("Evaluated %1 samples").arg(evaluation_->samples);
            if (evaluation_->accuracy)
                summary += tr(": top-1 float %1%, quantized %2%")
                               .arg(evaluation_->accuracy->floatTop1 * 100, 0, 'f', 2)
                               .arg(evaluation_->accuracy->quantizedTop1 * 100, 0, 'f', 2);
            for (const OutputEvaluation& o : evaluation_->outputs)
                summary += tr("; %1 SQNR %2 dB").arg(QString::fromStdString(o.name)).arg(o.metrics.sqnrDb, 0, 'f', 1);
            emit logMessage(summary, false);
            markChanged();
            emit evaluationChanged();
        },
        [this](const QString& message) { emit logMessage(message, true); });
}

SessionFile Workspace::toSession() const
{
    SessionFile s;
    s.modelPath = modelPath_.toStdString();
    s.modelSha256 = modelSha256_;
    s.rules = nlohmann::ordered_json::parse(rules_->toJsonText());
    s.calibrationData = calibrationData_;
    s.evaluationData = evaluationData_;
    if (statistics_)
        s.activationStatistics = statistics_->toJson();
    if (evaluation_) {
        s.evaluation = evaluation_->toJson();
        s.rulesOfResults = nlohmann::ordered_json::parse(evaluationRules_);
    }
    return s;
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
    if (!s.modelSha256.empty() && s.modelSha256 != modelSha256_)
        emit logMessage(tr("The model file changed since the session was saved (SHA-256 differs): cached results "
                           "are dropped."),
                        true);
    std::vector<nlohmann::ordered_json> rows;
    for (const auto& r : s.rules["rules"])
        rows.push_back(r);
    undo_->clear();
    rules_->restoreRows(std::move(rows));
    calibrationData_ = s.calibrationData;
    evaluationData_ = s.evaluationData;
    if (s.modelSha256 == modelSha256_) {
        try {
            if (!s.activationStatistics.is_null()) {
                statistics_ = std::make_shared<const ActivationStatistics>(
                    ActivationStatistics::fromJson(s.activationStatistics));
                emit statisticsChanged();
            }
        } catch (const Error& e) {
            emit logMessage(tr("Cached statistics dropped: %1").arg(QString::fromUtf8(e.what())), true);
        }
        // The cached evaluation comes back whole (table, inspector, charts), stale
        // unless its rules are the current ones.
        if (!s.evaluation.is_null()) {
            try {
                EvaluationResult restored = EvaluationResult::fromJson(s.evaluation);
                // Rows of layers this model does not have (a session file edited by hand) are dropped, and said so.
                const size_t rows = restored.layers.size();
                std::erase_if(restored.layers, [&](const LayerEvaluation& l) { return l.layer >= model_->layers.size(); });
                if (restored.layers.size() != rows)
                    emit logMessage(tr("Cached evaluation: %1 of %2 layer row(s) name layers the model does not have "
                                       "(it has %3); they were dropped")
                                        .arg(rows - restored.layers.size())
                                        .arg(rows)
                                        .arg(model_->layers.size()),
                                    true);
                auto evaluation = std::make_shared<const EvaluationResult>(std::move(restored));
                std::string rulesText = s.rulesOfResults.dump(); // as saved, if it no longer parses
                bool current = false;
                try {
                    rulesText = RuleSet::fromJson(s.rulesOfResults.dump()).toJson();
                    current = !s.rulesOfResults.is_null() && rulesText == rules_->effectiveRules().toJson();
                } catch (const Error&) {
                    current = false; // rules that no longer parse: the results are stale
                }
                evaluation_ = std::move(evaluation);
                evaluationRules_ = rulesText;
                evaluationGeneration_ = current ? generation_ : generation_ - 1;
                layers_->setActivationResults(evaluationGeneration_, activationResults(*evaluation_));
                emit evaluationChanged();
            } catch (const Error& e) {
                emit logMessage(tr("Cached evaluation dropped: %1").arg(QString::fromUtf8(e.what())), true);
            }
        }
    }
    setModified(false);
    undo_->setClean();
    emit logMessage(tr("Session %1 restored").arg(sessionPath_), false);
}

} // namespace qs
