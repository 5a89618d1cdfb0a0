#include "io/synthetic_data.h"

#include <algorithm>
#include <limits>
#include <set>

#include "core/error.h"
#include "core/half.h"

namespace qs {

namespace {

// Ops an id tensor passes through unchanged in value on its way to a Gather.
bool keepsIds(const std::string& opType)
{
    static const std::set<std::string> ops{"Cast", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity"};
    return ops.count(opType) != 0;
}

// The size of the gathered axis of a Gather reading constant data with `value` as indices.
std::optional<int64_t> gatheredRows(const Model& model, const Node& node)
{
    const Tensor* table = node.inputs.empty() ? nullptr : model.initializer(node.inputs[0]);
    if (!table || table->shape().empty())
        return std::nullopt;
    const int64_t rank = int64_t(table->shape().size());
    int64_t axis = node.intAttribute("axis", 0);
    axis = axis < 0 ? axis + rank : axis;
    if (axis < 0 || axis >= rank)
        return std::nullopt;
    return table->shape()[size_t(axis)];
}

std::string dimsText(const std::vector<Dim>& dims, const std::vector<size_t>& axes)
{
    std::string s;
    for (size_t i = 0; i < axes.size(); ++i)
        s += (i == 0                 ? ""
              : i + 1 == axes.size() ? " and "
                                     : ", ") +
             std::to_string(axes[i]) + " (" + dims[axes[i]].toString() + ")";
    return s;
}

int64_t integerMax(DType t)
{
    switch (t) {
    case DType::I8:
        return std::numeric_limits<int8_t>::max();
    case DType::U8:
        return std::numeric_limits<uint8_t>::max();
    case DType::I16:
        return std::numeric_limits<int16_t>::max();
    case DType::U16:
        return std::numeric_limits<uint16_t>::max();
    case DType::I32:
        return std::numeric_limits<int32_t>::max();
    case DType::U32:
        return std::numeric_limits<uint32_t>::max();
    default:
        return std::numeric_limits<int64_t>::max();
    }
}

template <class T> void fillIds(Tensor& t, int64_t bound, std::mt19937_64& random)
{
    std::uniform_int_distribution<int64_t> ids(0, bound - 1);
    for (T& v : t.mutableValues<T>())
        v = T(ids(random));
}

} // namespace

int64_t syntheticIdBound(const Model& model, const std::string& input)
{
    std::optional<int64_t> bound;
    std::vector<std::string> values{input};
    std::set<std::string> seen{input};
    while (!values.empty()) {
        const std::string value = values.back();
        values.pop_back();
        for (const Node& node : model.nodes) {
            for (size_t i = 0; i < node.inputs.size(); ++i) {
                if (node.inputs[i] != value)
                    continue;
                if (node.opType == "Gather" && node.domain.empty() && i == 1) {
                    if (const auto rows = gatheredRows(model, node); rows && *rows > 0)
                        bound = std::min(bound.value_or(*rows), *rows);
                } else if (keepsIds(node.opType) && node.domain.empty() && i == 0 && !node.outputs.empty() &&
                           seen.insert(node.outputs[0]).second) {
                    values.push_back(node.outputs[0]);
                }
            }
        }
    }
    return bound.value_or(kDefaultSyntheticIdBound);
}

Shape syntheticShape(const ValueInfo& input, const std::optional<Shape>& given, int64_t batch,
                     const std::string& source, const std::string& remedy)
{
    const std::string what = source + ": input '" + input.name + "' (" + input.toString() + ")";
    if (given) {
        if (input.shape && input.shape->size() != given->size())
            throw Error(what + " has rank " + std::to_string(input.shape->size()) + ", the shape given for it " +
                        shapeToString(*given) + " has rank " + std::to_string(given->size()));
        for (size_t axis = 0; input.shape && axis < given->size(); ++axis)
            if ((*input.shape)[axis].isFixed() && *(*input.shape)[axis].size != (*given)[axis])
                throw Error(what + ": the shape given for it, " + shapeToString(*given) + ", has " +
                            std::to_string((*given)[axis]) + " along axis " + std::to_string(axis) +
                            ", which is fixed at " + std::to_string(*(*input.shape)[axis].size));
        for (int64_t d : *given)
            if (d < 1)
                throw Error(what + ": the shape given for it, " + shapeToString(*given) + ", has a dimension < 1");
        return *given;
    }
    if (!input.shape)
        throw Error(what + " has no declared rank, so its shape is unknown; " + remedy);
    const std::vector<Dim>& dims = *input.shape;
    Shape shape;
    std::vector<size_t> dynamic;
    for (size_t axis = 0; axis < dims.size(); ++axis) {
        if (dims[axis].isFixed())
            shape.push_back(*dims[axis].size);
        else if (axis == 0)
            shape.push_back(batch);
        else
            dynamic.push_back(axis);
    }
    if (!dynamic.empty())
        throw Error(what + " has dynamic " + (dynamic.size() == 1 ? "dimension " : "dimensions ") +
                    dimsText(dims, dynamic) + "; " + remedy);
    return shape;
}

Tensor syntheticTensor(const ValueInfo& input, const Shape& shape, int64_t idBound, std::mt19937_64& random)
{
    if (!input.dtype)
        throw Error("input '" + input.name + "' is of type " + input.typeName + ", which cannot be synthesised");
    const DType dtype = *input.dtype;
    Tensor t(dtype, shape);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    switch (dtype) {
    case DType::F32:
        for (float& v : t.mutableValues<float>())
            v = normal(random);
        break;
    case DType::F64:
        for (double& v : t.mutableValues<double>())
            v = normal(random);
        break;
    case DType::F16:
        for (uint16_t& v : t.mutableValues<uint16_t>())
            v = floatToFp16(normal(random));
        break;
    case DType::BF16:
        for (uint16_t& v : t.mutableValues<uint16_t>())
            v = floatToBf16(normal(random));
        break;
    case DType::Bool:
        fillIds<uint8_t>(t, 2, random);
        break;
    default: {
        const int64_t bound = std::clamp<int64_t>(idBound, 1, integerMax(dtype));
        switch (dtype) {
        case DType::I8:
            fillIds<int8_t>(t, bound, random);
            break;
        case DType::U8:
            fillIds<uint8_t>(t, bound, random);
            break;
        case DType::I16:
            fillIds<int16_t>(t, bound, random);
            break;
        case DType::U16:
            fillIds<uint16_t>(t, bound, random);
            break;
        case DType::I32:
            fillIds<int32_t>(t, bound, random);
            break;
        case DType::U32:
            fillIds<uint32_t>(t, bound, random);
            break;
        case DType::U64:
            fillIds<uint64_t>(t, bound, random);
            break;
        default:
            fillIds<int64_t>(t, bound, random);
            break;
        }
    }
    }
    return t;
}

SyntheticDataSource::SyntheticDataSource(const Model& model, int64_t samples, uint64_t seed,
                                         const DataSourceOptions& options, const std::map<std::string, Shape>& shapes)
    : DataSource("<synthetic>", options), seed_(seed), random_(seed)
{
    if (samples < 1)
        throw Error("synthetic data: the number of samples must be at least 1");
    if (model.inputs.empty())
        throw Error("synthetic data: the model (" + model.sourcePath.string() + ") declares no inputs to feed");
    std::vector<DataArray> arrays;
    for (const ValueInfo& input : model.inputs) {
        const auto given = shapes.find(input.name);
        const Shape shape = syntheticShape(
            input, given == shapes.end() ? std::nullopt : std::optional<Shape>(given->second), options.batchSize,
            "synthetic data", "synthetic data needs a shape for it: use a data file with arrays of its shape");
        if (shape.empty())
            throw Error("synthetic data: input '" + input.name + "' is 0-d: data needs rows along axis 0");
        if (!input.dtype)
            throw Error("synthetic data: input '" + input.name + "' is of type " + input.typeName +
                        ", which cannot be synthesised");
        DataArray a;
        a.name = a.fileName = input.name;
        a.dtype = *input.dtype;
        a.rows = samples;
        a.rowShape.assign(shape.begin() + 1, shape.end());
        arrays.push_back(std::move(a));
        declared_.push_back(input);
        idBounds_.push_back(syntheticIdBound(model, input.name));
    }
    setArrays(std::move(arrays), std::nullopt);
}

Tensor SyntheticDataSource::readRows(size_t index, int64_t count)
{
    Shape shape{count};
    const DataArray& a = inputs()[index];
    shape.insert(shape.end(), a.rowShape.begin(), a.rowShape.end());
    return syntheticTensor(declared_[index], shape, idBounds_[index], random_);
}

void SyntheticDataSource::restart()
{
    random_.seed(seed_);
}

} // namespace qs
