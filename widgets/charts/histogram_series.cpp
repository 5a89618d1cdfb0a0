#include "widgets/charts/histogram_series.h"

#include <algorithm>
#include <cmath>

#include <QPen>

namespace qs {

QLineSeries* histogramOutline(const Histogram& h, double floor, const QString& name)
{
    auto* s = new QLineSeries;
    s->setName(name);
    QList<QPointF> points;
    points.reserve(qsizetype(2 * h.bins() + 2));
    points.append(QPointF(h.lo, floor));
    for (size_t i = 0; i < h.bins(); ++i) {
        const double c = std::max(double(h.counts[i]), floor);
        points.append(QPointF(h.edge(i), c));
        points.append(QPointF(h.edge(i + 1), c));
    }
    points.append(QPointF(h.hi, floor));
    s->replace(points);
    return s;
}

QAreaSeries* histogramArea(const Histogram& h, double floor, const QString& name, const QColor& color)
{
    QLineSeries* upper = histogramOutline(h, floor, name);
    auto* lower = new QLineSeries;
    lower->append(h.lo, floor);
    lower->append(h.hi, floor);
    auto* area = new QAreaSeries(upper, lower);
    area->setName(name);
    QColor fill = color;
    fill.setAlphaF(0.45f);
    area->setBrush(fill);
    area->setPen(QPen(color, 1));
    return area;
}

QLineSeries* verticalLine(double x, double y0, double y1, const QString& name, const QPen& pen)
{
    auto* s = new QLineSeries;
    s->setName(name);
    s->append(x, y0);
    s->append(x, y1);
    s->setPen(pen);
    return s;
}

QString histogramCsv(const QStringList& columns, const std::vector<const Histogram*>& histograms)
{
    QString out = "bin_lo,bin_hi," + columns.join(',') + '\n';
    if (histograms.empty())
        return out;
    const Histogram& first = *histograms.front();
    for (size_t i = 0; i < first.bins(); ++i) {
        out += QString::number(first.edge(i), 'g', 9) + ',' + QString::number(first.edge(i + 1), 'g', 9);
        for (const Histogram* h : histograms)
            out += ',' + QString::number(i < h->bins() ? h->counts[i] : 0);
        out += '\n';
    }
    return out;
}

int binAt(const Histogram& h, double x)
{
    if (h.bins() == 0 || x < h.lo || x > h.hi || h.hi <= h.lo)
        return -1;
    return std::min(int((x - h.lo) / (h.hi - h.lo) * double(h.bins())), int(h.bins()) - 1);
}

} // namespace qs
