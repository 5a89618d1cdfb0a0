#pragma once
// Plain-text output of the CLI's human-readable tables.

#include <string>
#include <vector>

namespace qs::cli {

// `v` through a printf format ("%.2f", "%.4g", ...).
std::string formatNumber(double v, const char* format);

// Rows of cells as lines; each column as wide as its widest cell, two spaces
// apart; columns flagged in `rightAligned` are right-aligned (numbers).
std::string alignedTable(const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& rightAligned);

} // namespace qs::cli
