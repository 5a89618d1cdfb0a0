#include "widgets/charts/scale_range_view.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLegendMarker>
#include <QLineSeries>
#include <QScatterSeries>
#include <QSplitter>
#include <QToolTip>
#include <QVBoxLayout>
#include <QValueAxis>

#include "widgets/charts/chart_frame.h"
#include "widgets/charts/heat_map_item.h"

namespace qs {
namespace {

QString number(double v)
{
    return QString::number(v, 'g', 6);
}

void clearChart(QChart* chart)
{
    chart->removeAllSeries();
    for (QAbstractAxis* axis : chart->axes()) {
        chart->removeAxis(axis);
        delete axis;
    }
}

std::pair<QValueAxis*, QValueAxis*> attachValueAxes(QChart* chart, const QString& xTitle, const QString& yTitle)
{
    auto* x = new QValueAxis;
    auto* y = new QValueAxis;
    x->setTitleText(xTitle);
    x->setLabelFormat("%d");
    y->setTitleText(yTitle);
    y->setLabelFormat("%.3g");
    chart->addAxis(x, Qt::AlignBottom);
    chart->addAxis(y, Qt::AlignLeft);
    for (QAbstractSeries* s : chart->series()) {
        s->attachAxis(x);
        s->attachAxis(y);
    }
    return {x, y};
}

} // namespace

ScaleRangeView::ScaleRangeView(JobTracker* jobs, QWidget* parent)
    : QWidget(parent), ranges_(new ChartFrame("scale_ranges", this)), scales_(new ChartFrame("scales", this)),
      tiles_(new ChartFrame("tile_scales", this)), order_(new QComboBox(this)), mode_(new QComboBox(this)),
      tileAnchor_(new QLineSeries), job_(jobs, JobKind::ScaleRange)
{
    order_->addItems({tr("Channel order"), tr("Sorted by absmax")});
    mode_->addItems({tr("Min / max"), tr("Absmax")});
    connect(order_, &QComboBox::currentIndexChanged, this, [this] { draw(); });
    connect(mode_, &QComboBox::currentIndexChanged, this, [this] { draw(); });
    connect(ranges_->view(), &ChartView::hovered, this, &ScaleRangeView::hoverRanges);
    connect(scales_->view(), &ChartView::hovered, this, &ScaleRangeView::hoverScales);
    connect(tiles_->view(), &ChartView::hovered, this, &ScaleRangeView::hoverTiles);
    connect(ranges_, &ChartFrame::paletteChanged, this, &ScaleRangeView::draw);
    for (ChartFrame* f : {ranges_, scales_, tiles_})
        connect(f, &ChartFrame::zoomReset, this, &ScaleRangeView::draw);

    QChart* t = tiles_->chart();
    tileAnchor_->setPen(Qt::NoPen);
    t->addSeries(tileAnchor_);
    auto [tx, ty] = attachValueAxes(t, tr("tile"), tr("channel"));
    ty->setLabelFormat("%d");
    t->legend()->hide();
    heat_ = new HeatMapItem(t, tileAnchor_);
    tiles_->applyPalette();

    auto* controls = new QHBoxLayout;
    controls->addWidget(order_);
    controls->addWidget(mode_);
    controls->addStretch();
    auto* split = new QSplitter(Qt::Vertical, this);
    split->addWidget(ranges_);
    split->addWidget(scales_);
    split->addWidget(tiles_);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addLayout(controls);
    layout->addWidget(split, 1);
    clear(tr("Select a layer with a quantized weight to see its per-channel ranges."));
}

ScaleRangeView::~ScaleRangeView() = default;

void ScaleRangeView::showWeight(Tensor w, std::shared_ptr<const TensorQuantization> q, int channelAxis,
                                const QString& name)
{
    ranges_->setNote(tr("Computing…"));
    job_.start<ScaleRangeData>(
        tr("Computing scale ranges"),
        [w, q, channelAxis, name = name.toStdString()](const CancellationToken&) {
            return scaleRanges(w, *q, channelAxis, name);
        },
        [this](ScaleRangeData d) {
            data_ = std::move(d);
            draw();
            emit ready();
        },
        [this](const QString& e) { clear(e); });
}

void ScaleRangeView::clear(const QString& why)
{
    job_.cancel();
    data_.reset();
    for (ChartFrame* f : {ranges_, scales_}) {
        clearChart(f->chart());
        f->chart()->setTitle(QString());
        f->setCsvSource({});
        f->setNote(QString());
    }
    ranges_->setNote(why);
    heat_->setMatrix({}, 0, 0, 0, 1, false);
    tiles_->setCsvSource({});
    tiles_->hide();
}

void ScaleRangeView::setSorted(bool sorted)
{
    order_->setCurrentIndex(sorted ? 1 : 0);
}

void ScaleRangeView::setAbsMax(bool absMax)
{
    mode_->setCurrentIndex(absMax ? 1 : 0);
}

std::vector<int64_t> ScaleRangeView::channelOrder() const
{
    if (!data_)
        return {};
    if (order_->currentIndex() == 1)
        return data_->sortedByAbsMax();
    std::vector<int64_t> order(static_cast<size_t>(data_->channels));
    std::iota(order.begin(), order.end(), 0);
    return order;
}

void ScaleRangeView::draw()
{
    if (!data_)
        return;
    drawRanges();
    drawScales();
    drawTiles();
}

void ScaleRangeView::drawRanges()
{
    const ScaleRangeData& d = *data_;
    const bool absMax = mode_->currentIndex() == 1;
    const std::vector<int64_t> order = channelOrder();
    QChart* chart = ranges_->chart();
    clearChart(chart);
    chart->setTitle(tr("%1: per-channel ranges (%2 channels along axis %3)")
                        .arg(QString::fromStdString(d.tensor))
                        .arg(d.channels)
                        .arg(d.channelAxis));
    const auto line = [&](const QString& name, const QColor& color, Qt::PenStyle style, auto valueOf) {
        auto* s = new QLineSeries;
        s->setName(name);
        s->setPen(QPen(color, 1.5, style));
        s->setPointsVisible(d.channels <= 64);
        for (size_t i = 0; i < order.size(); ++i)
            s->append(double(i), valueOf(order[i]));
        chart->addSeries(s);
        return s;
    };
    const auto flat = [&](const QString& name, double v, const QColor& color) {
        auto* s = new QLineSeries;
        s->setName(name);
        s->setPen(QPen(color, 1.5, Qt::DotLine));
        s->append(-0.5, v);
        s->append(double(d.channels) - 0.5, v);
        chart->addSeries(s);
        return s;
    };
    std::vector<QAbstractSeries*> unnamed;
    if (absMax) {
        line(tr("channel absmax"), ranges_->seriesColor(0), Qt::SolidLine,
             [&](int64_t c) { return d.channelAbsMax(c); });
        line(tr("calibrated"), ranges_->seriesColor(1), Qt::DashLine, [&](int64_t c) {
            const Range& r = d.calibrated[size_t(c)];
            return std::max(std::abs(double(r.min)), std::abs(double(r.max)));
        });
        flat(tr("per-tensor absmax %1").arg(number(std::max(std::abs(d.tensorMin), std::abs(d.tensorMax)))),
             std::max(std::abs(d.tensorMin), std::abs(d.tensorMax)), ranges_->seriesColor(3));
    } else {
        line(tr("channel max / min"), ranges_->seriesColor(0), Qt::SolidLine,
             [&](int64_t c) { return double(d.channelMax[size_t(c)]); });
        unnamed.push_back(line(QString(), ranges_->seriesColor(0), Qt::SolidLine,
                               [&](int64_t c) { return double(d.channelMin[size_t(c)]); }));
        line(tr("calibrated range"), ranges_->seriesColor(1), Qt::DashLine,
             [&](int64_t c) { return double(d.calibrated[size_t(c)].max); });
        unnamed.push_back(line(QString(), ranges_->seriesColor(1), Qt::DashLine,
                               [&](int64_t c) { return double(d.calibrated[size_t(c)].min); }));
        flat(tr("per-tensor range [%1, %2]").arg(number(d.tensorMin), number(d.tensorMax)), d.tensorMax,
             ranges_->seriesColor(3));
        unnamed.push_back(flat(QString(), d.tensorMin, ranges_->seriesColor(3)));
    }
    auto [x, y] = attachValueAxes(chart, order_->currentIndex() == 1 ? tr("channel (sorted by absmax)") : tr("channel"),
                                  absMax ? tr("absmax") : tr("value"));
    x->setRange(-0.5, double(d.channels) - 0.5);
    x->setTickType(QValueAxis::TicksDynamic);
    x->setTickAnchor(0);
    x->setTickInterval(std::max<int64_t>(1, d.channels / 16));
    double lo = absMax ? 0.0 : std::min(double(d.tensorMin), double(d.tensorCalibrated.min));
    double hi = std::max(
        {double(d.tensorMax), double(d.tensorCalibrated.max), -double(d.tensorCalibrated.min), -double(d.tensorMin)});
    if (!absMax)
        hi = std::max(double(d.tensorMax), double(d.tensorCalibrated.max));
    y->setRange(lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo));
    y->applyNiceNumbers();
    for (QAbstractSeries* s : unnamed)
        for (QLegendMarker* m : chart->legend()->markers(s))
            m->setVisible(false);
    ranges_->applyPalette();
    // How uneven the channels are: what says per-channel scales (or equalization) pay off.
    double smallest = d.channelAbsMax(0), largest = smallest;
    for (int64_t c = 0; c < d.channels; ++c) {
        smallest = std::min(smallest, d.channelAbsMax(c));
        largest = std::max(largest, d.channelAbsMax(c));
    }
    ranges_->setNote(tr("Channel absmax from %1 to %2 (×%3 apart).")
                         .arg(number(smallest), number(largest))
                         .arg(smallest > 0 ? number(largest / smallest) : QString("∞")));
    const ScaleRangeData* data = &*data_;
    ranges_->setCsvSource([data] {
        QString out = "channel,min,max,absmax,calibrated_min,calibrated_max\n";
        for (int64_t c = 0; c < data->channels; ++c)
            out += QString("%1,%2,%3,%4,%5,%6\n")
                       .arg(c)
                       .arg(number(data->channelMin[size_t(c)]), number(data->channelMax[size_t(c)]),
                            number(data->channelAbsMax(c)), number(data->calibrated[size_t(c)].min),
                            number(data->calibrated[size_t(c)].max));
        return out;
    });
}

