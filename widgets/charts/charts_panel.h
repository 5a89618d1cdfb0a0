#pragma once
// The analysis charts the app embeds: four tabs (distribution, method
// comparison — calibration methods or weight-rounding algorithms —, scale
// ranges, layer errors), fed only engine results. Every
// setter takes shared, immutable results; heavy work (binning a tensor,
// comparing methods, turning calibration statistics into an activation's
// range) runs on the panel's job tracker, off the GUI thread, and a newer
// request supersedes an older one. Signals say what the user asked for; the app applies it (the
// panel never edits rules itself).

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <tuple>

#include <QStringList>
#include <QWidget>

#include <nlohmann/json.hpp>

class QComboBox;
class QStackedWidget;
class QLabel;

namespace qs {

class Model;
class QuantizationPlan;
class WeightQuantizer;
class RuleSet;
class ActivationStatistics;
struct EvaluationResult;
struct SensitivityResult;
class DistributionView;
class MethodComparisonView;
class AlgorithmComparisonView;
class ScaleRangeView;
class LayerErrorView;
class JobTracker;

class ChartsPanel : public QWidget {
    Q_OBJECT
public:
    explicit ChartsPanel(QWidget* parent = nullptr);
    ~ChartsPanel() override;

    // A new model clears everything computed from the previous one.
    void setModel(std::shared_ptr<const Model> model);
    // The current plan, its fake-quantized weights and the rules it came from.
    void setPlan(std::shared_ptr<const QuantizationPlan> plan, std::shared_ptr<const WeightQuantizer> weights,
                 std::shared_ptr<const RuleSet> rules);
    // Calibration statistics of the activations (null: none yet).
    void setActivationStatistics(std::shared_ptr<const ActivationStatistics> stats);
    // The per-layer error of the last evaluation (null: none yet).
    void setEvaluation(std::shared_ptr<const EvaluationResult> eval);
    // The last sensitivity run (null: none yet).
    void setSensitivity(std::shared_ptr<const SensitivityResult> s);
    // The layer (index into Model::layers) the distribution, method and scale views show.
    void setSelectedLayer(std::optional<size_t> layer);

    // Whether the distribution and method views show the layer's input activation (else its weight).
    void setShowActivation(bool activation);
    bool showsActivation() const;
    // Whether the Methods tab compares the weight-rounding algorithms (else calibration methods).
    void setCompareAlgorithms(bool algorithms);
    bool comparesAlgorithms() const;

    DistributionView* distributionView() const { return distribution_; }
    MethodComparisonView* methodComparisonView() const { return methods_; }
    AlgorithmComparisonView* algorithmComparisonView() const { return algorithms_; }
    ScaleRangeView* scaleRangeView() const { return scales_; }
    LayerErrorView* layerErrorView() const { return layerErrors_; }
    JobTracker* jobs() const { return jobs_; }

signals:
    // A bar of the layer-error chart was clicked: select this layer everywhere.
    void layerClicked(size_t layer);
    // "Apply" in the method comparison: write `method` (a calibration method
    // string) into the rule that governs `layer` (weight_calibration, or
    // act_calibration when the comparison was of the input activation).
    void methodApplied(size_t layer, QString method, bool activation);
    // "Apply" in the algorithm comparison: set `fields` (null: the default) in the rule that governs `layer`.
    void algorithmApplied(size_t layer, nlohmann::ordered_json fields);
    // The threshold line marks these layers (module paths) to keep in float.
    void keepFloatProposed(QStringList modulePaths);

private:
    void refreshLayer();
    void refreshLayerErrors();
    void showWeight(size_t layer);
    void showActivation(size_t layer);
    // The algorithm comparison of the selected layer, when the Methods tab shows it.
    void refreshAlgorithms();

    std::shared_ptr<const Model> model_;
    std::shared_ptr<const QuantizationPlan> plan_;
    std::shared_ptr<const WeightQuantizer> weights_;
    std::shared_ptr<const RuleSet> rules_;
    std::shared_ptr<const ActivationStatistics> stats_;
    std::shared_ptr<const EvaluationResult> evaluation_;
    std::shared_ptr<const SensitivityResult> sensitivity_;
    std::optional<size_t> layer_;
    // What the layer views show now, to skip recomputing it when a new plan leaves it unchanged.
    struct Shown {
        std::optional<size_t> layer;
        bool activation = false;
        const void* weight = nullptr; // the QuantizedWeight shown (the cache keeps unchanged layers' pointers)
        const void* stats = nullptr;
        std::string activationMethod;
        bool operator==(const Shown&) const = default;
    };
    std::optional<Shown> shown_;
    // What the algorithm comparison was last asked for (layer, statistics, the rules as JSON).
    std::optional<std::tuple<size_t, const void*, std::string>> algorithmsShown_;
    // The views' jobs: the panel's own tracker, so that chart data neither waits
    // behind a calibration in the workspace's pool nor shows in the status bar.
    JobTracker* jobs_ = nullptr;
    QComboBox* subject_ = nullptr;
    QLabel* header_ = nullptr;
    DistributionView* distribution_ = nullptr;
    MethodComparisonView* methods_ = nullptr;
    AlgorithmComparisonView* algorithms_ = nullptr;
    QComboBox* methodsMode_ = nullptr;
    QStackedWidget* methodsStack_ = nullptr;
    ScaleRangeView* scales_ = nullptr;
    LayerErrorView* layerErrors_ = nullptr;
};

} // namespace qs
