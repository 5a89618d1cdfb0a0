#include "widgets/charts/heat_map_item.h"

#include <algorithm>
#include <cmath>

#include <QAbstractAxis>
#include <QChart>
#include <QPainter>
#include <QValueAxis>

namespace qs {

HeatMapItem::HeatMapItem(QChart* chart, QAbstractSeries* anchor) : QGraphicsItem(chart), chart_(chart), anchor_(anchor)
{
    setZValue(1); // above the plot background, below the series
    QObject::connect(chart, &QChart::plotAreaChanged, chart, [this] {
        prepareGeometryChange();
        update();
    });
    // Zoom and pan change the axes, not the plot area. (Axes are attached before the item is made.)
    for (QAbstractAxis* axis : chart->axes())
        if (auto* v = qobject_cast<QValueAxis*>(axis))
            QObject::connect(v, &QValueAxis::rangeChanged, chart, [this] { update(); });
}

QColor HeatMapItem::rampColor(double t)
{
    static const QColor stops[] = {QColor(68, 1, 84), QColor(59, 82, 139), QColor(33, 145, 140), QColor(94, 201, 98),
                                   QColor(253, 231, 37)};
    t = std::clamp(t, 0.0, 1.0) * 4.0;
    const int i = std::min(int(t), 3);
    const double f = t - i;
    const QColor& a = stops[i];
    const QColor& b = stops[i + 1];
    return QColor::fromRgbF(float(a.redF() + (b.redF() - a.redF()) * f),
                            float(a.greenF() + (b.greenF() - a.greenF()) * f),
                            float(a.blueF() + (b.blueF() - a.blueF()) * f));
}

void HeatMapItem::setMatrix(std::vector<double> values, int rows, int cols, double x0, double x1, bool logScale)
{
    values_ = std::move(values);
    rows_ = rows;
    cols_ = cols;
    x0_ = x0;
    x1_ = x1 > x0 ? x1 : x0 + 1;
    max_ = values_.empty() ? 0 : *std::max_element(values_.begin(), values_.end());
    image_ = QImage(std::max(cols, 1), std::max(rows, 1), QImage::Format_ARGB32);
    image_.fill(Qt::transparent);
    // Log: counts from 0 (transparent) up; linear: the smallest positive value is dark, the largest bright.
    double bottom = 0;
    if (!logScale) {
        bottom = max_;
        for (const double v : values_)
            if (v > 0)
                bottom = std::min(bottom, v);
    }
    const double top = logScale ? std::log1p(max_) : max_ - bottom;
    for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c) {
            const double v = values_[size_t(r) * size_t(cols) + size_t(c)];
            if (v <= 0)
                continue;
            const double t = top <= 0 ? 1.0 : (logScale ? std::log1p(v) : v - bottom) / top;
            image_.setPixelColor(c, rows - 1 - r, rampColor(t)); // row 0 at the bottom
        }
    update();
}

std::optional<std::pair<int, int>> HeatMapItem::cellAt(QPointF value) const
{
    const int r = int(std::floor(value.y() + 0.5));
    const int c = int(std::floor((value.x() - x0_) / (x1_ - x0_) * cols_));
    if (r < 0 || r >= rows_ || c < 0 || c >= cols_)
        return std::nullopt;
    return std::pair{r, c};
}

std::optional<double> HeatMapItem::valueAt(QPointF value) const
{
    const auto cell = cellAt(value);
    if (!cell)
        return std::nullopt;
    return values_[size_t(cell->first) * size_t(cols_) + size_t(cell->second)];
}

QRectF HeatMapItem::boundingRect() const
{
    return chart_->plotArea();
}

void HeatMapItem::paint(QPainter* painter, const QStyleOptionGraphicsItem*, QWidget*)
{
    if (rows_ == 0 || cols_ == 0)
        return;
    const QPointF topLeft = chart_->mapToPosition(QPointF(x0_, rows_ - 0.5), anchor_);
    const QPointF bottomRight = chart_->mapToPosition(QPointF(x1_, -0.5), anchor_);
    painter->save();
    painter->setClipRect(chart_->plotArea());
    painter->setRenderHint(QPainter::SmoothPixmapTransform, false);
    painter->drawImage(QRectF(topLeft, bottomRight).normalized(), image_);
    painter->restore();
}

} // namespace qs