void ScaleRangeView::drawScales()
{
    const ScaleRangeData& d = *data_;
    QChart* chart = scales_->chart();
    clearChart(chart);
    if (d.tilesPerChannel > 1) {
        scales_->hide();
        return;
    }
    scales_->show();
    const std::vector<int64_t> order = channelOrder();
    auto* s = new QScatterSeries;
    s->setName(d.perTensor ? tr("scale (one per tensor)") : tr("scale per channel"));
    s->setColor(scales_->seriesColor(2));
    s->setBorderColor(scales_->seriesColor(2));
    s->setMarkerSize(d.channels <= 64 ? 7 : 4);
    for (size_t i = 0; i < order.size(); ++i)
        s->append(double(i), d.scales[size_t(order[i])]);
    chart->addSeries(s);
    auto [x, y] = attachValueAxes(chart, tr("channel"), tr("scale"));
    x->setRange(-0.5, double(d.channels) - 0.5);
    x->setTickType(QValueAxis::TicksDynamic);
    x->setTickAnchor(0);
    x->setTickInterval(std::max<int64_t>(1, d.channels / 16));
    y->setRange(0, d.scaleMax * 1.1 > 0 ? d.scaleMax * 1.1 : 1);
    y->applyNiceNumbers();
    chart->setTitle(
        tr("Scales: %1 … %2, spread ×%3, mean %4, std %5")
            .arg(number(d.scaleMin), number(d.scaleMax), number(d.spread()), number(d.scaleMean), number(d.scaleStd)));
    scales_->applyPalette();
    const ScaleRangeData* data = &*data_;
    scales_->setCsvSource([data] {
        QString out = "channel,scale\n";
        for (int64_t c = 0; c < data->channels; ++c)
            out += QString::number(c) + ',' + QString::number(data->scales[size_t(c)], 'g', 9) + '\n';
        return out;
    });
}

