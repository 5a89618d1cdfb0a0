#include "widgets/charts/distribution_view.h"

#include <algorithm>
#include <cmath>

#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLegendMarker>
#include <QLogValueAxis>
#include <QScatterSeries>
#include <QSplitter>
#include <QToolTip>
#include <QVBoxLayout>
#include <QValueAxis>

#include "runtime/activation_calibration.h"
#include "widgets/charts/chart_frame.h"
#include "widgets/charts/heat_map_item.h"
#include "widgets/charts/histogram_series.h"

namespace qs {
namespace {

constexpr size_t kBins = 256;

// Enough bins to show the shape, few enough that small tensors do not look like combs.
size_t binsFor(int64_t elements)
{
    return std::clamp(size_t(2.0 * std::sqrt(double(elements))), size_t(16), kBins);
}
constexpr size_t kMaxGridLines = 160; // more grid values than this in view: too dense to draw

QString number(double v)
{
    return QString::number(v, 'g', 6);
}

QString percent(double fraction)
{
    return QString::number(100.0 * fraction, 'g', 3) + "%";
}

void clearChart(QChart* chart)
{
    chart->removeAllSeries();
    for (QAbstractAxis* axis : chart->axes()) {
        chart->removeAxis(axis);
        delete axis;
    }
}

void hideLegendOf(QChart* chart, QAbstractSeries* series)
{
    for (QLegendMarker* m : chart->legend()->markers(series))
        m->setVisible(false);
}

// Attaches x and y axes (y logarithmic when asked) to every series of the chart.
std::pair<QValueAxis*, QAbstractAxis*> attachAxes(QChart* chart, double lo, double hi, double maxCount, bool log,
                                                  const QString& xTitle)
{
    auto* x = new QValueAxis;
    x->setRange(lo, hi);
    x->setTitleText(xTitle);
    x->setLabelFormat("%.3g");
    QAbstractAxis* y;
    if (log) {
        auto* l = new QLogValueAxis;
        l->setBase(10);
        l->setRange(0.5, std::max(2.0, maxCount * 2));
        l->setLabelFormat("%g");
        y = l;
    } else {
        auto* v = new QValueAxis;
        v->setRange(0, std::max(1.0, maxCount * 1.05));
        v->applyNiceNumbers();
        v->setLabelFormat("%g");
        y = v;
    }
    y->setTitleText(QObject::tr("count"));
    chart->addAxis(x, Qt::AlignBottom);
    chart->addAxis(y, Qt::AlignLeft);
    for (QAbstractSeries* s : chart->series()) {
        s->attachAxis(x);
        s->attachAxis(y);
    }
    return {x, y};
}

double maxCount(const Histogram& h)
{
    return h.counts.empty() ? 0 : double(*std::max_element(h.counts.begin(), h.counts.end()));
}

} // namespace

DistributionView::DistributionView(JobTracker* jobs, QWidget* parent)
    : QWidget(parent), histogram_(new ChartFrame("distribution", this)),
      rounding_(new ChartFrame("rounding_error", this)), clipping_(new ChartFrame("clipping_error", this)),
      strip_(new ChartFrame("channel_strip", this)), channelBox_(new QComboBox(this)),
      logBox_(new QCheckBox(tr("Log counts"), this)), stripAnchor_(new QLineSeries), stripMin_(new QScatterSeries),
      stripMax_(new QScatterSeries), job_(jobs, JobKind::Distribution)
{
    channelBox_->setToolTip(tr("The whole tensor with all channels as a heat strip, or one channel"));
    connect(channelBox_, &QComboBox::activated, this,
            [this](int index) { setChannel(index <= 0 ? std::nullopt : std::optional<int64_t>(index - 1)); });
    connect(logBox_, &QCheckBox::toggled, this, [this] { redraw(); });

    // The heat strip keeps its series and axes; data only moves them.
    QChart* s = strip_->chart();
    s->setTitle(tr("All channels"));
    stripMin_->setName(tr("clipping range"));
    stripAnchor_->setPen(Qt::NoPen);
    s->addSeries(stripAnchor_);
    s->addSeries(stripMin_);
    s->addSeries(stripMax_);
    auto* sx = new QValueAxis;
    auto* sy = new QValueAxis;
    sx->setTitleText(tr("value"));
    sx->setLabelFormat("%.3g");
    sy->setTitleText(tr("channel"));
    sy->setLabelFormat("%.0f");
    s->addAxis(sx, Qt::AlignBottom);
    s->addAxis(sy, Qt::AlignLeft);
    for (QAbstractSeries* series : s->series()) {
        series->attachAxis(sx);
        series->attachAxis(sy);
    }
    s->legend()->hide();
    heat_ = new HeatMapItem(s, stripAnchor_);
    strip_->applyPalette();
    // Qt Charts elides every axis label of a chart too short for them.
    histogram_->setMinimumHeight(220);
    strip_->setMinimumHeight(180);

    connect(histogram_->view(), &ChartView::hovered, this, &DistributionView::hoverHistogram);
    connect(strip_->view(), &ChartView::hovered, this, &DistributionView::hoverStrip);
    connect(histogram_, &ChartFrame::paletteChanged, this, &DistributionView::redraw);
    // Axes set by hand (not only by zooming) are restored too.
    for (ChartFrame* f : {histogram_, rounding_, clipping_, strip_})
        connect(f, &ChartFrame::zoomReset, this, &DistributionView::redraw);

    auto* controls = new QHBoxLayout;
    controls->addWidget(new QLabel(tr("Channel:"), this));
    controls->addWidget(channelBox_);
    controls->addWidget(logBox_);
    controls->addStretch();

    auto* errors = new QSplitter(Qt::Vertical, this);
    errors->addWidget(rounding_);
    errors->addWidget(clipping_);
    auto* left = new QSplitter(Qt::Vertical, this);
    left->addWidget(histogram_);
    left->addWidget(strip_);
    left->setStretchFactor(0, 3);
    left->setStretchFactor(1, 2);
    auto* split = new QSplitter(Qt::Horizontal, this);
    split->addWidget(left);
    split->addWidget(errors);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 2);

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addLayout(controls);
    layout->addWidget(split, 1);
    clear(tr("Select a quantized layer to see its distribution."));
}

