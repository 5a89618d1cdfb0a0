#pragma once
// Per-channel ranges of the selected weight — data min/max (or absmax) and
// the calibrated range, in channel order or sorted by absmax — with the whole
// tensor's range drawn for contrast; below, the per-channel scales and their
// spread, or for tiled rules the tile scales as a channels × tiles heat map.

#include <memory>
#include <optional>

#include <QWidget>

#include "analysis/scale_ranges.h"
#include "widgets/jobs/job_tracker.h"

class QComboBox;
class QLineSeries;

namespace qs {

class ChartFrame;
class HeatMapItem;

class ScaleRangeView : public QWidget {
    Q_OBJECT
public:
    // Computes its data on `jobs` (JobKind::ScaleRange; it may be deleted first).
    explicit ScaleRangeView(JobTracker* jobs, QWidget* parent = nullptr);
    ~ScaleRangeView() override;

    // A weight: float32 in the axis order of q's layout, and its channel axis.
    void showWeight(Tensor w, std::shared_ptr<const TensorQuantization> q, int channelAxis, const QString& name);
    void clear(const QString& why);

    const ScaleRangeData* data() const { return data_ ? &*data_ : nullptr; }
    bool busy() const { return job_.busy(); }
    void setSorted(bool sorted);
    void setAbsMax(bool absMax);
    // The channel drawn at x position i (channel order or sorted).
    std::vector<int64_t> channelOrder() const;

    ChartFrame* rangeFrame() const { return ranges_; }
    ChartFrame* scaleFrame() const { return scales_; }
    ChartFrame* tileFrame() const { return tiles_; }

signals:
    void ready();

private:
    void draw();
    void drawRanges();
    void drawScales();
    void drawTiles();
    void hoverRanges(QPointF value, QPoint globalPos);
    void hoverScales(QPointF value, QPoint globalPos);
    void hoverTiles(QPointF value, QPoint globalPos);

    ChartFrame* ranges_;
    ChartFrame* scales_;
    ChartFrame* tiles_;
    QComboBox* order_;
    QComboBox* mode_;
    QLineSeries* tileAnchor_;
    HeatMapItem* heat_;
    std::optional<ScaleRangeData> data_;
    JobSlot job_; // the data, computed on the tracker the view was given
};

} // namespace qs
