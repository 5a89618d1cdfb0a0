#include "core/block_layout.h"

#include <cmath>

namespace qs {

int normalizeAxis(int axis, int rank, const char* what)
{
    const int a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a >= rank)
        throw Error(std::string(what) + " " + std::to_string(axis) + " is out of range for a tensor of rank " +
                    std::to_string(rank));
    return a;
}

BlockLayout BlockLayout::perTensor(const Shape& shape)
{
    BlockLayout l{shape, shape};
    for (auto& b : l.block)
        b = std::max<int64_t>(b, 1);
    return l;
}

BlockLayout BlockLayout::perChannel(const Shape& shape, int channelAxis)
{
    BlockLayout l = perTensor(shape);
    l.block[size_t(normalizeAxis(channelAxis, int(shape.size()), "channel axis"))] = 1;
    return l;
}

BlockLayout BlockLayout::tiled(const Shape& shape, int channelAxis, int tileAxis, int64_t tileSize)
{
    BlockLayout l = perTensor(shape);
    const int t = normalizeAxis(tileAxis, int(shape.size()), "tile axis");
    if (channelAxis >= 0) {
        const int c = normalizeAxis(channelAxis, int(shape.size()), "channel axis");
        if (c == t)
            throw Error("the tile axis must differ from the channel axis (both are " + std::to_string(c) + ")");
        l.block[size_t(c)] = 1;
    }
    if (tileSize < 1)
        throw Error("tile size must be at least 1, got " + std::to_string(tileSize));
    l.block[size_t(t)] = std::min<int64_t>(tileSize, std::max<int64_t>(shape[size_t(t)], 1));
    return l;
}

BlockLayout BlockLayout::blocks(const Shape& shape, int axis, int64_t blockSize)
{
    BlockLayout l{shape, Shape(shape.size(), 1)};
    const int a = normalizeAxis(axis, int(shape.size()), "block axis");
    if (blockSize < 1)
        throw Error("block size must be at least 1, got " + std::to_string(blockSize));
    l.block[size_t(a)] = std::min<int64_t>(blockSize, std::max<int64_t>(shape[size_t(a)], 1));
    return l;
}

Shape BlockLayout::gridShape() const
{
    Shape g(shape.size());
    for (size_t i = 0; i < shape.size(); ++i)
        g[i] = (shape[i] + block[i] - 1) / block[i];
    return g;
}

int64_t BlockLayout::groupCount() const { return shapeElementCount(gridShape()); }

int64_t BlockLayout::groupOf(int64_t flat) const
{
    const Shape grid = gridShape();
    int64_t group = 0, gridStride = 1;
    for (size_t i = shape.size(); i-- > 0;) {
        const int64_t idx = flat % shape[i];
        flat /= shape[i];
        group += (idx / block[i]) * gridStride;
        gridStride *= grid[i];
    }
    return group;
}

std::string BlockLayout::describe() const
{
    if (isPerTensor())
        return "per_tensor";
    std::string perIndex, tiles;
    for (size_t i = 0; i < shape.size(); ++i) {
        if (block[i] == 1 && shape[i] > 1) {
            if (!perIndex.empty())
                perIndex += ',';
            perIndex += std::to_string(i);
        } else if (block[i] < shape[i]) {
            if (!tiles.empty())
                tiles += ", ";
            tiles += "axis ";
            tiles += std::to_string(i);
            tiles += " size ";
            tiles += std::to_string(block[i]);
        }
    }
    if (tiles.empty())
        return "per_channel(axis=" + perIndex + ")";
    return "tile(" + tiles + (perIndex.empty() ? "" : "; per-index axes " + perIndex) + ")";
}

int64_t resolveTileSize(double tileSize, int64_t axisLength)
{
    if (!(tileSize > 0) || !std::isfinite(tileSize))
        throw Error("tile_size must be a positive number, got " + std::to_string(tileSize));
    if (tileSize >= 1) {
        if (tileSize != std::floor(tileSize))
            throw Error("tile_size " + std::to_string(tileSize) + " must be an integer when it is 1 or more");
        return int64_t(tileSize);
    }
    const double count = 1.0 / tileSize;
    const int64_t tiles = int64_t(std::llround(count));
    if (std::abs(count - double(tiles)) > 1e-6 * count)
        throw Error("tile_size " + std::to_string(tileSize) + " is not 1/n for an integer tile count n");
    if (axisLength % tiles != 0)
        throw Error("tile_size " + std::to_string(tileSize) + " asks for " + std::to_string(tiles) +
                    " tiles, which do not divide the axis length " + std::to_string(axisLength));
    return axisLength / tiles;
}

} // namespace qs