DistributionView::~DistributionView() = default;

void DistributionView::showWeight(Tensor x, Tensor fakeQuant, std::shared_ptr<const TensorQuantization> q,
                                  int channelAxis, const QString& name, const QString& description)
{
    const bool sameTensor = weight_ && weight_->name == name.toStdString() && weight_->x.shape() == x.shape();
    weight_ = WeightInput{std::move(x), std::move(fakeQuant), std::move(q), channelAxis, name.toStdString()};
    description_ = description;
    const int64_t channels = channelAxis >= 0 && weight_->x.rank() > 0
                                 ? weight_->x.dim(normalizeAxis(channelAxis, weight_->x.rank(), "channel axis"))
                                 : 0;
    if (!sameTensor || channelBox_->count() != channels + 1) {
        channelBox_->clear();
        channelBox_->addItem(channels > 1 ? tr("All channels") : tr("Whole tensor"));
        for (int64_t c = 0; c < channels && channels > 1; ++c)
            channelBox_->addItem(tr("Channel %1").arg(c));
        channel_.reset();
    }
    channelBox_->setEnabled(channels > 1);
    computeWeight();
}

void DistributionView::computeWeight()
{
    histogram_->setNote(tr("Computing…"));
    const WeightInput in = *weight_;
    const std::optional<int64_t> channel = channel_;
    job_.start<DistributionData>(
        tr("Computing the distribution"),
        [in, channel](const CancellationToken& cancel) {
            const int64_t channels =
                channel ? in.x.dim(normalizeAxis(in.channelAxis, in.x.rank(), "channel axis")) : int64_t(1);
            return weightDistribution(in.x, in.fakeQuant, *in.q, in.channelAxis, channel, in.name,
                                      binsFor(in.x.numel() / channels), cancel);
        },
        [this](DistributionData d) { land(std::move(d)); }, [this](const QString& error) { clear(error); });
}

