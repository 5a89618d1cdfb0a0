#include "widgets/charts/layer_error_view.h"

#include <algorithm>
#include <cmath>

#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QCursor>
#include <QHBoxLayout>
#include <QHorizontalBarSeries>
#include <QLegendMarker>
#include <QLineSeries>
#include <QPushButton>
#include <QSplitter>
#include <QToolTip>
#include <QVBoxLayout>
#include <QValueAxis>

#include "widgets/charts/chart_frame.h"

namespace qs {
namespace {

void clearChart(QChart* chart)
{
    chart->removeAllSeries();
    for (QAbstractAxis* axis : chart->axes()) {
        chart->removeAxis(axis);
        delete axis;
    }
}

QString sqnrText(std::optional<double> v)
{
    if (!v)
        return QObject::tr("—");
    if (std::isinf(*v))
        return *v > 0 ? QObject::tr("∞ dB (exact)") : QObject::tr("−∞ dB");
    return QString::number(*v, 'f', 2) + " dB";
}

} // namespace

LayerErrorView::LayerErrorView(QWidget* parent)
    : QWidget(parent), bars_(new ChartFrame("layer_errors", this)), sensitivity_(new ChartFrame("sensitivity", this)),
      propose_(new QPushButton(tr("Keep marked layers in float"), this))
{
    propose_->setToolTip(tr("Propose a rule that leaves the layers below the threshold line in float"));
    connect(propose_, &QPushButton::clicked, this, &LayerErrorView::proposeKeepFloat);
    connect(bars_->view(), &ChartView::hovered, this, &LayerErrorView::hoverBars);
    connect(bars_->view(), &ChartView::pressed, this, [this](QPointF, QPoint viewPos, bool* accepted) {
        if (!thresholdLine_)
            return;
        QChart* chart = bars_->chart();
        const QPointF linePos = chart->mapToPosition(QPointF(0, threshold_), thresholdLine_);
        const QPointF scenePos = chart->mapToScene(linePos);
        const QPoint viewLine = bars_->view()->mapFromScene(scenePos);
        if (std::abs(viewLine.y() - viewPos.y()) <= 6) {
            dragging_ = true;
            *accepted = true;
        }
    });
    connect(bars_->view(), &ChartView::dragged, this, [this](QPointF value) {
        if (dragging_)
            setThreshold(value.y());
    });
    // Releasing the line only ends the drag: "Keep marked layers in float" applies it (a rule
    // added on release would also drop the sensitivity ranking the user is reading).
    connect(bars_->view(), &ChartView::released, this, [this] { dragging_ = false; });
    connect(bars_, &ChartFrame::paletteChanged, this, &LayerErrorView::draw);
    connect(bars_, &ChartFrame::zoomReset, this, &LayerErrorView::draw);
    connect(sensitivity_, &ChartFrame::zoomReset, this, &LayerErrorView::draw);

    auto* controls = new QHBoxLayout;
    controls->addStretch();
    controls->addWidget(propose_);
    auto* split = new QSplitter(Qt::Vertical, this);
    split->addWidget(bars_);
    split->addWidget(sensitivity_);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 2);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addLayout(controls);
    layout->addWidget(split, 1);
    draw();
}

void LayerErrorView::setData(LayerErrorData data)
{
    data_ = std::move(data);
    draw();
}

double LayerErrorView::displayed(std::optional<double> sqnr) const
{
    if (!sqnr)
        return 0;
    if (std::isinf(*sqnr))
        return *sqnr > 0 ? ceiling_ : 0;
    return std::max(*sqnr, 0.0);
}

void LayerErrorView::draw()
{
    drawBars();
    drawSensitivity();
}

