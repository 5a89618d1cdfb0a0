#pragma once
// The state of one exploration in the app and the jobs that move it forward:
// the model (loaded in the background), the rules (RuleTableModel with its
// undo stack), the plan rebuilt on every edit, the fake-quantized weights
// updated incrementally in the background, calibration statistics and the
// last evaluation. Every result carries the rules generation it was computed
// from; the layer table shows older ones as stale. No widget here: the main
// window shows what this holds.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <QObject>
#include <QString>
#include <QStringList>

#include "graph/model.h"
#include "io/data_source.h"
#include "runtime/activation_calibration.h"
#include "runtime/interpreter.h"
#include "runtime/quantization_plan.h"
#include "runtime/weight_quantizer.h"
#include "session/evaluation.h"
#include "session/session_file.h"

class QUndoStack;

namespace qs {

class JobTracker;
class LayerTreeModel;
class RuleTableModel;

class Workspace : public QObject {
    Q_OBJECT
public:
    explicit Workspace(QObject* parent = nullptr);
    ~Workspace() override;

    JobTracker* jobs() const { return jobs_; }
    QUndoStack* undoStack() const { return undo_; }
    RuleTableModel* rules() const { return rules_; }
    LayerTreeModel* layers() const { return layers_; }

    // ---- model
    // Loads in the background; modelLoaded or modelFailed follows.
    void openModel(const QString& path);
    std::shared_ptr<const Model> model() const { return model_; }
    QString modelPath() const { return modelPath_; }
    // Ops the interpreter cannot run (calibration and evaluation are then
    // unavailable; weight-only quantization still works).
    const QStringList& unsupportedOps() const { return unsupported_; }
    bool canRun() const { return interpreter_ != nullptr; }
    std::shared_ptr<const Interpreter> interpreter() const { return interpreter_; }

    // ---- rules and weights
    // Replaces the rules (undoable). Throws Error for an unreadable file.
    void loadRules(const QString& path);
    void saveRules(const QString& path) const;
    uint64_t generation() const { return generation_; }
    std::shared_ptr<const QuantizationPlan> plan() const { return plan_; }
    // The fake-quantized weights of weightsGeneration() (may be older than generation()).
    std::shared_ptr<const WeightQuantizer> weights() const { return weights_; }
    uint64_t weightsGeneration() const { return weightsGeneration_; }
    // Layers the last finished weight job recomputed.
    const std::vector<size_t>& lastRecomputed() const { return lastRecomputed_; }

    // ---- data, calibration, evaluation
    void setCalibrationData(std::optional<DataConfig> config);
    void setEvaluationData(std::optional<DataConfig> config);
    const std::optional<DataConfig>& calibrationData() const { return calibrationData_; }
    const std::optional<DataConfig>& evaluationData() const { return evaluationData_; }
    // Opens the batches a configuration describes (image folders through QImage).
    static std::unique_ptr<DataSource> openData(const DataConfig& config, const Model* model);
    // Background jobs; their results arrive through signals. Each needs a model
    // the interpreter can run and its data configured.
    void calibrate();
    void evaluate();
    // Ranks the layers by what quantizing them does to the output: one layer
    // quantized at a time, or all but one (on the evaluation data).
    void runSensitivity(SensitivityKind kind);
    std::shared_ptr<const ActivationStatistics> statistics() const { return statistics_; }
    std::shared_ptr<const SensitivityResult> sensitivity() const { return sensitivity_; }
    std::shared_ptr<const EvaluationResult> evaluation() const { return evaluation_; }
    uint64_t evaluationGeneration() const { return evaluationGeneration_; }

    // ---- sessions
    SessionFile toSession() const;
    // Restores rules, data and cached results after the session's model is loaded.
    void openSession(const QString& path);
    bool isModified() const { return modified_; }
    void setModified(bool modified);
    QString sessionPath() const { return sessionPath_; }
    void setSessionPath(const QString& path) { sessionPath_ = path; }

signals:
    void modelLoaded();
    void modelFailed(const QString& message);
    // Plan rebuilt after a rule edit (weights follow in the background).
    void planChanged();
    void weightsUpdated();
    void statisticsChanged();
    void evaluationChanged();
    void sensitivityChanged();
    void modifiedChanged(bool modified);
    // A line for the Log dock; `error` lines are shown in red.
    void logMessage(const QString& text, bool error);

private:
    struct Loaded;
    void onRulesChanged();
    // A change the undo stack does not hold (data, calibration, evaluation).
    void markChanged();
    // What an evaluation or sensitivity job runs on, captured for its thread.
    struct EvaluationInputs {
        std::shared_ptr<const Interpreter> interpreter;
        std::shared_ptr<const QuantizationPlan> plan;
        std::shared_ptr<const Model> model;
        std::shared_ptr<const WeightQuantizer> weights;
        std::shared_ptr<const ActivationStatistics> statistics;
        DataConfig data;
        EvaluationOptions options() const
        {
            EvaluationOptions o;
            o.maxBatches = data.maxBatches;
            return o;
        }
    };
    // The inputs when an evaluation-like job can start now; else logs why not.
    std::optional<EvaluationInputs> evaluationInputs();
    void startWeightJob();
    void applyLoaded(std::shared_ptr<Loaded> loaded);
    void restorePendingSession();

    JobTracker* jobs_;
    QUndoStack* undo_;
    RuleTableModel* rules_;
    LayerTreeModel* layers_;

    std::shared_ptr<const Model> model_;
    std::shared_ptr<const Interpreter> interpreter_;
    QString modelPath_;
    std::string modelSha256_;
    QStringList unsupported_;

    uint64_t generation_ = 0;
    std::shared_ptr<const QuantizationPlan> plan_;
    std::shared_ptr<const WeightQuantizer> weights_;
    uint64_t weightsGeneration_ = 0;
    std::vector<size_t> lastRecomputed_;

    std::optional<DataConfig> calibrationData_, evaluationData_;
    std::shared_ptr<const ActivationStatistics> statistics_;
    std::shared_ptr<const EvaluationResult> evaluation_;
    uint64_t evaluationGeneration_ = 0;
    std::string evaluationRules_; // rules document the evaluation was computed from
    std::shared_ptr<const SensitivityResult> sensitivity_;

    bool modified_ = false;
    bool changedOutsideUndo_ = false;
    QString sessionPath_;
    std::optional<SessionFile> pendingSession_; // applied once its model has loaded
};

} // namespace qs
