#include "io/hdf5_file.h"

#include <hdf5.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <mutex>
#include <system_error>

#include "core/contained_call.h"
#include "core/error.h"
#include "io/hdf5_answer.h"
#include "io/hdf5_library.h"
#include "io/hdf5_structure.h"

namespace qs {

using hdf5::AnswerReader;
using hdf5::AnswerWriter;
using hdf5::checkedProduct;
using hdf5::decodeStructure;
using hdf5::encodeStructure;
using hdf5::fail;
using hdf5::failContained;
using hdf5::failLibrary;
using hdf5::Id;
using hdf5::memoryType;
using hdf5::openFile;
using hdf5::QuietLibrary;
using hdf5::readAttributes;
using hdf5::Walker;

std::string normalizeHdf5Path(std::string_view path)
{
    std::string out = "/";
    size_t i = 0;
    while (i < path.size()) {
        while (i < path.size() && path[i] == '/')
            ++i;
        const size_t end = std::min(path.find('/', i), path.size());
        if (end > i) {
            if (out.size() > 1)
                out += '/';
            out.append(path.substr(i, end - i));
        }
        i = end;
    }
    return out;
}

namespace {

// Reads rows [begin, begin + count) of `dataset` (count -1 with begin 0: a
// whole scalar) in the child, in slabs of `rowsPerSlab` rows, passing each
// slab's bytes to `emit`.
template <class Emit>
void readInChild(hid_t file, const std::filesystem::path& path, uint64_t fileSize, const Hdf5Dataset& dataset,
                 int64_t begin, int64_t count, int64_t rowsPerSlab, uint64_t rowBytes, Emit&& emit)
{
    const Id ds(H5Dopen2(file, dataset.path.c_str(), H5P_DEFAULT), H5Dclose);
    if (!ds.valid())
        failLibrary(path, dataset.path, "cannot open the dataset");
    // The file may have been replaced since open(): it must still be the
    // dataset described then, and pass the same checks.
    std::vector<Hdf5Dataset> unused;
    std::vector<std::string> unusedGroups;
    Walker walker{path, fileSize, unused, unusedGroups, {}};
    const Hdf5Dataset now = walker.describe(ds.get(), dataset.path);
    if (now.shape != dataset.shape || now.dtype != dataset.dtype)
        fail(path, dataset.path, "the dataset changed since the file was opened");
    const Id fileType(H5Dget_type(ds.get()), H5Tclose);
    const Id memType(memoryType(*dataset.dtype, fileType.get()), H5Tclose);
    const Id fileSpace(H5Dget_space(ds.get()), H5Sclose);
    if (!fileType.valid() || !memType.valid() || !fileSpace.valid())
        failLibrary(path, dataset.path, "cannot prepare the read");
    if (dataset.shape.empty()) {
        std::string value(size_t(rowBytes), '\0');
        if (H5Dread(ds.get(), memType.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, value.data()) < 0)
            failLibrary(path, dataset.path, "cannot read the data (corrupted or truncated?)");
        emit(std::string_view(value));
        return;
    }
    std::string slab(size_t(rowBytes * uint64_t(std::min(rowsPerSlab, count))), '\0');
    for (int64_t row = begin; row < begin + count; row += rowsPerSlab) {
        const int64_t rows = std::min(rowsPerSlab, begin + count - row);
        std::vector<hsize_t> start(dataset.shape.size(), 0), extent(dataset.shape.begin(), dataset.shape.end());
        start[0] = hsize_t(row);
        extent[0] = hsize_t(rows);
        if (H5Sselect_hyperslab(fileSpace.get(), H5S_SELECT_SET, start.data(), nullptr, extent.data(), nullptr) < 0)
            failLibrary(path, dataset.path, "cannot select rows");
        const Id memSpace(H5Screate_simple(int(extent.size()), extent.data(), nullptr), H5Sclose);
        if (H5Dread(ds.get(), memType.get(), memSpace.get(), fileSpace.get(), H5P_DEFAULT, slab.data()) < 0)
            failLibrary(path, dataset.path, "cannot read the data (corrupted or truncated?)");
        emit(std::string_view(slab.data(), size_t(rowBytes * uint64_t(rows))));
    }
}

// Bytes of a whole dataset as a tensor; nothing when it cannot be read.
std::optional<uint64_t> tensorBytes(const Hdf5Dataset& d)
{
    if (!d.dtype)
        return std::nullopt;
    std::optional<uint64_t> bytes = dtypeSize(*d.dtype);
    for (int64_t dim : d.shape)
        bytes = bytes ? checkedProduct(*bytes, uint64_t(dim)) : std::nullopt;
    return bytes;
}

} // namespace

// Small datasets open() read along with the tree, until read() takes them.
struct Hdf5File::Prefetched {
    std::mutex mutex;
    std::unordered_map<std::string, Tensor> tensors;     // by dataset path
    std::unordered_map<std::string, std::string> errors; // the Error reading a dataset gave
};

std::recursive_mutex& hdf5LibraryMutex()
{
    static std::recursive_mutex mutex;
    return mutex;
}

Hdf5File Hdf5File::open(const std::filesystem::path& path)
{
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
        fail(path, {}, "no such file");
    const uint64_t fileSize = std::filesystem::file_size(path, ec);
    if (ec)
        fail(path, {}, "cannot read the file size: " + ec.message());

    // libhdf5 1.10 can crash or allocate without end on corrupted structures
    // (docs/robustness.md): the library runs only in a contained child. It
    // sends the tree with every attribute as one message, then, for each small
    // dataset it prefetches, a message "S" (starting) and one "T" (the tensor's
    // bytes) or "E" (the Error reading it gave).
    Hdf5File f;
    f.path_ = path;
    auto attributes = std::make_shared<Attributes>();
    auto prefetched = std::make_shared<Prefetched>();
    bool haveStructure = false;
    std::optional<size_t> reading; // the dataset the child last started to prefetch
    std::string message;
    const std::lock_guard library(hdf5LibraryMutex()); // no fork while a writer is inside libhdf5
    const ContainedOutcome outcome = ContainedCall::run(
        [&](ContainedChannel& channel) {
            QuietLibrary quiet;
            const htri_t isHdf5 = H5Fis_hdf5(path.c_str());
            if (isHdf5 == 0)
                fail(path, {}, "not an HDF5 file (no HDF5 signature at offset 0, 512, 1024, ...)");
            if (isHdf5 < 0)
                failLibrary(path, {}, "cannot read the file");
            const Id file(openFile(path), H5Fclose);
            const Id root(H5Gopen2(file.get(), "/", H5P_DEFAULT), H5Gclose);
            if (!root.valid())
                failLibrary(path, "/", "cannot open the root group");
            std::vector<Hdf5Dataset> datasets;
            std::vector<std::string> groups;
            Walker walker{path, fileSize, datasets, groups, {}};
            walker.walkGroup(root.get(), "/", 0);
            Attributes found;
            for (const std::string& g : groups)
                found.byObject.emplace(g, readAttributes(file.get(), path, g));
            for (const Hdf5Dataset& d : datasets)
                found.byObject.emplace(d.path, readAttributes(file.get(), path, d.path));
            channel.send(encodeStructure(groups, datasets, found));

            uint64_t total = 0;
            for (size_t i = 0; i < datasets.size(); ++i) {
                const std::optional<uint64_t> bytes = tensorBytes(datasets[i]);
                if (!bytes || *bytes > kHdf5PrefetchDatasetBytes || total + *bytes > kHdf5PrefetchTotalBytes)
                    continue;
                total += *bytes;
                AnswerWriter start;
                start.number(i);
                std::string started = "S"; // (not "S" + take(): GCC 12's -Wrestrict misfires on it)
                started += start.take();
                channel.send(started);
                std::string answer = "T";
                try {
                    const Hdf5Dataset& d = datasets[i];
                    const uint64_t rowBytes =
                        d.shape.empty() || d.shape[0] == 0 ? *bytes : *bytes / uint64_t(d.shape[0]);
                    if (*bytes > 0)
                        readInChild(file.get(), path, fileSize, d, 0, d.shape.empty() ? -1 : d.shape[0],
                                    std::numeric_limits<int64_t>::max(), rowBytes,
                                    [&](std::string_view slab) { answer.append(slab); });
                } catch (const Error& e) {
                    answer = "E" + std::string(e.what());
                }
                channel.send(answer);
            }
        },
        [&](std::string_view piece, bool ends) {
            if (message.size() + piece.size() > kContainedMemoryBudget)
                fail(path, {},
                     "the file's structure and attributes take more than " +
                         std::to_string(kContainedMemoryBudget >> 20) + " MiB");
            message.append(piece);
            if (!ends)
                return;
            if (!haveStructure) {
                decodeStructure(message, path, f.groups_, f.datasets_, *attributes);
                haveStructure = true;
            } else if (message.size() == 9 && message[0] == 'S') {
                AnswerReader r(std::string_view(message).substr(1), path);
                reading = size_t(r.number());
                if (*reading >= f.datasets_.size() || !f.datasets_[*reading].dtype)
                    fail(path, {}, "the HDF5 reading process sent a garbled answer");
            } else if (reading && !message.empty() && (message[0] == 'T' || message[0] == 'E')) {
                const Hdf5Dataset& d = f.datasets_[*reading];
                if (message[0] == 'E') {
                    prefetched->errors.emplace(d.path, message.substr(1));
                } else {
                    Tensor t(*d.dtype, d.shape);
                    if (message.size() - 1 != t.nbytes())
                        fail(path, d.path, "the HDF5 reading process sent a garbled answer");
                    std::memcpy(t.mutableRawData(), message.data() + 1, t.nbytes());
                    if (*d.dtype == DType::Bool)
                        for (uint8_t& v : t.mutableValues<uint8_t>())
                            v = v != 0;
                    prefetched->tensors.emplace(d.path, std::move(t));
                }
                reading.reset();
            } else {
                fail(path, {}, "the HDF5 reading process sent a garbled answer");
            }
            message.clear();
        });
    if (!haveStructure) {
        if (outcome.answered())
            fail(path, {}, "the HDF5 reading process sent no answer");
        failContained(path, {}, outcome, "reading the file's structure");
    }
    // The structure arrived but the child died prefetching a dataset: reading
    // that dataset is what fails (the others are read when asked for).
    if (!outcome.answered() && reading) {
        const std::string& object = f.datasets_[*reading].path;
        try {
            failContained(path, object, outcome, "reading the data");
        } catch (const Error& e) {
            prefetched->errors.emplace(object, e.what());
        }
    }
    f.attributes_ = std::move(attributes);
    f.prefetched_ = std::move(prefetched);
    for (size_t i = 0; i < f.datasets_.size(); ++i)
        f.datasetByPath_.emplace(f.datasets_[i].path, i);
    return f;
}

const Hdf5Dataset* Hdf5File::find(std::string_view path) const
{
    const auto it = datasetByPath_.find(normalizeHdf5Path(path));
    return it == datasetByPath_.end() ? nullptr : &datasets_[it->second];
}

bool Hdf5File::isGroup(std::string_view path) const
{
    return std::find(groups_.begin(), groups_.end(), normalizeHdf5Path(path)) != groups_.end();
}

Tensor Hdf5File::read(std::string_view path) const
{
    const Hdf5Dataset* d = find(path);
    if (!d)
        fail(path_, normalizeHdf5Path(path), "no such dataset");
    return read(*d);
}

Tensor Hdf5File::read(const Hdf5Dataset& dataset) const
{
    {
        // A prefetched tensor is handed over once; reading it again goes to the file.
        std::lock_guard lock(prefetched_->mutex);
        const auto it = prefetched_->tensors.find(dataset.path);
        if (it != prefetched_->tensors.end() && it->second.shape() == dataset.shape &&
            it->second.dtype() == dataset.dtype) {
            Tensor t = std::move(it->second);
            prefetched_->tensors.erase(it);
            return t;
        }
    }
    if (dataset.shape.empty())
        return readRows(dataset, 0, -1);
    return readRows(dataset, 0, dataset.shape[0]);
}

Tensor Hdf5File::readRows(const Hdf5Dataset& dataset, int64_t begin, int64_t count) const
{
    if (!dataset.dtype)
        fail(path_, dataset.path, "cannot be read: " + dataset.skipReason);
    const bool wholeScalar = dataset.shape.empty() && begin == 0 && count == -1;
    if (!wholeScalar && (dataset.shape.empty() || begin < 0 || count < 0 || begin > dataset.shape[0] ||
                         count > dataset.shape[0] - begin))
        fail(path_, dataset.path,
             "rows [" + std::to_string(begin) + ", " + std::to_string(begin) + " + " + std::to_string(count) +
                 ") are outside shape " + shapeToString(dataset.shape));
    Shape shape = dataset.shape;
    if (!shape.empty())
        shape[0] = count;
    Tensor out(*dataset.dtype, shape);
    if (out.numel() == 0)
        return out;
    const uint64_t rowBytes = wholeScalar ? out.nbytes() : out.nbytes() / uint64_t(count);
    {
        std::lock_guard lock(prefetched_->mutex);
        // Reading the whole dataset failed in open(): it would fail again (a
        // part of it may still be readable).
        const bool whole = wholeScalar || (begin == 0 && count == dataset.shape[0]);
        if (const auto error = prefetched_->errors.find(dataset.path); whole && error != prefetched_->errors.end())
            throw Error(error->second);
        const auto it = prefetched_->tensors.find(dataset.path);
        if (it != prefetched_->tensors.end() && it->second.shape() == dataset.shape) {
            std::memcpy(out.mutableRawData(),
                        static_cast<const std::byte*>(it->second.rawData()) +
                            uint64_t(std::max<int64_t>(begin, 0)) * rowBytes,
                        out.nbytes());
            return out;
        }
    }

    // The child reads slabs of whole rows and sends each as it is read, so its
    // own memory stays within the budget plus one slab whatever the dataset's size.
    const int64_t rowsPerSlab = wholeScalar ? 1 : int64_t(std::max<uint64_t>(1, kHdf5ReadSlabBytes / rowBytes));
    const uint64_t slabBytes = wholeScalar ? out.nbytes() : rowBytes * uint64_t(std::min(rowsPerSlab, count));
    const std::filesystem::path& file = path_;
    std::byte* target = static_cast<std::byte*>(out.mutableRawData());
    uint64_t received = 0;
    ContainmentLimits limits;
    limits.memoryBudget = kContainedMemoryBudget + slabBytes;
    const std::lock_guard library(hdf5LibraryMutex()); // no fork while a writer is inside libhdf5
    const ContainedOutcome outcome = ContainedCall::run(
        [&](ContainedChannel& channel) {
            QuietLibrary quiet;
            std::error_code ec;
            const uint64_t fileSize = std::filesystem::file_size(file, ec);
            const Id handle(openFile(file), H5Fclose);
            readInChild(handle.get(), file, ec ? 0 : fileSize, dataset, begin, count, rowsPerSlab, rowBytes,
                        [&](std::string_view slab) { channel.send(slab); });
        },
        [&](std::string_view piece, bool) {
            if (piece.size() > out.nbytes() - received)
                fail(file, dataset.path, "the HDF5 reading process sent more data than the dataset holds");
            std::memcpy(target + received, piece.data(), piece.size());
            received += piece.size();
        },
        limits);
    if (!outcome.answered())
        failContained(file, dataset.path, outcome, "reading the data");
    if (received != out.nbytes())
        fail(file, dataset.path,
             "the HDF5 reading process sent " + std::to_string(received) + " of " + std::to_string(out.nbytes()) +
                 " bytes");
    if (*dataset.dtype == DType::Bool)
        for (uint8_t& v : out.mutableValues<uint8_t>())
            v = v != 0;
    return out;
}

std::vector<std::string> Hdf5File::attributeNames(std::string_view objectPath) const
{
    const std::string object = normalizeHdf5Path(objectPath);
    const auto it = attributes_->byObject.find(object);
    if (it == attributes_->byObject.end())
        fail(path_, object, "cannot list the attributes (no such group or dataset)");
    if (!it->second.listError.empty())
        throw Error(it->second.listError);
    std::vector<std::string> names;
    for (const auto& a : it->second.attributes)
        names.push_back(a.name);
    return names;
}

std::optional<std::vector<std::string>> Hdf5File::stringsAttribute(std::string_view objectPath,
                                                                   std::string_view name) const
{
    const std::string object = normalizeHdf5Path(objectPath);
    const auto it = attributes_->byObject.find(object);
    if (it == attributes_->byObject.end())
        fail(path_, object, "cannot look up attribute '" + std::string(name) + "' (no such group or dataset)");
    if (!it->second.listError.empty())
        throw Error(it->second.listError);
    for (const auto& a : it->second.attributes) {
        if (a.name != name)
            continue;
        if (!a.strings)
            throw Error(a.error);
        return a.strings;
    }
    return std::nullopt;
}

std::optional<std::string> Hdf5File::stringAttribute(std::string_view objectPath, std::string_view name) const
{
    auto strings = stringsAttribute(objectPath, name);
    if (!strings)
        return std::nullopt;
    if (strings->size() != 1)
        fail(path_, normalizeHdf5Path(objectPath) + " attribute '" + std::string(name) + "'",
             "expected one string, found " + std::to_string(strings->size()));
    return std::move(strings->front());
}

} // namespace qs
