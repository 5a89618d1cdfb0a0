#pragma once
// A matrix drawn as coloured cells inside a chart's plot area, following the
// chart's axes (so zoom, pan and export treat it like any series). Qt Charts
// has no heat-map series; this item paints one image, scaled, under the
// series. Rows run along y (row r covers [r − 0.5, r + 0.5]), columns along
// x over [x0, x1]. Zero cells stay transparent.

#include <optional>
#include <vector>

#include <QGraphicsItem>
#include <QImage>

class QChart;
class QAbstractSeries;

namespace qs {

class HeatMapItem : public QGraphicsItem {
public:
    // `anchor` is a series attached to the axes the matrix follows.
    HeatMapItem(QChart* chart, QAbstractSeries* anchor);

    // rows × cols values, row-major; colours by log(1 + v) when `logScale`, else
    // linearly from the smallest positive value (dark) to the largest (bright).
    void setMatrix(std::vector<double> values, int rows, int cols, double x0, double x1, bool logScale);
    // The value under a point in axis units, if any.
    std::optional<double> valueAt(QPointF value) const;
    // The cell (row, column) under a point in axis units.
    std::optional<std::pair<int, int>> cellAt(QPointF value) const;
    double maxValue() const { return max_; }

    QRectF boundingRect() const override;
    void paint(QPainter* painter, const QStyleOptionGraphicsItem* option, QWidget* widget) override;

    // The colour of t in [0, 1] (a viridis-like ramp, dark to bright).
    static QColor rampColor(double t);

private:
    QChart* chart_;
    QAbstractSeries* anchor_;
    std::vector<double> values_;
    int rows_ = 0, cols_ = 0;
    double x0_ = 0, x1_ = 1, max_ = 0;
    QImage image_;
};

} // namespace qs
