#include "widgets/charts/method_comparison_view.h"

#include <algorithm>
#include <cmath>

#include <QDoubleSpinBox>
#include <QHBoxLayout>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLegendMarker>
#include <QLogValueAxis>
#include <QPushButton>
#include <QTableView>
#include <QToolTip>
#include <QVBoxLayout>
#include <QValueAxis>

#include "runtime/activation_calibration.h"
#include "widgets/charts/chart_frame.h"
#include "widgets/charts/histogram_series.h"
#include "widgets/charts/method_table_model.h"

namespace qs {
namespace {

constexpr size_t kBins = 256;

} // namespace

MethodComparisonView::MethodComparisonView(JobTracker* jobs, QWidget* parent)
    : QWidget(parent), chart_(new ChartFrame("method_comparison", this)), table_(new QTableView(this)),
      model_(new MethodTableModel(this)), percentile_(new QDoubleSpinBox(this)), rms_(new QDoubleSpinBox(this)),
      apply_(new QPushButton(tr("Apply"), this)), job_(jobs, JobKind::MethodComparison)
{
    percentile_->setRange(50.0, 100.0);
    percentile_->setDecimals(3);
    percentile_->setSingleStep(0.01);
    percentile_->setValue(99.99);
    percentile_->setToolTip(tr("p of percentile,p"));
    rms_->setRange(0.1, 100.0);
    rms_->setDecimals(2);
    rms_->setValue(3.0);
    rms_->setToolTip(tr("s of rms,s"));
    connect(percentile_, &QDoubleSpinBox::editingFinished, this, &MethodComparisonView::recompute);
    connect(rms_, &QDoubleSpinBox::editingFinished, this, &MethodComparisonView::recompute);
    apply_->setToolTip(tr("Write the selected method (the best when none is selected) into the layer's rule"));
    connect(apply_, &QPushButton::clicked, this, &MethodComparisonView::apply);

    table_->setModel(model_);
    connect(table_->selectionModel(), &QItemSelectionModel::selectionChanged, this, [this] { draw(); });
    connect(chart_->view(), &ChartView::hovered, this, &MethodComparisonView::hover);
    connect(chart_, &ChartFrame::paletteChanged, this, &MethodComparisonView::draw);
    connect(chart_, &ChartFrame::zoomReset, this, &MethodComparisonView::draw);

    auto* controls = new QHBoxLayout;
    controls->addWidget(new QLabel(tr("percentile p:"), this));
    controls->addWidget(percentile_);
    controls->addWidget(new QLabel(tr("rms s:"), this));
    controls->addWidget(rms_);
    controls->addStretch();
    controls->addWidget(apply_);
    layOutChartBesideTable(this, chart_, controls, table_);
    clear(tr("Select a quantized layer to compare calibration methods on it."));
}

MethodComparisonView::~MethodComparisonView() = default;

void MethodComparisonView::showWeight(Tensor x, const QuantizationSpec& spec, const QString& name)
{
    weight_ = std::move(x);
    spec_ = spec;
    name_ = name.toStdString();
    stats_.reset();
    activation_ = false;
    recompute();
}

void MethodComparisonView::showActivation(std::shared_ptr<const ActivationStatistics> stats, const std::string& value,
                                          const CalibrationTarget& target)
{
    weight_.reset();
    stats_ = std::move(stats);
    name_ = value;
    target_ = target;
    activation_ = true;
    recompute();
}

void MethodComparisonView::clear(const QString& why)
{
    job_.cancel();
    data_.reset();
    model_->setResults({}, {});
    chart_->chart()->removeAllSeries();
    for (QAbstractAxis* a : chart_->chart()->axes()) {
        chart_->chart()->removeAxis(a);
        delete a;
    }
    chart_->chart()->setTitle(QString());
    chart_->setCsvSource({});
    chart_->setNote(why);
    apply_->setEnabled(false);
}

void MethodComparisonView::setPercentile(double p)
{
    percentile_->setValue(p);
    recompute();
}

void MethodComparisonView::setRmsFactor(double s)
{
    rms_->setValue(s);
    recompute();
}

void MethodComparisonView::recompute()
{
    const double p = percentile_->value(), s = rms_->value();
    if (weight_) {
        chart_->setNote(tr("Comparing methods…"));
        const Tensor x = *weight_;
        const QuantizationSpec spec = spec_;
        const std::string name = name_;
        job_.start<MethodComparisonData>(
            tr("Comparing methods"),
            [x, spec, p, s, name](const CancellationToken& cancel) {
                return compareWeightMethods(x, spec, p, s, name, kBins, cancel);
            },
            [this](MethodComparisonData d) { land(std::move(d)); }, [this](const QString& e) { clear(e); });
    } else if (stats_) {
        chart_->setNote(tr("Comparing methods…"));
        const auto stats = stats_;
        const std::string value = name_;
        const CalibrationTarget target = target_;
        job_.start<MethodComparisonData>(
            tr("Comparing methods"),
            [stats, value, target, p, s](const CancellationToken& cancel) {
                const auto it = stats->observers().find(value);
                if (it == stats->observers().end())
                    throw Error("activation '" + value + "' was not observed in calibration");
                return compareActivationMethods(it->second, target, p, s, kBins, cancel);
            },
            [this](MethodComparisonData d) { land(std::move(d)); }, [this](const QString& e) { clear(e); });
    }
}

QColor MethodComparisonView::colorOf(const std::string& method) const
{
    // A method keeps its colour whatever its rank: by its place in the compared list.
    const auto methods = comparedMethods({percentile_->value()}, rms_->value());
    const auto it = std::find(methods.begin(), methods.end(), method);
    return chart_->seriesColor(it == methods.end() ? 0 : int(it - methods.begin()) + 1);
}

void MethodComparisonView::land(MethodComparisonData d)
{
    data_ = std::move(d);
    std::vector<QColor> colors;
    for (const MethodResult& r : data_->results)
        colors.push_back(colorOf(r.method));
    model_->setResults(data_->results, colors);
    table_->resizeColumnsToContents();
    apply_->setEnabled(data_->best() != nullptr);
    draw();
    emit ready();
}

void MethodComparisonView::draw()
{
    if (!data_)
        return;
    const MethodComparisonData& d = *data_;
    QChart* chart = chart_->chart();
    chart->removeAllSeries();
    for (QAbstractAxis* a : chart->axes()) {
        chart->removeAxis(a);
        delete a;
    }
    chart->setTitle(QString::fromStdString(d.tensor));
    QColor muted = chart_->textColor();
    muted.setAlphaF(0.5f);
    chart->addSeries(histogramArea(d.values, 0.5, tr("x"), muted));
    const double top = std::max(2.0, 2.0 * double(*std::max_element(d.values.counts.begin(), d.values.counts.end())));
    const QString chosen = chosenMethod();
    std::vector<QAbstractSeries*> unnamed;
    for (size_t i = 0; i < d.results.size(); ++i) {
        const MethodResult& r = d.results[i];
        if (!r.skipped.empty() || r.ranges.empty())
            continue;
        const Range e = rangeEnvelope(r);
        const bool selected = QString::fromStdString(r.method) == chosen;
        const QPen pen(colorOf(r.method), selected ? 3.0 : 1.5, selected ? Qt::SolidLine : Qt::DashLine);
        QLineSeries* lo = verticalLine(e.min, 0.5, top, QString::fromStdString(r.method), pen);
        QLineSeries* hi = verticalLine(e.max, 0.5, top, QString(), pen);
        chart->addSeries(lo);
        chart->addSeries(hi);
        unnamed.push_back(hi);
    }
    auto* x = new QValueAxis;
    x->setRange(d.values.lo, d.values.hi);
    x->setLabelFormat("%.3g");
    x->setTitleText(d.activation ? tr("activation") : tr("weight"));
    auto* y = new QLogValueAxis;
    y->setRange(0.5, top);
    y->setLabelFormat("%g");
    y->setTitleText(tr("count"));
    chart->addAxis(x, Qt::AlignBottom);
    chart->addAxis(y, Qt::AlignLeft);
    for (QAbstractSeries* s : chart->series()) {
        s->attachAxis(x);
        s->attachAxis(y);
    }
    for (QAbstractSeries* s : unnamed)
        for (QLegendMarker* m : chart->legend()->markers(s))
            m->setVisible(false);
    chart_->applyPalette();
    QString note;
    if (const MethodResult* best = d.best())
        note = tr("Best: %1 (lowest MSE).").arg(QString::fromStdString(best->method));
    if (d.estimated)
        note += tr(" Errors estimated on the calibration histogram.");
    if (!d.results.empty() && d.results.front().ranges.size() > 1)
        note += tr(" Lines: the envelope of %1 groups' ranges.").arg(d.results.front().ranges.size());
    chart_->setNote(note.trimmed());
    const MethodComparisonData* data = &*data_;
    chart_->setCsvSource([data] {
        QString out = "method,mse,sqnr_db,max_abs_error,cosine,fraction_clipped,range_min,range_max,skipped\n";
        for (const MethodResult& r : data->results) {
            const Range e = rangeEnvelope(r);
            out += csvField(QString::fromStdString(r.method));
            if (r.skipped.empty())
                out += QString(",%1,%2,%3,%4,%5,%6,%7,")
                           .arg(r.metrics.mse, 0, 'g', 17)
                           .arg(r.metrics.sqnrDb, 0, 'g', 17)
                           .arg(r.metrics.maxAbsError, 0, 'g', 17)
                           .arg(r.metrics.cosine, 0, 'g', 17)
                           .arg(r.metrics.fractionClipped, 0, 'g', 17)
                           .arg(e.min, 0, 'g', 17)
                           .arg(e.max, 0, 'g', 17);
            else
                out += ",,,,,,,," + csvField(QString::fromStdString(r.skipped));
            out += '\n';
        }
        return out;
    });
}

QString MethodComparisonView::chosenMethod() const
{
    if (!data_)
        return {};
    const QModelIndexList rows = table_->selectionModel()->selectedRows();
    if (!rows.isEmpty()) {
        const MethodResult& r = data_->results[size_t(rows.front().row())];
        if (r.skipped.empty())
            return QString::fromStdString(r.method);
    }
    const MethodResult* best = data_->best();
    return best ? QString::fromStdString(best->method) : QString();
}

void MethodComparisonView::apply()
{
    const QString method = chosenMethod();
    if (!method.isEmpty())
        emit methodApplied(method);
}

void MethodComparisonView::hover(QPointF value, QPoint globalPos)
{
    if (!data_)
        return;
    QStringList lines;
    const int bin = binAt(data_->values, value.x());
    if (bin >= 0)
        lines << tr("[%1, %2): %3 values")
                     .arg(data_->values.edge(size_t(bin)), 0, 'g', 6)
                     .arg(data_->values.edge(size_t(bin) + 1), 0, 'g', 6)
                     .arg(data_->values.counts[size_t(bin)]);
    // Ranges whose bounds are within a few pixels' worth of the pointer.
    const double tolerance = (data_->values.hi - data_->values.lo) / 150.0;
    for (const MethodResult& r : data_->results) {
        if (!r.skipped.empty() || r.ranges.empty())
            continue;
        const Range e = rangeEnvelope(r);
        if (std::abs(e.min - value.x()) < tolerance || std::abs(e.max - value.x()) < tolerance)
            lines << tr("%1: [%2, %3], MSE %4, SQNR %5 dB")
                         .arg(QString::fromStdString(r.method))
                         .arg(e.min, 0, 'g', 6)
                         .arg(e.max, 0, 'g', 6)
                         .arg(r.metrics.mse, 0, 'g', 4)
                         .arg(r.metrics.sqnrDb, 0, 'f', 2);
    }
    if (!lines.isEmpty())
        QToolTip::showText(globalPos, lines.join('\n'), chart_->view());
}

} // namespace qs
