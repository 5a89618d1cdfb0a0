// The graph view of issue 23:
//  - the layout (Graphviz) of the demo CNN: every graph node placed once, no
//    two boxes overlapping, the edges exactly the producer -> consumer pairs
//    the model's value names give, each spline running between its two boxes;
//  - repeated blocks (tests/graph/make_block_models.py): the run is found,
//    broken where a block differs, folds into one node and unfolds back, in the
//    app too;
//  - a 2002-node graph opened in the app: laid out as a job, then fit, zoom,
//    pan, search and selection while a StallWatchdog measures the longest
//    GUI-thread stall (asserted under 50 ms; figures printed);
//  - on the demo evaluated with w8a8: clicking a node selects its layer in the
//    table and the Inspector and back; each layer's colour is the colour of its
//    SQNR in quantscope-cli's report; the quantized activations are marked;
//    the screenshot docs/screenshots/graph_view.png.
#include <QtTest>

#include <QApplication>
#include <QComboBox>
#include <QDir>
#include <QDockWidget>
#include <QGraphicsView>
#include <QLabel>
#include <QLineEdit>
#include <QProcess>
#include <QScrollBar>
#include <QSortFilterProxyModel>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTextBrowser>
#include <QToolButton>
#include <QTreeView>
#include <QWheelEvent>

#include <fstream>
#include <limits>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "gui/main_window.h"
#include "gui/stall_watchdog.h"
#include "gui/workspace.h"
#include "session/exploration.h"
#include "widgets/graph/graph_layout.h"
#include "widgets/graph/repeated_blocks.h"
#include "widgets/graph_view.h"
#include "widgets/jobs/job_tracker.h"
#include "widgets/layer_tree_model.h"
#include "gui_support.h"
#include "widgets/charts/charts_panel.h"
#include "widgets/charts/distribution_view.h"

using namespace qs;
using namespace gui_test;

namespace {

const QString kBlocks6 = QStringLiteral(QUANTSCOPE_GRAPH_DIR "/blocks_6.onnx");
const QString kBlocks400 = QStringLiteral(QUANTSCOPE_GRAPH_DIR "/blocks_400.onnx");

std::shared_ptr<const Model> load(const QString& path)
{
    LoadOptions options;
    options.interpreter = false;
    return loadExplorationModel(path.toStdString(), options).model;
}

// Opens `path` in the window and waits for its layout and current weights.
bool openLaidOut(MainWindow& window, const QString& path)
{
    Workspace& ws = *window.workspace();
    QSignalSpy loaded(&ws, &Workspace::modelLoaded);
    window.openModel(path);
    if (!loaded.wait(60000))
        return false;
    return waitFor(
        [&] {
            return ws.graphLayout() && window.graphView()->graphLayout() == ws.graphLayout().get() &&
                   window.graphView()->sceneReady() && ws.weightsGeneration() == ws.generation();
        },
        120000);
}

QRectF box(const LayoutNode& n)
{
    return QRectF(n.x - n.width / 2, n.y - n.height / 2, n.width, n.height);
}

double distance(const QRectF& r, const LayoutPoint& p)
{
    const double dx = std::max({r.left() - p.x, 0.0, p.x - r.right()});
    const double dy = std::max({r.top() - p.y, 0.0, p.y - r.bottom()});
    return std::hypot(dx, dy);
}

// The layout node's identity as the model names it: "node:<index>", "input:<name>", "output:<name>".
std::string identity(const LayoutNode& n)
{
    switch (n.kind) {
    case LayoutNode::Kind::Op:
        return "node:" + std::to_string(*n.graphNode);
    case LayoutNode::Kind::Input:
        return "input:" + n.name;
    case LayoutNode::Kind::Output:
        return "output:" + n.name;
    case LayoutNode::Kind::FoldedRun:
        return "run:" + std::to_string(*n.run);
    }
    return {};
}

void saveShot(QWidget* w, const QString& name)
{
    QDir().mkpath(kScreenshots);
    QTest::qWait(100);
    const QPixmap shot = w->grab();
    QVERIFY(!shot.isNull());
    QVERIFY(shot.save(kScreenshots + QLatin1Char('/') + name));
    qInfo("screenshot: %s", qPrintable(QDir::cleanPath(kScreenshots + QLatin1Char('/') + name)));
}

std::optional<size_t> currentLayer(MainWindow& window)
{
    const QModelIndex index = window.layerView()->currentIndex();
    if (!index.isValid())
        return std::nullopt;
    const int layer =
        window.layerProxy()->mapToSource(index).siblingAtColumn(0).data(LayerTreeModel::LayerRole).toInt();
    return layer >= 0 ? std::optional<size_t>(size_t(layer)) : std::nullopt;
}

void selectInTable(MainWindow& window, size_t layer)
{
    const QModelIndex index = window.layerProxy()->mapFromSource(window.workspace()->layers()->indexOfLayer(layer));
    QVERIFY(index.isValid());
    window.layerView()->setCurrentIndex(index);
}

// Clicks layout node `node` where the view shows it.
void clickNode(GraphView* graph, size_t node)
{
    QGraphicsView* view = graph->view();
    view->centerOn(graph->nodeCentre(node));
    const QPoint at = view->mapFromScene(graph->nodeCentre(node));
    QTest::mouseClick(view->viewport(), Qt::LeftButton, {}, at);
}

} // namespace

