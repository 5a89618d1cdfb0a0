#include "widgets/charts/search_curve_view.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QLineSeries>
#include <QPushButton>
#include <QScatterSeries>
#include <QSplitter>
#include <QTreeWidget>
#include <QVBoxLayout>
#include <QValueAxis>

#include "session/rule_search.h"
#include "widgets/charts/chart_frame.h"
#include "widgets/summary_bar.h"

namespace qs {
namespace {

// The label of a choice: how many layers take each candidate ("3× int4 tile 128, 2× int8").
QString choiceText(const SearchPoint& p, const SearchCandidates& candidates)
{
    std::vector<int> count(candidates.candidates.size(), 0);
    int unsearched = 0;
    for (const int64_t c : p.candidate)
        if (c < 0)
            ++unsearched;
        else if (size_t(c) < count.size())
            ++count[size_t(c)];
    QStringList parts;
    for (size_t c = 0; c < count.size(); ++c)
        if (count[c])
            parts << QStringLiteral("%1× %2").arg(count[c]).arg(QString::fromStdString(candidates.label(c)));
    if (unsearched)
        parts << QObject::tr("%1× unsearched").arg(unsearched);
    return parts.join(QStringLiteral(", "));
}

constexpr int kPointRole = Qt::UserRole + 1;

} // namespace

SearchCurveView::SearchCurveView(QWidget* parent)
    : QWidget(parent), candidatesFile_(new QLineEdit(this)), target_(new QLineEdit(this)),
      browse_(new QPushButton(tr("Browse…"), this)), run_(new QPushButton(tr("Run Search"), this)),
      status_(new QLabel(this)), chart_(new ChartFrame("search_curve", this)), points_(new QTreeWidget(this)),
      apply_(new QPushButton(tr("Apply Point's Rules"), this))
{
    candidatesFile_->setPlaceholderText(tr("candidates file: {\"version\": 1, \"candidates\": [...]}, smallest first"));
    target_->setText(QStringLiteral("output_sqnr_db>=30"));
    target_->setToolTip(tr("output_sqnr_db>=DB, top1_agreement>=F or perplexity_increase<=F (docs/search.md)"));
    run_->setObjectName(QStringLiteral("RunSearch"));
    apply_->setObjectName(QStringLiteral("ApplySearchPoint"));
    apply_->setEnabled(false);
    apply_->setToolTip(tr("Replace the rules by the selected point's (undoable)"));
    status_->setWordWrap(true);
    connect(browse_, &QPushButton::clicked, this, [this] {
        const QString path = QFileDialog::getOpenFileName(this, tr("Search candidates"),
                                                          QFileInfo(candidatesFile_->text()).absolutePath(),
                                                          tr("Candidate files (*.json)"));
        if (!path.isEmpty())
            candidatesFile_->setText(path);
    });
    connect(run_, &QPushButton::clicked, this,
            [this] { emit searchRequested(candidatesFile_->text().trimmed(), target_->text().trimmed()); });
    connect(apply_, &QPushButton::clicked, this, [this] {
        if (const auto p = selectedPoint())
            emit pointApplied(*p);
    });
    connect(points_, &QTreeWidget::itemSelectionChanged, this, [this] {
        apply_->setEnabled(selectedPoint().has_value());
        drawChart(); // the selected point is ringed
    });
    connect(points_, &QTreeWidget::itemDoubleClicked, this, [this] {
        if (const auto p = selectedPoint())
            emit pointApplied(*p);
    });
    connect(chart_, &ChartFrame::paletteChanged, this, &SearchCurveView::drawChart);
    connect(chart_, &ChartFrame::zoomReset, this, &SearchCurveView::drawChart);

    points_->setRootIsDecorated(false);
    points_->setAlternatingRowColors(true);
    points_->setHeaderLabels({tr("#"), tr("Step"), tr("Weight bytes"), tr("Metric"), tr("Meets"), tr("Choice")});
    points_->header()->setStretchLastSection(true);

    auto* fileRow = new QHBoxLayout;
    fileRow->addWidget(candidatesFile_, 1);
    fileRow->addWidget(browse_);
    auto* targetRow = new QHBoxLayout;
    targetRow->addWidget(target_, 1);
    targetRow->addWidget(run_);
    auto* form = new QFormLayout;
    form->addRow(tr("Candidates:"), fileRow);
    form->addRow(tr("Target:"), targetRow);
    auto* applyRow = new QHBoxLayout;
    applyRow->addStretch();
    applyRow->addWidget(apply_);
    auto* bottom = new QWidget(this);
    auto* bottomLayout = new QVBoxLayout(bottom);
    bottomLayout->setContentsMargins(0, 0, 0, 0);
    bottomLayout->addWidget(points_, 1);
    bottomLayout->addLayout(applyRow);
    auto* split = new QSplitter(Qt::Vertical, this);
    split->addWidget(chart_);
    split->addWidget(bottom);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 2);
    split->setChildrenCollapsible(false);
    chart_->setMinimumHeight(300);
    points_->setMinimumHeight(120);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(2, 2, 2, 2);
    layout->addLayout(form);
    layout->addWidget(status_);
    layout->addWidget(split, 1);
    drawChart();
}

