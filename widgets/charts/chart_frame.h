#pragma once
// The one frame every chart sits in: a QChartView with rubber-band zoom, wheel
// zoom, pan (middle button or Shift + drag, arrow keys), reset; a tool row to
// export PNG and SVG and to copy the chart's data as CSV; tooltips; and
// colours taken from the widget's palette (light or dark), re-applied when
// the palette changes.

#include <functional>

#include <QChartView>
#include <QColor>
#include <QImage>
#include <QPointF>
#include <QWidget>

class QHBoxLayout;
class QLabel;
class QTableView;

namespace qs {

class ChartView : public QChartView {
    Q_OBJECT
public:
    explicit ChartView(QChart* chart, QWidget* parent = nullptr);

signals:
    // The mouse moved over the plot: `value` in the first series' axes units.
    void hovered(QPointF value, QPoint globalPos);
    // A press or drag of the left button a view may handle itself (a threshold
    // line): return true through `accepted` to keep the rubber band out of it.
    void pressed(QPointF value, QPoint viewPos, bool* accepted);
    void dragged(QPointF value);
    void released();

protected:
    void wheelEvent(QWheelEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;
    void mouseReleaseEvent(QMouseEvent* event) override;
    void keyPressEvent(QKeyEvent* event) override;

private:
    QPointF valueAt(QPoint viewPos) const;
    bool panning_ = false;
    bool ownDrag_ = false;
    QPoint last_;
};

class ChartFrame : public QWidget {
    Q_OBJECT
public:
    explicit ChartFrame(const QString& name, QWidget* parent = nullptr);

    QChart* chart() const { return chart_; }
    ChartView* view() const { return view_; }
    // The data behind the chart as CSV, for copy and tests.
    void setCsvSource(std::function<QString()> csv) { csv_ = std::move(csv); }
    QString csv() const { return csv_ ? csv_() : QString(); }
    // A line of text under the chart (legend facts, errors, "computing…").
    void setNote(const QString& text);
    QString note() const;

    void resetZoom();
    // The chart as drawn now, at `size` (default: its current size).
    QImage renderImage(QSize size = {}) const;
    bool exportPng(const QString& path, QSize size = {}) const;
    bool exportSvg(const QString& path, QSize size = {}) const;
    void copyCsv() const;

    // Colours for the chart's parts from the palette; call after adding axes or series.
    // Also fits the chart's text to its width (fitText).
    void applyPalette();
    // What Qt Charts would elide with "..." at the current width is given room
    // instead: axis labels are never truncated (the plot gives way), a title
    // wider than the chart is wrapped onto lines, and a legend whose entries do
    // not fit in one row is stacked on the right. Runs again on every resize.
    void fitText();
    // The i-th series colour, legible on the palette's base colour.
    QColor seriesColor(int index) const;
    bool darkPalette() const;
    QColor textColor() const;
    QColor mutedColor() const;

signals:
    void zoomReset();
    // The widget's palette changed (and was applied): views re-colour their series.
    void paletteChanged();

protected:
    void changeEvent(QEvent* event) override;

private:
    QString name_;
    QString title_;        // the title as the view set it (the chart holds it wrapped)
    QString wrappedTitle_; // what fitText set
    QChart* chart_;
    ChartView* view_;
    QLabel* note_;
    std::function<QString()> csv_;
};

// CSV field quoting (RFC 4180).
QString csvField(const QString& text);

// The comparison views' layout, filling `view`: the chart on the left (3/5), and on the right the
// `controls` row above `table`, which selects one row at a time.
void layOutChartBesideTable(QWidget* view, ChartFrame* chart, QHBoxLayout* controls, QTableView* table);

} // namespace qs
