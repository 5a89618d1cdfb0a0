#include "widgets/rule_comparison_model.h"

#include <cmath>
#include <limits>

#include <QBrush>
#include <QColor>

namespace qs {

RuleComparisonModel::RuleComparisonModel(QObject* parent) : QAbstractTableModel(parent) {}

void RuleComparisonModel::setComparison(std::shared_ptr<const RuleComparison> comparison)
{
    beginResetModel();
    comparison_ = std::move(comparison);
    endResetModel();
}

std::optional<double> RuleComparisonModel::delta(const LayerComparison& row, int column)
{
    switch (column) {
    case DeltaWeightSqnrColumn:
        return row.deltaWeightSqnr;
    case DeltaIsolatedSqnrColumn:
        return row.deltaIsolatedSqnr;
    case DeltaAccumulatedSqnrColumn:
        return row.deltaAccumulatedSqnr;
    case DeltaBytesColumn:
        return row.deltaWeightBytes ? std::optional<double>(double(*row.deltaWeightBytes)) : std::nullopt;
    default:
        return std::nullopt;
    }
}

int RuleComparisonModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() || !comparison_ ? 0 : int(comparison_->layers.size());
}

int RuleComparisonModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant RuleComparisonModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid) || !comparison_)
        return {};
    const LayerComparison& row = comparison_->layers[size_t(index.row())];
    const int column = index.column();
    const std::optional<double> d = delta(row, column);
    const bool isDelta = column >= DeltaWeightSqnrColumn && column <= DeltaBytesColumn;
    switch (role) {
    case Qt::DisplayRole:
        switch (column) {
        case PathColumn:
            return QString::fromStdString(row.modulePath);
        case AColumn:
            return QString::fromStdString(row.a.summary());
        case BColumn:
            return QString::fromStdString(row.b.summary());
        case NoteColumn:
            return QString::fromStdString(row.note);
        case DeltaBytesColumn:
            return d ? QStringLiteral("%1%2").arg(*d > 0 ? QStringLiteral("+") : QString()).arg(qlonglong(*d))
                     : QStringLiteral("–");
        default:
            return d ? QStringLiteral("%1%2").arg(*d > 0 ? QStringLiteral("+") : QString()).arg(*d, 0, 'f', 2)
                     : QStringLiteral("–");
        }
    case Qt::TextAlignmentRole:
        return isDelta ? QVariant(Qt::AlignRight | Qt::AlignVCenter) : QVariant();
    case Qt::ForegroundRole:
        // Worse in B (less SQNR, more bytes) in red, better in green.
        if (!isDelta || !d || *d == 0)
            return {};
        return QBrush((column == DeltaBytesColumn ? *d > 0 : *d < 0) ? QColor(0xc6, 0x28, 0x28)
                                                                     : QColor(0x2e, 0x7d, 0x32));
    case Qt::ToolTipRole:
        if (column == AColumn || column == BColumn) {
            const ComparedLayerSide& s = column == AColumn ? row.a : row.b;
            QString tip = tr("%1 bytes").arg(s.weightBytes);
            if (s.rule)
                tip += tr(", rule %1").arg(*s.rule);
            if (!s.problem.empty())
                tip += QStringLiteral("\n") + QString::fromStdString(s.problem);
            return tip;
        }
        return {};
    case SortRole:
        if (isDelta)
            return d ? *d : std::numeric_limits<double>::quiet_NaN();
        if (column == PathColumn)
            return QString::fromStdString(row.modulePath);
        return data(index, Qt::DisplayRole);
    case LayerOrderRole:
        return int(row.order);
    default:
        return {};
    }
}

QVariant RuleComparisonModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal)
        return {};
    if (role == Qt::DisplayRole) {
        static const char* const names[] = {"Layer", "A", "B", "Δ weight", "Δ isolated", "Δ accum.", "Δ bytes", "Note"};
        return section >= 0 && section < ColumnCount ? tr(names[section]) : QVariant();
    }
    if (role == Qt::ToolTipRole && (section == AColumn || section == BColumn))
        return tr("What %1 quantizes the layer to: weight qtype / input activation qtype")
            .arg(section == AColumn ? QStringLiteral("A") : QStringLiteral("B"));
    if (role == Qt::ToolTipRole && section >= DeltaWeightSqnrColumn && section <= DeltaBytesColumn)
        return section == DeltaBytesColumn
                   ? tr("B − A of the weight bytes; '–' where the layer is absent from a side")
                   : tr("B − A of the SQNR in dB (weight; output with this layer alone quantized; output with every "
                        "layer quantized); '–' where a side has no finite figure (float, exact, absent or not "
                        "evaluated)");
    return {};
}

} // namespace qs
