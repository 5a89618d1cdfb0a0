// The file-backed data sources: .npz, .npy and HDF5 (io/data_source.h).
#include <cctype>
#include <cstring>
#include <fstream>

#include "core/error.h"
#include "core/mapped_file.h"
#include "io/data_source.h"
#include "io/hdf5_file.h"
#include "io/npy.h"
#include "io/npy_header.h"
#include "io/npz.h"
#include "io/text_data_source.h"

namespace qs {

namespace {

DataArray describe(std::string name, DType dtype, const Shape& shape, const std::string& source)
{
    if (shape.empty())
        throw Error(source + ": array '" + name + "' is 0-d: data needs rows along axis 0");
    return {name, name, dtype, Shape(shape.begin() + 1, shape.end()), shape[0]};
}

// Splits `found` into inputs and the labels array, then matches the inputs to
// the model's when there is one.
void arrange(std::vector<DataArray> found, const std::string& labelsName, const Model* model, const std::string& source,
             std::vector<DataArray>& inputs, std::optional<DataArray>& labels)
{
    for (auto it = found.begin(); it != found.end();)
        if (it->name == labelsName) {
            labels = *it;
            labels->name = "labels";
            it = found.erase(it);
        } else {
            ++it;
        }
    inputs = model ? matchModelInputs(found, *model, source) : std::move(found);
}

class NpzDataSource final : public DataSource {
public:
    NpzDataSource(const std::filesystem::path& path, const DataSourceOptions& options, const Model* model)
        : DataSource(path, options), file_(std::make_unique<NpzFile>(NpzFile::open(path)))
    {
        std::vector<DataArray> found;
        for (const NpzArray& a : file_->arrays())
            found.push_back(describe(a.name, a.header.dtype, a.header.shape, path.string()));
        std::vector<DataArray> inputs;
        std::optional<DataArray> labels;
        arrange(std::move(found), options.labelsName, model, path.string(), inputs, labels);
        setArrays(std::move(inputs), std::move(labels));
        restart();
    }

protected:
    Tensor readRows(size_t index, int64_t count) override { return readers_.at(index)->next(count); }

    void restart() override
    {
        readers_.clear();
        for (const DataArray& a : inputs())
            readers_.push_back(std::make_unique<NpzRowReader>(*file_, *file_->find(a.fileName)));
        if (labels())
            readers_.push_back(std::make_unique<NpzRowReader>(*file_, *file_->find(labels()->fileName)));
    }

private:
    std::unique_ptr<NpzFile> file_; // the readers point into it: it never moves
    std::vector<std::unique_ptr<NpzRowReader>> readers_;
};

// A C-order .npy of native byte order is sliced from its mapping (rows are
// borrowed when aligned, copied otherwise); Fortran order, big-endian data
// and bools (normalised to 0/1) are read whole once, as NpzRowReader does.
class NpyDataSource final : public DataSource {
public:
    NpyDataSource(const std::filesystem::path& path, const DataSourceOptions& options, const Model* model)
        : DataSource(path, options), mapping_(MappedFile::open(path))
    {
        const std::string name = path.string();
        const std::span<const std::byte> bytes(mapping_->data(), mapping_->size());
        const size_t offset = npyDataOffset(bytes.first(std::min(bytes.size(), kNpyPreambleBytes)), name);
        if (offset > bytes.size())
            throw Error(name + ": truncated: the npy header runs past the end of the file");
        header_ = parseNpyHeader(bytes.first(offset), name);
        if (uint64_t(header_.dataBytes) != bytes.size() - offset)
            throw Error(name + ": the array data is " + std::to_string(bytes.size() - offset) + " bytes, its shape " +
                        shapeToString(header_.shape) + " needs " + std::to_string(header_.dataBytes));
        std::vector<DataArray> found{describe(path.stem().string(), header_.dtype, header_.shape, name)};
        found[0].fileName = path.filename().string();
        if (model && model->inputs.size() > 1)
            throw Error(name + ": an .npy holds one array, the model has " + std::to_string(model->inputs.size()) +
                        " inputs (use an .npz with arrays named after them)");
        setArrays(model ? matchModelInputs(found, *model, name) : found, std::nullopt);
        if (header_.fortranOrder || header_.bigEndian || header_.dtype == DType::Bool)
            whole_ = readNpy(path);
        rowBytes_ = rows() ? header_.dataBytes / rows() : 0;
    }

protected:
    Tensor readRows(size_t, int64_t count) override
    {
        count = std::min(count, rows() - position_);
        Shape shape{count};
        shape.insert(shape.end(), header_.shape.begin() + 1, header_.shape.end());
        const std::byte* source =
            whole_ ? static_cast<const std::byte*>(whole_->rawData()) : mapping_->data() + header_.dataOffset;
        source += position_ * rowBytes_;
        position_ += count;
        if (!whole_ && reinterpret_cast<uintptr_t>(source) % dtypeSize(header_.dtype) == 0)
            return Tensor::borrow(header_.dtype, shape, source, mapping_);
        Tensor t(header_.dtype, shape);
        if (t.nbytes())
            std::memcpy(t.mutableRawData(), source, t.nbytes());
        return t;
    }

