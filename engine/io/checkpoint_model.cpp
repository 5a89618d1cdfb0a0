#include "io/checkpoint_model.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"
#include "graph/weight_layout.h"
#include "io/keras_model.h"
#include "io/load_budget.h"

namespace qs {

namespace {

Model weightsOnly(const std::filesystem::path& path, const char* format)
{
    Model model;
    model.sourcePath = path;
    model.format = format;
    model.weightsOnly = true;
    return model;
}

std::string lowerCase(std::string s)
{
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return s;
}

bool endsWith(const std::string& s, const std::string& suffix)
{
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

} // namespace

Model checkpointModel(const SafetensorsFile& file)
{
    Model model = weightsOnly(file.path(), "safetensors");
    model.metadata = file.metadata();
    // open() checked every tensor's size against its bytes and the per-tensor
    // limit; what the copies (misaligned data) take is summed before any is made.
    LoadBudget budget(file.path().string());
    for (const SafetensorsEntry& entry : file.entries())
        budget.reserve(file.allocatedBytes(entry), "tensor \"" + entry.name + "\"");
    for (const SafetensorsEntry& entry : file.entries())
        model.addInitializer(entry.name, file.tensor(entry));
    model.layers = inferCheckpointLayers(model);
    return model;
}

Model checkpointModel(const NpzFile& file)
{
    Model model = weightsOnly(file.path(), "npz");
    LoadBudget budget(file.path().string());
    for (const NpzArray& array : file.arrays()) {
        const std::string what = "array \"" + array.name + "\"";
        checkTensorElements(shapeElementCount(array.header.shape), array.header.shape, file.path().string(), what);
        budget.reserve(file.allocatedBytes(array), what);
    }
    for (const NpzArray& array : file.arrays())
        model.addInitializer(array.name, file.read(array));
    model.layers = inferCheckpointLayers(model);
    return model;
}

Model checkpointModel(const Hdf5File& file)
{
    Model model = weightsOnly(file.path(), "hdf5");
    // Every dataset loaded is read into owned memory: the sizes its dataspace
    // declares are bounded before the first read (a chunked dataset may declare
    // far more than the file stores).
    LoadBudget budget(file.path().string());
    for (const Hdf5Dataset& d : file.datasets())
        if (d.dtype && isFloatingDType(*d.dtype)) {
            const std::string what = "dataset \"" + d.path + "\"";
            const int64_t numel = shapeElementCount(d.shape);
            checkTensorElements(numel, d.shape, file.path().string(), what);
            budget.reserve(uint64_t(numel) * dtypeSize(*d.dtype), what);
        }
    std::vector<std::string> left;
    for (const Hdf5Dataset& d : file.datasets()) {
        if (d.dtype && isFloatingDType(*d.dtype))
            model.addInitializer(d.path.substr(1), file.read(d));
        else
            left.push_back(d.path + " (" + (d.skipReason.empty() ? d.fileType : d.skipReason) + ")");
    }
    if (!left.empty()) {
        std::string warning = std::to_string(left.size()) + " dataset(s) not loaded as weights: ";
        for (size_t i = 0; i < left.size() && i < 10; ++i)
            warning += (i ? "; " : "") + left[i];
        if (left.size() > 10)
            warning += "; ...";
        model.warnings.push_back(warning);
    }
    model.layers = inferCheckpointLayers(model);
    return model;
}

Model loadCheckpointModel(const std::filesystem::path& path)
{
    const std::string name = lowerCase(path.filename().string());
    if (endsWith(name, ".safetensors") || endsWith(name, ".index.json"))
        return checkpointModel(SafetensorsFile::open(path));
    if (endsWith(name, ".npz"))
        return checkpointModel(NpzFile::open(path));
    if (endsWith(name, ".h5") || endsWith(name, ".hdf5") || endsWith(name, ".hdf") || endsWith(name, ".he5")) {
        const Hdf5File file = Hdf5File::open(path);
        return isKerasFile(file) ? loadKerasModel(file) : checkpointModel(file);
    }
    throw Error(path.string() + ": unknown checkpoint format (expected .safetensors, .index.json, .npz, .h5 or .hdf5)");
}

} // namespace qs
