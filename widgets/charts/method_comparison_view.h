#pragma once
// Calibration methods compared on the selected weight or input activation:
// the histogram with each method's clipping range in its own colour, and a
// table of MSE, SQNR and clipped fraction, best first. The percentile p and
// the rms factor s are editable; "Apply" asks for the selected method (the
// best when none is selected) to be written into the layer's rule.

#include <memory>
#include <optional>
#include <string>

#include <QWidget>

#include "analysis/method_comparison.h"
#include "widgets/jobs/job_tracker.h"

class QDoubleSpinBox;
class QPushButton;
class QTableView;

namespace qs {

class ActivationStatistics;
class ChartFrame;
class MethodTableModel;

class MethodComparisonView : public QWidget {
    Q_OBJECT
public:
    // Compares on `jobs` (JobKind::MethodComparison; it may be deleted first).
    explicit MethodComparisonView(JobTracker* jobs, QWidget* parent = nullptr);
    ~MethodComparisonView() override;

    // A weight (any float dtype) quantized with `spec` (its method is the current one).
    void showWeight(Tensor x, const QuantizationSpec& spec, const QString& name);
    // An input activation's observer in `stats`, for the rule's target.
    void showActivation(std::shared_ptr<const ActivationStatistics> stats, const std::string& value,
                        const CalibrationTarget& target);
    void clear(const QString& why);

    const MethodComparisonData* data() const { return data_ ? &*data_ : nullptr; }
    bool busy() const { return job_.busy(); }
    bool isActivation() const { return activation_; }
    void setPercentile(double p);
    void setRmsFactor(double s);
    // The method string of the selected row, else of the best one; empty when none applies.
    QString chosenMethod() const;
    // Emits methodApplied(chosenMethod()) when there is one.
    void apply();

    ChartFrame* histogramFrame() const { return chart_; }
    QTableView* table() const { return table_; }
    MethodTableModel* tableModel() const { return model_; }
    QPushButton* applyButton() const { return apply_; }

signals:
    void methodApplied(QString method);
    void ready();

private:
    void recompute();
    void land(MethodComparisonData d);
    void draw();
    void hover(QPointF value, QPoint globalPos);
    QColor colorOf(const std::string& method) const;

    ChartFrame* chart_;
    QTableView* table_;
    MethodTableModel* model_;
    QDoubleSpinBox* percentile_;
    QDoubleSpinBox* rms_;
    QPushButton* apply_;
    // What is compared: a weight, or an activation.
    std::optional<Tensor> weight_;
    QuantizationSpec spec_;
    std::string name_;
    std::shared_ptr<const ActivationStatistics> stats_;
    CalibrationTarget target_;
    bool activation_ = false;
    std::optional<MethodComparisonData> data_;
    JobSlot job_; // the data, computed on the tracker the view was given
};

} // namespace qs
