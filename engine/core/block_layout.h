#pragma once
// How a tensor is split into groups of elements that share one scale (and
// zero point). Every granularity is a block shape: along each axis, how many
// consecutive indices fall into one group.
//   per-tensor:          block = shape                      (one group)
//   per-channel (axis a): block[a] = 1, others = shape     (shape[a] groups)
//   tiled:               block[a] = 1, block[t] = tile      (shape[a] * ceil(shape[t]/tile) groups)
//   microscaling:        block[last] = 32, others = 1
// Groups are numbered in row-major order of the grid shape ceil(shape / block),
// which is also the shape of the scale tensor: it broadcasts to the tensor
// after repeating each grid index block[i] times (ONNX blocked quantization).

#include <cstdint>
#include <optional>
#include <string>

#include "core/tensor.h"

namespace qs {

struct BlockLayout {
    Shape shape; // the tensor's shape
    Shape block; // elements per group along each axis, 1 <= block[i] <= max(shape[i], 1)

    static BlockLayout perTensor(const Shape& shape);
    static BlockLayout perChannel(const Shape& shape, int channelAxis);
    // Per-channel along channelAxis (or none when channelAxis < 0) and split into
    // tiles of tileSize elements along tileAxis. The last tile may be shorter.
    static BlockLayout tiled(const Shape& shape, int channelAxis, int tileAxis, int64_t tileSize);
    // Blocks of blockSize along `axis`, every other index its own group (OCP MX, nvfp4).
    static BlockLayout blocks(const Shape& shape, int axis, int64_t blockSize);

    Shape gridShape() const;    // ceil(shape / block) per axis
    int64_t groupCount() const; // product of gridShape()
    // Group index of the element at row-major flat index `flat` (reference implementation).
    int64_t groupOf(int64_t flat) const;
    bool isPerTensor() const { return groupCount() == 1; }
    // "per_tensor", "per_channel(axis=0)", "tile(axis=1, size=128)", ...
    std::string describe() const;
};

// Resolves a rule's tile_size against the length of the axis it tiles:
// an integer >= 1 is the tile length; a value in (0, 1) means 1/tile_count, so
// 0.25 splits the axis into 4 equal tiles and requires the length be divisible.
// Throws Error naming the axis length when the value cannot be honoured.
int64_t resolveTileSize(double tileSize, int64_t axisLength);

// Normalises a possibly negative axis against rank; throws Error when out of range.
int normalizeAxis(int axis, int rank, const char* what);

} // namespace qs