class TestGuiGraph : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() { QStandardPaths::setTestModeEnabled(true); }
    void layoutOfTheDemo();
    void repeatedBlocksFoldAndUnfold();
    void refusesAGraphAboveTheLimit();
    void largeGraphStaysSmooth();
    void selectionColoursAndMarkersOnTheDemo();
};

void TestGuiGraph::layoutOfTheDemo()
{
    const auto model = load(kModel);
    const GraphLayout layout = layoutGraph(*model, findRepeatedRuns(*model), {});
    QCOMPARE(layout.nodes.size(), model->nodes.size() + model->inputs.size() + model->outputs.size());

    // Every graph node placed once, with its layer.
    std::vector<int> placed(model->nodes.size(), 0);
    for (size_t i = 0; i < layout.nodes.size(); ++i) {
        const LayoutNode& n = layout.nodes[i];
        QVERIFY(n.width > 0 && n.height > 0);
        QVERIFY(n.x - n.width / 2 >= -1 && n.x + n.width / 2 <= layout.width + 1);
        QVERIFY(n.y - n.height / 2 >= -1 && n.y + n.height / 2 <= layout.height + 1);
        if (n.kind != LayoutNode::Kind::Op)
            continue;
        ++placed[*n.graphNode];
        QCOMPARE(layout.nodeOfGraphNode[*n.graphNode], i);
        QCOMPARE(n.opType, model->nodes[*n.graphNode].opType);
        if (n.layer)
            QCOMPARE(*model->layers[*n.layer].node, *n.graphNode);
    }
    QVERIFY(std::all_of(placed.begin(), placed.end(), [](int c) { return c == 1; }));
    size_t layersDrawn = 0;
    for (const LayoutNode& n : layout.nodes)
        layersDrawn += n.layer.has_value();
    QCOMPARE(layersDrawn, model->layers.size());

    // No two boxes overlap.
    for (size_t a = 0; a < layout.nodes.size(); ++a)
        for (size_t b = a + 1; b < layout.nodes.size(); ++b)
            QVERIFY2(!box(layout.nodes[a]).intersects(box(layout.nodes[b])),
                     qPrintable(QStringLiteral("%1 overlaps %2")
                                    .arg(QString::fromStdString(layout.nodes[a].name),
                                         QString::fromStdString(layout.nodes[b].name))));

    // The edges are the producer -> consumer pairs of the model's value names, nothing else.
    std::map<std::string, std::string> producer;
    for (const ValueInfo& in : model->inputs)
        producer[in.name] = "input:" + in.name;
    for (size_t n = 0; n < model->nodes.size(); ++n)
        for (const std::string& out : model->nodes[n].outputs)
            producer[out] = "node:" + std::to_string(n);
    std::set<std::pair<std::string, std::string>> expected;
    for (size_t n = 0; n < model->nodes.size(); ++n)
        for (const std::string& in : model->nodes[n].inputs)
            if (producer.count(in))
                expected.insert({producer[in], "node:" + std::to_string(n)});
    for (const ValueInfo& out : model->outputs)
        expected.insert({producer.at(out.name), "output:" + out.name});
    std::set<std::pair<std::string, std::string>> drawn;
    for (const LayoutEdge& e : layout.edges) {
        drawn.insert({identity(layout.nodes[e.from]), identity(layout.nodes[e.to])});
        // The spline leaves the producer's box and its arrow ends at the consumer's.
        QVERIFY(e.spline.size() >= 4 && (e.spline.size() - 1) % 3 == 0);
        QVERIFY(e.arrowEnd.has_value());
        QVERIFY2(distance(box(layout.nodes[e.from]), e.spline.front()) < 2.0, "edge start off its producer");
        QVERIFY2(distance(box(layout.nodes[e.to]), *e.arrowEnd) < 2.0, "arrow off its consumer");
        // Top to bottom.
        QVERIFY(layout.nodes[e.from].y < layout.nodes[e.to].y);
    }
    QCOMPARE(drawn, expected);
    QCOMPARE(layout.edges.size(), expected.size());
    qInfo("demo: %zu nodes, %zu edges laid out in %.3f s", layout.nodes.size(), layout.edges.size(), layout.seconds);
}

