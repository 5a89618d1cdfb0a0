#include "io/checkpoint_model.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"
#include "graph/weight_layout.h"
#include "io/keras_model.h"

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
    for (const SafetensorsEntry& entry : file.entries())
        model.addInitializer(entry.name, file.tensor(entry));
    model.layers = inferCheckpointLayers(model);
    return model;
}

Model checkpointModel(const NpzFile& file)
{
    Model model = weightsOnly(file.path(), "npz");
    for (const NpzArray& array : file.arrays())
        model.addInitializer(array.name, file.read(array));
    model.layers = inferCheckpointLayers(model);
    return model;
}

Model checkpointModel(const Hdf5File& file)
{
    Model model = weightsOnly(file.path(), "hdf5");
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
