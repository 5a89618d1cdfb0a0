#include "widgets/charts/algorithm_table_model.h"

#include <cmath>

namespace qs {

QString sqnrText(double db)
{
    return std::isinf(db) ? QStringLiteral("∞") : QString::number(db, 'f', 2);
}

void AlgorithmTableModel::setRows(std::vector<AlgorithmRow> rows)
{
    beginResetModel();
    rows_ = std::move(rows);
    endResetModel();
}

int AlgorithmTableModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : int(rows_.size());
}

int AlgorithmTableModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

Qt::ItemFlags AlgorithmTableModel::flags(const QModelIndex& index) const
{
    if (!index.isValid())
        return Qt::NoItemFlags;
    // A skipped variant cannot be chosen for Apply.
    return rows_[size_t(index.row())].skipped.empty() ? Qt::ItemIsEnabled | Qt::ItemIsSelectable : Qt::NoItemFlags;
}

QVariant AlgorithmTableModel::data(const QModelIndex& index, int role) const
{
    if (!index.isValid() || index.row() >= rowCount() || index.column() >= ColumnCount)
        return {};
    const AlgorithmRow& r = rows_[size_t(index.row())];
    const bool skipped = !r.skipped.empty();
    if (role == Qt::ToolTipRole)
        return skipped ? QString::fromStdString(r.skipped)
                       : tr("%1 (%2): weight SQNR %3 dB, MSE %4; output SQNR %5 dB, MSE %6; %7 ms")
                             .arg(QString::fromStdString(r.variant), QString::fromStdString(r.qtype))
                             .arg(r.weight.sqnrDb, 0, 'g', 8)
                             .arg(r.weight.mse, 0, 'g', 6)
                             .arg(r.outputSqnrDb, 0, 'g', 8)
                             .arg(r.outputMse, 0, 'g', 6)
                             .arg(1000.0 * r.seconds, 0, 'f', 1);
    if (role == Qt::TextAlignmentRole && index.column() != Variant)
        return int(Qt::AlignRight | Qt::AlignVCenter);
    if (role != Qt::DisplayRole)
        return {};
    switch (Column(index.column())) {
    case Variant:
        return QString::fromStdString(r.variant);
    case WeightSqnr:
        return skipped ? QString::fromStdString(r.skipped) : sqnrText(r.weight.sqnrDb);
    case OutputSqnr:
        return skipped ? QString() : sqnrText(r.outputSqnrDb);
    case Time:
        return skipped ? QString() : QString::number(1000.0 * r.seconds, 'f', 1);
    case ColumnCount:
        break;
    }
    return {};
}

QVariant AlgorithmTableModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return {};
    switch (Column(section)) {
    case Variant:
        return tr("Variant");
    case WeightSqnr:
        return tr("Weight SQNR dB");
    case OutputSqnr:
        return tr("Output SQNR dB");
    case Time:
        return tr("Time ms");
    case ColumnCount:
        break;
    }
    return {};
}

} // namespace qs
