#include "widgets/frozen_column_tree_view.h"

#include <QHeaderView>
#include <QScrollBar>

namespace qs {

FrozenColumnTreeView::FrozenColumnTreeView(QWidget* parent) : QTreeView(parent), frozen_(new QTreeView(this))
{
    frozen_->setObjectName(QStringLiteral("FrozenColumn"));
    frozen_->setFocusPolicy(Qt::NoFocus);
    frozen_->setFrameShape(QFrame::NoFrame);
    frozen_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    frozen_->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    frozen_->setVerticalScrollMode(ScrollPerPixel);
    setVerticalScrollMode(ScrollPerPixel);
    setHorizontalScrollMode(ScrollPerPixel);
    frozen_->header()->setSectionsMovable(false);
    frozen_->header()->setSortIndicatorShown(true);
    frozen_->header()->setSectionsClickable(true);
    viewport()->stackUnder(frozen_);

    // Scrolling either one scrolls both.
    connect(frozen_->verticalScrollBar(), &QScrollBar::valueChanged, verticalScrollBar(), &QScrollBar::setValue);
    connect(verticalScrollBar(), &QScrollBar::valueChanged, frozen_->verticalScrollBar(), &QScrollBar::setValue);
    // Rows open and close together.
    connect(this, &QTreeView::expanded, frozen_, &QTreeView::expand);
    connect(this, &QTreeView::collapsed, frozen_, &QTreeView::collapse);
    connect(frozen_, &QTreeView::expanded, this, &QTreeView::expand);
    connect(frozen_, &QTreeView::collapsed, this, &QTreeView::collapse);
    // The frozen header's section is the main one's column 0: resizing or clicking it acts on the main view.
    connect(header(), &QHeaderView::sectionResized, this, [this](int logical, int, int size) {
        if (logical == 0 && frozen_->columnWidth(0) != size) {
            frozen_->setColumnWidth(0, size);
            placeFrozen();
        }
    });
    connect(frozen_->header(), &QHeaderView::sectionResized, this, [this](int logical, int, int size) {
        if (logical == 0 && columnWidth(0) != size)
            setColumnWidth(0, size);
    });
    connect(frozen_->header(), &QHeaderView::sectionClicked, this, [this](int logical) {
        if (!isSortingEnabled())
            return;
        const bool same = header()->sortIndicatorSection() == logical;
        sortByColumn(logical, same && header()->sortIndicatorOrder() == Qt::AscendingOrder ? Qt::DescendingOrder
                                                                                           : Qt::AscendingOrder);
    });
    connect(header(), &QHeaderView::sortIndicatorChanged, frozen_->header(), &QHeaderView::setSortIndicator);
    // The overlay's clicks select the row in the main view and give it the focus (keyboard, editing).
    connect(frozen_, &QTreeView::pressed, this, [this](const QModelIndex& index) {
        setCurrentIndex(index);
        setFocus();
    });
    connect(frozen_, &QTreeView::doubleClicked, this, &QTreeView::doubleClicked);
    connect(horizontalScrollBar(), &QScrollBar::valueChanged, this, &FrozenColumnTreeView::placeFrozen);
}

void FrozenColumnTreeView::setModel(QAbstractItemModel* model)
{
    QTreeView::setModel(model);
    frozen_->setModel(model);
    frozen_->setSelectionModel(selectionModel());
    syncFrozenColumns();
    if (model) {
        connect(model, &QAbstractItemModel::columnsInserted, this, &FrozenColumnTreeView::syncFrozenColumns);
        connect(model, &QAbstractItemModel::modelReset, this, &FrozenColumnTreeView::syncFrozenColumns);
    }
}

void FrozenColumnTreeView::setSelectionModel(QItemSelectionModel* selectionModel)
{
    QTreeView::setSelectionModel(selectionModel);
    // QTreeView::setModel sets a selection model of its own first, before the overlay has the model.
    if (selectionModel && frozen_->model() == selectionModel->model())
        frozen_->setSelectionModel(selectionModel);
}

void FrozenColumnTreeView::syncFrozenColumns()
{
    if (!model())
        return;
    for (int c = 1; c < model()->columnCount(); ++c)
        frozen_->setColumnHidden(c, true);
    frozen_->setColumnHidden(0, false);
    frozen_->setColumnWidth(0, columnWidth(0));
    frozen_->setAlternatingRowColors(alternatingRowColors());
    frozen_->setUniformRowHeights(uniformRowHeights());
    frozen_->setSelectionBehavior(selectionBehavior());
    frozen_->setTextElideMode(textElideMode());
    frozen_->setIndentation(indentation());
    placeFrozen();
}

void FrozenColumnTreeView::syncExpanded(const QModelIndex& parent)
{
    const int rows = model()->rowCount(parent);
    for (int r = 0; r < rows; ++r) {
        const QModelIndex child = model()->index(r, 0, parent);
        if (!model()->hasChildren(child))
            continue;
        const bool open = isExpanded(child);
        if (frozen_->isExpanded(child) != open)
            frozen_->setExpanded(child, open);
        if (open)
            syncExpanded(child);
    }
}

void FrozenColumnTreeView::placeFrozen()
{
    // Over the main view's header section 0 and viewport's left edge; hidden while nothing scrolls sideways.
    const int width = columnWidth(0);
    frozen_->setGeometry(frameWidth(), frameWidth(), width, viewport()->height() + header()->height());
    frozen_->header()->setFixedHeight(header()->height());
    const bool shown = horizontalScrollBar()->value() > 0;
    if (shown && expansionStale_ && model()) {
        syncExpanded({});
        expansionStale_ = false;
    }
    frozen_->setVisible(shown);
}

void FrozenColumnTreeView::resizeEvent(QResizeEvent* event)
{
    QTreeView::resizeEvent(event);
    placeFrozen();
}

void FrozenColumnTreeView::updateGeometries()
{
    QTreeView::updateGeometries();
    // Walking every row here cost tens of milliseconds per layout of a large model; the
    // overlay catches up when it is shown, and expanded()/collapsed() keep it so after.
    expansionStale_ = true;
    placeFrozen();
}

void FrozenColumnTreeView::scrollTo(const QModelIndex& index, ScrollHint hint)
{
    // Column 0 is always in view; scrolling to it sideways would only jump.
    if (index.column() == 0) {
        const int x = horizontalScrollBar()->value();
        QTreeView::scrollTo(index, hint);
        horizontalScrollBar()->setValue(x);
        return;
    }
    QTreeView::scrollTo(index, hint);
}

} // namespace qs
