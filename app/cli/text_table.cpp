#include "cli/text_table.h"

#include <algorithm>
#include <cstdio>

namespace qs::cli {

std::string formatNumber(double v, const char* format)
{
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, format, v);
    return buffer;
}

std::string alignedTable(const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& rightAligned)
{
    if (rows.empty())
        return {};
    std::vector<size_t> width(rows.front().size(), 0);
    for (const auto& row : rows)
        for (size_t c = 0; c < row.size(); ++c)
            width[c] = std::max(width[c], row[c].size());
    std::string text;
    for (const auto& row : rows) {
        std::string line;
        for (size_t c = 0; c < row.size(); ++c) {
            const std::string pad(width[c] - row[c].size(), ' ');
            line += rightAligned[c] ? pad + row[c] : row[c] + (c + 1 < row.size() ? pad : "");
            if (c + 1 < row.size())
                line += "  ";
        }
        text += line + "\n";
    }
    return text;
}

} // namespace qs::cli