void SearchCurveView::setCandidatesFile(const QString& path)
{
    candidatesFile_->setText(path);
}

QString SearchCurveView::candidatesFile() const
{
    return candidatesFile_->text();
}

void SearchCurveView::setTargetText(const QString& text)
{
    target_->setText(text);
}

QString SearchCurveView::targetText() const
{
    return target_->text();
}

void SearchCurveView::setRunEnabled(bool enabled, const QString& why)
{
    run_->setEnabled(enabled);
    run_->setToolTip(enabled ? tr("Find the smallest rules that meet the target (a background job; Esc cancels)")
                             : why);
}

void SearchCurveView::setStatus(const QString& text)
{
    status_->setText(text);
}

QString SearchCurveView::status() const
{
    return status_->text();
}

std::optional<size_t> SearchCurveView::selectedPoint() const
{
    const auto items = points_->selectedItems();
    if (items.isEmpty())
        return std::nullopt;
    return size_t(items.first()->data(0, kPointRole).toULongLong());
}

void SearchCurveView::selectPoint(size_t index)
{
    for (int i = 0; i < points_->topLevelItemCount(); ++i)
        if (points_->topLevelItem(i)->data(0, kPointRole).toULongLong() == index)
            points_->setCurrentItem(points_->topLevelItem(i));
}

void SearchCurveView::setResult(std::shared_ptr<const RuleSearchResult> result,
                                std::shared_ptr<const SearchCandidates> candidates)
{
    result_ = std::move(result);
    candidates_ = std::move(candidates);
    points_->clear();
    if (result_ && candidates_) {
        const QString metric =
            QString::fromUtf8(result_->target.metricName().data(), qsizetype(result_->target.metricName().size()));
        points_->headerItem()->setText(3, metric);
        for (size_t i = 0; i < result_->points.size(); ++i) {
            const SearchPoint& p = result_->points[i];
            auto* item = new QTreeWidgetItem(points_);
            item->setData(0, kPointRole, qulonglong(i));
            item->setText(0, QString::number(i + 1));
            item->setText(1, QString::fromStdString(p.step));
            item->setText(2, byteSizeText(p.weightBytes));
            item->setToolTip(2, tr("%1 bytes").arg(p.weightBytes));
            item->setText(3, QString::number(p.value, 'f', 4));
            item->setText(4, p.meets ? tr("yes") : tr("no"));
            item->setText(5, choiceText(p, *candidates_));
            item->setToolTip(5, item->text(5));
            for (int c : {0, 2, 3})
                item->setTextAlignment(c, Qt::AlignRight | Qt::AlignVCenter);
        }
        for (int c = 0; c < 5; ++c)
            points_->resizeColumnToContents(c);
        if (!result_->points.empty())
            selectPoint(result_->points.size() - 1); // the chosen ("final") point when the target was met
    }
    apply_->setEnabled(selectedPoint().has_value());
    drawChart();
}

