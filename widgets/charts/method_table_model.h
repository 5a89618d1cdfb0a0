#pragma once
// The method-comparison table: one row per calibration method, best (lowest
// MSE) first, with its MSE, SQNR, clipped fraction and range; methods that do
// not apply to the qtype last, with the reason.

#include <vector>

#include <QAbstractTableModel>
#include <QColor>

#include "analysis/method_comparison.h"

namespace qs {

class MethodTableModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Method, Mse, Sqnr, Clipped, RangeColumn, ColumnCount };
    using QAbstractTableModel::QAbstractTableModel;

    // `colors`: one per result (the colour of its range in the chart).
    void setResults(std::vector<MethodResult> results, std::vector<QColor> colors);
    const std::vector<MethodResult>& results() const { return results_; }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;
    Qt::ItemFlags flags(const QModelIndex& index) const override;

private:
    std::vector<MethodResult> results_;
    std::vector<QColor> colors_;
};

// The envelope [min of mins, max of maxes] of a result's per-group ranges.
Range rangeEnvelope(const MethodResult& r);

} // namespace qs
