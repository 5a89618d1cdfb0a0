#include "runtime/broadcast.h"

namespace qs {

Shape broadcastShapes(const Shape& a, const Shape& b, const std::string& what)
{
    const size_t rank = std::max(a.size(), b.size());
    Shape out(rank, 1);
    for (size_t i = 0; i < rank; ++i) {
        const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
        const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
        if (da != db && da != 1 && db != 1)
            throw Error(what + ": shapes " + shapeToString(a) + " and " + shapeToString(b) + " do not broadcast");
        out[i] = da == 1 ? db : da;
    }
    return out;
}

Shape broadcastStrides(const Shape& shape, const Shape& target)
{
    Shape strides(target.size(), 0);
    const Shape own = rowMajorStrides(shape);
    const size_t lead = target.size() - shape.size();
    for (size_t i = 0; i < shape.size(); ++i)
        strides[lead + i] = shape[i] == 1 ? 0 : own[i];
    return strides;
}

} // namespace qs