void LayerErrorView::drawBars()
{
    QChart* chart = bars_->chart();
    clearChart(chart);
    thresholdLine_ = nullptr;
    sets_.clear();
    if (data_.rows.empty()) {
        chart->setTitle(QString());
        bars_->setNote(tr("Quantize and evaluate the model to see the error of every layer."));
        bars_->setCsvSource({});
        propose_->setEnabled(false);
        return;
    }
    double finiteMax = 0;
    for (const LayerErrorRow& r : data_.rows)
        for (const auto& v : {r.weightSqnr, r.isolatedSqnr, r.accumulatedSqnr})
            if (v && std::isfinite(*v))
                finiteMax = std::max(finiteMax, *v);
    ceiling_ = std::ceil((finiteMax + 10.0) / 10.0) * 10.0;
    chart->setTitle(tr("SQNR per layer (higher is better; drag the threshold line)"));
    auto* series = new QBarSeries;
    const QString names[] = {tr("weight"), tr("isolated activation"), tr("accumulated activation")};
    for (int k = 0; k < 3; ++k) {
        auto* set = new QBarSet(names[k]);
        set->setColor(bars_->seriesColor(k));
        set->setBorderColor(bars_->seriesColor(k));
        set->setSelectedColor(bars_->darkPalette() ? QColor(255, 110, 110) : QColor(200, 20, 20));
        for (const LayerErrorRow& r : data_.rows)
            set->append(displayed(k == 0 ? r.weightSqnr : k == 1 ? r.isolatedSqnr : r.accumulatedSqnr));
        series->append(set);
        sets_.push_back(set);
        connect(set, &QBarSet::clicked, this, &LayerErrorView::clickRow);
    }
    chart->addSeries(series);
    thresholdLine_ = new QLineSeries;
    thresholdLine_->setPen(QPen(bars_->seriesColor(3), 2, Qt::DashLine));
    chart->addSeries(thresholdLine_);
    auto* x = new QBarCategoryAxis;
    QStringList categories;
    for (const LayerErrorRow& r : data_.rows)
        categories << QString::fromStdString(r.modulePath);
    x->append(categories);
    x->setLabelsAngle(categories.size() > 6 ? -45 : 0);
    auto* y = new QValueAxis;
    y->setRange(0, ceiling_);
    y->setTitleText(tr("SQNR (dB)"));
    y->setLabelFormat("%.0f");
    chart->addAxis(x, Qt::AlignBottom);
    chart->addAxis(y, Qt::AlignLeft);
    series->attachAxis(x);
    series->attachAxis(y);
    thresholdLine_->attachAxis(x);
    thresholdLine_->attachAxis(y);
    bars_->applyPalette();
    updateThresholdLine();
    const LayerErrorData* data = &data_;
    bars_->setCsvSource([data] {
        QString out = "layer,module_path,weight_sqnr_db,isolated_sqnr_db,accumulated_sqnr_db\n";
        const auto field = [](std::optional<double> v) { return v ? QString::number(*v, 'g', 9) : QString(); };
        for (const LayerErrorRow& r : data->rows)
            out += QString::number(r.layer) + ',' + csvField(QString::fromStdString(r.modulePath)) + ',' +
                   field(r.weightSqnr) + ',' + field(r.isolatedSqnr) + ',' + field(r.accumulatedSqnr) + '\n';
        return out;
    });
}

void LayerErrorView::setThreshold(double db)
{
    threshold_ = std::clamp(db, 0.0, std::max(ceiling_, 1.0));
    updateThresholdLine();
}

void LayerErrorView::updateThresholdLine()
{
    if (!thresholdLine_)
        return;
    const qsizetype n = qsizetype(data_.rows.size());
    thresholdLine_->replace({QPointF(-0.5, threshold_), QPointF(double(n) - 0.5, threshold_)});
    const QStringList marked = markedLayers();
    thresholdLine_->setName(tr("threshold %1 dB: %2 layer(s) below").arg(threshold_, 0, 'f', 1).arg(marked.size()));
    QList<int> below;
    for (int i = 0; i < int(n); ++i)
        if (const auto s = data_.rows[size_t(i)].markedSqnr(); s && *s < threshold_)
            below << i;
    for (QBarSet* set : sets_) {
        set->deselectAllBars();
        set->selectBars(below);
    }
    propose_->setEnabled(!marked.isEmpty());
    bars_->setNote(marked.isEmpty()
                       ? tr("No layer's isolated SQNR (or weight SQNR) is below the threshold.")
                       : tr("Below the threshold (isolated SQNR, else weight SQNR): %1").arg(marked.join(", ")));
}

QStringList LayerErrorView::markedLayers() const
{
    QStringList out;
    for (const LayerErrorRow* r : data_.below(threshold_))
        out << QString::fromStdString(r->modulePath);
    return out;
}

void LayerErrorView::proposeKeepFloat()
{
    const QStringList marked = markedLayers();
    if (!marked.isEmpty())
        emit keepFloatProposed(marked);
}