void TestGuiGraph::repeatedBlocksFoldAndUnfold()
{
    const auto model = load(kBlocks6);
    QCOMPARE(model->nodes.size(), size_t(32));
    const auto runs = findRepeatedRuns(*model);
    QCOMPARE(runs.size(), size_t(1));
    QCOMPARE(runs[0].family, std::string("/blocks/blocks.#"));
    QCOMPARE(runs[0].blocks.size(), size_t(6));
    for (size_t b = 0; b < 6; ++b) {
        QCOMPARE(runs[0].blocks[b].prefix, "/blocks/blocks." + std::to_string(b));
        QCOMPARE(runs[0].blocks[b].firstNode, 1 + 5 * b);
        QCOMPARE(runs[0].blocks[b].nodeCount, size_t(5));
    }

    // A block of another structure breaks the run: blocks 0–2 and 4–5 repeat, 3 does not.
    Model changed = *model;
    changed.nodes[1 + 5 * 3 + 1].opType = "Sigmoid";
    const auto broken = findRepeatedRuns(changed);
    QCOMPARE(broken.size(), size_t(2));
    QCOMPARE(broken[0].blocks.size(), size_t(3));
    QCOMPARE(broken[1].blocks.size(), size_t(2));
    QCOMPARE(broken[1].blocks.front().prefix, std::string("/blocks/blocks.4"));

    const GraphLayout full = layoutGraph(*model, runs, {});
    QCOMPARE(full.nodes.size(), size_t(32 + 2));
    const GraphLayout folded = layoutGraph(*model, runs, {0});
    // input, stem, the run, head, output: a chain of four edges.
    QCOMPARE(folded.nodes.size(), size_t(5));
    QCOMPARE(folded.edges.size(), size_t(4));
    const size_t run = folded.nodeOfGraphNode[1];
    QVERIFY(folded.nodes[run].kind == LayoutNode::Kind::FoldedRun);
    for (size_t n = 1; n <= 30; ++n)
        QCOMPARE(folded.nodeOfGraphNode[n], run);
    QVERIFY(folded.nodeOfGraphNode[0] != run && folded.nodeOfGraphNode[31] != run);

    // Double-clicking a folded run's box asks for that run alone to open, the other staying folded.
    {
        auto brokenModel = std::make_shared<Model>(changed);
        const auto both = std::make_shared<GraphLayout>(layoutGraph(changed, broken, {0, 1}));
        GraphView view;
        view.resize(600, 900);
        view.show();
        QSignalSpy built(&view, &GraphView::sceneBuilt);
        view.setGraph(both, brokenModel, broken);
        QVERIFY(built.wait(10000));
        QSignalSpy fold(&view, &GraphView::foldRequested);
        const size_t first = both->nodeOfGraphNode[1]; // the first run's node
        QCOMPARE(both->nodes[first].run, std::optional<size_t>(0));
        QGraphicsView* canvas = view.view();
        canvas->centerOn(view.nodeCentre(first));
        QTest::mouseDClick(canvas->viewport(), Qt::LeftButton, {}, canvas->mapFromScene(view.nodeCentre(first)));
        QCOMPARE(fold.count(), 1);
        QCOMPARE(fold.first().first().value<std::set<size_t>>(), std::set<size_t>{1});
    }

    // In the app: the Fold button lays out again as a job, and unfolds back.
    MainWindow window(false);
    window.resize(1400, 900);
    window.show();
    QVERIFY(openLaidOut(window, kBlocks6));
    GraphView* graph = window.graphView();
    QCOMPARE(graph->graphLayout()->nodes.size(), size_t(34));
    QVERIFY(graph->foldButton()->isEnabled());
    QSignalSpy built(graph, &GraphView::sceneBuilt);
    graph->foldButton()->click();
    QVERIFY(built.wait(60000));
    QCOMPARE(graph->graphLayout()->nodes.size(), size_t(5));
    QVERIFY(graph->foldButton()->isChecked());
    graph->foldButton()->click();
    QVERIFY(built.wait(60000));
    QCOMPARE(graph->graphLayout()->nodes.size(), size_t(34));
    QVERIFY(!graph->foldButton()->isChecked());
}

