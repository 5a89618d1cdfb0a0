#pragma once
// The app's adapter over one engine Exploration (session/exploration.h): the
// exploration owns the model, rules, data settings and generation-stamped
// results; this class adds what only a GUI has — the rule table with its undo
// stack, the layer table, the job tracker that runs the exploration's jobs on
// worker threads, and signals. It computes nothing itself. No widget here: the
// main window shows what this holds.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <QObject>
#include <QString>
#include <QStringList>

#include "quantization/weight_bytes.h"
#include "session/exploration.h"
#include "session/rule_comparison.h"
#include "session/rule_search.h"
#include "widgets/graph/graph_layout.h"
#include "widgets/graph/repeated_blocks.h"
#include "widgets/jobs/job_kind.h"

class QUndoStack;

namespace qs {

// How a log line is shown: on stderr prefixed "warning: " or "error: ", in the Log dock in colour.
enum class LogLevel { Info, Warning, Error };

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
    // Loads in the background; modelLoaded or modelFailed follows. Replacing
    // a model starts clean: the data settings of the last one (unless set
    // since this call) and the undo history go; the rules stay.
    void openModel(const QString& path);
    std::shared_ptr<const Model> model() const { return exploration_.modelPtr(); }
    QString modelPath() const { return modelPath_; }
    // The engine's exploration: every result and the snapshot a job reads.
    const Exploration& exploration() const { return exploration_; }
    // Ops the interpreter cannot run (calibration and evaluation are then
    // unavailable; weight-only quantization still works).
    const QStringList& unsupportedOps() const { return unsupported_; }
    bool canRun() const { return exploration_.interpreter() != nullptr; }
    std::shared_ptr<const Interpreter> interpreter() const { return exploration_.interpreter(); }

    // ---- rules and weights
    // Replaces the rules (undoable). Throws Error for an unreadable file.
    void loadRules(const QString& path);
    void saveRules(const QString& path) const;
    uint64_t generation() const { return exploration_.generation(); }
    std::shared_ptr<const QuantizationPlan> plan() const { return exploration_.plan(); }
    // The fake-quantized weights of weightsGeneration() (may be older than generation()).
    std::shared_ptr<const WeightQuantizer> weights() const { return exploration_.weights(); }
    uint64_t weightsGeneration() const { return exploration_.weightsGeneration(); }
    // The weight bytes of weightsGeneration()'s weights, float and quantized
    // (computed by the weight job); none before the first weight job.
    const std::optional<WeightBytes>& weightBytes() const { return weightBytes_; }
    // Layers the last finished weight job recomputed.
    const std::vector<size_t>& lastRecomputed() const { return lastRecomputed_; }

    // ---- data, calibration, evaluation
    void setCalibrationData(std::optional<DataConfig> config);
    void setEvaluationData(std::optional<DataConfig> config);
    const std::optional<DataConfig>& calibrationData() const { return exploration_.calibrationData(); }
    const std::optional<DataConfig>& evaluationData() const { return exploration_.evaluationData(); }
    // Background jobs; their results arrive through signals. Each needs a model
    // the interpreter can run and its data configured.
    void calibrate();
    void evaluate();
    // Ranks the layers by what quantizing them does to the output: one layer
    // quantized at a time, or all but one (on the evaluation data).
    // `algorithm`: every layer's weight rounded by it instead of its rule's
    // (SensitivityJob), so the ranking shows which layers it rescues.
    void runSensitivity(SensitivityKind kind, std::optional<WeightAlgorithm> algorithm = {});
    std::shared_ptr<const ActivationStatistics> statistics() const { return exploration_.statistics(); }
    std::shared_ptr<const SensitivityResult> sensitivity() const { return exploration_.sensitivity(); }
    std::shared_ptr<const EvaluationResult> evaluation() const { return exploration_.evaluation(); }
    uint64_t evaluationGeneration() const { return exploration_.evaluationGeneration(); }

