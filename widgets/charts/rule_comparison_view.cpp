#include "widgets/charts/rule_comparison_view.h"

#include <algorithm>
#include <cmath>

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QHorizontalBarSeries>
#include <QLabel>
#include <QPushButton>
#include <QRegularExpression>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>
#include <QValueAxis>

#include "session/rule_comparison.h"
#include "widgets/charts/chart_frame.h"
#include "widgets/rule_comparison_model.h"
#include "widgets/summary_bar.h"

namespace qs {
namespace {

// Numbers by value; rows without the figure (NaN) last whichever way the column is sorted.
class ComparisonSortProxy : public QSortFilterProxyModel {
public:
    using QSortFilterProxyModel::QSortFilterProxyModel;

protected:
    bool lessThan(const QModelIndex& left, const QModelIndex& right) const override
    {
        const QVariant l = left.data(RuleComparisonModel::SortRole);
        const QVariant r = right.data(RuleComparisonModel::SortRole);
        if (l.typeId() == QMetaType::Double && r.typeId() == QMetaType::Double) {
            const double a = l.toDouble(), b = r.toDouble();
            const bool aMissing = std::isnan(a), bMissing = std::isnan(b);
            if (aMissing || bMissing) {
                if (aMissing && bMissing)
                    return left.data(RuleComparisonModel::LayerOrderRole).toInt() <
                           right.data(RuleComparisonModel::LayerOrderRole).toInt();
                // Missing is "greater" ascending and "smaller" descending: last either way.
                return sortOrder() == Qt::AscendingOrder ? bMissing : aMissing;
            }
            if (a != b)
                return a < b;
            return left.data(RuleComparisonModel::LayerOrderRole).toInt() <
                   right.data(RuleComparisonModel::LayerOrderRole).toInt();
        }
        return QSortFilterProxyModel::lessThan(left, right);
    }
};

QString figure(const ComparedFigure& f, bool percent, int decimals, const QString& unit)
{
    auto text = [&](const std::optional<double>& v) {
        if (!v)
            return QStringLiteral("–");
        if (std::isinf(*v))
            return *v > 0 ? QStringLiteral("∞") : QStringLiteral("−∞");
        return QString::number(percent ? *v * 100.0 : *v, 'f', decimals) + unit;
    };
    QString s = QStringLiteral("A %1, B %2").arg(text(f.a), text(f.b));
    if (const auto d = f.delta())
        s += QStringLiteral(" (%1%2%3)")
                 .arg(*d >= 0 ? QStringLiteral("+") : QString())
                 .arg(percent ? *d * 100.0 : *d, 0, 'f', decimals)
                 .arg(percent ? QObject::tr(" points") : unit);
    return s;
}

} // namespace

RuleComparisonView::RuleComparisonView(QWidget* parent)
    : QWidget(parent), keep_(new QPushButton(tr("Keep as A"), this)), clear_(new QPushButton(tr("Clear A"), this)),
      sides_(new QLabel(this)), figures_(new QLabel(this)), model_(new RuleComparisonModel(this)),
      proxy_(new ComparisonSortProxy(this)), table_(new QTableView(this)), chart_(new ChartFrame("ab_comparison", this))
{
    keep_->setObjectName(QStringLiteral("KeepAsA"));
    keep_->setToolTip(tr("Hold the current rules and results as A; then change the rules (or open another rule "
                         "file): they are B"));
    clear_->setToolTip(tr("Forget A"));
    connect(keep_, &QPushButton::clicked, this, &RuleComparisonView::keepAsARequested);
    connect(clear_, &QPushButton::clicked, this, &RuleComparisonView::clearARequested);
    sides_->setWordWrap(true);
    figures_->setWordWrap(true);
    figures_->setTextInteractionFlags(Qt::TextSelectableByMouse);

    proxy_->setSourceModel(model_);
    proxy_->setSortRole(RuleComparisonModel::SortRole);
    table_->setModel(proxy_);
    table_->setSortingEnabled(true);
    table_->sortByColumn(-1, Qt::AscendingOrder); // model order until the user sorts
    table_->setSelectionBehavior(QAbstractItemView::SelectRows);
    table_->setAlternatingRowColors(true);
    table_->verticalHeader()->hide();
    table_->horizontalHeader()->setStretchLastSection(true);
    table_->horizontalHeader()->setMinimumSectionSize(36);
    table_->setToolTip(
        tr("Δ columns: B − A, SQNR in dB (weight, isolated and accumulated activation) and weight bytes"));
    table_->setWordWrap(false);
    connect(chart_, &ChartFrame::paletteChanged, this, &RuleComparisonView::drawChart);
    connect(chart_, &ChartFrame::zoomReset, this, &RuleComparisonView::drawChart);

    auto* top = new QHBoxLayout;
    top->addWidget(keep_);
    top->addWidget(clear_);
    top->addWidget(sides_, 1);
    auto* split = new QSplitter(Qt::Vertical, this);
    split->addWidget(table_);
    split->addWidget(chart_);
    split->setStretchFactor(0, 2);
    split->setStretchFactor(1, 3);
    split->setChildrenCollapsible(false);
    chart_->setMinimumHeight(300);
    table_->setMinimumHeight(120);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(2, 2, 2, 2);
    layout->addLayout(top);
    layout->addWidget(figures_);
    layout->addWidget(split, 1);
    setADescription({});
    setComparison(nullptr);
}

void RuleComparisonView::setADescription(const QString& text)
{
    clear_->setEnabled(!text.isEmpty());
    sides_->setText(text.isEmpty() ? tr("No A yet: press <b>Keep as A</b>, then change the rules.")
                                   : tr("<b>A</b>: %1 · <b>B</b>: the current rules").arg(text.toHtmlEscaped()));
}

void RuleComparisonView::setKeepEnabled(bool enabled, const QString& why)
{
    keep_->setEnabled(enabled);
    keep_->setToolTip(enabled || why.isEmpty() ? tr("Hold the current rules and results as A; then change the rules "
                                                    "(or open another rule file): they are B")
                                               : why);
}

void RuleComparisonView::setComparison(std::shared_ptr<const RuleComparison> comparison, bool stale)
{
    model_->setComparison(comparison);
    table_->resizeColumnsToContents();
    if (!comparison) {
        figures_->setText(QString());
        drawChart();
        return;
    }
    const RuleComparison& c = *comparison;
    QStringList lines;
    for (const OutputComparison& o : c.outputs)
        lines << tr("<b>Output %1 SQNR</b>: %2").arg(QString::fromStdString(o.name), figure(o.sqnrDb, false, 2, " dB"));
    if (c.quantizedTop1.a || c.quantizedTop1.b)
        lines << tr("<b>Top-1</b>: %1").arg(figure(c.quantizedTop1, true, 2, "%"));
    if (c.top1Agreement.a || c.top1Agreement.b)
        lines << tr("<b>Agreement with float</b>: %1").arg(figure(c.top1Agreement, true, 2, "%"));
    if (c.quantizedPerplexity.a || c.quantizedPerplexity.b)
        lines << tr("<b>Perplexity</b>: %1").arg(figure(c.quantizedPerplexity, false, 3, QString()));
    const int64_t dBytes = c.totalB.quantizedBytes - c.totalA.quantizedBytes;
    lines << tr("<b>Weight bytes</b>: float %1, A %2, B %3 (%4%5)")
                 .arg(byteSizeText(c.totalA.floatBytes), byteSizeText(c.totalA.quantizedBytes),
                      byteSizeText(c.totalB.quantizedBytes), dBytes >= 0 ? QStringLiteral("+") : QStringLiteral("−"),
                      byteSizeText(std::abs(dBytes)));
    if (!c.evaluatedA || !c.evaluatedB)
        lines << tr("<i>Activation and output figures need both sides evaluated (%1 is not): Run ▸ Evaluate.</i>")
                     .arg(!c.evaluatedA && !c.evaluatedB ? tr("neither")
                          : !c.evaluatedA                ? tr("A")
                                                         : tr("B"));
    if (stale)
        lines << tr("<i>Updating…</i>");
    figures_->setText(lines.join(QStringLiteral("<br>")));
    drawChart();
}

QString RuleComparisonView::figuresText() const
{
    QString t = figures_->text();
    t.replace(QStringLiteral("<br>"), QStringLiteral("\n"));
    return t.remove(QRegularExpression(QStringLiteral("<[^>]*>")));
}

void RuleComparisonView::drawChart()
{
    QChart* chart = chart_->chart();
    chart->removeAllSeries();
    for (QAbstractAxis* axis : chart->axes()) {
        chart->removeAxis(axis);
        delete axis;
    }
    const auto c = model_->comparison();
    if (!c || c->layers.empty()) {
        chart->setTitle(QString());
        chart_->setNote(tr("Keep the current results as A, then change the rules: the per-layer differences B − A "
                           "show here."));
        chart_->setCsvSource({});
        return;
    }
    chart->setTitle(tr("Δ SQNR per layer, B − A (dB; right of 0: B is better)"));
    auto* series = new QHorizontalBarSeries;
    const int columns[] = {RuleComparisonModel::DeltaWeightSqnrColumn, RuleComparisonModel::DeltaIsolatedSqnrColumn,
                           RuleComparisonModel::DeltaAccumulatedSqnrColumn};
    const QString names[] = {tr("weight"), tr("isolated activation"), tr("accumulated activation")};
    QStringList categories;
    double extent = 1.0;
    // The first layer at the top: a horizontal bar series draws its first category at the bottom.
    std::vector<const LayerComparison*> rows;
    for (const LayerComparison& r : c->layers)
        rows.push_back(&r);
    std::reverse(rows.begin(), rows.end());
    for (const LayerComparison* r : rows)
        categories << QString::fromStdString(r->modulePath);
    for (int k = 0; k < 3; ++k) {
        auto* set = new QBarSet(names[k]);
        set->setColor(chart_->seriesColor(k));
        set->setBorderColor(chart_->seriesColor(k));
        for (const LayerComparison* r : rows) {
            const double v = RuleComparisonModel::delta(*r, columns[k]).value_or(0.0);
            extent = std::max(extent, std::abs(v));
            set->append(v);
        }
        series->append(set);
    }
    chart->addSeries(series);
    auto* axisY = new QBarCategoryAxis;
    axisY->append(categories);
    chart->addAxis(axisY, Qt::AlignLeft);
    series->attachAxis(axisY);
    auto* axisX = new QValueAxis;
    extent = std::ceil(extent * 1.1);
    axisX->setRange(-extent, extent);
    axisX->setTitleText(tr("Δ SQNR (dB)"));
    axisX->applyNiceNumbers();
    axisX->setLabelFormat(QStringLiteral("%.0f"));
    chart->addAxis(axisX, Qt::AlignBottom);
    series->attachAxis(axisX);
    chart->legend()->setAlignment(Qt::AlignBottom);
    chart_->applyPalette();
    chart_->setNote(tr("A layer without a bar has no finite figure on one side (float, exact or not evaluated)."));
    chart_->setCsvSource([c] {
        QString csv = QStringLiteral("module_path,a,b,delta_weight_sqnr_db,delta_isolated_sqnr_db,"
                                     "delta_accumulated_sqnr_db,delta_weight_bytes,note\n");
        auto num = [](const std::optional<double>& v) { return v ? QString::number(*v, 'g', 10) : QString(); };
        for (const LayerComparison& r : c->layers)
            csv += QStringList{csvField(QString::fromStdString(r.modulePath)),
                               csvField(QString::fromStdString(r.a.summary())),
                               csvField(QString::fromStdString(r.b.summary())),
                               num(r.deltaWeightSqnr),
                               num(r.deltaIsolatedSqnr),
                               num(r.deltaAccumulatedSqnr),
                               r.deltaWeightBytes ? QString::number(*r.deltaWeightBytes) : QString(),
                               csvField(QString::fromStdString(r.note))}
                       .join(QLatin1Char(',')) +
                   QLatin1Char('\n');
        return csv;
    });
}

} // namespace qs
