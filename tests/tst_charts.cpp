// Analysis charts: the views' signals, CSV and drawing, the panel on the demo
// model, and a screenshot of each view (docs/screenshots/chart_*.png), one in
// a dark palette. The data they draw is tested without widgets in tst_chart_data.
#include <QtTest>

#include <QAbstractItemModelTester>
#include <QApplication>
#include <QClipboard>
#include <QLineSeries>
#include <QPushButton>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTableView>
#include <QValueAxis>

#include <chrono>
#include <cmath>
#include <future>
#include <random>
#include <thread>

#include "chart_test_inputs.h"

#include "analysis/method_comparison.h"
#include "quant/metrics.h"
#include "quantization/tensor_quantization.h"
#include "graph/model.h"
#include "io/data_source.h"
#include "io/model_loader.h"
#include "quant/kernels.h"
#include "rules/ruleset.h"
#include "runtime/activation_calibration.h"
#include "runtime/interpreter.h"
#include "quantization/quantization_plan.h"
#include "quantization/weight_quantizer.h"
#include "session/evaluation.h"
#include "widgets/charts/chart_frame.h"
#include "widgets/charts/charts_panel.h"
#include "widgets/charts/distribution_view.h"
#include "widgets/charts/layer_error_view.h"
#include "widgets/charts/method_comparison_view.h"
#include "widgets/charts/method_table_model.h"
#include "widgets/charts/scale_range_view.h"
#include "widgets/jobs/job_tracker.h"

using namespace qs;
using namespace qs::chart_test;

namespace {

const char* const kCalib = QUANTSCOPE_TEST_DATA "/../../resources/demo/digits/digits_calib.npz";
const char* const kEval = QUANTSCOPE_TEST_DATA "/../../resources/demo/digits/digits_eval.npz";
const char* const kScreenshots = QUANTSCOPE_TEST_DATA "/../../docs/screenshots/";

bool waitFor(const std::function<bool()>& done)
{
    QElapsedTimer timer;
    timer.start();
    while (!done() && timer.elapsed() < 15000)
        QTest::qWait(10);
    return done();
}

void screenshot(QWidget& w, const QString& file)
{
    w.resize(1200, 700);
    w.show();
    QTest::qWait(50);
    QCoreApplication::processEvents();
    const QImage image = w.grab().toImage();
    QVERIFY(image.save(QString(kScreenshots) + file));
}

// The panel at a readable size with tab `tab` in front.
void screenshotTab(ChartsPanel& panel, int tab, const QString& file)
{
    panel.findChild<QTabWidget*>()->setCurrentIndex(tab);
    screenshot(panel, file);
}

QPalette darkPalette()
{
    QPalette p;
    p.setColor(QPalette::Window, QColor(40, 42, 46));
    p.setColor(QPalette::Base, QColor(30, 31, 34));
    p.setColor(QPalette::AlternateBase, QColor(45, 47, 52));
    p.setColor(QPalette::Text, QColor(225, 225, 225));
    p.setColor(QPalette::WindowText, QColor(225, 225, 225));
    p.setColor(QPalette::Button, QColor(50, 52, 58));
    p.setColor(QPalette::ButtonText, QColor(225, 225, 225));
    return p;
}

// Mean luminance difference between a chart's text colour and its background in an image.
bool paletteApplied(const QImage& image, const QColor& base)
{
    // The corner pixel of the chart is its background.
    const QColor corner = image.pixelColor(image.width() - 3, image.height() / 2);
    return std::abs(corner.lightness() - base.lightness()) < 30;
}

} // namespace

class TestCharts : public QObject {
    Q_OBJECT
private slots:
    void tiledScalesDrawAsAHeatMap()
    {
        const Tensor w = noisyTensor({5, 64}, 5);
        const TensorQuantization q = computeQuantization(w, tiledSpec(16), "w");
        const ScaleRangeData d = scaleRanges(w, q, 0, "w");
        // The view shows the tiles as a heat map instead of per-channel scales.
        JobTracker jobs;
        ScaleRangeView view(&jobs);
        QSignalSpy ready(&view, &ScaleRangeView::ready);
        view.showWeight(w, std::make_shared<const TensorQuantization>(q), 0, "w");
        QVERIFY(waitFor([&] { return !ready.isEmpty() && !view.busy(); }));
        const QStringList csv = view.tileFrame()->csv().trimmed().split('\n');
        QCOMPARE(csv.size(), 6);
        QCOMPARE(csv[0], QString("channel,tile0,tile1,tile2,tile3"));
        QCOMPARE(csv[3].split(',')[2].toFloat(), d.scales[2 * 4 + 1]);
        screenshot(view, "chart_tile_scales.png");
        QVERIFY(!view.tileFrame()->isHidden());
        QVERIFY(view.scaleFrame()->isHidden());
    }

