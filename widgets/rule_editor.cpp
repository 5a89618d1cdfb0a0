#include "widgets/rule_editor.h"

#include <QAction>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QStyle>
#include <QTableView>
#include <QToolBar>
#include <QVBoxLayout>

#include "widgets/rule_field_delegate.h"
#include "widgets/rule_table_model.h"

namespace qs {

RuleEditor::RuleEditor(RuleTableModel* model, QWidget* parent)
    : QWidget(parent), model_(model), view_(new QTableView(this)), delegate_(new RuleFieldDelegate(this)),
      status_(new QLabel(this))
{
    auto* bar = new QToolBar(this);
    bar->setIconSize(QSize(16, 16));
    bar->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
    const QStyle* s = style();
    add_ = bar->addAction(QIcon::fromTheme(QStringLiteral("list-add"), QIcon(QStringLiteral(":/icons/add.svg"))),
                          tr("Add"));
    add_->setToolTip(tr("Add a rule after the selected one (quantizes nothing until you set a qtype)"));
    duplicate_ = bar->addAction(
        QIcon::fromTheme(QStringLiteral("edit-copy"), QIcon(QStringLiteral(":/icons/duplicate.svg"))), tr("Duplicate"));
    remove_ = bar->addAction(
        QIcon::fromTheme(QStringLiteral("list-remove"), QIcon(QStringLiteral(":/icons/remove.svg"))), tr("Delete"));
    up_ = bar->addAction(QIcon::fromTheme(QStringLiteral("go-up"), s->standardIcon(QStyle::SP_ArrowUp)), tr("Up"));
    up_->setToolTip(tr("Move the rule up: earlier rules win"));
    down_ = bar->addAction(QIcon::fromTheme(QStringLiteral("go-down"), s->standardIcon(QStyle::SP_ArrowDown)),
                           tr("Down"));

    view_->setModel(model_);
    view_->setItemDelegate(delegate_);
    view_->setSelectionBehavior(QAbstractItemView::SelectRows);
    view_->setSelectionMode(QAbstractItemView::SingleSelection);
    view_->setEditTriggers(QAbstractItemView::DoubleClicked | QAbstractItemView::EditKeyPressed |
                           QAbstractItemView::AnyKeyPressed);
    view_->setAlternatingRowColors(true);
    view_->horizontalHeader()->setStretchLastSection(false);
    view_->verticalHeader()->setDefaultSectionSize(view_->fontMetrics().height() + 8);
    view_->setWordWrap(false);
    status_->setWordWrap(true);
    status_->setTextInteractionFlags(Qt::TextSelectableByMouse);

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(2, 2, 2, 2);
    layout->setSpacing(2);
    layout->addWidget(bar);
    layout->addWidget(view_, 1);
    layout->addWidget(status_);

    connect(add_, &QAction::triggered, this, [this] {
        const int row = currentRule().value_or(model_->rowCount() - 1) + 1;
        nlohmann::ordered_json rule = nlohmann::ordered_json::object();
        rule["module_path"] = ".*";
        model_->insertRule(row, rule, tr("Add rule %1").arg(row));
        selectRule(row);
    });
    connect(duplicate_, &QAction::triggered, this, [this] {
        if (const auto row = currentRule()) {
            model_->duplicateRule(*row);
            selectRule(*row + 1);
        }
    });
    connect(remove_, &QAction::triggered, this, [this] {
        if (const auto row = currentRule()) {
            model_->removeRule(*row);
            if (model_->rowCount() > 0)
                selectRule(std::min(*row, model_->rowCount() - 1));
        }
    });
    connect(up_, &QAction::triggered, this, [this] {
        if (const auto row = currentRule(); row && *row > 0) {
            model_->moveRule(*row, -1);
            selectRule(*row - 1);
        }
    });
    connect(down_, &QAction::triggered, this, [this] {
        if (const auto row = currentRule(); row && *row + 1 < model_->rowCount()) {
            model_->moveRule(*row, +1);
            selectRule(*row + 1);
        }
    });
    connect(view_->selectionModel(), &QItemSelectionModel::selectionChanged, this, [this] {
        updateActions();
        const auto row = currentRule();
        emit ruleSelected(row ? std::optional<size_t>(size_t(*row)) : std::nullopt);
    });
    connect(model_, &RuleTableModel::rulesChanged, this, [this] {
        view_->resizeColumnsToContents();
        updateStatus();
        updateActions();
    });
    connect(delegate_, &RuleFieldDelegate::regexStatus, this, [this](const QString& message) {
        if (message.isEmpty())
            updateStatus();
        else
            status_->setText(QStringLiteral("<span style='color:#c62828'>%1</span>").arg(message.toHtmlEscaped()));
    });
    updateStatus();
    updateActions();
}

std::optional<int> RuleEditor::currentRule() const
{
    const auto rows = view_->selectionModel()->selectedRows();
    if (rows.isEmpty())
        return std::nullopt;
    return rows.first().row();
}

void RuleEditor::selectRule(int row)
{
    if (row < 0 || row >= model_->rowCount())
        return;
    view_->selectionModel()->select(model_->index(row, 0),
                                    QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
    view_->setCurrentIndex(model_->index(row, 0));
}

void RuleEditor::updateActions()
{
    const auto row = currentRule();
    duplicate_->setEnabled(row.has_value());
    remove_->setEnabled(row.has_value());
    up_->setEnabled(row && *row > 0);
    down_->setEnabled(row && *row + 1 < model_->rowCount());
}

void RuleEditor::updateStatus()
{
    const QString error = model_->firstError();
    if (!error.isEmpty()) {
        status_->setText(QStringLiteral("<span style='color:#c62828'>%1</span>").arg(error.toHtmlEscaped()));
        return;
    }
    const auto& unused = model_->resolution().unusedRules;
    if (model_->rowCount() == 0) {
        status_->setText(tr("No rules: every layer stays float. Add a rule or open a rule file."));
    } else if (!unused.empty()) {
        QStringList names;
        for (const size_t r : unused)
            names << QString::number(r);
        status_->setText(QStringLiteral("<span style='color:#b26a00'>%1</span>")
                             .arg(tr("Unused rules (match no layer): %1").arg(names.join(QStringLiteral(", ")))));
    } else {
        status_->setText(tr("%n rule(s), every rule matches at least one layer.", nullptr, model_->rowCount()));
    }
}

} // namespace qs
