#pragma once
// The rule editor: the ordered rule table (RuleTableModel) with its in-place
// editors and a tool bar to add, duplicate, delete and reorder rules, and a
// line under the table that shows the current error (an invalid regex with its
// position, a field the engine refuses) or the unused rules.

#include <optional>

#include <QWidget>

class QLabel;
class QTableView;
class QToolBar;
class QAction;

namespace qs {

class RuleTableModel;
class RuleFieldDelegate;

class RuleEditor : public QWidget {
    Q_OBJECT
public:
    explicit RuleEditor(RuleTableModel* model, QWidget* parent = nullptr);

    QTableView* view() const { return view_; }
    RuleFieldDelegate* delegate() const { return delegate_; }
    // The selected rule, if any.
    std::optional<int> currentRule() const;
    void selectRule(int row);

signals:
    // A rule was selected (its layers get highlighted) or the selection cleared.
    void ruleSelected(std::optional<size_t> rule);

private:
    void updateStatus();
    void updateActions();

    RuleTableModel* model_;
    QTableView* view_;
    RuleFieldDelegate* delegate_;
    QLabel* status_;
    QAction* add_;
    QAction* duplicate_;
    QAction* remove_;
    QAction* up_;
    QAction* down_;
};

} // namespace qs
