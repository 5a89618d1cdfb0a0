#pragma once
// Histograms and markers as Qt Charts series, shared by the views: a step
// outline of a histogram's counts (filled or not), vertical marker lines, and
// a histogram's CSV.

#include <QAreaSeries>
#include <QLineSeries>
#include <QString>

#include "calib/histogram.h"

namespace qs {

// The step outline (edge_i, c_i) → (edge_i+1, c_i) of h; counts below `floor`
// (a log axis cannot show 0) are drawn at `floor`.
QLineSeries* histogramOutline(const Histogram& h, double floor, const QString& name);
// The outline filled down to `floor`.
QAreaSeries* histogramArea(const Histogram& h, double floor, const QString& name, const QColor& color);
// A vertical segment at x from y0 to y1.
QLineSeries* verticalLine(double x, double y0, double y1, const QString& name, const QPen& pen);
// "bin_lo,bin_hi,<column names…>" then one row per bin.
QString histogramCsv(const QStringList& columns, const std::vector<const Histogram*>& histograms);
// The bin of h holding x, or −1.
int binAt(const Histogram& h, double x);

} // namespace qs
