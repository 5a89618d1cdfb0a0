#include "widgets/charts/method_table_model.h"

#include <algorithm>
#include <cmath>

namespace qs {

Range rangeEnvelope(const MethodResult& r)
{
    if (r.ranges.empty())
        return {};
    Range e = r.ranges.front();
    for (const Range& g : r.ranges) {
        e.min = std::min(e.min, g.min);
        e.max = std::max(e.max, g.max);
    }
    return e;
}

void MethodTableModel::setResults(std::vector<MethodResult> results, std::vector<QColor> colors)
{
    beginResetModel();
    results_ = std::move(results);
    colors_ = std::move(colors);
    colors_.resize(results_.size());
    endResetModel();
}

int MethodTableModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : int(results_.size());
}

int MethodTableModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

Qt::ItemFlags MethodTableModel::flags(const QModelIndex& index) const
{
    if (!index.isValid())
        return Qt::NoItemFlags;
    const bool applies = results_[size_t(index.row())].skipped.empty();
    return applies ? Qt::ItemIsEnabled | Qt::ItemIsSelectable : Qt::NoItemFlags;
}

QVariant MethodTableModel::data(const QModelIndex& index, int role) const
{
    if (!index.isValid() || index.row() >= rowCount() || index.column() >= ColumnCount)
        return {};
    const MethodResult& r = results_[size_t(index.row())];
    const bool skipped = !r.skipped.empty();
    if (role == Qt::DecorationRole && index.column() == Method)
        return colors_[size_t(index.row())];
    if (role == Qt::ToolTipRole)
        return skipped ? QString::fromStdString(r.skipped)
                       : tr("%1: MSE %2, SQNR %3 dB, max |error| %4, cosine %5, clipped %6%")
                             .arg(QString::fromStdString(r.method))
                             .arg(r.metrics.mse, 0, 'g', 8)
                             .arg(r.metrics.sqnrDb, 0, 'g', 8)
                             .arg(r.metrics.maxAbsError, 0, 'g', 8)
                             .arg(r.metrics.cosine, 0, 'g', 8)
                             .arg(100.0 * r.metrics.fractionClipped, 0, 'g', 6);
    if (role == Qt::TextAlignmentRole && index.column() != Method)
        return int(Qt::AlignRight | Qt::AlignVCenter);
    if (role != Qt::DisplayRole)
        return {};
    switch (Column(index.column())) {
    case Method:
        return QString::fromStdString(r.method);
    case Mse:
        return skipped ? QString::fromStdString(r.skipped) : QString::number(r.metrics.mse, 'g', 4);
    case Sqnr:
        return skipped                        ? QString()
               : std::isinf(r.metrics.sqnrDb) ? QString("∞")
                                              : QString::number(r.metrics.sqnrDb, 'f', 2);
    case Clipped:
        return skipped ? QString() : QString::number(100.0 * r.metrics.fractionClipped, 'g', 3) + "%";
    case RangeColumn: {
        if (skipped)
            return QString();
        const Range e = rangeEnvelope(r);
        const QString text = QString("[%1, %2]").arg(e.min, 0, 'g', 4).arg(e.max, 0, 'g', 4);
        return r.ranges.size() > 1 ? tr("%1 (%2 groups)").arg(text).arg(r.ranges.size()) : text;
    }
    case ColumnCount:
        break;
    }
    return {};
}

QVariant MethodTableModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return QAbstractTableModel::headerData(section, orientation, role);
    switch (Column(section)) {
    case Method:
        return tr("Method");
    case Mse:
        return tr("MSE");
    case Sqnr:
        return tr("SQNR (dB)");
    case Clipped:
        return tr("Clipped");
    case RangeColumn:
        return tr("Range");
    case ColumnCount:
        break;
    }
    return {};
}

} // namespace qs
