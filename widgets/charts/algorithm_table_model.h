#pragma once
// The algorithm-comparison table: one row per variant of session/algorithm_comparison.h
// (rtn, gptq, awq, adaround, each ± bias correction, lutN), in the engine's order,
// with the weight SQNR, the layer's output SQNR on the calibration inputs and
// the rounding time; a variant the layer's rule refuses shows its reason instead.

#include <vector>

#include <QAbstractTableModel>

#include "session/algorithm_comparison.h"

namespace qs {

class AlgorithmTableModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Variant, WeightSqnr, OutputSqnr, Time, ColumnCount };
    using QAbstractTableModel::QAbstractTableModel;

    void setRows(std::vector<AlgorithmRow> rows);
    const std::vector<AlgorithmRow>& rows() const { return rows_; }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;
    Qt::ItemFlags flags(const QModelIndex& index) const override;

private:
    std::vector<AlgorithmRow> rows_;
};

// An SQNR in dB as the views show it: "∞" when exact, else two decimals.
QString sqnrText(double db);

} // namespace qs
