#pragma once
// A against B (issue 23, part 2): "Keep as A" holds the current results; the
// rules as they are now are B. The view shows the comparison the app computes
// off the GUI thread (session/rule_comparison.h): the model-level figures of
// both sides (output SQNR, top-1, agreement, perplexity, weight bytes), a
// sortable per-layer table of the differences B − A, and a chart of the
// per-layer Δ SQNR. It asks; the app keeps A and computes.

#include <memory>

#include <QWidget>

class QLabel;
class QPushButton;
class QSortFilterProxyModel;
class QTableView;

namespace qs {

struct RuleComparison;
class ChartFrame;
class RuleComparisonModel;

class RuleComparisonView : public QWidget {
    Q_OBJECT
public:
    explicit RuleComparisonView(QWidget* parent = nullptr);

    // What A is ("w8a8_per_channel.json, kept 10:42"); empty: no A kept.
    void setADescription(const QString& text);
    // The comparison of A with the current rules (null: none yet); `stale`
    // while a newer one is being computed.
    void setComparison(std::shared_ptr<const RuleComparison> comparison, bool stale = false);
    void setKeepEnabled(bool enabled, const QString& why = {});

    RuleComparisonModel* model() const { return model_; }
    QSortFilterProxyModel* proxy() const { return proxy_; }
    QTableView* table() const { return table_; }
    ChartFrame* chartFrame() const { return chart_; }
    QPushButton* keepButton() const { return keep_; }
    // The model-level figures as shown (plain text), for tests.
    QString figuresText() const;

signals:
    void keepAsARequested();
    void clearARequested();

private:
    void drawChart();

    QPushButton* keep_;
    QPushButton* clear_;
    QLabel* sides_;
    QLabel* figures_;
    RuleComparisonModel* model_;
    QSortFilterProxyModel* proxy_;
    QTableView* table_;
    ChartFrame* chart_;
};

} // namespace qs
