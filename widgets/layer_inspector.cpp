#include "widgets/layer_inspector.h"

#include <QObject>
#include <QStringList>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "graph/model.h"
#include "quantization/quantization_plan.h"
#include "quantization/weight_quantizer.h"
#include "rules/regex_syntax.h"
#include "session/algorithm_comparison.h"
#include "session/evaluation.h"

namespace qs {

namespace {

QString esc(const std::string& s)
{
    return QString::fromStdString(s).toHtmlEscaped();
}

QString row(const QString& key, const QString& value)
{
    return QStringLiteral("<tr><td style='padding-right:12px'><b>%1</b></td><td>%2</td></tr>").arg(key, value);
}

QString shapeText(const Shape& shape)
{
    QStringList dims;
    for (const int64_t d : shape)
        dims << QString::number(d);
    return QLatin1Char('[') + dims.join(QStringLiteral(", ")) + QLatin1Char(']');
}

QString metricsText(const ErrorMetrics& m)
{
    const QString sqnr = std::isinf(m.sqnrDb) ? QStringLiteral("∞") : QString::number(m.sqnrDb, 'f', 2);
    return QObject::tr("SQNR %1 dB · MSE %2 · max |err| %3 · cosine %4")
        .arg(sqnr)
        .arg(m.mse, 0, 'g', 3)
        .arg(m.maxAbsError, 0, 'g', 3)
        .arg(m.cosine, 0, 'f', 5);
}

QString section(const QString& title)
{
    return QStringLiteral("<h4 style='margin-bottom:2px'>%1</h4>").arg(title);
}

QString sqnrCell(double db)
{
    return std::isinf(db) ? QStringLiteral("∞") : QString::number(db, 'f', 2);
}

QString differenceCell(double algorithm, double rtn)
{
    if (std::isinf(algorithm) || std::isinf(rtn))
        return QStringLiteral("—");
    const double d = algorithm - rtn;
    const QString colour = d >= 0 ? QStringLiteral("#2e7d32") : QStringLiteral("#c62828");
    return QStringLiteral("<span style='color:%1'>%2%3 dB</span>")
        .arg(colour, d >= 0 ? QStringLiteral("+") : QString())
        .arg(d, 0, 'f', 2);
}

// The layer's weight and output SQNR under RTN and under its rule's algorithm.
QString algorithmSection(const LayerInspection& in, const QuantizationRule& rule)
{
    const QString name = QString::fromStdString(rule.algorithm.toString()) +
                         (rule.biasCorrection ? QObject::tr(" + bias_correction") : QString());
    QString html = section(QObject::tr("%1 against RTN").arg(name.toHtmlEscaped()));
    if (!in.algorithms)
        return html + QStringLiteral("<p>%1</p>").arg(in.algorithmsNote.toHtmlEscaped());
    const RtnAgainstRule rows = rtnAgainstRule(*in.algorithms, rule);
    if (!rows.rtn || !rows.rule || !rows.rtn->skipped.empty() || !rows.rule->skipped.empty()) {
        const AlgorithmRow* skipped = rows.rtn && !rows.rtn->skipped.empty() ? rows.rtn : rows.rule;
        return html + QStringLiteral("<p>%1</p>")
                          .arg(skipped && !skipped->skipped.empty()
                                   ? esc(skipped->variant + ": " + skipped->skipped)
                                   : QObject::tr("The comparison holds no row for this rule."));
    }
    html += QStringLiteral("<table><tr><td></td><td style='padding-right:12px'><b>RTN</b></td>"
                           "<td style='padding-right:12px'><b>%1</b></td><td><b>%2</b></td></tr>")
                .arg(name.toHtmlEscaped(), QObject::tr("difference"));
    const auto line = [](const QString& key, double rtn, double algorithm) {
        return QStringLiteral("<tr><td style='padding-right:12px'><b>%1</b></td><td>%2 dB</td><td>%3 dB</td>"
                              "<td>%4</td></tr>")
            .arg(key, sqnrCell(rtn), sqnrCell(algorithm), differenceCell(algorithm, rtn));
    };
    html += line(QObject::tr("Weight SQNR"), rows.rtn->weight.sqnrDb, rows.rule->weight.sqnrDb);
    html += line(QObject::tr("Output SQNR"), rows.rtn->outputSqnrDb, rows.rule->outputSqnrDb);
    html += QStringLiteral("</table>");
    html += QObject::tr("<p>Output: the layer alone quantized, on %n calibration row(s) (the Methods chart's "
                        "Algorithms mode compares every variant).</p>",
                        nullptr, int(in.algorithms->calibrationRows));
    return html;
}

} // namespace

bool roundsBeyondRtn(const QuantizationRule& rule)
{
    return rule.algorithm.kind != WeightAlgorithmKind::Rtn || rule.biasCorrection;
}

RtnAgainstRule rtnAgainstRule(const AlgorithmComparison& c, const QuantizationRule& rule)
{
    RtnAgainstRule out;
    const std::string qtype = rule.weightQType ? std::string(qtypeName(*rule.weightQType)) : std::string();
    const std::string algorithm = rule.algorithm.toString();
    for (const AlgorithmRow& r : c.rows) {
        if (r.qtype != qtype)
            continue;
        if (!out.rtn && r.algorithm == "rtn" && !r.biasCorrection)
            out.rtn = &r;
        if (!out.rule && r.algorithm == algorithm && r.biasCorrection == rule.biasCorrection)
            out.rule = &r;
    }
    return out;
}

QString layerInspectionHtml(const LayerInspection& in)
{
    if (!in.model || in.layer >= in.model->layers.size())
        return QObject::tr("<p>Select a layer to see its tensors, rule, scales and errors.</p>");
    const QuantizableLayer& l = in.model->layers[in.layer];
    QString html = QStringLiteral("<h3 style='margin-bottom:2px'>%1</h3>").arg(esc(l.modulePath));
    html += QStringLiteral("<table>");
    html += row(QObject::tr("Op"), esc(l.opType) + (l.groups > 1 ? QObject::tr(" (groups %1)").arg(l.groups) : QString()));
    if (l.node && *l.node < in.model->scopeGraph(l.scope).nodes.size()) // a body layer: the node in its body
        html += row(QObject::tr("Node"), esc(in.model->scopeGraph(l.scope).nodes[*l.node].name));
    html += row(QObject::tr("Weight"), esc(l.weightName));
    html += row(QObject::tr("Shape"), shapeText(l.weightShape) + QStringLiteral(" ") + esc(std::string(dtypeName(l.weightDType))));
    html += row(QObject::tr("Parameters"), QString::number(l.parameterCount));
    QStringList sharers;
    const size_t first = l.sharesWeightOf.value_or(in.layer);
    for (size_t i = 0; i < in.model->layers.size(); ++i)
        if (i != in.layer && (i == first || in.model->layers[i].sharesWeightOf == first))
            sharers << esc(in.model->layers[i].modulePath);
    if (!sharers.empty())
        html += row(QObject::tr("Shared weight"),
                    QObject::tr("also read by %1; one quantizer for all, whose rules must agree")
                        .arg(sharers.join(QStringLiteral(", "))));
    QStringList contraction;
    for (const int a : l.contractionAxes)
        contraction << QString::number(a);
    html += row(QObject::tr("Channel axis"), QString::number(l.channelAxis));
    html += row(QObject::tr("Contraction axes"), contraction.join(QStringLiteral(", ")));
    html += QStringLiteral("</table>");

    html += section(QObject::tr("Rules"));
    if (!in.rules || in.rules->empty()) {
        html += QObject::tr("<p>No rules: the layer stays float.</p>");
    } else {
        html += QStringLiteral("<ul style='margin-top:0'>");
        for (const RuleExplanation& e : in.rules->explain(l.modulePath, l.opType)) {
            const bool applies = e.verdict == RuleVerdict::Applies;
            html += QStringLiteral("<li>%1%2%3</li>")
                        .arg(applies ? QStringLiteral("<b>") : QString(), esc(e.text),
                             applies ? QStringLiteral("</b>") : QString());
        }
        html += QStringLiteral("</ul>");
    }

    const LayerQuantization* lq = in.plan ? in.plan->forLayer(in.layer) : nullptr;
    html += section(QObject::tr("Quantization"));
    if (!lq) {
        html += QObject::tr("<p>Float (no rule applies).</p>");
    } else {
        html += QStringLiteral("<table>");
        if (!lq->problem.empty())
            html += row(QObject::tr("Problem"), QStringLiteral("<span style='color:#c62828'>%1</span>").arg(esc(lq->problem)));
        if (lq->weight) {
            html += row(QObject::tr("Weight qtype"), esc(std::string(qtypeName(lq->weight->qtype))));
            html += row(QObject::tr("Weight calibration"), esc(lq->weight->method.toString()));
            html += row(QObject::tr("Granularity"),
                        esc(std::string(granularityName(lq->weight->granularity))) +
                            (lq->weight->tileSize ? QObject::tr(", tiles of %1").arg(*lq->weight->tileSize) : QString()));
        } else {
            html += row(QObject::tr("Weight"), QObject::tr("float"));
        }
        if (lq->activation) {
            html += row(QObject::tr("Activation"), esc(lq->activation->value));
            html += row(QObject::tr("Act qtype"), esc(std::string(qtypeName(lq->activation->target.qtype))) +
                                                     (lq->activation->staticScale ? QObject::tr(", static scale")
                                                                                  : QObject::tr(", dynamic scale")));
            html += row(QObject::tr("Act calibration"), esc(lq->activation->method.toString()));
        } else {
            html += row(QObject::tr("Activation"), QObject::tr("float"));
        }
        html += QStringLiteral("</table>");
    }

    if (in.weight) {
        const auto& scales = in.weight->quantization.params.scales;
        html += section(QObject::tr("Weight scales") + (in.weightStale ? QObject::tr(" (stale)") : QString()));
        html += QStringLiteral("<table>");
        if (!scales.empty()) {
            const auto [lo, hi] = std::minmax_element(scales.begin(), scales.end());
            double sum = 0;
            for (const float s : scales)
                sum += s;
            html += row(QObject::tr("Groups"), QString::number(scales.size()));
            html += row(QObject::tr("Scale min / mean / max"), QStringLiteral("%1 / %2 / %3")
                                                                   .arg(*lo, 0, 'g', 4)
                                                                   .arg(sum / double(scales.size()), 0, 'g', 4)
                                                                   .arg(*hi, 0, 'g', 4));
            html += row(QObject::tr("Max / min scale"), QString::number(*lo > 0 ? *hi / *lo : 0.0, 'g', 4));
        }
        html += row(QObject::tr("Zero points"), in.weight->quantization.params.zeroPoints.empty()
                                                   ? QObject::tr("none (symmetric)")
                                                   : QString::number(in.weight->quantization.params.zeroPoints.size()));
        html += row(QObject::tr("Weight error"), metricsText(in.weight->metrics));
        html += row(QObject::tr("Clipped"), QStringLiteral("%1 %").arg(in.weight->metrics.fractionClipped * 100, 0, 'f', 3));
        html += QStringLiteral("</table>");
    }

    if (in.evaluation) {
        html += section(QObject::tr("Activations (evaluation)") + (in.evaluationStale ? QObject::tr(" (stale)") : QString()));
        html += QStringLiteral("<table>");
        if (in.evaluation->isolated)
            html += row(QObject::tr("Isolated"), metricsText(*in.evaluation->isolated));
        if (in.evaluation->accumulated)
            html += row(QObject::tr("Accumulated"), metricsText(*in.evaluation->accumulated));
        html += QStringLiteral("</table>");
    }

    if (in.rules)
        if (const std::optional<size_t> index = in.rules->firstMatch(l.modulePath, l.opType))
            if (const QuantizationRule& rule = in.rules->rules()[*index]; rule.weightQType && roundsBeyondRtn(rule))
                html += algorithmSection(in, rule);
    return html;
}

} // namespace qs

