#include "gui/synthetic_data_source.h"

#include "core/error.h"

namespace qs {

SyntheticDataSource::SyntheticDataSource(const Model& model, int64_t samples, uint64_t seed,
                                         const DataSourceOptions& options)
    : DataSource("<synthetic>", options), seed_(seed), random_(seed)
{
    if (samples < 1)
        throw Error("synthetic data: the number of samples must be at least 1");
    std::vector<DataArray> arrays;
    for (const ValueInfo& input : model.inputs) {
        if (input.dtype != DType::F32)
            throw Error("synthetic data: model input '" + input.name + "' is " + input.typeName +
                        "; only float32 inputs can be synthesised");
        if (!input.shape || input.shape->empty())
            throw Error("synthetic data: model input '" + input.name + "' has no known shape");
        DataArray a;
        a.name = a.fileName = input.name;
        a.dtype = DType::F32;
        a.rows = samples;
        for (size_t d = 1; d < input.shape->size(); ++d) {
            const Dim& dim = (*input.shape)[d];
            if (!dim.isFixed())
                throw Error("synthetic data: model input '" + input.name + "' has a symbolic dimension " +
                            std::to_string(d) + " (" + dim.toString() + "); use a data file");
            a.rowShape.push_back(*dim.size);
        }
        arrays.push_back(std::move(a));
    }
    setArrays(std::move(arrays), std::nullopt);
}

Tensor SyntheticDataSource::readRows(size_t index, int64_t count)
{
    Shape shape{count};
    const DataArray& a = inputs()[index];
    shape.insert(shape.end(), a.rowShape.begin(), a.rowShape.end());
    Tensor t(DType::F32, shape);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float& v : t.mutableValues<float>())
        v = normal(random_);
    return t;
}

void SyntheticDataSource::restart()
{
    random_.seed(seed_);
}

} // namespace qs
