#pragma once
// The distribution of the selected weight or input activation: its histogram
// (linear or log counts) with the clipping range of the rule's method, the
// fake-quantized distribution overlaid, the quantization grid when zoomed in
// far enough to tell its values apart, clipped mass and outliers in the
// legend; beside it the error x − fake_quant(x), rounding error (inside the
// range) and clipping error (outside) apart; for per-channel weights one
// channel, or all channels as a heat strip with each channel's range.

#include <memory>
#include <optional>
#include <string>

#include <QWidget>

#include "analysis/distribution.h"
#include "quantization/tensor_quantization.h"
#include "widgets/jobs/job_tracker.h"

class QCheckBox;
class QComboBox;
class QLineSeries;
class QScatterSeries;

namespace qs {

class ActivationStatistics;
struct ActivationQuantization;
class ChartFrame;
class HeatMapItem;

class DistributionView : public QWidget {
    Q_OBJECT
public:
    // Computes its data on `jobs` (JobKind::Distribution; it may be deleted first).
    explicit DistributionView(JobTracker* jobs, QWidget* parent = nullptr);
    ~DistributionView() override;

    // A weight: float32 values in the axis order of q's layout, its fake-quantized
    // values (same shape), its quantization and channel axis (< 0: none).
    void showWeight(Tensor x, Tensor fakeQuant, std::shared_ptr<const TensorQuantization> q, int channelAxis,
                    const QString& name, const QString& description);
    // An input activation from calibration statistics, with the range and parameters
    // its rule gives it (computed with the data, off the GUI thread).
    void showActivation(std::shared_ptr<const ActivationStatistics> stats, const ActivationQuantization& activation,
                        const QString& description);
    // Nothing to show, and why.
    void clear(const QString& why);

    // The data shown (null while nothing is).
    const DistributionData* data() const { return data_ ? &*data_ : nullptr; }
    bool busy() const { return job_.busy(); }
    void setLogCounts(bool on);
    // A channel of a per-channel weight, or none for the whole tensor and the heat strip.
    void setChannel(std::optional<int64_t> channel);

    ChartFrame* histogramFrame() const { return histogram_; }
    ChartFrame* roundingFrame() const { return rounding_; }
    ChartFrame* clippingFrame() const { return clipping_; }
    ChartFrame* stripFrame() const { return strip_; }

signals:
    // New data landed and is drawn.
    void ready();

private:
    struct WeightInput {
        Tensor x, fakeQuant;
        std::shared_ptr<const TensorQuantization> q;
        int channelAxis = -1;
        std::string name;
    };
    void computeWeight();
    void land(DistributionData d);
    void redraw();
    void drawHistogram();
    void drawErrors();
    void drawStrip();
    void updateGrid();
    void hoverHistogram(QPointF value, QPoint globalPos);
    void hoverStrip(QPointF value, QPoint globalPos);

    ChartFrame* histogram_;
    ChartFrame* rounding_;
    ChartFrame* clipping_;
    ChartFrame* strip_;
    QComboBox* channelBox_;
    QCheckBox* logBox_;
    QLineSeries* gridComb_ = nullptr;
    QLineSeries* stripAnchor_;
    QScatterSeries* stripMin_;
    QScatterSeries* stripMax_;
    HeatMapItem* heat_;
    std::optional<WeightInput> weight_;
    std::optional<int64_t> channel_;
    std::optional<DistributionData> data_;
    QString description_;
    JobSlot job_; // the data, computed on the tracker the view was given
};

} // namespace qs