    void comparisonTableIsSortedAndApplyEmitsTheBest()
    {
        const Tensor w = noisyTensor({8, 128}, 21);
        const MethodComparisonData d = compareWeightMethods(w, specOf("absmax"), 99.5, 2.5, "w");
        const MethodResult* best = d.best();
        QVERIFY(best);
        JobTracker jobs;
        MethodComparisonView view(&jobs);
        QSignalSpy ready(&view, &MethodComparisonView::ready);
        QSignalSpy applied(&view, &MethodComparisonView::methodApplied);
        view.setPercentile(99.5);
        view.setRmsFactor(2.5);
        view.showWeight(w, specOf("absmax"), "w");
        QVERIFY(waitFor([&] { return !ready.isEmpty() && !view.busy(); }));
        QAbstractItemModelTester tester(view.tableModel(), QAbstractItemModelTester::FailureReportingMode::QtTest);
        QCOMPARE(view.tableModel()->rowCount(), int(d.results.size()));
        QCOMPARE(view.tableModel()->index(0, MethodTableModel::Method).data().toString(),
                 QString::fromStdString(best->method));
        QTest::mouseClick(view.applyButton(), Qt::LeftButton);
        QCOMPARE(applied.size(), 1);
        QCOMPARE(applied.front().front().toString(), QString::fromStdString(best->method));
        // A selected row is applied instead of the best.
        view.table()->selectRow(2);
        view.apply();
        QCOMPARE(applied.back().front().toString(), QString::fromStdString(d.results[2].method));
        // CSV: a header and one line per method, best first.
        const QStringList lines = view.histogramFrame()->csv().trimmed().split('\n');
        QCOMPARE(lines.size(), int(d.results.size()) + 1);
        QVERIFY(lines[0].startsWith("method,mse,sqnr_db"));
        QVERIFY(lines[1].startsWith(QString::fromStdString(best->method) + ","));
        QCOMPARE(lines[1].split(',')[1].toDouble(), best->metrics.mse);
    }

    void layerErrorsThresholdAndClicks()
    {
        const Model& model = demo().model;
        const LayerErrorInputs in = layerErrorInputs();
        const LayerErrorData d = layerErrors(model, &in.eval, in.weights, &in.sens);
        LayerErrorView view;
        view.setData(d);
        view.setThreshold(13.0);
        const QStringList expected{QString::fromStdString(model.layers[1].modulePath),
                                   QString::fromStdString(model.layers[3].modulePath)};
        QCOMPARE(view.markedLayers(), expected);
        QSignalSpy proposed(&view, &LayerErrorView::keepFloatProposed);
        QSignalSpy clicked(&view, &LayerErrorView::layerClicked);
        view.proposeKeepFloat();
        QCOMPARE(proposed.size(), 1);
        QCOMPARE(proposed.front().front().toStringList(), expected);
        view.clickRow(2);
        QCOMPARE(clicked.size(), 1);
        QCOMPARE(clicked.front().front().value<size_t>(), size_t(2));
        const QStringList csv = view.barFrame()->csv().trimmed().split('\n');
        QCOMPARE(csv.size(), 6);
        QCOMPARE(csv[0], QString("layer,module_path,weight_sqnr_db,isolated_sqnr_db,accumulated_sqnr_db"));
        QCOMPARE(csv[2].split(',')[3].toDouble(), 12.0);
        // Dragging the threshold line moves it, and only moves it.
        view.resize(900, 600);
        view.show();
        QTest::qWait(20);
        QChart* chart = view.barFrame()->chart();
        auto* line = static_cast<QLineSeries*>(chart->series().back());
        const auto viewPos = [&](double db) {
            return view.barFrame()->view()->mapFromScene(chart->mapToScene(chart->mapToPosition(QPointF(2, db), line)));
        };
        QWidget* viewport = view.barFrame()->view()->viewport();
        QTest::mousePress(viewport, Qt::LeftButton, {}, viewPos(13.0));
        QMouseEvent move(QEvent::MouseMove, viewPos(30.0), viewport->mapToGlobal(viewPos(30.0)), Qt::NoButton,
                         Qt::LeftButton, Qt::NoModifier);
        QApplication::sendEvent(viewport, &move);
        QTest::mouseRelease(viewport, Qt::LeftButton, {}, viewPos(30.0));
        QVERIFY2(std::abs(view.threshold() - 30.0) < 1.0, qPrintable(QString::number(view.threshold())));
        // The drag only moved the line (issue 23: releasing it used to add a rule and drop the ranking) ...
        QCOMPARE(proposed.size(), 1);
        QCOMPARE(view.markedLayers().size(), 3); // 12, 28 and 9.5 dB
        // ... and "Keep marked layers in float" proposes what lies below it.
        QPushButton* keep = nullptr;
        for (QPushButton* b : view.findChildren<QPushButton*>())
            if (b->text() == QStringLiteral("Keep marked layers in float"))
                keep = b;
        QVERIFY(keep && keep->isEnabled());
        keep->click();
        QCOMPARE(proposed.size(), 2);
        QCOMPARE(proposed.back().front().toStringList(), view.markedLayers());
    }

