#pragma once
// A tree view whose first column stays in place while the others scroll
// horizontally, so a row's name is always beside its figures. The frozen
// column is a second QTreeView laid over the left edge (the technique of Qt's
// "Frozen Column" example): it shows the same model through the same selection
// model, only column 0, and follows the main view's vertical scrolling,
// expanded rows, column width and sort order. Keyboard focus and editing stay
// with the main view.

#include <QTreeView>

namespace qs {

class FrozenColumnTreeView : public QTreeView {
    Q_OBJECT
public:
    explicit FrozenColumnTreeView(QWidget* parent = nullptr);

    void setModel(QAbstractItemModel* model) override;
    void setSelectionModel(QItemSelectionModel* selectionModel) override;
    // The overlay showing column 0 (the tests look at it).
    QTreeView* frozenView() const { return frozen_; }
    // Column 0 is always in view: scrolling to one of its cells moves only vertically.
    void scrollTo(const QModelIndex& index, ScrollHint hint = EnsureVisible) override;

protected:
    void resizeEvent(QResizeEvent* event) override;
    void updateGeometries() override;

private:
    void syncFrozenColumns();
    // The overlay's rows expanded as the main view's are (QTreeView::expandAll emits no expanded()).
    void syncExpanded(const QModelIndex& parent);
    // Places the overlay, shown only while the view is scrolled sideways (its rows synced then).
    void placeFrozen();
    QTreeView* frozen_;
    bool expansionStale_ = true;
};

} // namespace qs
