#include "widgets/summary_bar.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QRegularExpression>

#include <cmath>

#include "session/exploration.h"

namespace qs {

SummaryFigures summaryFigures(const Exploration& x, const std::optional<WeightBytes>& bytes, uint64_t bytesGeneration)
{
    SummaryFigures f;
    if (!x.hasModel())
        return f;
    if (const auto e = x.evaluation()) {
        f.evaluated = true;
        f.evaluationStale = x.evaluationGeneration() != x.generation();
        if (e->accuracy) {
            f.floatTop1 = e->accuracy->floatTop1;
            f.quantizedTop1 = e->accuracy->quantizedTop1;
        }
        if (e->agreement)
            f.top1Agreement = e->agreement->fraction();
        for (const OutputEvaluation& o : e->outputs)
            f.outputSqnrDb.emplace_back(o.name, o.metrics.sqnrDb);
        if (e->perplexity) {
            f.floatPerplexity = e->perplexity->floatValue;
            f.quantizedPerplexity = e->perplexity->quantizedValue;
        }
    }
    f.weightBytes = bytes;
    f.weightBytesStale = bytes && bytesGeneration != x.generation();
    return f;
}

QString byteSizeText(int64_t bytes)
{
    const double b = double(bytes);
    if (b >= 1024.0 * 1024.0 * 1024.0)
        return QStringLiteral("%1 GB").arg(b / (1024.0 * 1024.0 * 1024.0), 0, 'f', 2);
    if (b >= 1024.0 * 1024.0)
        return QStringLiteral("%1 MB").arg(b / (1024.0 * 1024.0), 0, 'f', 2);
    if (b >= 1024.0)
        return QStringLiteral("%1 KB").arg(b / 1024.0, 0, 'f', 1);
    return QStringLiteral("%1 B").arg(bytes);
}

namespace {

QString percent(double fraction)
{
    return QStringLiteral("%1%").arg(fraction * 100.0, 0, 'f', 2);
}

QString decibels(double db)
{
    return std::isinf(db) ? (db > 0 ? QStringLiteral("∞ dB") : QStringLiteral("−∞ dB"))
                          : QStringLiteral("%1 dB").arg(db, 0, 'f', 1);
}

} // namespace

SummaryBar::SummaryBar(QWidget* parent)
    : QWidget(parent), accuracy_(new QLabel(this)), agreement_(new QLabel(this)), sqnr_(new QLabel(this)),
      perplexity_(new QLabel(this)), bytes_(new QLabel(this)), stale_(new QLabel(this))
{
    setObjectName(QStringLiteral("SummaryBar"));
    accuracy_->setObjectName(QStringLiteral("SummaryTop1"));
    agreement_->setObjectName(QStringLiteral("SummaryAgreement"));
    sqnr_->setObjectName(QStringLiteral("SummarySqnr"));
    perplexity_->setObjectName(QStringLiteral("SummaryPerplexity"));
    bytes_->setObjectName(QStringLiteral("SummaryBytes"));
    stale_->setObjectName(QStringLiteral("SummaryStale"));
    auto* row = new QHBoxLayout(this);
    row->setContentsMargins(6, 3, 6, 3);
    row->setSpacing(18);
    for (QLabel* l : {accuracy_, agreement_, sqnr_, perplexity_, bytes_}) {
        l->setTextInteractionFlags(Qt::TextSelectableByMouse);
        l->setTextFormat(Qt::RichText);
        row->addWidget(l);
    }
    row->addStretch(1);
    row->addWidget(stale_);
    stale_->setToolTip(tr("The rules changed since these figures were computed: evaluate again"));
    setFigures({});
}

void SummaryBar::setFigures(const SummaryFigures& f)
{
    figures_ = f;
    const QString muted = palette().color(QPalette::Disabled, QPalette::Text).name();
    auto dim = [&](const QString& text, bool stale) {
        return stale ? QStringLiteral("<span style='color:%1'>%2</span>").arg(muted, text) : text;
    };
    const bool evalStale = f.evaluationStale;
    if (f.quantizedTop1)
        accuracy_->setText(
            dim(tr("<b>Top-1</b> %1 → %2").arg(percent(*f.floatTop1), percent(*f.quantizedTop1)), evalStale));
    else
        accuracy_->setText(dim(tr("<b>Top-1</b> –"), true));
    accuracy_->setToolTip(tr("Top-1 accuracy on the labelled evaluation data: float → quantized"));
    accuracy_->setVisible(f.quantizedTop1 || !f.evaluated || !f.top1Agreement);
    agreement_->setText(f.top1Agreement ? dim(tr("<b>Agreement</b> %1").arg(percent(*f.top1Agreement)), evalStale)
                                        : dim(tr("<b>Agreement</b> –"), true));
    agreement_->setToolTip(tr("Rows whose quantized top-1 class is the float model's (needs no labels)"));
    QStringList outputs;
    for (const auto& [name, db] : f.outputSqnrDb)
        outputs << (f.outputSqnrDb.size() == 1
                        ? decibels(db)
                        : QStringLiteral("%1 %2").arg(QString::fromStdString(name), decibels(db)));
    sqnr_->setText(dim(
        tr("<b>Output SQNR</b> %1").arg(outputs.isEmpty() ? QStringLiteral("–") : outputs.join(QStringLiteral(", "))),
        evalStale || outputs.isEmpty()));
    sqnr_->setToolTip(tr("SQNR of the quantized model's outputs against float, over the evaluation data"));
    perplexity_->setVisible(f.quantizedPerplexity.has_value());
    if (f.quantizedPerplexity)
        perplexity_->setText(dim(
            tr("<b>Perplexity</b> %1 → %2").arg(*f.floatPerplexity, 0, 'f', 3).arg(*f.quantizedPerplexity, 0, 'f', 3),
            evalStale));
    if (f.weightBytes) {
        const WeightBytes& b = *f.weightBytes;
        const double ratio = b.floatBytes > 0 ? double(b.quantizedBytes) / double(b.floatBytes) : 1.0;
        bytes_->setText(dim(tr("<b>Weights</b> %1 → %2 (%3%)")
                                .arg(byteSizeText(b.floatBytes), byteSizeText(b.quantizedBytes))
                                .arg(ratio * 100.0, 0, 'f', 1),
                            f.weightBytesStale));
    } else {
        bytes_->setText(dim(tr("<b>Weights</b> –"), true));
    }
    bytes_->setToolTip(tr("Weight bytes: float → as the rules quantize them (codes, scales and zero points)"));
    if (!f.evaluated)
        stale_->setText(tr("not evaluated yet"));
    else
        stale_->setText(isStale() ? tr("⚠ stale: the rules changed since") : QString());
    stale_->setStyleSheet(isStale() ? QStringLiteral("QLabel { color: #b26a00; font-weight: bold; }") : QString());
}

QString SummaryBar::text() const
{
    QStringList parts;
    for (QLabel* l : {accuracy_, agreement_, sqnr_, perplexity_, bytes_, stale_})
        if (!l->isHidden() && !l->text().isEmpty()) {
            QString t = l->text();
            t.remove(QRegularExpression(QStringLiteral("<[^>]*>")));
            parts << t;
        }
    return parts.join(QStringLiteral(" · "));
}

} // namespace qs