    void distributionViewOnDemoWeightAndCsv()
    {
        const Tensor w = demoWeight(demo().conv1);
        auto q = std::make_shared<const TensorQuantization>(computeQuantization(w, specOf("percentile,99"), "conv1"));
        const Tensor fq = fakeQuantize(w, q->params);
        JobTracker jobs;
        DistributionView view(&jobs);
        QSignalSpy ready(&view, &DistributionView::ready);
        view.showWeight(w, fq, q, 0, "features.conv1.weight", "int8, percentile,99, per channel");
        QVERIFY(waitFor([&] { return !ready.isEmpty() && !view.busy(); }));
        QVERIFY(view.data());
        const QStringList lines = view.histogramFrame()->csv().trimmed().split('\n');
        QCOMPARE(lines[0], QString("bin_lo,bin_hi,count,fake_quant_count"));
        int64_t total = 0;
        for (int i = 1; i < lines.size(); ++i)
            total += lines[i].split(',')[2].toLongLong();
        QCOMPARE(total, w.numel());
        view.histogramFrame()->copyCsv();
        QCOMPARE(QApplication::clipboard()->text(), view.histogramFrame()->csv());
        screenshot(view, "chart_distribution.png");

        // One channel, zoomed in: the grid becomes visible.
        ready.clear();
        view.setChannel(3);
        QVERIFY(waitFor([&] { return !ready.isEmpty() && !view.busy(); }));
        QCOMPARE(view.data()->elements, w.numel() / w.dim(0));
        QChart* chart = view.histogramFrame()->chart();
        auto* x = static_cast<QValueAxis*>(chart->axes(Qt::Horizontal).front());
        const float s = view.data()->grid->scale;
        x->setRange(-10.0 * s, 10.0 * s);
        const auto comb = [chart]() -> QLineSeries* {
            for (QAbstractSeries* series : chart->series())
                if (series->name().startsWith("grid"))
                    return static_cast<QLineSeries*>(series);
            return nullptr;
        };
        QVERIFY(comb());
        QCOMPARE(comb()->count(), 3 * 21);
        view.histogramFrame()->resetZoom();
        QVERIFY(comb());
        QCOMPARE(comb()->count(), 0); // the whole range: too dense to draw
        QCOMPARE(static_cast<QValueAxis*>(chart->axes(Qt::Horizontal).front())->min(), view.data()->values.lo);

        // The wheel zooms in around the view; Reset brings the full range back.
        {
            QChart* c = view.histogramFrame()->chart();
            const auto span = [c] {
                const auto* axis = static_cast<QValueAxis*>(c->axes(Qt::Horizontal).front());
                return axis->max() - axis->min();
            };
            const double full = span();
            QWidget* viewport = view.histogramFrame()->view()->viewport();
            const QPointF centre = viewport->rect().center();
            QWheelEvent wheel(centre, viewport->mapToGlobal(centre), QPoint(), QPoint(0, 240), Qt::NoButton,
                              Qt::NoModifier, Qt::NoScrollPhase, false);
            QApplication::sendEvent(viewport, &wheel);
            QVERIFY2(span() < 0.7 * full, qPrintable(QString("%1 of %2").arg(span()).arg(full)));
            view.histogramFrame()->resetZoom();
            QCOMPARE(span(), full);
        }

        // Exports.
        QTemporaryDir dir;
        QVERIFY(view.histogramFrame()->exportPng(dir.filePath("a.png"), QSize(640, 400)));
        QCOMPARE(QImage(dir.filePath("a.png")).size(), QSize(640, 400));
        QVERIFY(view.histogramFrame()->exportSvg(dir.filePath("a.svg"), QSize(640, 400)));
        QFile svg(dir.filePath("a.svg"));
        QVERIFY(svg.open(QIODevice::ReadOnly));
        QVERIFY(svg.readAll().contains("<svg"));
    }

