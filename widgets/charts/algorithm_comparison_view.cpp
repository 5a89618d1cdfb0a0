#include "widgets/charts/algorithm_comparison_view.h"

#include <algorithm>
#include <cmath>

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QHBoxLayout>
#include <QHorizontalBarSeries>
#include <QItemSelectionModel>
#include <QLabel>
#include <QPushButton>
#include <QTableView>
#include <QVBoxLayout>
#include <QValueAxis>

#include "runtime/activation_calibration.h"
#include "widgets/charts/algorithm_table_model.h"
#include "widgets/charts/chart_frame.h"

namespace qs {

nlohmann::ordered_json ruleFieldsOf(const AlgorithmRow& row, const std::string& ruleQType)
{
    nlohmann::ordered_json f = nlohmann::ordered_json::object();
    f["algorithm"] = row.algorithm == "rtn" ? nlohmann::ordered_json() : nlohmann::ordered_json(row.algorithm);
    f["bias_correction"] = row.biasCorrection ? nlohmann::ordered_json(true) : nlohmann::ordered_json();
    if (row.qtype != ruleQType) {
        f["weight_qtype"] = row.qtype;
        for (const char* reset :
             {"weight_calibration", "symmetric", "narrow_range", "scale_restriction", "rounding", "rounding_seed"})
            f[reset] = nullptr;
    }
    return f;
}

AlgorithmComparisonView::AlgorithmComparisonView(JobTracker* jobs, QWidget* parent)
    : QWidget(parent), chart_(new ChartFrame("algorithm_comparison", this)), table_(new QTableView(this)),
      model_(new AlgorithmTableModel(this)), apply_(new QPushButton(tr("Apply"), this)),
      job_(jobs, JobKind::AlgorithmComparison)
{
    apply_->setToolTip(tr("Write the selected variant (the best output SQNR when none is selected) into the "
                          "layer's rule"));
    connect(apply_, &QPushButton::clicked, this, &AlgorithmComparisonView::apply);
    table_->setModel(model_);
    table_->setWordWrap(false);
    connect(table_->selectionModel(), &QItemSelectionModel::selectionChanged, this, [this] { draw(); });
    connect(chart_, &ChartFrame::paletteChanged, this, &AlgorithmComparisonView::draw);
    connect(chart_, &ChartFrame::zoomReset, this, &AlgorithmComparisonView::draw);

    auto* controls = new QHBoxLayout;
    controls->addWidget(new QLabel(tr("Only this layer quantized; output on the calibration inputs."), this), 1);
    controls->addWidget(apply_);
    layOutChartBesideTable(this, chart_, controls, table_);
    clear(tr("Select a quantized layer to compare algorithms on it."));
}

AlgorithmComparisonView::~AlgorithmComparisonView() = default;

void AlgorithmComparisonView::show(std::shared_ptr<const Model> model, std::shared_ptr<const RuleSet> rules,
                                   size_t layer, std::shared_ptr<const ActivationStatistics> stats)
{
    if (!model || !rules || layer >= model->layers.size()) {
        clear(tr("Select a quantized layer to compare algorithms on it."));
        return;
    }
    const QString path = QString::fromStdString(model->layers[layer].modulePath);
    const auto found = stats ? stats->hessians().find(layer) : LayerHessians::const_iterator();
    if (!stats || found == stats->hessians().end() || found->second->rows() == 0) {
        clear(stats ? tr("The calibration holds no input statistics of %1: they are gathered for layers whose rule "
                         "sets algorithm gptq, awq or adaround, or bias_correction. Set one on its rule and run "
                         "calibration again to compare the algorithms.")
                          .arg(path)
                    : tr("Run calibration to compare algorithms on %1 (its rule must set algorithm gptq, awq or "
                         "adaround, or bias_correction, so that its input statistics are gathered).")
                          .arg(path));
        return;
    }
    chart_->setNote(tr("Comparing algorithms…"));
    data_.reset();
    model_->setRows({});
    apply_->setEnabled(false);
    const std::shared_ptr<const InputHessian> inputs = found->second;
    job_.start<AlgorithmComparison>(
        tr("Comparing algorithms"),
        [model, rules, layer, inputs](const CancellationToken& cancel) {
            return compareAlgorithms(*model, *rules, layer, *inputs, cancel);
        },
        [this](AlgorithmComparison c) { land(std::move(c)); }, [this](const QString& e) { clear(e); });
}

void AlgorithmComparisonView::clear(const QString& why)
{
    job_.cancel();
    data_.reset();
    model_->setRows({});
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

void AlgorithmComparisonView::land(AlgorithmComparison c)
{
    data_ = std::move(c);
    model_->setRows(data_->rows);
    table_->resizeColumnsToContents();
    apply_->setEnabled(chosenRow() != nullptr);
    draw();
    emit ready();
}

const AlgorithmRow* AlgorithmComparisonView::chosenRow() const
{
    if (!data_)
        return nullptr;
    const QModelIndexList rows = table_->selectionModel()->selectedRows();
    if (!rows.isEmpty()) {
        const AlgorithmRow& r = data_->rows[size_t(rows.front().row())];
        if (r.skipped.empty())
            return &r;
    }
    const AlgorithmRow* best = nullptr;
    for (const AlgorithmRow& r : data_->rows)
        if (r.skipped.empty() && (!best || r.outputSqnrDb > best->outputSqnrDb))
            best = &r;
    return best;
}

void AlgorithmComparisonView::apply()
{
    if (!data_)
        return;
    if (const AlgorithmRow* row = chosenRow()) {
        const nlohmann::json rule = nlohmann::json::parse(data_->rule);
        emit algorithmApplied(ruleFieldsOf(*row, rule.value("weight_qtype", std::string())));
    }
}

void AlgorithmComparisonView::draw()
{
    if (!data_)
        return;
    const AlgorithmComparison& d = *data_;
    QChart* chart = chart_->chart();
    chart->removeAllSeries();
    for (QAbstractAxis* a : chart->axes()) {
        chart->removeAxis(a);
        delete a;
    }
    chart->setTitle(tr("%1 (%2)").arg(QString::fromStdString(d.modulePath), QString::fromStdString(d.weightName)));
    // An exact result (infinite SQNR) is drawn a little above the highest finite bar.
    double top = 0;
    for (const AlgorithmRow& r : d.rows)
        if (r.skipped.empty())
            for (double v : {r.weight.sqnrDb, r.outputSqnrDb})
                if (std::isfinite(v))
                    top = std::max(top, v);
    const double exact = top + 5.0;
    auto* weight = new QBarSet(tr("weight SQNR dB"));
    auto* output = new QBarSet(tr("output SQNR dB"));
    weight->setColor(chart_->seriesColor(1));
    output->setColor(chart_->seriesColor(2));
    QStringList categories;
    const AlgorithmRow* chosen = chosenRow();
    int chosenIndex = -1;
    // From the bottom up, so that the bars read top-down in the table's order.
    for (auto it = d.rows.rbegin(); it != d.rows.rend(); ++it) {
        const AlgorithmRow& r = *it;
        if (!r.skipped.empty())
            continue;
        if (&r == chosen)
            chosenIndex = int(categories.size());
        categories << QString::fromStdString(r.variant);
        weight->append(std::isfinite(r.weight.sqnrDb) ? r.weight.sqnrDb : exact);
        output->append(std::isfinite(r.outputSqnrDb) ? r.outputSqnrDb : exact);
    }
    if (chosenIndex >= 0) {
        weight->selectBar(chosenIndex);
        output->selectBar(chosenIndex);
        weight->setSelectedColor(weight->color().darker(150));
        output->setSelectedColor(output->color().darker(150));
    }
    // Horizontal bars: the variants' names read along the category axis.
    auto* series = new QHorizontalBarSeries;
    series->append(weight);
    series->append(output);
    chart->addSeries(series);
    auto* y = new QBarCategoryAxis;
    y->append(categories);
    auto* x = new QValueAxis;
    x->setRange(std::min(0.0, top), std::max(1.0, exact + 2.0));
    x->setLabelFormat("%.0f");
    x->setTitleText(tr("SQNR dB"));
    chart->addAxis(x, Qt::AlignBottom);
    chart->addAxis(y, Qt::AlignLeft);
    series->attachAxis(x);
    series->attachAxis(y);
    chart_->applyPalette();
    size_t skipped = 0;
    for (const AlgorithmRow& r : d.rows)
        skipped += r.skipped.empty() ? 0 : 1;
    QString note = tr("%n calibration row(s).", nullptr, int(d.calibrationRows));
    if (chosen)
        note += tr(" %1 %2: output SQNR %3 dB.")
                    .arg(table_->selectionModel()->hasSelection() ? tr("Selected") : tr("Best"),
                         QString::fromStdString(chosen->variant), sqnrText(chosen->outputSqnrDb));
    if (skipped)
        note += tr(" %n variant(s) skipped (see the table).", nullptr, int(skipped));
    chart_->setNote(note);
    const AlgorithmComparison* data = &*data_;
    chart_->setCsvSource([data] {
        QString out = "variant,algorithm,bias_correction,qtype,weight_sqnr_db,weight_mse,output_sqnr_db,output_mse,"
                      "seconds,skipped\n";
        for (const AlgorithmRow& r : data->rows) {
            out += csvField(QString::fromStdString(r.variant)) + ',' + csvField(QString::fromStdString(r.algorithm)) +
                   ',' + (r.biasCorrection ? "true" : "false") + ',' + QString::fromStdString(r.qtype);
            if (r.skipped.empty())
                out += QString(",%1,%2,%3,%4,%5,")
                           .arg(r.weight.sqnrDb, 0, 'g', 17)
                           .arg(r.weight.mse, 0, 'g', 17)
                           .arg(r.outputSqnrDb, 0, 'g', 17)
                           .arg(r.outputMse, 0, 'g', 17)
                           .arg(r.seconds, 0, 'g', 6);
            else
                out += ",,,,,," + csvField(QString::fromStdString(r.skipped));
            out += '\n';
        }
        return out;
    });
}

} // namespace qs