void DistributionView::showActivation(std::shared_ptr<const ActivationStatistics> stats,
                                      const ActivationQuantization& activation, const QString& description)
{
    weight_.reset();
    channel_.reset();
    channelBox_->clear();
    channelBox_->addItem(tr("Whole tensor"));
    channelBox_->setEnabled(false);
    description_ = description;
    histogram_->setNote(tr("Computing…"));
    job_.start<DistributionData>(
        tr("Computing the distribution"),
        [stats, activation](const CancellationToken&) {
            const Observer* observer = stats->find(activation.value);
            if (!observer)
                throw Error("activation '" + activation.value + "' was not observed in calibration");
            const StaticActivation s = staticActivationFrom(*observer, activation);
            return activationDistribution(*observer, s.params, s.range, kBins);
        },
        [this](DistributionData d) { land(std::move(d)); }, [this](const QString& error) { clear(error); });
}

void DistributionView::clear(const QString& why)
{
    job_.cancel();
    data_.reset();
    for (ChartFrame* f : {histogram_, rounding_, clipping_}) {
        clearChart(f->chart());
        f->chart()->setTitle(QString());
        f->setCsvSource({});
    }
    gridComb_ = nullptr;
    histogram_->setNote(why);
    rounding_->setNote(QString());
    clipping_->setNote(QString());
    heat_->setMatrix({}, 0, 0, 0, 1, true);
    strip_->setCsvSource({});
    strip_->hide();
}

void DistributionView::setLogCounts(bool on)
{
    logBox_->setChecked(on); // redraws
}

void DistributionView::setChannel(std::optional<int64_t> channel)
{
    if (!weight_ || channel == channel_)
        return;
    channel_ = channel;
    channelBox_->setCurrentIndex(channel ? int(*channel) + 1 : 0);
    computeWeight();
}

void DistributionView::land(DistributionData d)
{
    data_ = std::move(d);
    redraw();
    emit ready();
}

void DistributionView::redraw()
{
    if (!data_)
        return;
    drawHistogram();
    drawErrors();
    drawStrip();
}

void DistributionView::drawHistogram()
{
    const DistributionData& d = *data_;
    const bool log = logBox_->isChecked();
    const double floor = log ? 0.5 : 0.0;
    QChart* chart = histogram_->chart();
    clearChart(chart);
    QString title = QString::fromStdString(d.tensor);
    if (d.channel)
        title += tr(" — channel %1").arg(*d.channel);
    chart->setTitle(title);

    chart->addSeries(histogramArea(d.values, floor, tr("x (%1 values)").arg(d.elements), histogram_->seriesColor(0)));
    QLineSeries* fake = histogramOutline(d.fakeQuant, floor, tr("fake_quant(x)"));
    fake->setPen(QPen(histogram_->seriesColor(1), 1.5));
    chart->addSeries(fake);
    const double top = std::max(maxCount(d.values), maxCount(d.fakeQuant));
    const double yTop = log ? std::max(2.0, top * 2) : std::max(1.0, top * 1.05);
    QPen clipPen(histogram_->seriesColor(3), 2, Qt::DashLine);
    const QString clipName =
        tr("clip range: clipped %1 (%2), outliers %3").arg(percent(d.clippedFraction)).arg(d.clipped).arg(d.outliers);
    QLineSeries* clipLo = verticalLine(d.range.min, floor, yTop, clipName, clipPen);
    QLineSeries* clipHi = verticalLine(d.range.max, floor, yTop, QString(), clipPen);
    chart->addSeries(clipLo);
    chart->addSeries(clipHi);
    gridComb_ = new QLineSeries;
    gridComb_->setPen(QPen(histogram_->mutedColor(), 1));
    chart->addSeries(gridComb_);
    auto [x, y] = attachAxes(chart, d.values.lo, d.values.hi, top, log, d.activation ? tr("activation") : tr("weight"));
    hideLegendOf(chart, clipHi);
    connect(x, &QValueAxis::rangeChanged, this, &DistributionView::updateGrid);
    updateGrid();
    histogram_->applyPalette();

    QString note = description_ + (description_.isEmpty() ? "" : ". ") +
                   tr("Clip range [%1, %2]; outliers: beyond %3σ of the mean.")
                       .arg(number(d.range.min), number(d.range.max))
                       .arg(kOutlierSigmas);
    if (d.estimated)
        note += (note.isEmpty() ? "" : "  ") + tr("(from the calibration histogram: exact up to a bin)");
    histogram_->setNote(note);
    const DistributionData* data = &*data_;
    histogram_->setCsvSource([data] {
        return histogramCsv({"count", "fake_quant_count"}, {&data->values, &data->fakeQuant});
    });
}

