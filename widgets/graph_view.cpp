#include "widgets/graph_view.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <QComboBox>
#include <QElapsedTimer>
#include <QGraphicsItem>
#include <QGraphicsScene>
#include <QGraphicsView>
#include <QHBoxLayout>
#include <QHelpEvent>
#include <QLabel>
#include <QLineEdit>
#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QStyleOptionGraphicsItem>
#include <QTimer>
#include <QToolButton>
#include <QToolTip>
#include <QVBoxLayout>
#include <QWheelEvent>

#include "graph/model.h"

namespace qs {

namespace {

// Below this level of detail (screen pixels per scene point) nodes are plain
// boxes and edges straight lines: thousands of them stay cheap to paint.
constexpr double kTextDetail = 0.45;
constexpr double kMinScale = 0.005, kMaxScale = 6.0;
// Work per turn of the event loop while a scene is built or an old one deleted.
constexpr qint64 kSliceMs = 8;
const QColor kSelected(0x15, 0x65, 0xc0);
const QColor kMatched(0xef, 0x6c, 0x00);
const QColor kShared(0x7b, 0x1f, 0xa2);
const QColor kEdge(0x70, 0x70, 0x70);
const QColor kMarker(0xd8, 0x43, 0x15);

QString toQ(const std::string& s)
{
    return QString::fromStdString(s);
}

QString dbText(double db)
{
    if (std::isinf(db))
        return db > 0 ? QObject::tr("exact") : QObject::tr("−∞ dB");
    return QObject::tr("%1 dB").arg(db, 0, 'f', 1);
}

// "int8 [0, 4.21]" beside the marker: the qtype, and the range when calibrated.
QString markerLabel(const QuantizationPoint& p)
{
    QString label = toQ(p.qtype);
    if (p.range)
        label += QStringLiteral(" [%1, %2]").arg(double(p.range->min), 0, 'g', 3).arg(double(p.range->max), 0, 'g', 3);
    else if (!p.staticScale)
        label += QObject::tr(" dynamic");
    return label;
}

QString swatch(const QColor& c, const QString& text)
{
    return QStringLiteral("<span style='background:%1;color:%1'>&nbsp;&nbsp;&nbsp;</span>&nbsp;%2&nbsp;&nbsp; ")
        .arg(c.name(), text.toHtmlEscaped());
}

// A query brings the scene's BSP index up to date with the items added since the
// last one. Left alone, Qt indexes them when its index timer fires, which a new
// scene or scene rectangle sets to two seconds: every item at once, in the first paint.
void indexNow(QGraphicsScene* scene)
{
    (void)scene->items(QPointF(-1e9, -1e9));
}

} // namespace

class GraphNodeItem : public QGraphicsItem {
public:
    GraphNodeItem(size_t index, const LayoutNode& n)
        : index_(index), rect_(-n.width / 2, -n.height / 2, n.width, n.height), op_(toQ(n.opType)),
          name_(toQ(n.shortName)), io_(n.kind == LayoutNode::Kind::Input || n.kind == LayoutNode::Kind::Output),
          folded_(n.kind == LayoutNode::Kind::FoldedRun), layer_(n.layer.has_value())
    {
        setPos(n.x, n.y);
        setZValue(1);
    }
    size_t index() const { return index_; }
    QRectF boundingRect() const override { return rect_.adjusted(-4, -4, 4, 4); }
    void setFill(const QColor& c)
    {
        if (fill_ != c) {
            fill_ = c;
            update();
        }
    }
    QColor fill() const { return fill_; }
    // The third line of a layer's box: its value under the metric ("31.2 dB").
    void setValueText(const QString& text)
    {
        if (value_ != text) {
            value_ = text;
            update();
        }
    }
    void setMarks(bool selected, bool matched, bool current, bool shared)
    {
        if (selected != selected_ || matched != matched_ || current != current_ || shared != shared_) {
            selected_ = selected, matched_ = matched, current_ = current, shared_ = shared;
            update();
        }
    }
    void paint(QPainter* p, const QStyleOptionGraphicsItem* option, QWidget*) override
    {
        const double lod = option->levelOfDetailFromTransform(p->worldTransform());
        const QColor outline = selected_                ? kSelected
                               : (matched_ || current_) ? kMatched
                               : shared_                ? kShared
                                                        : QColor(0x50, 0x50, 0x50);
        const double outlineWidth = selected_ || current_ ? 3.0 : matched_ || shared_ ? 2.0 : 0.8;
        if (lod < kTextDetail) {
            p->fillRect(rect_, fill_);
            if (selected_ || matched_ || current_ || shared_) {
                // Thick enough to be seen from far away: a few screen pixels.
                QPen pen(outline, std::max(outlineWidth, 2.5) / lod);
                p->setPen(pen);
                p->setBrush(Qt::NoBrush);
                p->drawRect(rect_);
            }
            return;
        }
        p->setRenderHint(QPainter::Antialiasing, true);
        QPen pen(outline, outlineWidth);
        if (shared_ && !selected_ && !matched_ && !current_)
            pen.setStyle(Qt::DashLine);
        p->setPen(pen);
        p->setBrush(fill_);
        if (io_)
            p->drawEllipse(rect_);
        else
            p->drawRoundedRect(rect_, folded_ ? 9 : 4, folded_ ? 9 : 4);
        if (folded_) {
            p->setBrush(Qt::NoBrush);
            p->drawRoundedRect(rect_.adjusted(3, 3, -3, -3), 7, 7);
        }
        p->setPen(QColor(0x20, 0x20, 0x20));
        QFont font = p->font();
        font.setPointSizeF(8.5);
        font.setBold(true);
        p->setFont(font);
        const QRectF text = rect_.adjusted(4, 2, -4, -2);
        if (io_) {
            p->drawText(text, Qt::AlignCenter, p->fontMetrics().elidedText(name_, Qt::ElideMiddle, int(text.width())));
            return;
        }
        const int lines = layer_ ? 3 : 2;
        const double line = text.height() / lines;
        p->drawText(QRectF(text.left(), text.top(), text.width(), line), Qt::AlignCenter,
                    p->fontMetrics().elidedText(op_, Qt::ElideRight, int(text.width())));
        font.setBold(false);
        p->setFont(font);
        p->drawText(QRectF(text.left(), text.top() + line, text.width(), line), Qt::AlignCenter,
                    p->fontMetrics().elidedText(name_, Qt::ElideLeft, int(text.width())));
        if (layer_)
            p->drawText(QRectF(text.left(), text.top() + 2 * line, text.width(), line), Qt::AlignCenter,
                        p->fontMetrics().elidedText(value_, Qt::ElideRight, int(text.width())));
    }

private:
    size_t index_;
    QRectF rect_;
    QString op_, name_;
    bool io_, folded_, layer_;
    QString value_;
    QColor fill_ = nonLayerColour();
    bool selected_ = false, matched_ = false, current_ = false, shared_ = false;
};

class GraphEdgeItem : public QGraphicsItem {
public:
    explicit GraphEdgeItem(const LayoutEdge& e)
    {
        setZValue(0);
        if (e.spline.empty())
            return;
        path_.moveTo(e.spline[0].x, e.spline[0].y);
        for (size_t k = 1; k + 2 < e.spline.size(); k += 3)
            path_.cubicTo(e.spline[k].x, e.spline[k].y, e.spline[k + 1].x, e.spline[k + 1].y, e.spline[k + 2].x,
                          e.spline[k + 2].y);
        start_ = QPointF(e.spline[0].x, e.spline[0].y);
        end_ = e.arrowEnd ? QPointF(e.arrowEnd->x, e.arrowEnd->y) : path_.currentPosition();
        if (e.arrowEnd) {
            // An arrow head from the spline's end to dot's arrow tip.
            const QPointF base = path_.currentPosition();
            const QPointF d = end_ - base;
            const QPointF n(-d.y() * 0.5, d.x() * 0.5);
            arrow_ << end_ << base + n << base - n;
        }
        // The control points' rectangle holds the curve: cheaper than its exact bounds.
        bounds_ = path_.controlPointRect().united(arrow_.boundingRect()).adjusted(-2, -2, 2, 2);
    }
    const QPainterPath& path() const { return path_; }
    QRectF boundingRect() const override { return bounds_; }
    void paint(QPainter* p, const QStyleOptionGraphicsItem* option, QWidget*) override
    {
        if (path_.isEmpty())
            return;
        const double lod = option->levelOfDetailFromTransform(p->worldTransform());
        if (lod < kTextDetail) {
            QPen pen(kEdge, 0); // cosmetic: one pixel whatever the zoom
            p->setPen(pen);
            p->drawLine(start_, end_);
            return;
        }
        p->setRenderHint(QPainter::Antialiasing, true);
        p->setPen(QPen(kEdge, 1.0));
        p->setBrush(Qt::NoBrush);
        p->drawPath(path_);
        if (!arrow_.isEmpty()) {
            p->setPen(Qt::NoPen);
            p->setBrush(kEdge);
            p->drawPolygon(arrow_);
        }
    }

private:
    QPainterPath path_;
    QPolygonF arrow_;
    QPointF start_, end_;
    QRectF bounds_;
};

class GraphMarkerItem : public QGraphicsItem {
public:
    GraphMarkerItem(const QPointF& at, const QString& label, bool shared, std::string value, size_t layer)
        : label_(label), shared_(shared), value_(std::move(value)), layer_(layer)
    {
        setPos(at);
        setZValue(2);
    }
    const std::string& value() const { return value_; }
    size_t layer() const { return layer_; }
    QRectF boundingRect() const override { return QRectF(-7, -7, 14 + 6.5 * label_.size() + 6, 14); }
    void paint(QPainter* p, const QStyleOptionGraphicsItem* option, QWidget*) override
    {
        const double lod = option->levelOfDetailFromTransform(p->worldTransform());
        QPolygonF diamond;
        diamond << QPointF(0, -5) << QPointF(5, 0) << QPointF(0, 5) << QPointF(-5, 0);
        if (lod < kTextDetail) {
            p->setPen(Qt::NoPen);
            p->setBrush(shared_ ? kShared : kMarker);
            p->drawPolygon(diamond);
            return;
        }
        p->setRenderHint(QPainter::Antialiasing, true);
        p->setPen(QPen(shared_ ? kShared : Qt::white, shared_ ? 2.0 : 1.0));
        p->setBrush(kMarker);
        p->drawPolygon(diamond);
        QFont font = p->font();
        font.setPointSizeF(7.5);
        p->setFont(font);
        p->setPen(shared_ ? kShared : kMarker.darker(130));
        p->drawText(QPointF(8, 3.5), label_);
    }

private:
    QString label_;
    bool shared_;
    std::string value_;
    size_t layer_;
};

// The view: hand-drag pans, the wheel zooms, a click (a press and release in
// place) selects the node under it.
class GraphCanvas : public QGraphicsView {
public:
    GraphCanvas(GraphView* owner, QGraphicsScene* scene) : QGraphicsView(scene, owner), owner_(owner)
    {
        setDragMode(QGraphicsView::ScrollHandDrag);
        setTransformationAnchor(QGraphicsView::AnchorUnderMouse);
        setViewportUpdateMode(QGraphicsView::SmartViewportUpdate);
        setOptimizationFlag(QGraphicsView::DontAdjustForAntialiasing, true);
        setOptimizationFlag(QGraphicsView::DontSavePainterState, true);
        setBackgroundBrush(palette().base());
    }

protected:
    // A node's tooltip is written when asked for: thousands of HTML strings per result would stall.
    bool viewportEvent(QEvent* event) override
    {
        if (event->type() == QEvent::ToolTip) {
            auto* help = static_cast<QHelpEvent*>(event);
            for (QGraphicsItem* item : items(help->pos())) {
                if (!item->toolTip().isEmpty())
                    break; // a marker: its own tooltip
                if (auto* node = dynamic_cast<GraphNodeItem*>(item)) {
                    QToolTip::showText(help->globalPos(), owner_->nodeToolTip(node->index()), this);
                    return true;
                }
            }
        }
        return QGraphicsView::viewportEvent(event);
    }
    void wheelEvent(QWheelEvent* event) override
    {
        const double factor = std::pow(1.0015, event->angleDelta().y());
        const double scale = transform().m11() * factor;
        if (scale < kMinScale || scale > kMaxScale)
            return;
        this->scale(factor, factor);
        event->accept();
    }
    void mousePressEvent(QMouseEvent* event) override
    {
        pressAt_ = event->position().toPoint();
        QGraphicsView::mousePressEvent(event);
    }
    void mouseReleaseEvent(QMouseEvent* event) override
    {
        QGraphicsView::mouseReleaseEvent(event);
        if (event->button() != Qt::LeftButton || (event->position().toPoint() - pressAt_).manhattanLength() > 4)
            return;
        for (QGraphicsItem* item : items(event->position().toPoint()))
            if (auto* node = dynamic_cast<GraphNodeItem*>(item)) {
                owner_->nodeClicked(node->index());
                return;
            }
    }
    void mouseDoubleClickEvent(QMouseEvent* event) override
    {
        if (event->button() == Qt::LeftButton)
            for (QGraphicsItem* item : items(event->position().toPoint()))
                if (auto* node = dynamic_cast<GraphNodeItem*>(item)) {
                    owner_->nodeDoubleClicked(node->index());
                    event->accept();
                    return;
                }
        QGraphicsView::mouseDoubleClickEvent(event);
    }

private:
    GraphView* owner_;
    QPoint pressAt_;
};

GraphView::GraphView(QWidget* parent) : QWidget(parent), scene_(newScene(0)), buildTimer_(new QTimer(this))
{
    buildTimer_->setSingleShot(true);
    buildTimer_->setInterval(0);
    connect(buildTimer_, &QTimer::timeout, this, &GraphView::buildSlice);
    canvas_ = new GraphCanvas(this, scene_);
    canvas_->setObjectName(QStringLiteral("GraphCanvas"));

    metricCombo_ = new QComboBox(this);
    for (const GraphMetric m : kGraphMetrics)
        metricCombo_->addItem(graphMetricName(m), int(m));
    metricCombo_->setCurrentIndex(int(metric_));
    metricCombo_->setToolTip(tr("What colours each layer's node"));
    search_ = new QLineEdit(this);
    search_->setPlaceholderText(tr("Find node…"));
    search_->setClearButtonEnabled(true);
    search_->setToolTip(tr("Highlights the nodes whose name contains the text; Enter centres the next one"));
    fold_ = new QToolButton(this);
    fold_->setText(tr("Fold blocks"));
    fold_->setCheckable(true);
    fold_->setEnabled(false);
    fold_->setToolTip(tr("Draw each run of repeated blocks (layers.0, layers.1, …) as one node"));
    fit_ = new QToolButton(this);
    fit_->setText(tr("Fit"));
    fit_->setToolTip(tr("Show the whole graph"));
    legend_ = new QLabel(this);
    legend_->setWordWrap(true);
    legend_->setTextFormat(Qt::RichText);
    status_ = new QLabel(this);
    status_->setWordWrap(true);
    status_->hide();

    auto* top = new QHBoxLayout;
    top->addWidget(metricCombo_);
    top->addWidget(search_, 1);
    top->addWidget(fold_);
    top->addWidget(fit_);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(2, 2, 2, 2);
    layout->addLayout(top);
    layout->addWidget(legend_);
    layout->addWidget(status_);
    layout->addWidget(canvas_, 1);

    connect(metricCombo_, &QComboBox::currentIndexChanged, this,
            [this](int) { setMetric(GraphMetric(metricCombo_->currentData().toInt())); });
    connect(search_, &QLineEdit::textChanged, this, &GraphView::updateSearch);
    connect(search_, &QLineEdit::returnPressed, this, &GraphView::nextMatch);
    connect(fit_, &QToolButton::clicked, this, &GraphView::fitToView);
    connect(fold_, &QToolButton::toggled, this, [this](bool on) {
        std::set<size_t> all;
        if (on)
            for (size_t i = 0; i < runs_.size(); ++i)
                all.insert(i);
        emit foldRequested(all);
    });
    updateLegend();
}

GraphView::~GraphView() = default;

QGraphicsView* GraphView::view() const
{
    return canvas_;
}

void GraphView::setStatus(const QString& text)
{
    status_->setText(text);
    status_->setVisible(!text.isEmpty());
}

void GraphView::setGraph(std::shared_ptr<const GraphLayout> layout, std::shared_ptr<const Model> model,
                         std::vector<RepeatedRun> runs)
{
    layout_ = std::move(layout);
    model_ = std::move(model);
    runs_ = std::move(runs);
    fold_->setEnabled(!runs_.empty());
    {
        const QSignalBlocker block(fold_);
        fold_->setChecked(layout_ && !layout_->foldedRuns.empty());
    }
    fold_->setToolTip(
        runs_.empty() ? tr("No repeated blocks found in this graph")
                      : tr("Draw each of the %n run(s) of repeated blocks as one node", nullptr, int(runs_.size())));
    rebuildScene();
}

QGraphicsScene* GraphView::newScene(size_t items)
{
    auto* scene = new QGraphicsScene(this);
    scene->setItemIndexMethod(QGraphicsScene::BspTreeIndex); // static items: the index suited to them
    // The depth Qt would choose for this many items, fixed up front: left to
    // itself the index is rebuilt whole each time a slice grows past a power of two.
    scene->setBspTreeDepth(std::max(5, int(std::ceil(std::log2(double(std::max<size_t>(items, 2)))))));
    return scene;
}

void GraphView::rebuildScene()
{
    // The scene shown goes off screen, to be deleted a slice at a time.
    RetiringScene old{scene_, std::move(edges_)};
    old.items.insert(old.items.end(), nodes_.begin(), nodes_.end());
    old.items.insert(old.items.end(), markers_.begin(), markers_.end());
    retiring_.push_back(std::move(old));
    edges_.clear();
    nodes_.clear();
    markers_.clear();
    matches_.clear();
    const size_t items = layout_ && model_ ? layout_->edges.size() + layout_->nodes.size() : 0;
    scene_ = newScene(items);
    if (items) {
        scene_->setSceneRect(-20, -20, layout_->width + 40, layout_->height + 40);
        edges_.reserve(layout_->edges.size());
        nodes_.reserve(layout_->nodes.size());
    }
    indexNow(scene_);
    canvas_->setScene(nullptr);
    buildNext_ = 0;
    sceneReady_ = false;
    buildSlice();
}

void GraphView::buildSlice()
{
    QElapsedTimer clock;
    clock.start();
    if (!sceneReady_) {
        const size_t edges = layout_ && model_ ? layout_->edges.size() : 0;
        const size_t total = layout_ && model_ ? edges + layout_->nodes.size() : 0;
        if (buildNext_ < total) {
            while (buildNext_ < total && clock.elapsed() < kSliceMs)
                for (const size_t end = std::min(total, buildNext_ + 64); buildNext_ < end; ++buildNext_) {
                    if (buildNext_ < edges) {
                        edges_.push_back(new GraphEdgeItem(layout_->edges[buildNext_]));
                        scene_->addItem(edges_.back());
                    } else {
                        const size_t node = buildNext_ - edges;
                        nodes_.push_back(new GraphNodeItem(node, layout_->nodes[node]));
                        scene_->addItem(nodes_.back());
                    }
                }
            // Each slice's items indexed within its slice, not all at the first paint.
            indexNow(scene_);
        } else {
            finishScene(); // a turn of its own: colours and search, then the scene is shown
        }
    }
    while (!retiring_.empty() && clock.elapsed() < kSliceMs) {
        RetiringScene& old = retiring_.front();
        for (size_t k = 0; k < 64 && !old.items.empty(); ++k) {
            delete old.items.back();
            old.items.pop_back();
        }
        if (old.items.empty()) {
            delete old.scene;
            retiring_.erase(retiring_.begin());
        }
    }
    if (!sceneReady_ || !retiring_.empty())
        buildTimer_->start();
}

void GraphView::finishScene()
{
    sceneReady_ = true;
    applyColours();
    updateSearch();
    indexNow(scene_);
    canvas_->setScene(scene_);
    fitToView();
    if (selectedLayer_) {
        const auto keep = selectedLayer_;
        selectedLayer_.reset();
        selectLayer(keep);
    }
    emit sceneBuilt();
}

QString GraphView::nodeToolTip(size_t i) const
{
    if (!layout_ || i >= layout_->nodes.size())
        return {};
    const LayoutNode& n = layout_->nodes[i];
    QString tip = QStringLiteral("<b>%1</b> %2").arg(toQ(n.opType).toHtmlEscaped(), toQ(n.name).toHtmlEscaped());
    if (n.kind == LayoutNode::Kind::FoldedRun && n.run && *n.run < runs_.size()) {
        const RepeatedRun& run = runs_[*n.run];
        tip += tr("<br>%1 identical blocks of %2 nodes folded; coloured by their lowest value")
                   .arg(run.blocks.size())
                   .arg(run.blocks.front().nodeCount);
    }
    if (n.layer && model_ && *n.layer < model_->layers.size()) {
        const size_t l = *n.layer;
        tip += tr("<br>layer <i>%1</i>").arg(toQ(model_->layers[l].modulePath).toHtmlEscaped());
        for (const GraphMetric m : kGraphMetrics)
            if (const auto v = colouring_.value(m, l))
                tip += QStringLiteral("<br>%1: %2").arg(graphMetricName(m), dbText(*v));
        if (l < colouring_.algorithm.size())
            tip += tr("<br>Algorithm: %1")
                       .arg(colouring_.algorithm[l].empty() ? tr("weight float") : toQ(colouring_.algorithm[l]));
        if (l < colouring_.weightSharedWith.size() && !colouring_.weightSharedWith[l].empty()) {
            QStringList others;
            for (const size_t o : colouring_.weightSharedWith[l])
                others << toQ(model_->layers[o].modulePath).toHtmlEscaped();
            tip += tr("<br><b>Shared weight</b> (one quantizer) with %1").arg(others.join(QStringLiteral(", ")));
        }
    }
    return tip;
}

void GraphView::setColouring(GraphColouring colouring)
{
    colouring_ = std::move(colouring);
    applyColours();
}

void GraphView::setMetric(GraphMetric metric)
{
    metric_ = metric;
    if (metricCombo_->currentData().toInt() != int(metric)) {
        const QSignalBlocker block(metricCombo_);
        metricCombo_->setCurrentIndex(metricCombo_->findData(int(metric)));
    }
    applyColours();
}

QColor GraphView::nodeFill(size_t node) const
{
    return node < nodes_.size() ? nodes_[node]->fill() : QColor();
}

void GraphView::applyColours()
{
    updateLegend();
    if (!layout_ || !model_ || !sceneReady_) // the build applies them when it ends
        return;
    // Which layers each folded node holds: it takes their lowest value.
    std::map<size_t, std::vector<size_t>> foldedLayers;
    for (size_t l = 0; l < model_->layers.size(); ++l) {
        const auto& layer = model_->layers[l];
        if (layer.scope == 0 && layer.node && *layer.node < layout_->nodeOfGraphNode.size()) {
            const size_t n = layout_->nodeOfGraphNode[*layer.node];
            if (layout_->nodes[n].kind == LayoutNode::Kind::FoldedRun)
                foldedLayers[n].push_back(l);
        }
    }
    for (size_t i = 0; i < layout_->nodes.size(); ++i) {
        const LayoutNode& n = layout_->nodes[i];
        QColor fill = nonLayerColour();
        if (n.kind == LayoutNode::Kind::Input || n.kind == LayoutNode::Kind::Output)
            fill = QColor(0xe3, 0xec, 0xf5);
        else if (n.layer) {
            fill = colouring_.colour(metric_, *n.layer);
            if (metric_ == GraphMetric::Algorithm)
                nodes_[i]->setValueText(*n.layer < colouring_.algorithm.size() &&
                                                !colouring_.algorithm[*n.layer].empty()
                                            ? toQ(colouring_.algorithm[*n.layer])
                                            : tr("float"));
            else if (const auto v = colouring_.value(metric_, *n.layer))
                nodes_[i]->setValueText(dbText(*v));
            else
                nodes_[i]->setValueText(QStringLiteral("–"));
        } else if (n.kind == LayoutNode::Kind::FoldedRun) {
            std::optional<double> lowest;
            for (const size_t l : foldedLayers[i])
                if (const auto v = colouring_.value(metric_, l))
                    lowest = lowest ? std::min(*lowest, *v) : *v;
            fill = lowest ? sqnrColour(*lowest) : noValueColour();
        }
        nodes_[i]->setFill(fill);
    }
    refreshFlags();

    // Quantization points: a marker on the edge that carries the value into the layer's node.
    for (GraphMarkerItem* m : markers_)
        delete m;
    markers_.clear();
    std::map<std::pair<size_t, std::string>, size_t> edgeInto; // (to, value) -> edge
    for (size_t e = 0; e < layout_->edges.size(); ++e)
        for (const std::string& v : layout_->edges[e].values)
            edgeInto[{layout_->edges[e].to, v}] = e;
    for (const QuantizationPoint& p : colouring_.points) {
        const auto& layer = model_->layers[p.layer];
        if (layer.scope != 0 || !layer.node || *layer.node >= layout_->nodeOfGraphNode.size())
            continue;
        const size_t to = layout_->nodeOfGraphNode[*layer.node];
        const auto e = edgeInto.find({to, p.value});
        if (e == edgeInto.end() || layout_->edges[e->second].spline.empty())
            continue;
        const auto& spline = layout_->edges[e->second].spline;
        // Near the consumer: the last control point before the end, three quarters of the way.
        const LayoutPoint a = spline[spline.size() >= 4 ? spline.size() - 4 : 0], b = spline.back();
        const QPointF at(a.x + 0.7 * (b.x - a.x), a.y + 0.7 * (b.y - a.y));
        auto* marker = new GraphMarkerItem(at, markerLabel(p), !p.sharedWith.empty(), p.value, p.layer);
        QString tip = tr("<b>%1</b> quantized to <b>%2</b> at the input of <i>%3</i><br>")
                          .arg(toQ(p.value).toHtmlEscaped(), toQ(p.qtype), toQ(layer.modulePath).toHtmlEscaped());
        if (!p.staticScale)
            tip += tr("dynamic range: a scale per batch (%1)").arg(toQ(p.method).toHtmlEscaped());
        else if (p.range)
            tip += tr("range [%1, %2] (%3, from calibration)")
                       .arg(double(p.range->min), 0, 'g', 4)
                       .arg(double(p.range->max), 0, 'g', 4)
                       .arg(toQ(p.method).toHtmlEscaped());
        else
            tip += tr("static range by %1: %2")
                       .arg(toQ(p.method).toHtmlEscaped(),
                            tr("not calibrated yet, or a histogram search (the Charts' Distribution shows it)"));
        if (!p.sharedWith.empty()) {
            QStringList others;
            for (const size_t o : p.sharedWith)
                others << toQ(model_->layers[o].modulePath).toHtmlEscaped();
            tip += tr("<br><b>Shared quantizer</b>: one observer and scale with %1")
                       .arg(others.join(QStringLiteral(", ")));
        }
        marker->setToolTip(tip);
        scene_->addItem(marker);
        markers_.push_back(marker);
    }
}

QString GraphView::markerToolTip(const std::string& value, size_t layer) const
{
    for (const GraphMarkerItem* m : markers_)
        if (m->value() == value && m->layer() == layer)
            return m->toolTip();
    return {};
}

void GraphView::updateLegend()
{
    QString html;
    if (metric_ == GraphMetric::Algorithm) {
        for (const char* a : {"rtn", "gptq", "awq", "adaround"})
            html += swatch(algorithmColour(a), QString::fromLatin1(a));
        html += swatch(algorithmColour(""), tr("weight float"));
    } else {
        for (const double db : {kSqnrColourLow, 20.0, 30.0, kSqnrColourHigh})
            html += swatch(sqnrColour(db), db == kSqnrColourLow    ? tr("≤%1 dB").arg(db)
                                           : db == kSqnrColourHigh ? tr("≥%1 dB").arg(db)
                                                                   : tr("%1 dB").arg(db));
        html += swatch(noValueColour(), tr("no value"));
        if (metric_ == GraphMetric::Sensitivity)
            html += tr("(output SQNR with %1)")
                        .arg(colouring_.sensitivityAllButOne ? tr("all but this layer quantized")
                                                             : tr("only this layer quantized"));
    }
    html += QStringLiteral("<span style='color:%1'>◆</span>&nbsp;%2&nbsp;&nbsp; ")
                .arg(kMarker.name(), tr("quantized activation: qtype [range]"));
    html += QStringLiteral("<span style='color:%1'>◆ ▭</span>&nbsp;%2").arg(kShared.name(), tr("shared quantizer"));
    legend_->setText(html);
}

void GraphView::updateSearch()
{
    matches_.clear();
    matchCursor_ = 0;
    matchCentred_ = false;
    const QString text = search_->text().trimmed();
    if (layout_ && !text.isEmpty()) {
        const std::string needle = text.toLower().toStdString();
        auto lower = [](std::string s) {
            std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
            return s;
        };
        for (size_t i = 0; i < layout_->nodes.size(); ++i) {
            const LayoutNode& n = layout_->nodes[i];
            std::string hay = lower(n.name);
            if (n.layer && model_) {
                hay += '\n';
                hay += lower(model_->layers[*n.layer].modulePath);
            }
            if (hay.find(needle) != std::string::npos)
                matches_.push_back(i);
        }
    }
    search_->setStyleSheet(!text.isEmpty() && matches_.empty() ? QStringLiteral("QLineEdit { background: #ffd0d0; }")
                                                               : QString());
    refreshFlags();
}

void GraphView::refreshFlags()
{
    if (!layout_ || !sceneReady_)
        return;
    const std::optional<size_t> current = currentMatch();
    for (size_t i = 0; i < nodes_.size(); ++i) {
        const auto& layer = layout_->nodes[i].layer;
        const bool selected = selectedLayer_ && layer == selectedLayer_;
        const bool matched = std::binary_search(matches_.begin(), matches_.end(), i);
        const bool shared =
            layer && *layer < colouring_.weightSharedWith.size() && !colouring_.weightSharedWith[*layer].empty();
        nodes_[i]->setMarks(selected, matched, current == i, shared);
    }
}

std::optional<size_t> GraphView::currentMatch() const
{
    if (!matchCentred_ || matches_.empty())
        return std::nullopt;
    return matches_[(matchCursor_ + matches_.size() - 1) % matches_.size()];
}

void GraphView::nextMatch()
{
    if (matches_.empty() || !sceneReady_)
        return;
    const size_t node = matches_[matchCursor_ % matches_.size()];
    matchCursor_ = (matchCursor_ + 1) % matches_.size();
    matchCentred_ = true;
    refreshFlags();
    // Close enough to read the names.
    if (canvas_->transform().m11() < 0.8)
        canvas_->setTransform(QTransform::fromScale(1.0, 1.0));
    canvas_->centerOn(nodes_[node]);
}

void GraphView::fitToView()
{
    if (!layout_)
        return;
    canvas_->fitInView(scene_->sceneRect(), Qt::KeepAspectRatio);
    // A tall graph fits as a thread: no smaller than a scale where boxes show.
    if (canvas_->transform().m11() < kMinScale)
        canvas_->setTransform(QTransform::fromScale(kMinScale, kMinScale));
}

void GraphView::zoomBy(double factor)
{
    const double scale = canvas_->transform().m11() * factor;
    if (scale < kMinScale || scale > kMaxScale)
        return;
    const auto anchor = canvas_->transformationAnchor();
    canvas_->setTransformationAnchor(QGraphicsView::AnchorViewCenter);
    canvas_->scale(factor, factor);
    canvas_->setTransformationAnchor(anchor);
}

QPointF GraphView::nodeCentre(size_t node) const
{
    return node < nodes_.size() ? nodes_[node]->pos() : QPointF();
}

std::optional<size_t> GraphView::layerAt(const QPointF& scenePos) const
{
    for (QGraphicsItem* item : scene_->items(scenePos))
        if (auto* node = dynamic_cast<GraphNodeItem*>(item))
            return layout_->nodes[node->index()].layer;
    return std::nullopt;
}

void GraphView::nodeClicked(size_t node)
{
    if (!layout_ || node >= layout_->nodes.size() || !layout_->nodes[node].layer)
        return;
    const size_t layer = *layout_->nodes[node].layer;
    if (selectedLayer_ == layer)
        return;
    selectedLayer_ = layer;
    refreshFlags();
    emit layerSelected(layer);
}

void GraphView::nodeDoubleClicked(size_t node)
{
    if (!layout_ || node >= layout_->nodes.size() || !layout_->nodes[node].run)
        return;
    // That run opens; the others stay as they are.
    std::set<size_t> folded = layout_->foldedRuns;
    folded.erase(*layout_->nodes[node].run);
    emit foldRequested(folded);
}

void GraphView::selectLayer(std::optional<size_t> layer)
{
    if (layer == selectedLayer_)
        return;
    selectedLayer_ = layer;
    if (!layout_ || !model_ || !sceneReady_) // the build centres it when it ends
        return;
    refreshFlags();
    if (!layer || *layer >= model_->layers.size())
        return;
    const auto& l = model_->layers[*layer];
    if (l.scope != 0 || !l.node || *l.node >= layout_->nodeOfGraphNode.size())
        return;
    canvas_->centerOn(nodes_[layout_->nodeOfGraphNode[*l.node]]);
}

} // namespace qs
