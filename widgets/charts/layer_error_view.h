#pragma once
// Per-layer error across the model: bars of weight, isolated-activation and
// accumulated SQNR per layer in model order (click a bar to select the
// layer), a threshold line the user drags to mark layers to keep in float
// (bars below it are highlighted; "Keep marked layers in float" proposes them), and the
// sensitivity ranking after a sensitivity run.

#include <QStringList>
#include <QWidget>

#include "session/layer_errors.h"

class QBarSet;
class QLineSeries;
class QPushButton;

namespace qs {

class ChartFrame;

class LayerErrorView : public QWidget {
    Q_OBJECT
public:
    explicit LayerErrorView(QWidget* parent = nullptr);

    void setData(LayerErrorData data);
    const LayerErrorData& data() const { return data_; }

    double threshold() const { return threshold_; }
    void setThreshold(double db);
    // Module paths of the layers below the threshold, in model order.
    QStringList markedLayers() const;
    // Emits keepFloatProposed(markedLayers()).
    void proposeKeepFloat();
    // What a click on the bars of row `row` does.
    void clickRow(int row);

    ChartFrame* barFrame() const { return bars_; }
    ChartFrame* sensitivityFrame() const { return sensitivity_; }

signals:
    void layerClicked(size_t layer);
    void keepFloatProposed(QStringList modulePaths);

private:
    void draw();
    void drawBars();
    void drawSensitivity();
    void updateThresholdLine();
    void hoverBars(QPointF value, QPoint globalPos);
    double displayed(std::optional<double> sqnr) const;

    ChartFrame* bars_;
    ChartFrame* sensitivity_;
    QPushButton* propose_;
    LayerErrorData data_;
    double threshold_ = 20.0;
    double ceiling_ = 60.0; // where +∞ SQNR bars end
    QLineSeries* thresholdLine_ = nullptr;
    std::vector<QBarSet*> sets_;
    bool dragging_ = false;
};

} // namespace qs