void SearchCurveView::drawChart()
{
    QChart* chart = chart_->chart();
    chart->removeAllSeries();
    for (QAbstractAxis* axis : chart->axes()) {
        chart->removeAxis(axis);
        delete axis;
    }
    if (!result_ || result_->points.empty()) {
        chart->setTitle(QString());
        chart_->setNote(tr("Run the search: every point it evaluates is drawn here, weight size against the "
                           "target's metric."));
        chart_->setCsvSource({});
        return;
    }
    const RuleSearchResult& r = *result_;
    const QString metric = QString::fromUtf8(r.target.metricName().data(), qsizetype(r.target.metricName().size()));
    chart->setTitle(tr("Size against %1 of the points tried").arg(metric));
    // Sizes in KB or MB, whichever reads better.
    int64_t maxBytes = r.floatBytes;
    for (const SearchPoint& p : r.points)
        maxBytes = std::max(maxBytes, p.weightBytes);
    const bool mb = maxBytes >= 4 * 1024 * 1024;
    const double unit = mb ? 1024.0 * 1024.0 : 1024.0;
    auto* meets = new QScatterSeries;
    meets->setName(tr("meets the target"));
    auto* misses = new QScatterSeries;
    misses->setName(tr("misses it"));
    auto* chosen = new QScatterSeries;
    chosen->setName(tr("selected"));
    chosen->setMarkerSize(18);
    chosen->setBrush(Qt::NoBrush);
    meets->setColor(chart_->darkPalette() ? QColor(102, 187, 106) : QColor(46, 125, 50));
    misses->setColor(chart_->darkPalette() ? QColor(239, 83, 80) : QColor(198, 40, 40));
    meets->setMarkerSize(10);
    misses->setMarkerSize(10);
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    bool infinite = false;
    for (const SearchPoint& p : r.points) {
        if (std::isfinite(p.value)) {
            lo = std::min(lo, p.value);
            hi = std::max(hi, p.value);
        } else {
            infinite = true;
        }
    }
    lo = std::min(lo, r.target.threshold);
    hi = std::max(hi, r.target.threshold);
    const double margin = std::max((hi - lo) * 0.1, 0.01 * std::max(1.0, std::abs(hi)));
    QPen ring(chart_->textColor());
    ring.setWidthF(2.0);
    chosen->setPen(ring);
    auto* target = new QLineSeries;
    target->setName(tr("target %1").arg(QString::fromStdString(r.target.text())));
    QPen dashed(chart_->mutedColor());
    dashed.setStyle(Qt::DashLine);
    dashed.setWidthF(1.5);
    target->setPen(dashed);
    const double xMax = double(maxBytes) / unit * 1.05;
    target->append(0, r.target.threshold);
    target->append(xMax, r.target.threshold);
    for (QAbstractSeries* s : std::initializer_list<QAbstractSeries*>{target, meets, misses, chosen})
        chart->addSeries(s);
    auto* axisX = new QValueAxis;
    axisX->setRange(0, xMax);
    axisX->setTitleText(mb ? tr("weight MB (float: %1)").arg(byteSizeText(r.floatBytes))
                           : tr("weight KB (float: %1)").arg(byteSizeText(r.floatBytes)));
    axisX->setLabelFormat(QStringLiteral("%.0f"));
    auto* axisY = new QValueAxis;
    axisY->setRange(lo - margin, hi + margin * (infinite ? 2.0 : 1.0));
    axisX->applyNiceNumbers();
    axisY->applyNiceNumbers();
    // An exact point (float everywhere: +inf dB) sits on the top edge of the rounded axis.
    const double top = axisY->max(), bottom = axisY->min();
    target->clear(); // across the whole rounded axis
    target->append(axisX->min(), r.target.threshold);
    target->append(axisX->max(), r.target.threshold);
    auto shown = [&](double v) { return std::isfinite(v) ? v : (v > 0 ? top : bottom); };
    for (const SearchPoint& p : r.points)
        (p.meets ? meets : misses)->append(double(p.weightBytes) / unit, shown(p.value));
    if (const auto s = selectedPoint(); s && *s < r.points.size())
        chosen->append(double(r.points[*s].weightBytes) / unit, shown(r.points[*s].value));
    axisY->setTitleText(r.target.metric == SearchTarget::Metric::OutputSqnrDb    ? tr("output SQNR (dB)")
                        : r.target.metric == SearchTarget::Metric::Top1Agreement ? tr("top-1 agreement")
                                                                                 : tr("perplexity increase"));
    chart->addAxis(axisX, Qt::AlignBottom);
    chart->addAxis(axisY, Qt::AlignLeft);
    for (QAbstractSeries* s : chart->series()) {
        s->attachAxis(axisX);
        s->attachAxis(axisY);
    }
    // A click on a point selects its row.
    for (QScatterSeries* s : {meets, misses})
        connect(s, &QScatterSeries::clicked, this, [this, unit](const QPointF& at) {
            if (!result_)
                return;
            size_t best = 0;
            double bestDistance = std::numeric_limits<double>::infinity();
            for (size_t i = 0; i < result_->points.size(); ++i) {
                const SearchPoint& p = result_->points[i];
                const double d = std::isfinite(p.value)
                                     ? std::hypot(double(p.weightBytes) / unit - at.x(), p.value - at.y())
                                     : std::abs(double(p.weightBytes) / unit - at.x());
                if (d < bestDistance) {
                    bestDistance = d;
                    best = i;
                }
            }
            selectPoint(best);
        });
    chart->legend()->setAlignment(Qt::AlignBottom);
    chart_->applyPalette();
    meets->setColor(chart_->darkPalette() ? QColor(102, 187, 106) : QColor(46, 125, 50));
    misses->setColor(chart_->darkPalette() ? QColor(239, 83, 80) : QColor(198, 40, 40));
    chosen->setPen(ring);
    chosen->setBrush(Qt::NoBrush);
    target->setPen(dashed);
    // The search's message is the status line above; the note says only how to read the chart.
    chart_->setNote(infinite ? tr("An exact point (+∞: float everywhere) is drawn on the top edge. Click a point to "
                                  "select it.")
                             : tr("Click a point to select it."));
    auto result = result_;
    chart_->setCsvSource([result] {
        QString csv = QStringLiteral("index,step,weight_bytes,value,meets\n");
        for (size_t i = 0; i < result->points.size(); ++i) {
            const SearchPoint& p = result->points[i];
            csv += QStringLiteral("%1,%2,%3,%4,%5\n")
                       .arg(i + 1)
                       .arg(QString::fromStdString(p.step))
                       .arg(p.weightBytes)
                       .arg(p.value, 0, 'g', 10)
                       .arg(p.meets ? 1 : 0);
        }
        return csv;
    });
}

} // namespace qs