void DistributionView::updateGrid()
{
    if (!gridComb_ || !data_)
        return;
    QChart* chart = histogram_->chart();
    const auto axes = chart->axes(Qt::Horizontal);
    const auto vertical = chart->axes(Qt::Vertical);
    if (axes.isEmpty() || vertical.isEmpty())
        return;
    const auto* x = static_cast<QValueAxis*>(axes.front());
    double bottom = 0, top = 1;
    if (auto* v = qobject_cast<QValueAxis*>(vertical.front()))
        bottom = v->min(), top = v->max();
    else if (auto* l = qobject_cast<QLogValueAxis*>(vertical.front()))
        bottom = l->min(), top = l->max();
    std::vector<float> grid;
    if (data_->grid)
        grid = gridValuesIn(*data_->grid, x->min(), x->max(), kMaxGridLines);
    // A comb: up and down at each grid value, joined along the bottom axis.
    QList<QPointF> points;
    for (const float g : grid)
        points << QPointF(g, bottom) << QPointF(g, top) << QPointF(g, bottom);
    gridComb_->replace(points);
    gridComb_->setName(grid.empty() ? (data_->grid ? tr("grid (zoom in to see)") : tr("grid (per group)"))
                                    : tr("grid (scale %1)").arg(number(data_->grid->scale)));
}

void DistributionView::drawErrors()
{
    const DistributionData& d = *data_;
    const bool log = logBox_->isChecked();
    const double floor = log ? 0.5 : 0.0;
    const auto draw = [&](ChartFrame* frame, const Histogram& h, int64_t count, int color, const QString& title,
                          const QString& column) {
        QChart* chart = frame->chart();
        clearChart(chart);
        chart->setTitle(title);
        chart->legend()->hide();
        if (count > 0) {
            chart->addSeries(histogramArea(h, floor, title, frame->seriesColor(color)));
            attachAxes(chart, h.lo, h.hi, maxCount(h), log, tr("x − fake_quant(x)"));
        }
        frame->applyPalette();
        frame->setNote(count > 0 ? QString() : tr("no element"));
        const Histogram* hist = &h;
        frame->setCsvSource([hist, column] { return histogramCsv({column}, {hist}); });
    };
    draw(rounding_, d.roundingError, d.roundingCount, 2,
         tr("Rounding error, inside the range (%1 elements)").arg(d.roundingCount), "rounding_error_count");
    draw(clipping_, d.clippingError, d.clippingCount, 3,
         tr("Clipping error, outside the range (%1 elements)").arg(d.clippingCount), "clipping_error_count");
}