void ScaleRangeView::drawTiles()
{
    const ScaleRangeData& d = *data_;
    if (d.tilesPerChannel <= 1) {
        tiles_->hide();
        return;
    }
    tiles_->show();
    const int rows = int(d.channels), cols = int(d.tilesPerChannel);
    auto* x = static_cast<QValueAxis*>(tiles_->chart()->axes(Qt::Horizontal).front());
    auto* y = static_cast<QValueAxis*>(tiles_->chart()->axes(Qt::Vertical).front());
    x->setRange(-0.5, cols - 0.5);
    y->setRange(-0.5, rows - 0.5);
    for (auto [axis, n] : {std::pair{x, cols}, std::pair{y, rows}}) {
        axis->setTickType(QValueAxis::TicksDynamic);
        axis->setTickAnchor(0);
        axis->setTickInterval(std::max(1, (n + 7) / 8));
        axis->setLabelFormat("%.0f");
    }
    tileAnchor_->replace({QPointF(-0.5, -0.5), QPointF(cols - 0.5, rows - 0.5)});
    heat_->setMatrix(std::vector<double>(d.scales.begin(), d.scales.end()), rows, cols, -0.5, cols - 0.5, false);
    tiles_->chart()->setTitle(tr("Tile scales (%1 channels × %2 tiles): %3 (dark) … %4 (bright), spread ×%5")
                                  .arg(rows)
                                  .arg(cols)
                                  .arg(number(d.scaleMin), number(d.scaleMax), number(d.spread())));
    tiles_->applyPalette();
    const ScaleRangeData* data = &*data_;
    tiles_->setCsvSource([data] {
        QString out = "channel";
        for (int64_t t = 0; t < data->tilesPerChannel; ++t)
            out += ",tile" + QString::number(t);
        out += '\n';
        for (int64_t c = 0; c < data->channels; ++c) {
            out += QString::number(c);
            for (int64_t t = 0; t < data->tilesPerChannel; ++t)
                out += ',' + QString::number(data->scales[size_t(c * data->tilesPerChannel + t)], 'g', 9);
            out += '\n';
        }
        return out;
    });
}