    void newerRequestSupersedesOlder()
    {
        const Tensor big = noisyTensor({64, 20000}, 1);
        const Tensor small = demoWeight(demo().conv1);
        auto qBig = std::make_shared<const TensorQuantization>(computeQuantization(big, specOf("absmax"), "big"));
        auto qSmall = std::make_shared<const TensorQuantization>(computeQuantization(small, specOf("absmax"), "small"));
        JobTracker jobs;
        DistributionView view(&jobs);
        QSignalSpy ready(&view, &DistributionView::ready);
        view.showWeight(big, fakeQuantize(big, qBig->params), qBig, 0, "big", "");
        view.showWeight(small, fakeQuantize(small, qSmall->params), qSmall, 0, "small", "");
        QVERIFY(waitFor([&] { return !view.busy(); }));
        QTest::qWait(50);
        QCOMPARE(ready.size(), 1);
        QCOMPARE(view.data()->tensor, std::string("small"));
    }

    void methodsAndScaleScreenshotsOnDemoModel()
    {
        const Tensor w = demoWeight(demo().fc1);
        JobTracker jobs;
        MethodComparisonView methods(&jobs);
        QSignalSpy ready(&methods, &MethodComparisonView::ready);
        methods.showWeight(w, specOf("absmax", Granularity::PerTensor, QType::Int4), "classifier.fc1.weight");
        QVERIFY(waitFor([&] { return !ready.isEmpty() && !methods.busy(); }));
        screenshot(methods, "chart_methods.png");

        const Tensor conv = demoWeight(demo().conv1);
        auto q = std::make_shared<const TensorQuantization>(computeQuantization(conv, specOf("absmax"), "conv1"));
        ScaleRangeView scales(&jobs);
        QSignalSpy scaleReady(&scales, &ScaleRangeView::ready);
        scales.showWeight(conv, q, 0, "features.conv1.weight");
        QVERIFY(waitFor([&] { return !scaleReady.isEmpty() && !scales.busy(); }));
        const QStringList csv = scales.rangeFrame()->csv().trimmed().split('\n');
        QCOMPARE(csv.size(), int(conv.dim(0)) + 1);
        screenshot(scales, "chart_scale_ranges.png");
    }

    void panelOnDemoModelWithRealCalibrationAndEvaluation()
    {
        // conv2 gets int4 weights: the weak layer the charts should point at.
        auto interpreter = std::make_shared<Interpreter>(loadModel(kDemoModel));
        std::shared_ptr<const Model> model(interpreter, &interpreter->model());
        auto rules = std::make_shared<const RuleSet>(RuleSet::fromJson(R"({"version": 1, "rules": [
            {"module_path": "features/conv2", "weight_qtype": "int4", "act_qtype": "int8", "act_static_scale": true,
             "act_calibration": "percentile,99.9"},
            {"module_path": ".*", "weight_qtype": "int8", "act_qtype": "int8", "act_static_scale": true}]})"));
        auto plan = std::make_shared<const QuantizationPlan>(QuantizationPlan::build(*model, *rules));
        auto weights = std::make_shared<WeightQuantizer>();
        weights->update(*model, *plan);
        auto calib = openDataSource(kCalib, {}, model.get());
        auto stats = std::make_shared<const ActivationStatistics>(calibrateActivations(*interpreter, *plan, *calib));
        auto eval = openDataSource(kEval, {}, model.get());
        auto evaluation =
            std::make_shared<const EvaluationResult>(evaluate(*interpreter, *plan, *weights, stats.get(), *eval));
        auto sens = std::make_shared<const SensitivityResult>(
            sensitivity(*interpreter, *plan, *weights, stats.get(), *eval, SensitivityKind::OneLayer));

        ChartsPanel panel;
        panel.setModel(model);
        panel.setPlan(plan, weights, rules);
        panel.setActivationStatistics(stats);
        panel.setEvaluation(evaluation);
        panel.setSensitivity(sens);
        size_t conv2 = 0;
        for (size_t i = 0; i < model->layers.size(); ++i)
            if (model->layers[i].modulePath == "features/conv2")
                conv2 = i;
        LayerErrorView* errors = panel.layerErrorView();
        QCOMPARE(errors->data().rows.size(), plan->layers().size());
        QCOMPARE(errors->data().sensitivity.size(), sens->ranking.size());
        for (size_t i = 0; i < sens->ranking.size(); ++i)
            QCOMPARE(errors->data().sensitivity[i].outputSqnr, sens->ranking[i].output.sqnrDb);

