#pragma once
// The smallest rules that meet a target, in the app (issue 23, part 3): a form
// to run the search (a candidates file, a target such as output_sqnr_db>=30),
// the size-vs-error curve of every point the search evaluated (weight bytes
// against the target's metric, the target as a line, the chosen point
// marked), the points as a table, and "Apply" to set the rules of any point.
// The view asks; the app runs the search as a job and applies the rules.

#include <memory>
#include <optional>

#include <QWidget>

class QLabel;
class QLineEdit;
class QPushButton;
class QScatterSeries;
class QTreeWidget;

namespace qs {

struct RuleSearchResult;
struct SearchCandidates;
class ChartFrame;

class SearchCurveView : public QWidget {
    Q_OBJECT
public:
    explicit SearchCurveView(QWidget* parent = nullptr);

    void setCandidatesFile(const QString& path);
    QString candidatesFile() const;
    void setTargetText(const QString& text);
    QString targetText() const;
    // Whether a search can start now, and why not.
    void setRunEnabled(bool enabled, const QString& why = {});
    // The finished search (null: none); `candidates` label the points.
    void setResult(std::shared_ptr<const RuleSearchResult> result, std::shared_ptr<const SearchCandidates> candidates);
    std::shared_ptr<const RuleSearchResult> result() const { return result_; }
    // A line under the form ("searching…", an error).
    void setStatus(const QString& text);
    QString status() const;

    // Index into result()->points of the selected row (the chosen rules are the "final" point).
    std::optional<size_t> selectedPoint() const;
    void selectPoint(size_t index);
    QTreeWidget* pointTable() const { return points_; }
    ChartFrame* chartFrame() const { return chart_; }
    QPushButton* applyButton() const { return apply_; }
    QPushButton* runButton() const { return run_; }

signals:
    void searchRequested(QString candidatesFile, QString target);
    // Set the rules of point `index` of result()->points.
    void pointApplied(size_t index);

private:
    void drawChart();

    std::shared_ptr<const RuleSearchResult> result_;
    std::shared_ptr<const SearchCandidates> candidates_;
    QLineEdit* candidatesFile_;
    QLineEdit* target_;
    QPushButton* browse_;
    QPushButton* run_;
    QLabel* status_;
    ChartFrame* chart_;
    QTreeWidget* points_;
    QPushButton* apply_;
};

} // namespace qs