    void restart() override { position_ = 0; }

private:
    int64_t rows() const { return header_.shape.at(0); }

    std::shared_ptr<const MappedFile> mapping_;
    NpyHeader header_;
    std::optional<Tensor> whole_;
    int64_t rowBytes_ = 0;
    int64_t position_ = 0;
};

// Datasets directly inside options.hdf5Group; each read with Hdf5File::readRows.
class Hdf5DataSource final : public DataSource {
public:
    Hdf5DataSource(const std::filesystem::path& path, const DataSourceOptions& options, const Model* model)
        : DataSource(path, options), file_(Hdf5File::open(path))
    {
        const std::string group = normalizeHdf5Path(options.hdf5Group);
        const std::string name = path.string();
        if (!file_.isGroup(group))
            throw Error(name + ": no HDF5 group '" + group + "'");
        const std::string prefix = group == "/" ? "/" : group + "/";
        std::vector<DataArray> found;
        for (const Hdf5Dataset& d : file_.datasets()) {
            if (!d.path.starts_with(prefix) || d.path.find('/', prefix.size()) != std::string::npos)
                continue;
            if (!d.dtype)
                throw Error(name + ": dataset '" + d.path + "' cannot be read as data: " + d.skipReason);
            DataArray a = describe(d.path.substr(prefix.size()), *d.dtype, d.shape, name);
            a.fileName = d.path;
            found.push_back(std::move(a));
        }
        std::vector<DataArray> inputs;
        std::optional<DataArray> labels;
        arrange(std::move(found), options.labelsName, model, name, inputs, labels);
        setArrays(std::move(inputs), std::move(labels));
        restart();
    }

protected:
    Tensor readRows(size_t index, int64_t count) override
    {
        const DataArray& a = index < inputs().size() ? inputs()[index] : *labels();
        int64_t& position = positions_.at(index);
        count = std::min(count, a.rows - position);
        Tensor t = file_.readRows(*file_.find(a.fileName), position, count);
        position += count;
        return t;
    }

    void restart() override { positions_.assign(inputs().size() + (labels() ? 1 : 0), 0); }

private:
    Hdf5File file_;
    std::vector<int64_t> positions_;
};

std::string firstBytes(const std::filesystem::path& path, size_t count)
{
    std::ifstream in(path, std::ios::binary);
    std::string bytes(count, '\0');
    in.read(bytes.data(), std::streamsize(count));
    bytes.resize(size_t(in.gcount()));
    return bytes;
}

} // namespace

std::unique_ptr<DataSource> openDataSource(const std::filesystem::path& path, const DataSourceOptions& options,
                                           const Model* model)
{
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
        throw Error(path.string() + ": no such data file");
    std::string extension = path.extension().string();
    for (char& c : extension)
        c = char(std::tolower(static_cast<unsigned char>(c)));
    if (extension == ".txt")
        return openTextDataSource(path, options, model);
    const std::string head = firstBytes(path, 8);
    if (head.starts_with("PK\x03\x04") || head.starts_with("PK\x05\x06"))
        return std::make_unique<NpzDataSource>(path, options, model);
    if (head.starts_with("\x93NUMPY"))
        return std::make_unique<NpyDataSource>(path, options, model);
    if (head == std::string_view("\x89HDF\r\n\x1a\n", 8))
        return std::make_unique<Hdf5DataSource>(path, options, model);
    throw Error(path.string() + ": not a data file this build reads (expected .npz, .npy, HDF5, or .txt for a "
                                "language model; a folder of images is opened as an image folder)");
}

} // namespace qs
