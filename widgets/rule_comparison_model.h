#pragma once
// The A/B view's table (issue 23, part 2): one row per layer of a
// RuleComparison (session/rule_comparison.h) — what A and B quantize it to,
// the differences B − A of its weight, isolated and accumulated SQNR and of
// its weight bytes, and the note saying why a difference is missing. Sorting
// goes through a QSortFilterProxyModel on SortRole: numbers, and rows without
// the figure last in either direction.

#include <memory>

#include <QAbstractTableModel>

#include "session/rule_comparison.h"

namespace qs {

class RuleComparisonModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column {
        PathColumn,
        AColumn,
        BColumn,
        DeltaWeightSqnrColumn,
        DeltaIsolatedSqnrColumn,
        DeltaAccumulatedSqnrColumn,
        DeltaBytesColumn,
        NoteColumn,
        ColumnCount
    };
    enum Role {
        SortRole = Qt::UserRole + 1, // double for the Δ columns (NaN when missing), text elsewhere
        LayerOrderRole,              // int: the row's order (A's model order)
    };

    explicit RuleComparisonModel(QObject* parent = nullptr);

    void setComparison(std::shared_ptr<const RuleComparison> comparison);
    std::shared_ptr<const RuleComparison> comparison() const { return comparison_; }
    // The row's figure, for the chart and tests (none when missing).
    static std::optional<double> delta(const LayerComparison& row, int column);

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    std::shared_ptr<const RuleComparison> comparison_;
};

} // namespace qs