void ScaleRangeView::hoverRanges(QPointF value, QPoint globalPos)
{
    if (!data_)
        return;
    const auto order = channelOrder();
    const int64_t i = std::llround(value.x());
    if (i < 0 || i >= int64_t(order.size()))
        return;
    const int64_t c = order[size_t(i)];
    const Range& r = data_->calibrated[size_t(c)];
    QToolTip::showText(globalPos,
                       tr("channel %1\nmin %2, max %3, absmax %4\ncalibrated [%5, %6]")
                           .arg(c)
                           .arg(number(data_->channelMin[size_t(c)]), number(data_->channelMax[size_t(c)]),
                                number(data_->channelAbsMax(c)), number(r.min), number(r.max)),
                       ranges_->view());
}

void ScaleRangeView::hoverScales(QPointF value, QPoint globalPos)
{
    if (!data_ || data_->tilesPerChannel > 1)
        return;
    const auto order = channelOrder();
    const int64_t i = std::llround(value.x());
    if (i < 0 || i >= int64_t(order.size()))
        return;
    const int64_t c = order[size_t(i)];
    QToolTip::showText(globalPos, tr("channel %1: scale %2").arg(c).arg(number(data_->scales[size_t(c)])),
                       scales_->view());
}

void ScaleRangeView::hoverTiles(QPointF value, QPoint globalPos)
{
    const auto cell = heat_->cellAt(value);
    if (!data_ || !cell)
        return;
    QToolTip::showText(globalPos,
                       tr("channel %1, tile %2: scale %3")
                           .arg(cell->first)
                           .arg(cell->second)
                           .arg(number(data_->scales[size_t(cell->first * data_->tilesPerChannel + cell->second)])),
                       tiles_->view());
}

} // namespace qs
