#include "cli/input_shapes.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <vector>

#include "core/error.h"
#include "io/data_source.h"

namespace qs::cli {

std::map<std::string, Shape> shapeOptions(const Arguments& args, const Model& model, const std::string& modelFile)
{
    std::map<std::string, Shape> shapes;
    for (const std::string& spec : args.values("--shape")) {
        const size_t eq = spec.rfind('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
            throw UsageError("--shape takes NAME=AxBxC (e.g. x=1x3x48x320), got '" + spec + "'");
        const std::string name = spec.substr(0, eq);
        Shape shape;
        int64_t elements = 1;
        for (size_t start = eq + 1;;) {
            const size_t end = std::min(spec.find('x', start), spec.size());
            const std::string text = spec.substr(start, end - start);
            errno = 0;
            char* stop = nullptr;
            const long long size = std::strtoll(text.c_str(), &stop, 10);
            if (text.empty() || *stop != '\0' || errno == ERANGE || size < 1)
                throw UsageError("--shape " + spec + ": '" + text + "' is not a size >= 1 (the shape is AxBxC)");
            shape.push_back(size);
            if (size > kMaxShapeElements / elements)
                throw Error("--shape " + spec + ": more than " + std::to_string(kMaxShapeElements) +
                            " elements (1 GiB of float32) in one input");
            elements *= size;
            if (end == spec.size())
                break;
            start = end + 1;
        }
        if (std::none_of(model.inputs.begin(), model.inputs.end(),
                         [&](const ValueInfo& v) { return v.name == name; })) {
            std::string names;
            for (const ValueInfo& v : model.inputs)
                names += (names.empty() ? "'" : ", '") + v.name + "'";
            throw Error("--shape " + spec + ": " + modelFile + " has no input '" + name + "'; its inputs: " + names);
        }
        if (!shapes.emplace(name, std::move(shape)).second)
            throw UsageError("--shape " + name + " given twice");
    }
    return shapes;
}

std::optional<int64_t> batchSizeArgument(const Arguments& args)
{
    return args.integer("--batch-size", 1, int64_t(1) << 20);
}

BatchSizing cliBatchSizing(const Model& model, std::optional<int64_t> requested, int64_t preferred)
{
    try {
        return batchSizingFor(model, requested, preferred);
    } catch (const Error& e) {
        if (!requested)
            throw;
        throw Error("--batch-size " + std::to_string(*requested) + ": " + e.what());
    }
}

std::string shapeExample(const ValueInfo& input, int64_t batch)
{
    std::string example;
    for (size_t axis = 0; input.shape && axis < input.shape->size(); ++axis) {
        const Dim& d = (*input.shape)[axis];
        example += axis ? "x" : "";
        example += d.isFixed() ? std::to_string(*d.size)
                               : (axis == 0 ? std::to_string(batch) : "<" + (d.isSymbolic() ? d.symbol : "?") + ">");
    }
    return input.name + "=" + (example.empty() ? "AxBxC" : example);
}

std::string shapeRemedy(const ValueInfo& input, int64_t batch)
{
    return "give --shape " + shapeExample(input, batch) + " (a size for every axis)";
}

std::string dynamicDimsText(const ValueInfo& input)
{
    if (!input.shape)
        return " (its rank is unknown)";
    std::vector<std::string> dynamic;
    for (size_t axis = 0; axis < input.shape->size(); ++axis)
        if (!(*input.shape)[axis].isFixed())
            dynamic.push_back(std::to_string(axis) + " (" + (*input.shape)[axis].toString() + ")");
    std::string text;
    for (size_t i = 0; i < dynamic.size(); ++i)
        text += (i == 0 ? "" : i + 1 == dynamic.size() ? " and " : ", ") + dynamic[i];
    if (dynamic.empty())
        return "";
    return std::string(" (") + (dynamic.size() == 1 ? "dimension " : "dimensions ") + text +
           (dynamic.size() == 1 ? " is" : " are") + " dynamic)";
}

} // namespace qs::cli
