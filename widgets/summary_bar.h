#pragma once
// The figures a user came for, always in view (issue 23, part 4): float and
// quantized top-1 (when the data has labels), top-1 agreement with float,
// output SQNR, perplexity for causal language models, and the weight bytes
// before and after. summaryFigures() reads them from an exploration (no
// computation: the evaluation and the byte totals are results of jobs);
// SummaryBar shows them in one row and marks what is of older rules stale.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <QWidget>

#include "quantization/weight_bytes.h"

class QLabel;

namespace qs {

class Exploration;

struct SummaryFigures {
    std::optional<double> floatTop1, quantizedTop1;           // fractions, with labels
    std::optional<double> top1Agreement;                      // fraction of rows whose quantized top-1 is float's
    std::vector<std::pair<std::string, double>> outputSqnrDb; // per graph output
    std::optional<double> floatPerplexity, quantizedPerplexity;
    std::optional<WeightBytes> weightBytes;
    bool evaluated = false;        // an evaluation exists (current or not)
    bool evaluationStale = false;  // the evaluation is of other rules or data
    bool weightBytesStale = false; // the byte totals are of other rules
};

// The figures of `x`'s evaluation; `bytes` are the totals of the weights of
// generation `bytesGeneration` (none: not computed yet).
SummaryFigures summaryFigures(const Exploration& x, const std::optional<WeightBytes>& bytes, uint64_t bytesGeneration);

// "1.21 MB", "310.4 KB", "512 B" (powers of 1024, as file managers show them).
QString byteSizeText(int64_t bytes);

class SummaryBar : public QWidget {
    Q_OBJECT
public:
    explicit SummaryBar(QWidget* parent = nullptr);

    void setFigures(const SummaryFigures& figures);
    const SummaryFigures& figures() const { return figures_; }
    // The row as plain text ("Top-1 98.00% → 97.50% · ..."), for tests and the clipboard.
    QString text() const;
    bool isStale() const { return figures_.evaluationStale || figures_.weightBytesStale; }

private:
    SummaryFigures figures_;
    QLabel* accuracy_;
    QLabel* agreement_;
    QLabel* sqnr_;
    QLabel* perplexity_;
    QLabel* bytes_;
    QLabel* stale_;
};

} // namespace qs
