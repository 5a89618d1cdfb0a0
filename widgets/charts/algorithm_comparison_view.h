#pragma once
// The Methods chart's "Algorithms" mode: the selected layer's weight rounded by
// every algorithm under its rule (session/algorithm_comparison.h, what
// `compare-methods --algorithms` prints), as bars of weight SQNR and layer
// output SQNR per variant and a table with the variants the rule refuses and
// why. The comparison reads the layer's input statistics from the calibration
// (gathered for layers whose rule names gptq, awq, adaround or bias_correction);
// it runs as a job that a newer request or clear() cancels. "Apply" asks for the
// selected variant (the best output SQNR when none is selected) to be written
// into the layer's rule.

#include <memory>
#include <optional>

#include <QWidget>

#include <nlohmann/json.hpp>

#include "session/algorithm_comparison.h"
#include "widgets/jobs/job_tracker.h"

class QPushButton;
class QTableView;

namespace qs {

class ActivationStatistics;
class AlgorithmTableModel;
class ChartFrame;

class AlgorithmComparisonView : public QWidget {
    Q_OBJECT
public:
    // Compares on `jobs` (JobKind::AlgorithmComparison; it may be deleted first).
    explicit AlgorithmComparisonView(JobTracker* jobs, QWidget* parent = nullptr);
    ~AlgorithmComparisonView() override;

    // Compares layer `layer` of `model` under `rules` with its input statistics in `stats`;
    // says why not (clear) when `stats` holds none for it.
    void show(std::shared_ptr<const Model> model, std::shared_ptr<const RuleSet> rules, size_t layer,
              std::shared_ptr<const ActivationStatistics> stats);
    void clear(const QString& why);

    const AlgorithmComparison* comparison() const { return data_ ? &*data_ : nullptr; }
    bool busy() const { return job_.busy(); }
    // The selected row, else the one with the best output SQNR; null when none applies.
    const AlgorithmRow* chosenRow() const;
    // Emits algorithmApplied(ruleFieldsOf(chosen row)) when there is one.
    void apply();

    ChartFrame* chartFrame() const { return chart_; }
    QTableView* table() const { return table_; }
    AlgorithmTableModel* tableModel() const { return model_; }
    QPushButton* applyButton() const { return apply_; }

signals:
    // The rule fields that select the variant (null: back to the default).
    void algorithmApplied(nlohmann::ordered_json fields);
    void ready();

private:
    void land(AlgorithmComparison c);
    void draw();

    ChartFrame* chart_;
    QTableView* table_;
    AlgorithmTableModel* model_;
    QPushButton* apply_;
    std::optional<AlgorithmComparison> data_;
    JobSlot job_;
};

// The rule fields that turn the layer's rule into variant `row` of a comparison
// whose rule has weight_qtype `ruleQType`: algorithm and bias_correction (null
// for their defaults); for a lutN variant also weight_qtype and the fields the
// comparison reset for it (weight_calibration, symmetric, narrow_range,
// scale_restriction, rounding back to their defaults).
nlohmann::ordered_json ruleFieldsOf(const AlgorithmRow& row, const std::string& ruleQType);

} // namespace qs