namespace qs {

namespace {

// The pattern around a regex error: the excerpt with the refused character
// marked, and a caret line under it (counted in characters, as the messages
// count positions).
QString regexPointerHtml(const std::string& pattern, size_t offset)
{
    offset = std::min(offset, pattern.size());
    // At most kPatternExcerptLength characters around the position, as the error message quotes.
    size_t begin = 0;
    if (pattern.size() > kPatternExcerptLength) {
        begin = offset > kPatternExcerptLength / 2 ? offset - kPatternExcerptLength / 2 : 0;
        while (begin > 0 && (uint8_t(pattern[begin]) & 0xC0) == 0x80) // a UTF-8 character's first byte
            --begin;
    }
    size_t end = std::min(pattern.size(), begin + kPatternExcerptLength);
    while (end < pattern.size() && (uint8_t(pattern[end]) & 0xC0) == 0x80)
        ++end;
    const QString before = QString::fromStdString(pattern.substr(begin, offset - begin));
    size_t next = offset < pattern.size() ? offset + 1 : offset;
    while (next < end && (uint8_t(pattern[next]) & 0xC0) == 0x80)
        ++next;
    const QString at = QString::fromStdString(pattern.substr(offset, next - offset));
    const QString after = next < end ? QString::fromStdString(pattern.substr(next, end - next)) : QString();
    const QString lead = begin > 0 ? QStringLiteral("…") : QString();
    const QString trail = end < pattern.size() ? QStringLiteral("…") : QString();
    const QString marked = QStringLiteral("<span style='background:#c62828;color:white'>%1</span>")
                               .arg(at.isEmpty() ? QStringLiteral("&nbsp;") : at.toHtmlEscaped());
    const QString caret = QString(qsizetype(lead.size() + before.size()), QLatin1Char(' ')) + QLatin1Char('^');
    return QStringLiteral("<pre style='margin:2px 0'>%1%2%3%4%5\n<span style='color:#c62828'>%6</span></pre>")
        .arg(lead, before.toHtmlEscaped(), marked, after.toHtmlEscaped(), trail, caret);
}

} // namespace

QString ruleProblemsHtml(const std::vector<RuleProblem>& problems)
{
    QString html;
    for (const RuleProblem& p : problems) {
        const QString where = p.field.empty()
                                  ? QObject::tr("Rule %1").arg(p.rule + 1)
                                  : QObject::tr("Rule %1, field <code>%2</code>").arg(p.rule + 1).arg(esc(p.field));
        html += QStringLiteral("<div style='border-left:3px solid #c62828;padding-left:6px;margin-bottom:6px'>");
        html += QStringLiteral("<b style='color:#c62828'>%1</b>").arg(where);
        if (p.field == "module_path") {
            if (const auto error = findRegexSyntaxError(p.pattern))
                html += regexPointerHtml(p.pattern, error->offset);
        }
        html += QStringLiteral("<div>%1</div></div>").arg(esc(p.message));
    }
    return html;
}

} // namespace qs
