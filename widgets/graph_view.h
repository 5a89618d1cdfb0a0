#pragma once
// The Graph dock: the model's graph as Graphviz laid it out (graph/graph_layout.h,
// computed as a job by the app), each layer's node coloured by the metric
// chosen in the combo (legend below it), the activations the rules quantize
// drawn as markers on the edges that carry them (qtype and range in the
// tooltip), shared quantizers outlined. Drag pans, the wheel zooms around the
// cursor, "Fit" shows everything; the search field highlights matching nodes
// and Enter centres the next one; the Fold button folds every run of repeated
// blocks, and double-clicking a folded run's node unfolds that run alone.
// Clicking a layer's node emits layerSelected;
// selectLayer() selects and centres without emitting (no feedback loop).
//
// Drawing stays cheap at a few thousand nodes: items are static (the scene's
// BSP index), at low zoom nodes are plain boxes and edges straight lines
// without text or antialiasing (levelOfDetailFromTransform).
//
// A new layout's scene is built a slice at a time (at most kSliceMs of work
// per turn of the event loop, into a scene not yet shown), and the scene it
// replaces is deleted the same way, so that a graph of thousands of nodes never
// holds the GUI thread for long. sceneReady() says when the new one is shown.

#include <memory>
#include <optional>
#include <set>
#include <vector>

#include <QWidget>

#include "widgets/graph/graph_layout.h"
#include "widgets/graph/repeated_blocks.h"
#include "widgets/graph_colouring.h"

class QComboBox;
class QGraphicsItem;
class QGraphicsScene;
class QGraphicsView;
class QLabel;
class QLineEdit;
class QTimer;
class QToolButton;

namespace qs {

class Model;
class GraphNodeItem;
class GraphMarkerItem;
class GraphCanvas;

class GraphView : public QWidget {
    Q_OBJECT
public:
    explicit GraphView(QWidget* parent = nullptr);
    ~GraphView() override;

    // A new layout of `model` (null: none); `runs` are the model's repeated runs
    // (what the Fold button offers). Keeps the selection and metric.
    void setGraph(std::shared_ptr<const GraphLayout> layout, std::shared_ptr<const Model> model,
                  std::vector<RepeatedRun> runs);
    // Whether the scene of the current layout is built and shown (sceneBuilt() is
    // emitted when it is).
    bool sceneReady() const { return sceneReady_; }
    // A line shown instead of the graph (laying out…, an error) or over it; empty hides it.
    void setStatus(const QString& text);
    void setColouring(GraphColouring colouring);
    void setMetric(GraphMetric metric);
    GraphMetric metric() const { return metric_; }
    // Selects and centres the layer's node; emits nothing.
    void selectLayer(std::optional<size_t> layer);
    std::optional<size_t> selectedLayer() const { return selectedLayer_; }
    void fitToView();
    // Zooms by `factor` around the view's centre.
    void zoomBy(double factor);

    // For tests and the dock's own use.
    QGraphicsView* view() const;
    QLineEdit* searchField() const { return search_; }
    QComboBox* metricCombo() const { return metricCombo_; }
    QToolButton* foldButton() const { return fold_; }
    QLabel* legend() const { return legend_; }
    const GraphLayout* graphLayout() const { return layout_.get(); }
    // The fill of layout node `node` as drawn now.
    QColor nodeFill(size_t node) const;
    // Layout nodes matching the search text, and the one Enter centred last.
    const std::vector<size_t>& searchMatches() const { return matches_; }
    std::optional<size_t> currentMatch() const;
    size_t markerCount() const { return markers_.size(); }
    // The tooltip of the marker of `value` into `layer` (empty: none drawn).
    QString markerToolTip(const std::string& value, size_t layer) const;
    QString nodeToolTip(size_t node) const;
    // Scene position of layout node `node`'s centre.
    QPointF nodeCentre(size_t node) const;
    // Which layer is drawn at `scenePos`, if a layer's node is.
    std::optional<size_t> layerAt(const QPointF& scenePos) const;

signals:
    void layerSelected(size_t layer);
    // The scene of the layout given last to setGraph is built and shown.
    void sceneBuilt();
    // The runs to fold (empty: unfold all); the app lays out again.
    void foldRequested(const std::set<size_t>& runs);

private:
    friend class GraphCanvas;
    void rebuildScene();
    // One turn of the build: retire old items, then add new ones, within the time budget.
    void buildSlice();
    void finishScene();
    QGraphicsScene* newScene(size_t items);
    void applyColours();
    void updateLegend();
    void updateSearch();
    // Selected, matched, current-match and shared outlines of every node.
    void refreshFlags();
    void nextMatch();
    void nodeClicked(size_t node);
    // A folded run's node unfolds that run alone.
    void nodeDoubleClicked(size_t node);

    GraphCanvas* canvas_;
    QGraphicsScene* scene_;
    QTimer* buildTimer_;
    size_t buildNext_ = 0;  // next item to add: edges first, then nodes
    bool sceneReady_ = true;
    // Scenes replaced by a newer layout, their items deleted a slice at a time.
    struct RetiringScene {
        QGraphicsScene* scene;
        std::vector<QGraphicsItem*> items;
    };
    std::vector<RetiringScene> retiring_;
    QComboBox* metricCombo_;
    QLineEdit* search_;
    QToolButton* fold_;
    QToolButton* fit_;
    QLabel* legend_;
    QLabel* status_;

    std::shared_ptr<const GraphLayout> layout_;
    std::shared_ptr<const Model> model_;
    std::vector<RepeatedRun> runs_;
    GraphColouring colouring_;
    GraphMetric metric_ = GraphMetric::AccumulatedSqnr;
    std::optional<size_t> selectedLayer_;
    std::vector<QGraphicsItem*> edges_;
    std::vector<GraphNodeItem*> nodes_; // by layout node
    std::vector<GraphMarkerItem*> markers_;
    std::vector<size_t> matches_;
    size_t matchCursor_ = 0;
    bool matchCentred_ = false;
};

} // namespace qs
