#pragma once
// In-place editors of the rule table's cells: a combo box for fields whose
// values come from the engine's tables (qtypes, granularities, restrictions,
// rounding; calibration methods editable for their parameters), true/false
// for booleans, and for module_path a line edit that validates the regex as
// you type (red, with the error and its position in the tooltip and in
// regexProblem()).

#include <QString>
#include <QStyledItemDelegate>

namespace qs {

class RuleFieldDelegate : public QStyledItemDelegate {
    Q_OBJECT
public:
    using QStyledItemDelegate::QStyledItemDelegate;

    // What is wrong with a module_path regex ("missing ')' for the '(' at
    // position 6"), or empty when std::regex accepts it.
    static QString regexProblem(const QString& pattern);

    QWidget* createEditor(QWidget* parent, const QStyleOptionViewItem& option, const QModelIndex& index) const override;
    void setEditorData(QWidget* editor, const QModelIndex& index) const override;
    void setModelData(QWidget* editor, QAbstractItemModel* model, const QModelIndex& index) const override;

signals:
    // The regex being typed is invalid (message) or valid again (empty).
    void regexStatus(const QString& message) const;
};

} // namespace qs
