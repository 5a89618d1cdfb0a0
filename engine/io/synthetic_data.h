#pragma once
// Synthetic model inputs: seeded values shaped like a model's inputs, for
// bench-model's timing runs, `run --shape` smoke runs and the app's synthetic
// calibration data (shown there with a warning: ranges calibrated on it say
// nothing about real data).
//
// Values by element type: floats are standard normal; integers are ids drawn
// uniformly from [0, V), where V is the row count of the embedding table (a
// Gather on a constant table) the input feeds, found through the graph
// (syntheticIdBound); bools are 0 or 1.
//
// Shapes: the input's declared fixed dimensions; a dynamic axis 0 takes the
// batch size; any other dynamic dimension needs a shape from the caller
// (syntheticShape), else an Error names the input and its dynamic dimensions.

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>

#include "core/tensor.h"
#include "graph/model.h"
#include "io/data_source.h"

namespace qs {

// The id range of an integer input that feeds no embedding table: [0, 10).
inline constexpr int64_t kDefaultSyntheticIdBound = 10;

// The exclusive upper bound of ids integer input `input` may hold: the
// smallest size, along the gathered axis, of a constant table a Gather reads
// with it as indices — directly or through Cast, Reshape, Squeeze, Unsqueeze,
// Flatten or Identity. kDefaultSyntheticIdBound when it feeds none.
int64_t syntheticIdBound(const Model& model, const std::string& input);

// The shape synthetic values of `input` take. `given` (a user's full shape,
// axis 0 included) must have the declared rank and agree with every fixed
// dimension. Without it: fixed dimensions as declared, a dynamic axis 0 takes
// `batch`, and any other dynamic (symbolic or unknown) dimension is an Error
// naming `source`, the input and those dimensions, ending with `remedy` (what
// the caller offers to give a shape). An input of unknown rank needs `given`.
Shape syntheticShape(const ValueInfo& input, const std::optional<Shape>& given, int64_t batch,
                     const std::string& source, const std::string& remedy);

// Seeded values of `input`'s element type (rules above) in `shape`; integer
// ids in [0, idBound), capped at the type's range. Throws Error naming the
// input when its element type has no tensor dtype.
Tensor syntheticTensor(const ValueInfo& input, const Shape& shape, int64_t idBound, std::mt19937_64& random);

// A DataSource of `samples` synthetic rows for every model input, drawn from
// `seed` (rewind() repeats them). `shapes` gives full shapes (axis 0 is
// ignored: rows are batches of options.batchSize) of inputs with dynamic
// dimensions. Throws Error naming the input that cannot be synthesised.
class SyntheticDataSource final : public DataSource {
public:
    SyntheticDataSource(const Model& model, int64_t samples, uint64_t seed, const DataSourceOptions& options,
                        const std::map<std::string, Shape>& shapes = {});

protected:
    Tensor readRows(size_t index, int64_t count) override;
    void restart() override;

private:
    std::vector<ValueInfo> declared_; // the model's inputs, in order
    std::vector<int64_t> idBounds_;   // per input: syntheticIdBound
    uint64_t seed_;
    std::mt19937_64 random_;
};

} // namespace qs