        // Selecting a layer fills the weight views; a bar click selects and is forwarded.
        QSignalSpy clicked(&panel, &ChartsPanel::layerClicked);
        QSignalSpy distReady(panel.distributionView(), &DistributionView::ready);
        QSignalSpy scaleReady(panel.scaleRangeView(), &ScaleRangeView::ready);
        QSignalSpy methodReady(panel.methodComparisonView(), &MethodComparisonView::ready);
        errors->clickRow(int(conv2));
        QCOMPARE(clicked.size(), 1);
        QVERIFY(waitFor([&] {
            return !distReady.isEmpty() && !scaleReady.isEmpty() && !methodReady.isEmpty() &&
                   !panel.distributionView()->busy() && !panel.scaleRangeView()->busy() &&
                   !panel.methodComparisonView()->busy();
        }));
        const QuantizedWeight& qw = *weights->weights().at(conv2);
        QCOMPARE(panel.distributionView()->data()->elements, qw.fakeQuant.numel());
        QCOMPARE(panel.distributionView()->data()->clippedFraction, qw.metrics.fractionClipped);
        for (size_t c = 0; c < qw.quantization.ranges.size(); ++c)
            QCOMPARE(panel.scaleRangeView()->data()->calibrated[c].max, qw.quantization.ranges[c].max);
        screenshotTab(panel, 0, "chart_distribution.png");
        // A new plan that leaves this layer's weight as it was recomputes nothing.
        distReady.clear();
        panel.setPlan(plan, weights, rules);
        QTest::qWait(50);
        QVERIFY(!panel.distributionView()->busy());
        QCOMPARE(distReady.size(), 0);

        // Apply in the method view names the layer and what was compared.
        QSignalSpy applied(&panel, &ChartsPanel::methodApplied);
        panel.methodComparisonView()->apply();
        QCOMPARE(applied.size(), 1);
        QCOMPARE(applied.front()[0].value<size_t>(), conv2);
        QCOMPARE(applied.front()[1].toString(),
                 QString::fromStdString(panel.methodComparisonView()->data()->best()->method));
        QCOMPARE(applied.front()[2].toBool(), false);

        // The input activation, from the calibration statistics.
        distReady.clear();
        methodReady.clear();
        panel.setShowActivation(true);
        QVERIFY(waitFor([&] {
            return !distReady.isEmpty() && !methodReady.isEmpty() && !panel.distributionView()->busy() &&
                   !panel.methodComparisonView()->busy();
        }));
        const DistributionData* act = panel.distributionView()->data();
        QVERIFY(act->activation);
        QCOMPARE(act->elements, stats->observers().at(plan->layers()[1].activation->value).histogram(0).total());
        QVERIFY(act->clipped > 0); // percentile,99.9 clips
        QVERIFY(panel.methodComparisonView()->isActivation());
        screenshotTab(panel, 0, "chart_activation.png");
        panel.methodComparisonView()->apply();
        QCOMPARE(applied.back()[2].toBool(), true);

        // The threshold proposes the layers below it.
        QSignalSpy proposed(&panel, &ChartsPanel::keepFloatProposed);
        errors->setThreshold(errors->data().rows[conv2].markedSqnr().value() + 0.01);
        errors->proposeKeepFloat();
        QCOMPARE(proposed.size(), 1);
        QVERIFY(proposed.front().front().toStringList().contains("features/conv2"));
        panel.setPalette(darkPalette());
        screenshotTab(panel, 3, "chart_layer_errors.png");
    }

    void layerErrorViewFollowsThePalette()
    {
        const Model& model = demo().model;
        EvaluationResult eval;
        for (size_t i = 0; i < model.layers.size(); ++i) {
            const Tensor w = demoWeight(i);
            const TensorQuantization q =
                computeQuantization(w, specOf("absmax", Granularity::PerChannel, QType::Int4), "w");
            const Tensor fq = fakeQuantize(w, q.params);
            LayerEvaluation e;
            e.layer = i;
            e.weight = errorMetrics(w.values<float>(), fq.values<float>());
            eval.layers.push_back(e);
        }
        LayerErrorView view;
        view.setPalette(darkPalette());
        view.setData(layerErrors(model, &eval, {}, nullptr));
        view.setThreshold(22.0);
        const QImage image = view.barFrame()->renderImage(QSize(600, 400));
        QVERIFY(paletteApplied(image, darkPalette().color(QPalette::Base)));
        view.setPalette(QApplication::palette());
        QVERIFY(paletteApplied(view.barFrame()->renderImage(QSize(600, 400)),
                               QApplication::palette().color(QPalette::Base)));
    }
};

QTEST_MAIN(TestCharts)
#include "tst_charts.moc"