    // ---- A against B (session/rule_comparison.h)
    // Holds the current rules and results as A (`description` names them);
    // the current ones are B from then on, compared after every result.
    void keepAsA(const QString& description);
    void clearA();
    bool hasA() const { return comparisonA_ != nullptr; }
    QString aDescription() const { return aDescription_; }
    // The last comparison of A with the current results (null: none); stale
    // while a newer one is being computed.
    std::shared_ptr<const RuleComparison> comparison() const { return comparison_; }
    bool comparisonCurrent() const { return comparison_ && comparisonGeneration_ == comparisonRequest_; }

    // ---- the smallest rules that meet a target (session/rule_search.h)
    // Runs the search as a cancellable job on an exploration of its own (the
    // same model and data settings); searchFinished or logMessage follows.
    // Throws Error for an unreadable candidates file or target.
    void runSearch(const QString& candidatesFile, const QString& target);
    std::shared_ptr<const RuleSearchResult> searchResult() const { return searchResult_; }
    std::shared_ptr<const SearchCandidates> searchCandidates() const { return searchCandidates_; }
    // Replaces the rules by those of point `index` of searchResult() (undoable).
    void applySearchPoint(size_t index);

    // ---- the graph view (widgets/graph/graph_layout.h)
    // Lays out the model's graph as a job (started when a model opens) with the
    // repeated runs in `folded` folded; graphLayoutChanged or graphLayoutFailed follows.
    void layoutGraph(const std::set<size_t>& folded);
    std::shared_ptr<const GraphLayout> graphLayout() const { return graphLayout_; }
    // The model's runs of repeated blocks (what can be folded).
    const std::vector<RepeatedRun>& repeatedRuns() const { return repeatedRuns_; }

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
    // The A/B comparison was recomputed, or A was kept or cleared.
    void comparisonChanged();
    void searchFinished();
    void searchFailed(const QString& message);
    void graphLayoutChanged();
    void graphLayoutFailed(const QString& message);
    // A line for the Log dock: something the user should know of (Warning: a
    // rule that matches nothing, a layer left float) or something that failed (Error).
    void logMessage(const QString& text, LogLevel level);

private:
    void onRulesChanged();
    // A change the undo stack does not hold (data, calibration, evaluation).
    void markChanged();
    // Lines for the Log dock from the exploration's warnings.
    void logWarnings(const std::vector<ExplorationWarning>& warnings);
    // The layer table's results, from what the exploration holds.
    void showEvaluation();
    // The plan's assignments in the layer and rule tables; starts the weight job when `stale` says so.
    void showPlan(const Staleness& stale);
    void showWeights();
    void startWeightJob();
    // Runs the exploration's job `makeJob` makes (its refusal is logged) on a worker; the result
    // is applied on the GUI thread, its warnings logged, and `applied` runs when the exploration took it.
    template <class Job>
    void startStage(JobKind kind, const QString& title, const std::function<Job()>& makeJob,
                    const std::function<void()>& applied);
    void applyLoaded(LoadedModel loaded);
    // Recomputes the A/B comparison in the background when A is held.
    void startComparison();
    void restorePendingSession();

    JobTracker* jobs_;
    QUndoStack* undo_;
    RuleTableModel* rules_;
    LayerTreeModel* layers_;

    Exploration exploration_;
    QString modelPath_;
    QStringList unsupported_;
    std::vector<size_t> lastRecomputed_;
    std::optional<WeightBytes> weightBytes_;

    std::shared_ptr<const Exploration> comparisonA_;
    QString aDescription_;
    std::shared_ptr<const RuleComparison> comparison_;
    uint64_t comparisonRequest_ = 0, comparisonGeneration_ = 0;

    std::shared_ptr<const RuleSearchResult> searchResult_;
    std::shared_ptr<const SearchCandidates> searchCandidates_;
    std::shared_ptr<const Model> searchModel_; // the model the search result's choices index

    std::shared_ptr<const GraphLayout> graphLayout_;
    std::vector<RepeatedRun> repeatedRuns_;

    bool modified_ = false;
    bool changedOutsideUndo_ = false;
    QString sessionPath_;
    std::optional<SessionFile> pendingSession_; // applied once its model has loaded
    // Another model is being opened: drop these data settings of the last one when it is in.
    struct {
        bool calibration = false, evaluation = false;
    } cleanOnLoad_;
};

} // namespace qs
