#include "widgets/charts/chart_frame.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <vector>

#include <QAbstractAxis>
#include <QApplication>
#include <QBuffer>
#include <QClipboard>
#include <QFile>
#include <QFileDialog>
#include <QFontMetricsF>
#include <QHeaderView>
#include <QHBoxLayout>
#include <QKeyEvent>
#include <QLabel>
#include <QLegend>
#include <QLegendMarker>
#include <QPainter>
#include <QSplitter>
#include <QSvgGenerator>
#include <QTableView>
#include <QToolButton>
#include <QVBoxLayout>
#include <QValueAxis>
#include <QWheelEvent>

#include "core/atomic_file.h"
#include "core/error.h"

namespace qs {

ChartView::ChartView(QChart* chart, QWidget* parent) : QChartView(chart, parent)
{
    setRenderHint(QPainter::Antialiasing);
    setRubberBand(QChartView::RectangleRubberBand);
    setMouseTracking(true);
    setFocusPolicy(Qt::StrongFocus);
}

QPointF ChartView::valueAt(QPoint viewPos) const
{
    const QPointF scenePos = mapToScene(viewPos);
    const QPointF chartPos = chart()->mapFromScene(scenePos);
    const auto series = chart()->series();
    return series.isEmpty() ? QPointF() : chart()->mapToValue(chartPos, series.front());
}

void ChartView::wheelEvent(QWheelEvent* event)
{
    const double steps = event->angleDelta().y() / 120.0;
    if (steps == 0)
        return;
    chart()->zoom(std::pow(1.25, steps));
    event->accept();
}

void ChartView::mousePressEvent(QMouseEvent* event)
{
    const bool pan = event->button() == Qt::MiddleButton ||
                     (event->button() == Qt::LeftButton && (event->modifiers() & Qt::ShiftModifier));
    if (pan) {
        panning_ = true;
        last_ = event->pos();
        event->accept();
        return;
    }
    if (event->button() == Qt::LeftButton) {
        bool accepted = false;
        emit pressed(valueAt(event->pos()), event->pos(), &accepted);
        if (accepted) {
            ownDrag_ = true;
            event->accept();
            return;
        }
    }
    QChartView::mousePressEvent(event);
}

void ChartView::mouseMoveEvent(QMouseEvent* event)
{
    if (panning_) {
        const QPoint d = event->pos() - last_;
        last_ = event->pos();
        chart()->scroll(-d.x(), d.y());
        event->accept();
        return;
    }
    if (ownDrag_) {
        emit dragged(valueAt(event->pos()));
        event->accept();
        return;
    }
    if (chart()->plotArea().contains(chart()->mapFromScene(mapToScene(event->pos()))))
        emit hovered(valueAt(event->pos()), event->globalPosition().toPoint());
    QChartView::mouseMoveEvent(event);
}

void ChartView::mouseReleaseEvent(QMouseEvent* event)
{
    if (panning_ || ownDrag_) {
        if (ownDrag_)
            emit released();
        panning_ = ownDrag_ = false;
        event->accept();
        return;
    }
    QChartView::mouseReleaseEvent(event);
}

void ChartView::keyPressEvent(QKeyEvent* event)
{
    switch (event->key()) {
    case Qt::Key_Left:
        chart()->scroll(-20, 0);
        break;
    case Qt::Key_Right:
        chart()->scroll(20, 0);
        break;
    case Qt::Key_Up:
        chart()->scroll(0, 20);
        break;
    case Qt::Key_Down:
        chart()->scroll(0, -20);
        break;
    case Qt::Key_Plus:
        chart()->zoomIn();
        break;
    case Qt::Key_Minus:
        chart()->zoomOut();
        break;
    default:
        QChartView::keyPressEvent(event);
        return;
    }
    event->accept();
}

ChartFrame::ChartFrame(const QString& name, QWidget* parent)
    : QWidget(parent), name_(name), chart_(new QChart), view_(new ChartView(chart_, this)), note_(new QLabel(this))
{
    chart_->setAnimationOptions(QChart::NoAnimation);
    chart_->legend()->setAlignment(Qt::AlignBottom);
    chart_->setMargins(QMargins(4, 4, 4, 4));
    note_->setWordWrap(true);
    note_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    note_->hide();

    auto* tools = new QHBoxLayout;
    tools->setContentsMargins(0, 0, 0, 0);
    const auto addTool = [&](const QString& text, const QString& tip, auto slot) {
        auto* b = new QToolButton(this);
        b->setText(text);
        b->setToolTip(tip);
        b->setAutoRaise(true);
        connect(b, &QToolButton::clicked, this, slot);
        tools->addWidget(b);
    };
    tools->addStretch();
    addTool(tr("Reset"), tr("Reset zoom and pan (drag a rectangle to zoom, wheel to zoom, Shift+drag to pan)"),
            [this] { resetZoom(); });
    addTool(tr("PNG…"), tr("Export the chart as PNG"), [this] {
        const QString path = QFileDialog::getSaveFileName(this, tr("Export PNG"), name_ + ".png", tr("PNG (*.png)"));
        if (!path.isEmpty() && !exportPng(path))
            setNote(tr("Could not write %1").arg(path));
    });
    addTool(tr("SVG…"), tr("Export the chart as SVG"), [this] {
        const QString path = QFileDialog::getSaveFileName(this, tr("Export SVG"), name_ + ".svg", tr("SVG (*.svg)"));
        if (!path.isEmpty() && !exportSvg(path))
            setNote(tr("Could not write %1").arg(path));
    });
    addTool(tr("Copy CSV"), tr("Copy the chart's data to the clipboard as CSV"), [this] { copyCsv(); });

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->setSpacing(2);
    layout->addLayout(tools);
    layout->addWidget(view_, 1);
    layout->addWidget(note_);
    applyPalette();
    connect(chart_, &QGraphicsWidget::geometryChanged, this, &ChartFrame::fitText);
}

void ChartFrame::setNote(const QString& text)
{
    note_->setText(text);
    note_->setVisible(!text.isEmpty());
}

QString ChartFrame::note() const
{
    return note_->text();
}

void ChartFrame::resetZoom()
{
    chart_->zoomReset();
    emit zoomReset();
}

QImage ChartFrame::renderImage(QSize size) const
{
    if (!size.isValid())
        size = view_->size();
    QImage image(size, QImage::Format_ARGB32_Premultiplied);
    image.fill(palette().color(QPalette::Base));
    const QSize old = view_->size();
    view_->resize(size);
    QPainter painter(&image);
    painter.setRenderHint(QPainter::Antialiasing);
    view_->render(&painter, QRectF(QPointF(0, 0), size), view_->viewport()->rect());
    painter.end();
    view_->resize(old);
    return image;
}

namespace {

// Charts are saved like every other output (core/atomic_file.h): never half-written, nothing left behind.
bool saveAtomically(const QString& path, const QByteArray& bytes)
{
    try {
        writeFileAtomically(QFile::encodeName(path).toStdString(), bytes.constData(), size_t(bytes.size()));
        return true;
    } catch (const Error&) {
        return false;
    }
}

} // namespace

bool ChartFrame::exportPng(const QString& path, QSize size) const
{
    QByteArray bytes;
    QBuffer buffer(&bytes);
    buffer.open(QIODevice::WriteOnly);
    return renderImage(size).save(&buffer, "PNG") && saveAtomically(path, bytes);
}

bool ChartFrame::exportSvg(const QString& path, QSize size) const
{
    if (!size.isValid())
        size = view_->size();
    QByteArray bytes;
    QBuffer buffer(&bytes);
    QSvgGenerator svg;
    svg.setOutputDevice(&buffer);
    svg.setSize(size);
    svg.setViewBox(QRect(QPoint(0, 0), size));
    svg.setTitle(name_);
    const QSize old = view_->size();
    view_->resize(size);
    QPainter painter;
    if (!painter.begin(&svg))
        return false;
    view_->render(&painter, QRectF(QPointF(0, 0), size), view_->viewport()->rect());
    const bool ok = painter.end();
    view_->resize(old);
    return ok && saveAtomically(path, bytes);
}

void ChartFrame::copyCsv() const
{
    QApplication::clipboard()->setText(csv());
}

bool ChartFrame::darkPalette() const
{
    return palette().color(QPalette::Base).lightnessF() < 0.5;
}

QColor ChartFrame::textColor() const
{
    return palette().color(QPalette::Text);
}

QColor ChartFrame::mutedColor() const
{
    QColor c = palette().color(QPalette::Text);
    c.setAlphaF(0.35f);
    return c;
}

QColor ChartFrame::seriesColor(int index) const
{
    // Distinct hues (a colour-blind-safe order); lighter on a dark base.
    static const int hues[] = {210, 28, 140, 350, 275, 50, 185, 320, 95};
    const int hue = hues[size_t(index) % std::size(hues)];
    return darkPalette() ? QColor::fromHsl(hue, 190, 165) : QColor::fromHsl(hue, 200, 95);
}

void ChartFrame::applyPalette()
{
    const QPalette& p = palette();
    const QColor text = p.color(QPalette::Text);
    chart_->setBackgroundBrush(p.color(QPalette::Base));
    chart_->setBackgroundPen(Qt::NoPen);
    chart_->setPlotAreaBackgroundVisible(false);
    chart_->setTitleBrush(text);
    chart_->legend()->setLabelColor(text);
    view_->setBackgroundBrush(p.color(QPalette::Base));
    QColor grid = text;
    grid.setAlphaF(0.15f);
    for (QAbstractAxis* axis : chart_->axes()) {
        axis->setLabelsColor(text);
        axis->setTitleBrush(text);
        axis->setLinePenColor(mutedColor());
        axis->setGridLineColor(grid);
        axis->setMinorGridLineColor(grid);
    }
    fitText();
}

void ChartFrame::fitText()
{
    // Qt Charts measures rich text a little wider than QFontMetrics does (document margins): a tenth to spare.
    const qreal width = 0.9 * (chart_->size().width() - chart_->margins().left() - chart_->margins().right()) - 16;
    if (width <= 40)
        return; // not laid out yet
    // Greedy word wrap of `text` to `room` px, lines joined by <br> (Qt Charts draws titles as rich text).
    auto wrapped = [](const QString& text, const QFont& font, qreal room) {
        QStringList lines;
        const QFontMetricsF fm(font);
        for (const QString& word : text.split(QLatin1Char(' '), Qt::SkipEmptyParts)) {
            if (!lines.isEmpty() && fm.horizontalAdvance(lines.last() + QLatin1Char(' ') + word) <= room)
                lines.last() += QLatin1Char(' ') + word;
            else
                lines << word;
        }
        return lines.join(QStringLiteral("<br>"));
    };
    static const char* const kTitle = "qsTitle";
    static const char* const kWrapped = "qsWrappedTitle";
    for (QAbstractAxis* axis : chart_->axes()) {
        axis->setTruncateLabels(false);
        if (axis->titleText() != axis->property(kWrapped).toString())
            axis->setProperty(kTitle, axis->titleText()); // set by the view since the last fit
        // Qt Charts gives an axis title the chart's length along it, not only the plot's.
        const qreal room = axis->orientation() == Qt::Horizontal ? width : 0.9 * chart_->size().height() - 16;
        if (room <= 40)
            continue;
        const QString text = wrapped(axis->property(kTitle).toString(), axis->titleFont(), room);
        axis->setProperty(kWrapped, text);
        if (axis->titleText() != text)
            axis->setTitleText(text);
    }

    if (chart_->title() != wrappedTitle_)
        title_ = chart_->title(); // set by the view since the last fit
    wrappedTitle_ = wrapped(title_, chart_->titleFont(), width);
    if (chart_->title() != wrappedTitle_)
        chart_->setTitle(wrappedTitle_);
    // An entry that does not fit even stacked shows its whole text as a tooltip.
    chart_->legend()->setShowToolTips(true);

    QLegend* legend = chart_->legend();
    if (!legend->isVisible() || !legend->isAttachedToChart())
        return;
    const QFontMetricsF lfm(legend->font());
    std::vector<qreal> entries; // each entry's width: its marker, gaps and label
    qreal row = 0;
    for (const QLegendMarker* marker : legend->markers())
        if (marker->isVisible()) {
            entries.push_back(lfm.horizontalAdvance(marker->label()) + 1.6 * lfm.height());
            row += entries.back();
        }
    if (entries.empty() || (legend->alignment() != Qt::AlignBottom && legend->alignment() != Qt::AlignRight))
        return;
    // The layout that cuts fewer entries (an estimate: one row shares the width; a stack on the right gets about
    // half of it).
    auto cutAt = [&entries](qreal room) {
        return std::count_if(entries.begin(), entries.end(), [room](qreal e) { return e > room; });
    };
    const auto cutInRow = row <= width ? 0 : cutAt(width / qreal(entries.size()));
    const auto cutStacked = cutAt(0.5 * width);
    // Below 300 px a stack would leave the plot too little: one row, entries elided (their tooltips whole).
    const Qt::Alignment wanted = width >= 300 && cutStacked < cutInRow ? Qt::AlignRight : Qt::AlignBottom;
    if (legend->alignment() != wanted)
        legend->setAlignment(wanted);
}

void ChartFrame::changeEvent(QEvent* event)
{
    if (event->type() == QEvent::PaletteChange) {
        applyPalette();
        emit paletteChanged();
    }
    QWidget::changeEvent(event);
}

QString csvField(const QString& text)
{
    if (!text.contains(',') && !text.contains('"') && !text.contains('\n'))
        return text;
    QString quoted = text;
    quoted.replace('"', "\"\"");
    return '"' + quoted + '"';
}

void layOutChartBesideTable(QWidget* view, ChartFrame* chart, QHBoxLayout* controls, QTableView* table)
{
    table->setSelectionBehavior(QAbstractItemView::SelectRows);
    table->setSelectionMode(QAbstractItemView::SingleSelection);
    table->verticalHeader()->hide();
    table->horizontalHeader()->setStretchLastSection(true);
    auto* right = new QWidget(view);
    auto* rightLayout = new QVBoxLayout(right);
    rightLayout->setContentsMargins(0, 0, 0, 0);
    rightLayout->addLayout(controls);
    rightLayout->addWidget(table, 1);
    auto* split = new QSplitter(Qt::Horizontal, view);
    split->addWidget(chart);
    split->addWidget(right);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 2);
    auto* layout = new QVBoxLayout(view);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(split);
}

} // namespace qs
