#include "widgets/rule_field_delegate.h"

#include <QComboBox>
#include <QLineEdit>
#include <QPalette>
#include <QPointer>
#include <QRegularExpression>
#include <QRegularExpressionValidator>

#include "core/error.h"
#include "rules/regex_syntax.h"
#include "rules/rule.h"
#include "rules/schema.h"
#include "widgets/rule_table_model.h"

namespace qs {

QString RuleFieldDelegate::regexProblem(const QString& pattern)
{
    try {
        ModulePathPattern compiled(pattern.toStdString());
        return {};
    } catch (const Error& e) {
        // The engine's message names the pattern, the error and its position.
        return QString::fromStdString(e.what());
    }
}

QWidget* RuleFieldDelegate::createEditor(QWidget* parent, const QStyleOptionViewItem& option,
                                         const QModelIndex& index) const
{
    const RuleField* field = RuleTableModel::fieldOfColumn(index.column());
    if (!field)
        return nullptr;
    const QStringList allowed = index.data(RuleTableModel::AllowedValuesRole).toStringList();
    const bool boolean = field->kind == RuleFieldKind::Bool || field->kind == RuleFieldKind::OptionalBool;
    if (!allowed.isEmpty() || boolean) {
        auto* combo = new QComboBox(parent);
        combo->setToolTip(index.data(Qt::ToolTipRole).toString());
        // The first entry is the field's default (the field left out).
        combo->addItem(tr("(default)"), QString());
        if (boolean) {
            combo->addItem(QStringLiteral("true"), QStringLiteral("true"));
            combo->addItem(QStringLiteral("false"), QStringLiteral("false"));
        }
        // A type field says "float" in so many words (the value that leaves the tensor float: the field out).
        const bool qtype =
            QString::fromUtf8(field->name.data(), qsizetype(field->name.size())).endsWith(QLatin1String("_qtype"));
        if (qtype && !allowed.contains(QStringLiteral("float")))
            combo->addItem(QStringLiteral("float"), QStringLiteral("null"));
        for (const QString& v : allowed)
            combo->addItem(v, v);
        // Calibration methods take parameters ("percentile,99.9"): the syntax
        // entries are a starting point, the text is free.
        combo->setEditable(field->kind == RuleFieldKind::Method);
        if (!combo->isEditable()) {
            // A choice is the edit: commit it and close the editor at once, not on Enter. The close is
            // queued, after the view has taken the value, and only while the editor is still the view's
            // (hidden: the view released it already).
            connect(combo, &QComboBox::activated, this, [this, combo] {
                emit const_cast<RuleFieldDelegate*>(this)->commitData(combo);
                QPointer<QComboBox> guard(combo);
                QMetaObject::invokeMethod(
                    const_cast<RuleFieldDelegate*>(this),
                    [this, guard] {
                        if (guard && guard->isVisible())
                            emit const_cast<RuleFieldDelegate*>(this)->closeEditor(guard,
                                                                                   QAbstractItemDelegate::NoHint);
                    },
                    Qt::QueuedConnection);
            });
        }
        return combo;
    }
    auto* edit = new QLineEdit(parent);
    edit->setToolTip(index.data(Qt::ToolTipRole).toString());
    if (field->kind == RuleFieldKind::Regex) {
        const QPalette normal = edit->palette();
        connect(edit, &QLineEdit::textChanged, this, [this, edit, normal](const QString& text) {
            const QString problem = regexProblem(text);
            QPalette p = normal;
            if (!problem.isEmpty())
                p.setColor(QPalette::Base, QColor(255, 200, 200));
            if (!problem.isEmpty())
                p.setColor(QPalette::Text, QColor(120, 0, 0));
            edit->setPalette(p);
            edit->setToolTip(problem.isEmpty() ? tr("valid regex; must match the whole module path") : problem);
            emit regexStatus(problem);
        });
    }
    // Numbers take only number text (or nothing: the default); the field's
    // own check then says what is out of range (tile_size must be n or 1/n ...).
    if (field->kind == RuleFieldKind::Number)
        edit->setValidator(new QRegularExpressionValidator(
            QRegularExpression(QStringLiteral(R"(^(|null|\d*\.?\d+([eE][-+]?\d+)?)$)")), edit));
    if (field->kind == RuleFieldKind::Integer)
        edit->setValidator(new QRegularExpressionValidator(QRegularExpression(QStringLiteral(R"(^\d*$)")), edit));
    (void)option;
    return edit;
}

void RuleFieldDelegate::setEditorData(QWidget* editor, const QModelIndex& index) const
{
    const QString text = index.data(Qt::EditRole).toString();
    if (auto* combo = qobject_cast<QComboBox*>(editor)) {
        const int i = combo->findData(text);
        if (i >= 0)
            combo->setCurrentIndex(i);
        else if (combo->isEditable())
            combo->setEditText(text);
        return;
    }
    if (auto* edit = qobject_cast<QLineEdit*>(editor)) {
        edit->setText(text);
        return;
    }
    QStyledItemDelegate::setEditorData(editor, index);
}

void RuleFieldDelegate::setModelData(QWidget* editor, QAbstractItemModel* model, const QModelIndex& index) const
{
    if (auto* combo = qobject_cast<QComboBox*>(editor)) {
        QString value = combo->currentData().toString();
        if (combo->isEditable() && combo->currentText() != combo->itemText(combo->currentIndex()))
            value = combo->currentText();
        else if (combo->isEditable() && combo->currentIndex() > 0)
            value = combo->currentText();
        // Syntax entries such as "absmax[,s]" become the plain method name.
        const auto bracket = value.indexOf(QLatin1Char('['));
        if (bracket > 0)
            value = value.left(bracket);
        model->setData(index, value, Qt::EditRole);
        return;
    }
    if (auto* edit = qobject_cast<QLineEdit*>(editor)) {
        model->setData(index, edit->text(), Qt::EditRole);
        emit regexStatus({});
        return;
    }
    QStyledItemDelegate::setModelData(editor, model, index);
}

} // namespace qs
