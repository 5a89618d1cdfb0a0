#include "io/model_loader.h"

#include <array>
#include <cstdint>
#include <cstring>
#include <fstream>

#include "core/error.h"
#include "graph/weight_layout.h"
#include "io/checkpoint_model.h"
#include "io/hdf5_file.h"
#include "io/hf_folder.h"
#include "io/keras_model.h"
#include "io/npy.h"
#include "io/npz.h"
#include "io/onnx_loader.h"
#include "io/safetensors.h"

namespace qs {

namespace {

constexpr char kHdf5Signature[] = "\x89HDF\r\n\x1a\n";

bool endsWith(const std::string& s, std::string_view suffix)
{
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string lowerCase(std::string s)
{
    for (char& c : s)
        if (c >= 'A' && c <= 'Z')
            c = char(c - 'A' + 'a');
    return s;
}

// Up to `count` bytes at `offset`; fewer at the end of the file.
std::string bytesAt(std::ifstream& in, uint64_t offset, size_t count)
{
    std::string bytes(count, '\0');
    in.clear();
    in.seekg(std::streamoff(offset));
    if (!in)
        return {};
    in.read(bytes.data(), std::streamsize(count));
    bytes.resize(size_t(in.gcount()));
    return bytes;
}

bool isHdf5(std::ifstream& in, uint64_t fileSize)
{
    for (uint64_t offset : {0u, 512u, 1024u, 2048u})
        if (offset + 8 <= fileSize && bytesAt(in, offset, 8) == std::string_view(kHdf5Signature, 8))
            return true;
    return false;
}

bool isSafetensors(const std::string& head, uint64_t fileSize)
{
    if (head.size() < 9 || head[8] != '{')
        return false;
    uint64_t headerLength = 0;
    for (int i = 7; i >= 0; --i)
        headerLength = (headerLength << 8) | uint8_t(head[size_t(i)]);
    return headerLength >= 2 && headerLength <= fileSize - 8;
}

Model npyModel(const std::filesystem::path& path)
{
    Model model;
    model.sourcePath = path;
    model.format = "npy";
    model.weightsOnly = true;
    model.addInitializer(path.stem().string(), readNpy(path));
    model.layers = inferCheckpointLayers(model);
    return model;
}

Model hdf5Model(const std::filesystem::path& path)
{
    const Hdf5File file = Hdf5File::open(path);
    return isKerasFile(file) ? loadKerasModel(file) : checkpointModel(file);
}

} // namespace

std::string supportedModelFormats()
{
    return "ONNX, safetensors (single or sharded *.index.json), Keras or generic HDF5, NumPy .npz/.npy, "
           "Hugging Face folders (config.json + safetensors)";
}

ModelFormat detectModelFormat(const std::filesystem::path& path)
{
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
        if (isHuggingFaceFolder(path))
            return ModelFormat::HuggingFaceFolder;
        throw Error(path.string() + ": is a folder without a config.json (a Hugging Face checkpoint folder has "
                                    "config.json beside its safetensors files), not a model file");
    }
    const uint64_t fileSize = std::filesystem::file_size(path, ec);
    if (ec)
        throw Error(path.string() + ": cannot read the model file (" + ec.message() + ")");
    std::ifstream in(path, std::ios::binary);
    if (!in)
        throw Error(path.string() + ": cannot open the model file");
    const std::string head = bytesAt(in, 0, 16);

    if (isHdf5(in, fileSize))
        return ModelFormat::Hdf5;
    if (head.starts_with("PK\x03\x04") || head.starts_with("PK\x05\x06"))
        return ModelFormat::Npz;
    if (head.starts_with("\x93NUMPY"))
        return ModelFormat::Npy;
    if (isSafetensors(head, fileSize))
        return ModelFormat::Safetensors;

    const std::string name = lowerCase(path.filename().string());
    if (endsWith(name, ".index.json"))
        return ModelFormat::ShardedSafetensors;
    if (endsWith(name, ".onnx") || (!head.empty() && head[0] == '\x08'))
        return ModelFormat::Onnx;
    throw Error(
        path.string() + ": unrecognised model format (" +
        (fileSize == 0 ? std::string("empty file") : std::string("neither its first bytes nor its name match")) +
        "); supported: " + supportedModelFormats());
}

Model loadModel(const std::filesystem::path& path)
{
    switch (detectModelFormat(path)) {
    case ModelFormat::Onnx:
        return loadOnnx(path);
    case ModelFormat::Safetensors:
    case ModelFormat::ShardedSafetensors:
        return checkpointModel(SafetensorsFile::open(path));
    case ModelFormat::Npz:
        return checkpointModel(NpzFile::open(path));
    case ModelFormat::Npy:
        return npyModel(path);
    case ModelFormat::Hdf5:
        return hdf5Model(path);
    case ModelFormat::HuggingFaceFolder:
        return loadHuggingFaceFolder(path);
    }
    throw Error(path.string() + ": unrecognised model format");
}

} // namespace qs