void TestGuiGraph::refusesAGraphAboveTheLimit()
{
    // The 2002-node model with its blocks repeated past the limit: refused, with the limit in the message.
    const auto model = load(kBlocks400);
    Model big = *model;
    while (big.nodes.size() <= kMaxLayoutNodes)
        big.nodes.insert(big.nodes.end(), model->nodes.begin(), model->nodes.end());
    try {
        (void)layoutGraph(big, {}, {});
        QFAIL("a graph above the limit was laid out");
    } catch (const Error& e) {
        const QString message = QString::fromUtf8(e.what());
        QVERIFY2(message.contains(QString::number(kMaxLayoutNodes)) &&
                     message.contains(QStringLiteral("blocks_400.onnx")),
                 qPrintable(message));
    }
}

void TestGuiGraph::largeGraphStaysSmooth()
{
    MainWindow window(false);
    window.resize(1600, 1000);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    // The graph dock in front, wide enough to work in.
    auto* dock = window.findChild<QDockWidget*>(QStringLiteral("GraphDock"));
    QVERIFY(dock);
    dock->raise();
    window.resizeDocks({dock}, {900}, Qt::Horizontal);

    StallWatchdog loading(std::chrono::milliseconds(50));
    QElapsedTimer clock;
    clock.start();
    QVERIFY(openLaidOut(window, kBlocks400));
    const double openSeconds = clock.elapsed() / 1000.0;
    GraphView* graph = window.graphView();
    const GraphLayout* layout = graph->graphLayout();
    QCOMPARE(window.workspace()->model()->nodes.size(), size_t(2002));
    QCOMPARE(layout->nodes.size(), size_t(2004));
    QTest::qWait(200);
    const int64_t loadingGap = loading.longestGapMs(), loadingBusy = loading.longestBusyMs();
    // What the GUI thread does once per layout (the scene's items, built a slice
    // at a time while the old scene is deleted the same way) and once per result (the colours).
    Workspace& ws = *window.workspace();
    StallWatchdog rebuilding(std::chrono::milliseconds(50));
    QTest::qWait(30);
    QSignalSpy built(graph, &GraphView::sceneBuilt);
    QElapsedTimer once;
    once.start();
    // Twice in a row, as when a second layout arrives while the first is still being drawn:
    // the unfinished one is dropped, the last one is built once and in full.
    graph->setGraph(ws.graphLayout(), ws.model(), ws.repeatedRuns());
    graph->setGraph(ws.graphLayout(), ws.model(), ws.repeatedRuns());
    QVERIFY(built.wait(10000));
    const int64_t sceneMs = once.elapsed();
    QTest::qWait(300); // the old scenes' deletion
    QCOMPARE(built.count(), 1);
    QVERIFY(graph->sceneReady());
    for (size_t i = 0; i < layout->nodes.size(); ++i)
        QCOMPARE(graph->nodeCentre(i), QPointF(layout->nodes[i].x, layout->nodes[i].y));
    const int64_t rebuildGap = rebuilding.longestGapMs(), rebuildBusy = rebuilding.longestBusyMs();
    once.restart();
    graph->setColouring(graphColouring(*ws.model(), ws.plan().get(), ws.weights().get(), nullptr, nullptr, nullptr));
    const int64_t colourMs = once.elapsed();

    // Interaction, with a watchdog of its own. Each step also forces a paint of the view.
    QGraphicsView* view = graph->view();
    StallWatchdog watchdog(std::chrono::milliseconds(50));
    QTest::qWait(50);
    int64_t slowestStep = 0;
    auto step = [&](const std::function<void()>& action) {
        QElapsedTimer t;
        t.start();
        action();
        view->viewport()->repaint();
        slowestStep = std::max<int64_t>(slowestStep, t.elapsed());
        QTest::qWait(15); // the event loop runs between steps, as between a user's inputs
    };
    QVERIFY2(
        view->isVisible() && view->viewport()->height() > 300,
        qPrintable(QStringLiteral("viewport %1x%2").arg(view->viewport()->width()).arg(view->viewport()->height())));
    step([&] { graph->fitToView(); });
    const double fitScale = view->transform().m11();
    // Zoom in around points along the graph, the wheel as a user turns it.
    for (int i = 0; i < 15; ++i)
        step([&] {
            const QPoint at(view->viewport()->width() / 2, (i * 97) % view->viewport()->height());
            QWheelEvent wheel(at, view->viewport()->mapToGlobal(at), QPoint(), QPoint(0, 240), Qt::NoButton,
                              Qt::NoModifier, Qt::NoScrollPhase, false);
            QApplication::sendEvent(view->viewport(), &wheel);
        });
    QVERIFY2(view->transform().m11() > 0.5, // close enough to read: text is drawn
             qPrintable(QStringLiteral("fit %1, zoomed %2").arg(fitScale).arg(view->transform().m11())));
    // Pan: drags across the viewport, and long jumps of the scroll bar.
    for (int i = 0; i < 10; ++i)
        step([&] {
            const QPoint from(400, 500);
            QTest::mousePress(view->viewport(), Qt::LeftButton, {}, from);
            QTest::mouseMove(view->viewport(), from + QPoint(37 * (i % 3) - 30, -180));
            QTest::mouseRelease(view->viewport(), Qt::LeftButton, {}, from + QPoint(37 * (i % 3) - 30, -180));
        });
    for (int i = 0; i < 8; ++i)
        step([&] { view->verticalScrollBar()->setValue(view->verticalScrollBar()->maximum() * i / 8); });
    // Search: typed a key at a time, then Enter through the matches.
    step([&] { QTest::keyClicks(graph->searchField(), QStringLiteral("blocks.39")); });
    QCOMPARE(graph->searchMatches().size(), size_t(11 * 5)); // blocks.39 and blocks.390–399
    for (int i = 0; i < 5; ++i)
        step([&] { QTest::keyClick(graph->searchField(), Qt::Key_Return); });
    QVERIFY(graph->currentMatch().has_value());
    const QRectF shown = view->mapToScene(view->viewport()->rect()).boundingRect();
    QVERIFY(shown.contains(graph->nodeCentre(*graph->currentMatch())));
    step([&] { graph->searchField()->clear(); });
    // Select from the graph, then from the table at the other end: the view follows.
    const size_t target = *layout->nodeOfLayer(777);
    step([&] { clickNode(graph, target); });
    QCOMPARE(currentLayer(window), std::optional<size_t>(777));
    step([&] { selectInTable(window, 3); });
    QCOMPARE(graph->selectedLayer(), std::optional<size_t>(3));
    const QRectF now = view->mapToScene(view->viewport()->rect()).boundingRect();
    QVERIFY(now.contains(graph->nodeCentre(*layout->nodeOfLayer(3))));
    // Metric change repaints every node.
    step([&] { graph->metricCombo()->setCurrentIndex(0); });
    step([&] { graph->fitToView(); });
    for (int i = 0; i < 6; ++i)
        step([&] { graph->zoomBy(0.7); });
    QTest::qWait(100);

    const int64_t worst = watchdog.longestGapMs();
    qInfo("2002-node graph: layout %.2f s (job), open to drawn %.1f s; opening: longest GUI gap %lld ms, of which "
          "the GUI thread computed %lld ms; a new scene of the layout: built in %lld ms, longest gap %lld ms, "
          "computed %lld ms; colours of a result %lld ms; interaction: longest GUI gap %lld ms, computed %lld ms "
          "(watchdog, 10 ms beat), slowest step with its paint %lld ms, stalls over 50 ms: %d",
          layout->seconds, openSeconds, (long long)loadingGap, (long long)loadingBusy, (long long)sceneMs,
          (long long)rebuildGap, (long long)rebuildBusy, (long long)colourMs, (long long)worst,
          (long long)watchdog.longestBusyMs(), (long long)slowestStep, watchdog.stalls());
    QCOMPARE(watchdog.stalls(), 0);
    // A new scene: what the GUI thread itself computes between two beats stays under the limit (the
    // wall-time gaps above also count the time the machine ran other processes on its two cores).
    // Opening is printed, not asserted: it measures 38-47 ms on this machine, too close to the limit
    // for a test that shares the machine with another test (docs/user-guide.md, "Graph").
    QVERIFY2(rebuildBusy < 50, qPrintable(QStringLiteral("a new scene held the GUI thread %1 ms").arg(rebuildBusy)));
    QVERIFY2(slowestStep < 50, qPrintable(QStringLiteral("a step took %1 ms").arg(slowestStep)));
}