void LayerErrorView::clickRow(int row)
{
    if (row >= 0 && row < int(data_.rows.size()))
        emit layerClicked(data_.rows[size_t(row)].layer);
}

void LayerErrorView::drawSensitivity()
{
    QChart* chart = sensitivity_->chart();
    clearChart(chart);
    if (data_.sensitivity.empty()) {
        chart->setTitle(QString());
        sensitivity_->setNote(tr("Run a sensitivity analysis to rank the layers."));
        sensitivity_->setCsvSource({});
        return;
    }
    QString title =
        data_.allButOne
            ? tr("Sensitivity: output SQNR with all but this layer quantized (top: leaving it float helps most)")
            : tr("Sensitivity: output SQNR with only this layer quantized (top: most sensitive)");
    if (!data_.sensitivityAlgorithm.empty())
        title += tr(", weights rounded by %1").arg(QString::fromStdString(data_.sensitivityAlgorithm));
    chart->setTitle(title);
    chart->legend()->hide();
    auto* set = new QBarSet(tr("output SQNR"));
    set->setColor(sensitivity_->seriesColor(4));
    set->setBorderColor(sensitivity_->seriesColor(4));
    QStringList categories;
    // Horizontal bars run bottom-up: the most sensitive goes last to sit on top.
    for (auto it = data_.sensitivity.rbegin(); it != data_.sensitivity.rend(); ++it) {
        set->append(displayed(it->outputSqnr));
        categories << QString::fromStdString(it->modulePath);
    }
    const int n = int(data_.sensitivity.size());
    connect(set, &QBarSet::clicked, this,
            [this, n](int index) { emit layerClicked(data_.sensitivity[size_t(n - 1 - index)].layer); });
    auto* series = new QHorizontalBarSeries;
    series->append(set);
    chart->addSeries(series);
    auto* y = new QBarCategoryAxis;
    y->append(categories);
    auto* x = new QValueAxis;
    x->setTitleText(tr("output SQNR (dB)"));
    x->setLabelFormat("%.0f");
    x->setRange(0, ceiling_);
    chart->addAxis(y, Qt::AlignLeft);
    chart->addAxis(x, Qt::AlignBottom);
    series->attachAxis(x);
    series->attachAxis(y);
    connect(set, &QBarSet::hovered, this, [this, n](bool on, int index) {
        if (!on)
            return;
        const SensitivityRow& r = data_.sensitivity[size_t(n - 1 - index)];
        QString text = tr("%1 (rank %2)\noutput SQNR %3")
                           .arg(QString::fromStdString(r.modulePath))
                           .arg(n - index)
                           .arg(sqnrText(r.outputSqnr));
        if (r.top1)
            text += tr("\nquantized top-1 %1%").arg(100.0 * *r.top1, 0, 'f', 2);
        QToolTip::showText(QCursor::pos(), text, sensitivity_->view());
    });
    sensitivity_->applyPalette();
    sensitivity_->setNote(QString());
    const LayerErrorData* data = &data_;
    sensitivity_->setCsvSource([data] {
        QString out = "rank,layer,module_path,output_sqnr_db,top1\n";
        for (size_t i = 0; i < data->sensitivity.size(); ++i) {
            const SensitivityRow& r = data->sensitivity[i];
            out += QString::number(i + 1) + ',' + QString::number(r.layer) + ',' +
                   csvField(QString::fromStdString(r.modulePath)) + ',' + QString::number(r.outputSqnr, 'g', 9) + ',' +
                   (r.top1 ? QString::number(*r.top1, 'g', 9) : QString()) + '\n';
        }
        return out;
    });
}

void LayerErrorView::hoverBars(QPointF value, QPoint globalPos)
{
    const int i = int(std::lround(value.x()));
    if (i < 0 || i >= int(data_.rows.size()))
        return;
    const LayerErrorRow& r = data_.rows[size_t(i)];
    QToolTip::showText(globalPos,
                       tr("%1\nweight %2\nisolated %3\naccumulated %4")
                           .arg(QString::fromStdString(r.modulePath), sqnrText(r.weightSqnr), sqnrText(r.isolatedSqnr),
                                sqnrText(r.accumulatedSqnr)),
                       bars_->view());
}

} // namespace qs