void DistributionView::drawStrip()
{
    const DistributionData& d = *data_;
    if (d.strip.empty()) {
        strip_->hide();
        return;
    }
    strip_->show();
    const int rows = int(d.channels), cols = int(d.stripBins);
    std::vector<double> values(d.strip.begin(), d.strip.end());
    auto* x = static_cast<QValueAxis*>(strip_->chart()->axes(Qt::Horizontal).front());
    auto* y = static_cast<QValueAxis*>(strip_->chart()->axes(Qt::Vertical).front());
    x->setRange(d.values.lo, d.values.hi);
    y->setRange(-0.5, rows - 0.5);
    y->setTickType(QValueAxis::TicksDynamic);
    y->setTickAnchor(0);
    // Few ticks: a vertical label taller than its share of the axis is elided.
    y->setTickInterval(std::max(1, (rows + 3) / 4));
    stripAnchor_->replace({QPointF(d.values.lo, -0.5), QPointF(d.values.hi, rows - 0.5)});
    QList<QPointF> lo, hi;
    for (int c = 0; c < rows; ++c) {
        lo << QPointF(d.channelRanges[size_t(c)].min, c);
        hi << QPointF(d.channelRanges[size_t(c)].max, c);
    }
    stripMin_->replace(lo);
    stripMax_->replace(hi);
    const QColor marker = strip_->darkPalette() ? QColor(255, 255, 255) : QColor(200, 30, 30);
    for (QScatterSeries* m : {stripMin_, stripMax_}) {
        m->setColor(marker);
        m->setBorderColor(marker);
        m->setMarkerShape(QScatterSeries::MarkerShapeRectangle);
        m->setMarkerSize(std::clamp(160.0 / rows, 2.5, 6.0));
    }
    heat_->setMatrix(std::move(values), rows, cols, d.values.lo, d.values.hi, true);
    strip_->chart()->setTitle(
        tr("All %1 channels (colour: log count per bin; marks: each channel's clipping range)").arg(rows));
    const DistributionData* data = &*data_;
    strip_->setCsvSource([data] {
        QString out = "channel,range_min,range_max";
        for (int64_t b = 0; b < data->stripBins; ++b)
            out += ",bin" + QString::number(b);
        out += '\n';
        for (int64_t c = 0; c < data->channels; ++c) {
            out += QString::number(c) + ',' + number(data->channelRanges[size_t(c)].min) + ',' +
                   number(data->channelRanges[size_t(c)].max);
            for (int64_t b = 0; b < data->stripBins; ++b)
                out += ',' + QString::number(data->strip[size_t(c * data->stripBins + b)]);
            out += '\n';
        }
        return out;
    });
}

void DistributionView::hoverHistogram(QPointF value, QPoint globalPos)
{
    if (!data_)
        return;
    const int bin = binAt(data_->values, value.x());
    if (bin < 0)
        return;
    QString text = tr("[%1, %2): %3 values, %4 fake-quantized")
                       .arg(number(data_->values.edge(size_t(bin))), number(data_->values.edge(size_t(bin) + 1)))
                       .arg(data_->values.counts[size_t(bin)])
                       .arg(data_->fakeQuant.counts[size_t(bin)]);
    if (data_->grid) {
        const GroupQuant& g = *data_->grid;
        text += tr("\nnearest grid value %1").arg(number(referenceFakeQuantizeValue(g, float(value.x()))));
    }
    QToolTip::showText(globalPos, text, histogram_->view());
}

void DistributionView::hoverStrip(QPointF value, QPoint globalPos)
{
    if (!data_ || data_->strip.empty())
        return;
    const auto cell = heat_->cellAt(value);
    if (!cell)
        return;
    const auto [c, b] = *cell;
    const double width = (data_->values.hi - data_->values.lo) / double(data_->stripBins);
    const Range& r = data_->channelRanges[size_t(c)];
    QToolTip::showText(globalPos,
                       tr("channel %1, [%2, %3): %4 values\nrange [%5, %6]")
                           .arg(c)
                           .arg(number(data_->values.lo + b * width), number(data_->values.lo + (b + 1) * width))
                           .arg(data_->strip[size_t(c * data_->stripBins + b)])
                           .arg(number(r.min), number(r.max)),
                       strip_->view());
}

} // namespace qs
