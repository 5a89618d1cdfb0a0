#include "io/data_source.h"

#include <algorithm>

#include "core/error.h"

namespace qs {

namespace {

std::string namesOf(const std::vector<DataArray>& arrays)
{
    std::string s;
    for (const DataArray& a : arrays)
        s += (s.empty() ? "'" : ", '") + a.fileName + "'";
    return s.empty() ? "none" : s;
}

std::string inputNames(const Model& model)
{
    std::string s;
    for (const ValueInfo& v : model.inputs)
        s += (s.empty() ? "'" : ", '") + v.name + "'";
    return s;
}

// The array's dtype and row shape against the input's declared type.
void checkAgainstInput(const DataArray& array, const ValueInfo& input, const std::string& source)
{
    const std::string what = source + ": array '" + array.fileName + "' for model input '" + input.name + "'";
    if (input.dtype && *input.dtype != array.dtype)
        throw Error(what + " is " + std::string(dtypeName(array.dtype)) + ", the input takes " +
                    std::string(dtypeName(*input.dtype)) + " (convert the array, e.g. numpy's astype)");
    if (!input.shape)
        return;
    const std::vector<Dim>& dims = *input.shape;
    Shape shape{-1};
    shape.insert(shape.end(), array.rowShape.begin(), array.rowShape.end());
    if (dims.size() != shape.size())
        throw Error(what + " has rank " + std::to_string(shape.size()) + ", the input " + input.toString() +
                    " has rank " + std::to_string(dims.size()));
    for (size_t axis = 1; axis < dims.size(); ++axis)
        if (dims[axis].isFixed() && *dims[axis].size != shape[axis])
            throw Error(what + " has rows of shape " + shapeToString(array.rowShape) + ", the input is " +
                        input.toString() + " (axis " + std::to_string(axis) + " must be " +
                        std::to_string(*dims[axis].size) + ")");
}

} // namespace

DataSource::DataSource(std::filesystem::path path, DataSourceOptions options)
    : options_(std::move(options)), path_(std::move(path))
{
    if (options_.batchSize < 1)
        throw Error(path_.string() + ": batch size must be at least 1, not " + std::to_string(options_.batchSize));
}

int64_t DataSource::batchCount() const
{
    const int64_t full = rowCount_ / options_.batchSize;
    return options_.dropLast || options_.exactBatches || rowCount_ % options_.batchSize == 0 ? full : full + 1;
}

void DataSource::setArrays(std::vector<DataArray> arrays, std::optional<DataArray> labels)
{
    std::vector<const DataArray*> all;
    for (const DataArray& a : arrays)
        all.push_back(&a);
    if (labels)
        all.push_back(&*labels);
    if (arrays.empty())
        throw Error(path_.string() + ": holds no input arrays");
    for (size_t i = 1; i < all.size(); ++i)
        if (all[i]->rows != all[0]->rows)
            throw Error(path_.string() + ": arrays '" + all[0]->fileName + "' and '" + all[i]->fileName +
                        "' have different row counts (" + std::to_string(all[0]->rows) + " and " +
                        std::to_string(all[i]->rows) + " along axis 0)");
    if (options_.exactBatches && all[0]->rows < options_.batchSize)
        throw Error(path_.string() + ": " + std::to_string(all[0]->rows) + " rows, fewer than one batch: the model " +
                    "takes batches of exactly " + std::to_string(options_.batchSize) +
                    " rows (its inputs fix the batch dimension)");
    inputs_ = std::move(arrays);
    labels_ = std::move(labels);
    rowCount_ = inputs_[0].rows;
}

std::optional<Batch> DataSource::next()
{
    const int64_t rows = std::min(options_.batchSize, rowCount_ - position_);
    if (rows <= 0 || ((options_.dropLast || options_.exactBatches) && rows < options_.batchSize))
        return std::nullopt;
    Batch batch;
    batch.firstRow = position_;
    batch.rows = rows;
    for (size_t i = 0; i < inputs_.size(); ++i)
        batch.inputs.emplace(inputs_[i].name, readRows(i, rows));
    if (labels_)
        batch.labels = readRows(inputs_.size(), rows);
    position_ += rows;
    return batch;
}

void DataSource::rewind()
{
    restart();
    position_ = 0;
}

DataSourceOptions BatchSizing::apply(DataSourceOptions base) const
{
    base.batchSize = batchSize;
    base.exactBatches = fixed();
    return base;
}

BatchSizing batchSizingFor(const Model& model, std::optional<int64_t> requested, int64_t preferred)
{
    const std::string file = model.sourcePath.string();
    const ValueInfo* fixedBy = nullptr;
    for (const ValueInfo& input : model.inputs) {
        if (!input.shape || input.shape->empty() || !input.shape->front().isFixed())
            continue;
        if (fixedBy && *fixedBy->shape->front().size != *input.shape->front().size)
            throw Error(file + ": inputs '" + fixedBy->name + "' (" + fixedBy->toString() + ") and '" + input.name +
                        "' (" + input.toString() + ") fix different sizes along axis 0; data batches feed every " +
                        "input the same rows");
        fixedBy = fixedBy ? fixedBy : &input;
    }
    BatchSizing sizing;
    if (fixedBy && *fixedBy->shape->front().size >= 1) {
        sizing.batchSize = *fixedBy->shape->front().size;
        sizing.fixedBy = fixedBy->name;
        if (requested && *requested != sizing.batchSize)
            throw Error(file + ": input '" + fixedBy->name + "' (" + fixedBy->toString() +
                        ") takes batches of exactly " + std::to_string(sizing.batchSize) +
                        " (its axis 0 is fixed); a batch size of " + std::to_string(*requested) +
                        " cannot be used (leave it out to use " + std::to_string(sizing.batchSize) + ")");
        return sizing;
    }
    sizing.batchSize = requested.value_or(preferred);
    if (sizing.batchSize < 1)
        throw Error(file + ": the batch size must be at least 1, not " + std::to_string(sizing.batchSize));
    return sizing;
}

std::vector<DataArray> matchModelInputs(const std::vector<DataArray>& found, const Model& model,
                                        const std::string& source)
{
    if (model.inputs.empty())
        throw Error(source + ": the model (" + model.sourcePath.string() +
                    ") declares no inputs to feed (a weights-only checkpoint cannot take data)");
    std::vector<DataArray> matched;
    if (model.inputs.size() == 1 && found.size() == 1) { // one input takes the one array, whatever its name
        matched.push_back(found[0]);
        matched[0].name = model.inputs[0].name;
    } else {
        for (const ValueInfo& input : model.inputs) {
            const auto it =
                std::find_if(found.begin(), found.end(), [&](const DataArray& a) { return a.name == input.name; });
            if (it == found.end())
                throw Error(source + ": no array for model input '" + input.name + "' (the file holds " +
                            namesOf(found) + "; the model's inputs are " + inputNames(model) + ")");
            matched.push_back(*it);
        }
        for (const DataArray& a : found)
            if (std::none_of(model.inputs.begin(), model.inputs.end(),
                             [&](const ValueInfo& v) { return v.name == a.name; }))
                throw Error(source + ": array '" + a.fileName + "' is not an input of the model (its inputs are " +
                            inputNames(model) + ")");
    }
    for (size_t i = 0; i < matched.size(); ++i)
        checkAgainstInput(matched[i], model.inputs[i], source);
    return matched;
}

} // namespace qs