void TestGuiGraph::selectionColoursAndMarkersOnTheDemo()
{
    // The reference: quantscope-cli's report of the same rules and data.
    QTemporaryDir dir;
    const QString reportFile = dir.filePath(QStringLiteral("r.json"));
    QVERIFY(!runCli({"quantize", kModel, "--rules", kW8A8, "--calib", kCalib, "--eval", kEval, "--batch-size", "64",
                     "--sensitivity", "one", "--report", reportFile})
                 .isNull());
    std::ifstream in(reportFile.toStdString());
    const nlohmann::json report = nlohmann::json::parse(in);

    MainWindow window(false);
    window.resize(1600, 1000);
    window.show();
    window.openRules(kW8A8);
    QVERIFY(openLaidOut(window, kModel));
    Workspace& ws = *window.workspace();
    ws.setCalibrationData(fileData(kCalib));
    ws.setEvaluationData(fileData(kEval));
    QSignalSpy evaluated(&ws, &Workspace::evaluationChanged);
    window.runWhenReady(true, true);
    QVERIFY(evaluated.wait(120000));
    QTest::qWait(50);

    GraphView* graph = window.graphView();
    const GraphLayout* layout = graph->graphLayout();
    const Model& model = *ws.model();

    // Colours: each layer's node is the colour of its SQNR in the report.
    QVERIFY(graph->metric() == GraphMetric::AccumulatedSqnr);
    size_t coloured = 0, activations = 0;
    for (const auto& row : report["layers"]) {
        const size_t layer = row["index"].get<size_t>();
        const size_t node = *layout->nodeOfLayer(layer);
        QVERIFY(!row["accumulated_sqnr_db"].is_null());
        QCOMPARE(graph->nodeFill(node), sqnrColour(row["accumulated_sqnr_db"].get<double>()));
        ++coloured;
        if (!row["act_qtype"].is_null()) {
            ++activations;
            const std::string value = model.nodes[*model.layers[layer].node].inputs[0];
            const QString tip = graph->markerToolTip(value, layer);
            QVERIFY2(tip.contains(QString::fromStdString(row["act_qtype"].get<std::string>())), qPrintable(tip));
            QVERIFY2(row["act_static"].get<bool>() == tip.contains(QStringLiteral("range [")), qPrintable(tip));
        }
    }
    QCOMPARE(coloured, model.layers.size());
    QVERIFY(activations > 0);
    QCOMPARE(graph->markerCount(), activations);
    graph->metricCombo()->setCurrentIndex(graph->metricCombo()->findData(int(GraphMetric::WeightSqnr)));
    for (const auto& row : report["layers"])
        QCOMPARE(graph->nodeFill(*layout->nodeOfLayer(row["index"].get<size_t>())),
                 sqnrColour(row["weight_sqnr_db"].get<double>()));
    graph->metricCombo()->setCurrentIndex(graph->metricCombo()->findData(int(GraphMetric::Algorithm)));
    for (const auto& row : report["layers"])
        QCOMPARE(graph->nodeFill(*layout->nodeOfLayer(row["index"].get<size_t>())),
                 algorithmColour(row["algorithm"].is_null() ? std::string() : row["algorithm"].get<std::string>()));
    QVERIFY(graph->legend()->text().contains(QStringLiteral("rtn")));
    graph->setMetric(GraphMetric::AccumulatedSqnr);
    QVERIFY(graph->legend()->text().contains(QStringLiteral("dB")));

    // Sensitivity, run in the app: each layer's node takes the colour of the output SQNR with only
    // that layer quantized, as the CLI's ranking gives it.
    QSignalSpy ranked(&ws, &Workspace::sensitivityChanged);
    ws.runSensitivity(SensitivityKind::OneLayer);
    QVERIFY(ranked.wait(120000));
    QTest::qWait(50);
    graph->metricCombo()->setCurrentIndex(graph->metricCombo()->findData(int(GraphMetric::Sensitivity)));
    QCOMPARE(report["sensitivity"]["ranking"].size(), model.layers.size());
    for (const auto& entry : report["sensitivity"]["ranking"]) {
        const auto& sqnr = entry["output"]["sqnr_db"];
        const double db = sqnr.is_null() ? std::numeric_limits<double>::infinity() : sqnr.get<double>();
        QCOMPARE(graph->nodeFill(*layout->nodeOfLayer(entry["layer"].get<size_t>())), sqnrColour(db));
    }
    QVERIFY(graph->legend()->text().contains(QStringLiteral("only this layer quantized")));
    graph->setMetric(GraphMetric::AccumulatedSqnr);

    // Selection: a click on a node selects its layer in the table and the Inspector; the table selects the node.
    // The Charts follow a node click too: the distribution shows the clicked layer's weight.
    auto* charts = window.findChild<ChartsPanel*>();
    QVERIFY(charts);
    auto shownElements = [&](size_t layer) {
        const int64_t want = model.layers[layer].parameterCount;
        return waitFor(
            [&] {
                const DistributionData* d = charts->distributionView()->data();
                return !charts->distributionView()->busy() && d && d->elements == want;
            },
            30000);
    };
    const size_t last = model.layers.size() - 1;
    clickNode(graph, *layout->nodeOfLayer(last));
    QCOMPARE(currentLayer(window), std::optional<size_t>(last));
    QCOMPARE(graph->selectedLayer(), std::optional<size_t>(last));
    QVERIFY(window.inspector()->toPlainText().contains(QString::fromStdString(model.layers[last].modulePath)));
    QVERIFY(shownElements(last));
    selectInTable(window, 0);
    QCOMPARE(graph->selectedLayer(), std::optional<size_t>(0));
    QCOMPARE(currentLayer(window), std::optional<size_t>(0)); // no echo back from the graph
    QVERIFY(window.inspector()->toPlainText().contains(QString::fromStdString(model.layers[0].modulePath)));
    QVERIFY(shownElements(0));

    // The screenshot: the graph dock on its own, coloured by accumulated SQNR, the quantization points visible.
    auto* dock = window.findChild<QDockWidget*>(QStringLiteral("GraphDock"));
    QVERIFY(dock);
    dock->setFloating(true);
    dock->resize(720, 940);
    dock->show();
    dock->raise();
    QTest::qWait(100);
    graph->fitToView();
    saveShot(dock, QStringLiteral("graph_view.png"));
}

QTEST_MAIN(TestGuiGraph)
#include "tst_gui_graph.moc"
