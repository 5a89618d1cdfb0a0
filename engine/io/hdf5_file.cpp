#include "io/hdf5_file.h"

#include <hdf5.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <limits>
#include <mutex>
#include <set>
#include <sys/wait.h>
#include <system_error>
#include <unistd.h>

#include "core/error.h"

namespace qs {

namespace {

// Serialises every call into the library: the thread-safe build has its own
// lock, but the error-stack handler saved and restored below is per thread and
// a serial build has no lock at all.
std::recursive_mutex& libraryMutex()
{
    static std::recursive_mutex mutex;
    return mutex;
}

// Holds the library lock with HDF5's automatic error printing switched off.
class QuietLibrary {
public:
    QuietLibrary() : lock_(libraryMutex())
    {
        H5Eget_auto2(H5E_DEFAULT, &savedFunc_, &savedData_);
        H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
        H5Eclear2(H5E_DEFAULT);
    }
    ~QuietLibrary()
    {
        H5Eclear2(H5E_DEFAULT);
        H5Eset_auto2(H5E_DEFAULT, savedFunc_, savedData_);
    }
    QuietLibrary(const QuietLibrary&) = delete;
    QuietLibrary& operator=(const QuietLibrary&) = delete;

private:
    std::lock_guard<std::recursive_mutex> lock_;
    H5E_auto2_t savedFunc_ = nullptr;
    void* savedData_ = nullptr;
};

// The innermost description on HDF5's error stack (the most specific one),
// then clears the stack.
std::string takeLibraryError()
{
    std::string innermost;
    auto walk = [](unsigned, const H5E_error2_t* e, void* data) -> herr_t {
        if (e->desc && *e->desc)
            *static_cast<std::string*>(data) = e->desc;
        return 0;
    };
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, walk, &innermost);
    H5Eclear2(H5E_DEFAULT);
    return innermost;
}

[[noreturn]] void fail(const std::filesystem::path& file, std::string_view object, const std::string& what)
{
    std::string message = file.string();
    if (!object.empty())
        message += ": " + std::string(object);
    throw Error(message + ": " + what);
}

// Fails with HDF5's own description appended.
[[noreturn]] void failLibrary(const std::filesystem::path& file, std::string_view object, const std::string& what)
{
    const std::string detail = takeLibraryError();
    fail(file, object, detail.empty() ? what : what + " (HDF5: " + detail + ")");
}

// An HDF5 identifier closed on scope exit.
class Id {
public:
    Id(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
    ~Id()
    {
        if (id_ >= 0)
            close_(id_);
    }
    Id(const Id&) = delete;
    Id& operator=(const Id&) = delete;
    hid_t get() const { return id_; }
    bool valid() const { return id_ >= 0; }

private:
    hid_t id_;
    herr_t (*close_)(hid_t);
};

// A memory type for a stored float16 or bfloat16, whose bit fields HDF5
// converts any stored layout or byte order into.
hid_t halfMemoryType(DType dtype)
{
    const hid_t t = H5Tcopy(H5T_IEEE_F32LE);
    if (dtype == DType::F16) {
        H5Tset_fields(t, 15, 10, 5, 0, 10);
        H5Tset_size(t, 2);
        H5Tset_ebias(t, 15);
    } else {
        H5Tset_fields(t, 15, 7, 8, 0, 7);
        H5Tset_size(t, 2);
        H5Tset_ebias(t, 127);
    }
    return t;
}

std::string orderName(hid_t type)
{
    return H5Tget_order(type) == H5T_ORDER_BE ? " big-endian" : " little-endian";
}

// What a stored type becomes: the tensor dtype, or a reason to skip it.
struct TypeChoice {
    std::optional<DType> dtype;
    std::string skipReason;
    std::string words;
};

TypeChoice chooseType(hid_t type)
{
    const size_t size = H5Tget_size(type);
    const std::string bits = std::to_string(size * 8);
    switch (H5Tget_class(type)) {
    case H5T_INTEGER: {
        const bool isSigned = H5Tget_sign(type) == H5T_SGN_2;
        const std::string words = (isSigned ? "int" : "uint") + bits + orderName(type);
        switch (size) {
        case 1:
            return {isSigned ? DType::I8 : DType::U8, {}, words};
        case 2:
            return {isSigned ? DType::I16 : DType::U16, {}, words};
        case 4:
            return {isSigned ? DType::I32 : DType::U32, {}, words};
        case 8:
            return {isSigned ? DType::I64 : DType::U64, {}, words};
        default:
            return {std::nullopt, "integers of " + std::to_string(size) + " bytes are not supported", words};
        }
    }
    case H5T_FLOAT: {
        const std::string words = "float" + bits + orderName(type);
        if (size == 4)
            return {DType::F32, {}, words};
        if (size == 8)
            return {DType::F64, {}, words};
        if (size == 2) {
            size_t signPos = 0, expPos = 0, expSize = 0, mantPos = 0, mantSize = 0;
            H5Tget_fields(type, &signPos, &expPos, &expSize, &mantPos, &mantSize);
            if (signPos == 15 && expPos == 10 && expSize == 5 && mantPos == 0 && mantSize == 10)
                return {DType::F16, {}, words};
            if (signPos == 15 && expPos == 7 && expSize == 8 && mantPos == 0 && mantSize == 7)
                return {DType::BF16, {}, "bfloat16" + orderName(type)};
        }
        return {std::nullopt, "a " + bits + "-bit float of this layout is not supported", words};
    }
    case H5T_ENUM: {
        // h5py stores numpy bool as an int8 enumeration {FALSE = 0, TRUE = 1}.
        if (size == 1 && H5Tget_nmembers(type) == 2) {
            char* first = H5Tget_member_name(type, 0);
            char* second = H5Tget_member_name(type, 1);
            const bool isBool = first && second && std::strcmp(first, "FALSE") == 0 && std::strcmp(second, "TRUE") == 0;
            H5free_memory(first);
            H5free_memory(second);
            if (isBool)
                return {DType::Bool, {}, "bool"};
        }
        return {std::nullopt, "enumerations are not numeric tensors", "enum"};
    }
    case H5T_STRING:
        return {std::nullopt, "strings are not numeric tensors", "string"};
    case H5T_COMPOUND:
        return {std::nullopt, "compound (record) types are not supported", "compound"};
    case H5T_REFERENCE:
        return {std::nullopt, "object references are not numeric tensors", "reference"};
    case H5T_VLEN:
        return {std::nullopt, "variable-length sequences are not supported", "variable-length"};
    case H5T_ARRAY:
        return {std::nullopt, "array element types are not supported", "array"};
    case H5T_OPAQUE:
        return {std::nullopt, "opaque data is not a numeric tensor", "opaque"};
    case H5T_BITFIELD:
        return {std::nullopt, "bit fields are not supported", "bitfield"};
    default:
        return {std::nullopt, "the element type is not supported", "unknown"};
    }
}

hid_t memoryType(DType dtype, hid_t fileType)
{
    switch (dtype) {
    case DType::I8:
        return H5Tcopy(H5T_NATIVE_INT8);
    case DType::U8:
        return H5Tcopy(H5T_NATIVE_UINT8);
    case DType::I16:
        return H5Tcopy(H5T_NATIVE_INT16);
    case DType::U16:
        return H5Tcopy(H5T_NATIVE_UINT16);
    case DType::I32:
        return H5Tcopy(H5T_NATIVE_INT32);
    case DType::U32:
        return H5Tcopy(H5T_NATIVE_UINT32);
    case DType::I64:
        return H5Tcopy(H5T_NATIVE_INT64);
    case DType::U64:
        return H5Tcopy(H5T_NATIVE_UINT64);
    case DType::F32:
        return H5Tcopy(H5T_NATIVE_FLOAT);
    case DType::F64:
        return H5Tcopy(H5T_NATIVE_DOUBLE);
    case DType::F16:
    case DType::BF16:
        return halfMemoryType(dtype);
    case DType::Bool:
        return H5Tget_native_type(fileType, H5T_DIR_ASCEND);
    }
    return -1;
}

// a × b, or nothing when it exceeds int64.
std::optional<uint64_t> checkedProduct(uint64_t a, uint64_t b)
{
    constexpr uint64_t limit = uint64_t(std::numeric_limits<int64_t>::max());
    if (a != 0 && b > limit / a)
        return std::nullopt;
    return a * b;
}

} // namespace

struct Hdf5File::Handle {
    hid_t file = -1;
    ~Handle()
    {
        if (file >= 0) {
            QuietLibrary quiet;
            H5Fclose(file);
        }
    }
};

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

struct Walker {
    const std::filesystem::path& file;
    uint64_t fileSize;
    std::vector<Hdf5Dataset>& datasets;
    std::vector<std::string>& groups;
    std::set<std::string> visited; // object identities already listed

    // A key that is equal for two links to the same object.
    std::string identity(hid_t object, const std::string& path)
    {
#if H5_VERSION_GE(1, 12, 0)
        H5O_info2_t info;
        if (H5Oget_info3(object, &info, H5O_INFO_BASIC) < 0)
            failLibrary(file, path, "cannot read the object header");
        return std::to_string(info.fileno) + ":" +
               std::string(reinterpret_cast<const char*>(&info.token), sizeof info.token);
#else
        H5O_info_t info;
        if (H5Oget_info2(object, &info, H5O_INFO_BASIC) < 0)
            failLibrary(file, path, "cannot read the object header");
        return std::to_string(info.fileno) + ":" + std::to_string(info.addr);
#endif
    }

    void walkGroup(hid_t group, const std::string& path, int depth)
    {
        if (depth > kHdf5MaxDepth)
            fail(file, path, "groups nested deeper than " + std::to_string(kHdf5MaxDepth) + " levels");
        groups.push_back(path);
        struct Link {
            std::string name;
            H5L_type_t type;
        };
        std::vector<Link> links;
        auto collect = [](hid_t, const char* name, const H5L_info_t* info, void* data) -> herr_t {
            static_cast<std::vector<Link>*>(data)->push_back({name, info->type});
            return 0;
        };
        hsize_t index = 0;
        if (H5Literate(group, H5_INDEX_NAME, H5_ITER_INC, &index, collect, &links) < 0)
            failLibrary(file, path, "cannot list the group's members");
        for (const Link& link : links) {
            if (link.type != H5L_TYPE_HARD)
                continue; // soft and external links are not followed
            const std::string child = path == "/" ? "/" + link.name : path + "/" + link.name;
            const Id object(H5Oopen(group, link.name.c_str(), H5P_DEFAULT), H5Oclose);
            if (!object.valid())
                failLibrary(file, child, "cannot open the object");
            if (!visited.insert(identity(object.get(), child)).second)
                continue;
            switch (H5Iget_type(object.get())) {
            case H5I_GROUP:
                walkGroup(object.get(), child, depth + 1);
                break;
            case H5I_DATASET:
                datasets.push_back(describe(object.get(), child));
                break;
            default:
                break; // named datatypes
            }
        }
    }

    Hdf5Dataset describe(hid_t dataset, const std::string& path)
    {
        Hdf5Dataset d;
        d.path = path;
        const Id type(H5Dget_type(dataset), H5Tclose);
        const Id space(H5Dget_space(dataset), H5Sclose);
        const Id plist(H5Dget_create_plist(dataset), H5Pclose);
        if (!type.valid() || !space.valid() || !plist.valid())
            failLibrary(file, path, "cannot read the dataset's type, shape or layout");
        TypeChoice choice = chooseType(type.get());
        d.fileType = choice.words;

        const H5S_class_t spaceClass = H5Sget_simple_extent_type(space.get());
        if (spaceClass == H5S_NULL) {
            d.skipReason = "the dataspace is empty (null)";
            return d;
        }
        if (spaceClass == H5S_SIMPLE) {
            const int rank = H5Sget_simple_extent_ndims(space.get());
            if (rank < 0 || rank > H5S_MAX_RANK)
                failLibrary(file, path, "cannot read the dataset's shape");
            std::vector<hsize_t> dims(size_t(rank), 0);
            H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
            for (hsize_t dim : dims) {
                if (dim > hsize_t(std::numeric_limits<int64_t>::max()))
                    fail(file, path, "a dimension exceeds 2^63");
                d.shape.push_back(int64_t(dim));
            }
        } else if (spaceClass != H5S_SCALAR) {
            failLibrary(file, path, "cannot read the dataset's dataspace");
        }

        std::optional<uint64_t> count = 1;
        for (int64_t dim : d.shape)
            count = count ? checkedProduct(*count, uint64_t(dim)) : std::nullopt;
        const size_t fileItem = H5Tget_size(type.get());
        const std::optional<uint64_t> fileBytes = count ? checkedProduct(*count, fileItem) : std::nullopt;
        const std::optional<uint64_t> memoryBytes =
            count && choice.dtype ? checkedProduct(*count, dtypeSize(*choice.dtype)) : fileBytes;
        if (!fileBytes || !memoryBytes)
            fail(file, path,
                 "shape " + shapeToString(d.shape) + " of " + std::to_string(fileItem) +
                     "-byte elements overflows 2^63 bytes");

        d.storedBytes = H5Dget_storage_size(dataset);
        if (!choice.dtype) {
            d.skipReason = choice.skipReason;
            return d;
        }
        const std::string declared =
            "shape " + shapeToString(d.shape) + " of " + d.fileType + " needs " + std::to_string(*fileBytes) + " bytes";
        const int externalFiles = H5Pget_external_count(plist.get());
        const H5D_layout_t layout = H5Pget_layout(plist.get());
        if (externalFiles != 0)
            d.skipReason = "the data is stored in external files, which are not read";
        else if (layout == H5D_VIRTUAL)
            d.skipReason = "virtual datasets map other files, which are not read";
        else if (layout == H5D_CONTIGUOUS && d.storedBytes != 0) {
            const haddr_t offset = H5Dget_offset(dataset);
            if (d.storedBytes != *fileBytes)
                d.skipReason = declared + " but " + std::to_string(d.storedBytes) + " are stored";
            else if (offset == HADDR_UNDEF || offset > fileSize || d.storedBytes > fileSize - offset)
                d.skipReason = declared + " at offset " + std::to_string(offset) + ", past the end of the " +
                               std::to_string(fileSize) + "-byte file";
        } else if (layout == H5D_COMPACT && d.storedBytes != *fileBytes) {
            d.skipReason = declared + " but " + std::to_string(d.storedBytes) + " are stored";
        } else if (*memoryBytes > kHdf5SmallDatasetBytes &&
                   (d.storedBytes == 0 || *memoryBytes / d.storedBytes >= kHdf5MaxExpansion)) {
            d.skipReason = declared + " but only " + std::to_string(d.storedBytes) + " are stored (more than " +
                           std::to_string(kHdf5MaxExpansion) + "x expansion)";
        }
        if (d.skipReason.empty())
            d.dtype = choice.dtype;
        return d;
    }
};

// Runs `walk` in a forked child and waits for it. A child killed by a signal
// means libhdf5 crashed on this file: that becomes an Error naming the file.
// A child that merely throws (a clean library error) is fine: the parent's own
// open reports that error properly. A child that hangs is killed after 60 s.
template <class Walk> void probeStructureInChild(const std::filesystem::path& path, Walk&& walk)
{
    std::fflush(nullptr);
    const pid_t child = ::fork();
    if (child < 0)
        return; // no probe possible (out of processes): fall back to opening directly
    if (child == 0) {
        try {
            walk();
        } catch (...) {
        }
        ::_exit(0);
    }
    int status = 0;
    for (int waited = 0;; ++waited) {
        const pid_t r = ::waitpid(child, &status, WNOHANG);
        if (r == child)
            break;
        if (r < 0 && errno != EINTR)
            return;
        if (waited >= 6000) { // 60 s in 10 ms steps
            ::kill(child, SIGKILL);
            ::waitpid(child, &status, 0);
            fail(path, {}, "the HDF5 library did not finish reading the file's structure within 60 s "
                           "(corrupted file?)");
        }
        ::usleep(10000);
    }
    if (WIFSIGNALED(status))
        fail(path, {},
             "the HDF5 library crashed while reading the file's structure (signal " +
                 std::to_string(WTERMSIG(status)) + "): the file is corrupted");
}

} // namespace

void Hdf5File::openAndWalk(Hdf5File& f, const std::filesystem::path& path, uint64_t fileSize)
{
    const Id access(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
    // Closing the file closes every object still open in it.
    H5Pset_fclose_degree(access.get(), H5F_CLOSE_STRONG);
    f.path_ = path;
    f.handle_ = std::make_shared<Handle>();
    f.handle_->file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, access.get());
    if (f.handle_->file < 0)
        failLibrary(path, {}, "cannot open the HDF5 file (truncated or corrupted?)");

    const Id root(H5Gopen2(f.handle_->file, "/", H5P_DEFAULT), H5Gclose);
    if (!root.valid())
        failLibrary(path, "/", "cannot open the root group");
    Walker walker{path, fileSize, f.datasets_, f.groups_, {}};
    walker.walkGroup(root.get(), "/", 0);
    for (size_t i = 0; i < f.datasets_.size(); ++i)
        f.datasetByPath_.emplace(f.datasets_[i].path, i);
}

Hdf5File Hdf5File::open(const std::filesystem::path& path)
{
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
        fail(path, {}, "no such file");
    const uint64_t fileSize = std::filesystem::file_size(path, ec);
    if (ec)
        fail(path, {}, "cannot read the file size: " + ec.message());

    QuietLibrary quiet;
    const htri_t isHdf5 = H5Fis_hdf5(path.c_str());
    if (isHdf5 == 0)
        fail(path, {}, "not an HDF5 file (no HDF5 signature at offset 0, 512, 1024, ...)");
    if (isHdf5 < 0)
        failLibrary(path, {}, "cannot read the file");

    // libhdf5 1.10 can crash the process on some corrupted structures (a
    // fuzzer found a SIGSEGV inside H5Literate on an 8 KB file). Walking the
    // structure once in a forked child first turns that into an error instead
    // of losing the user's session. We hold the library lock across fork(), so
    // no other thread is inside libhdf5 and the child inherits a consistent
    // library state; the child never touches the lock.
    probeStructureInChild(path, [&] {
        // Leaked on purpose: the child ends with _exit, and destroying the
        // handle would take the library lock the parent holds.
        auto* probe = new Hdf5File;
        openAndWalk(*probe, path, fileSize);
    });
    Hdf5File f;
    openAndWalk(f, path, fileSize);
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

    QuietLibrary quiet;
    const Id ds(H5Dopen2(handle_->file, dataset.path.c_str(), H5P_DEFAULT), H5Dclose);
    if (!ds.valid())
        failLibrary(path_, dataset.path, "cannot open the dataset");
    const Id fileType(H5Dget_type(ds.get()), H5Tclose);
    const Id memType(memoryType(*dataset.dtype, fileType.get()), H5Tclose);
    const Id fileSpace(H5Dget_space(ds.get()), H5Sclose);
    if (!fileType.valid() || !memType.valid() || !fileSpace.valid())
        failLibrary(path_, dataset.path, "cannot prepare the read");
    // The file may have been replaced since open(): the shape must still match.
    if (H5Sget_simple_extent_ndims(fileSpace.get()) != int(dataset.shape.size()))
        fail(path_, dataset.path, "the dataset changed since the file was opened");
    hid_t memSpace = H5S_ALL, selection = H5S_ALL;
    std::optional<Id> memSpaceId;
    if (!wholeScalar) {
        std::vector<hsize_t> start(shape.size(), 0), extent(shape.begin(), shape.end());
        start[0] = hsize_t(begin);
        if (H5Sselect_hyperslab(fileSpace.get(), H5S_SELECT_SET, start.data(), nullptr, extent.data(), nullptr) < 0)
            failLibrary(path_, dataset.path, "cannot select rows");
        memSpaceId.emplace(H5Screate_simple(int(extent.size()), extent.data(), nullptr), H5Sclose);
        memSpace = memSpaceId->get();
        selection = fileSpace.get();
    }
    if (H5Dread(ds.get(), memType.get(), memSpace, selection, H5P_DEFAULT, out.mutableRawData()) < 0)
        failLibrary(path_, dataset.path, "cannot read the data (corrupted or truncated?)");
    if (*dataset.dtype == DType::Bool)
        for (uint8_t& v : out.mutableValues<uint8_t>())
            v = v != 0;
    return out;
}

std::vector<std::string> Hdf5File::attributeNames(std::string_view objectPath) const
{
    const std::string object = normalizeHdf5Path(objectPath);
    QuietLibrary quiet;
    std::vector<std::string> names;
    auto collect = [](hid_t, const char* name, const H5A_info_t*, void* data) -> herr_t {
        static_cast<std::vector<std::string>*>(data)->push_back(name);
        return 0;
    };
    hsize_t index = 0;
    if (H5Aiterate_by_name(handle_->file, object.c_str(), H5_INDEX_NAME, H5_ITER_INC, &index, collect, &names,
                           H5P_DEFAULT) < 0)
        failLibrary(path_, object, "cannot list the attributes");
    return names;
}

std::optional<std::vector<std::string>> Hdf5File::stringsAttribute(std::string_view objectPath,
                                                                   std::string_view name) const
{
    const std::string object = normalizeHdf5Path(objectPath);
    const std::string attrName(name);
    const std::string where = object + " attribute '" + attrName + "'";
    QuietLibrary quiet;
    const htri_t exists = H5Aexists_by_name(handle_->file, object.c_str(), attrName.c_str(), H5P_DEFAULT);
    if (exists < 0)
        failLibrary(path_, object, "cannot look up attribute '" + attrName + "'");
    if (exists == 0)
        return std::nullopt;
    const Id attr(H5Aopen_by_name(handle_->file, object.c_str(), attrName.c_str(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    const Id type(attr.valid() ? H5Aget_type(attr.get()) : -1, H5Tclose);
    const Id space(attr.valid() ? H5Aget_space(attr.get()) : -1, H5Sclose);
    if (!type.valid() || !space.valid())
        failLibrary(path_, where, "cannot open the attribute");
    const hssize_t n = H5Sget_simple_extent_npoints(space.get());
    // An empty list has no element type to speak of: h5py stores Python's []
    // (Keras's weight_names of a layer without weights) as float64.
    if (H5Tget_class(type.get()) != H5T_STRING && n == 0 && H5Sget_simple_extent_type(space.get()) == H5S_SIMPLE)
        return std::vector<std::string>{};
    if (H5Tget_class(type.get()) != H5T_STRING)
        fail(path_, where, "expected a string attribute, found " + chooseType(type.get()).words);
    if (n < 0 || n > (1 << 24))
        fail(path_, where, "holds " + std::to_string(n) + " strings (at most 2^24 accepted)");

    std::vector<std::string> out;
    if (H5Tis_variable_str(type.get()) > 0) {
        const Id memType(H5Tcopy(H5T_C_S1), H5Tclose);
        H5Tset_size(memType.get(), H5T_VARIABLE);
        H5Tset_cset(memType.get(), H5Tget_cset(type.get()));
        std::vector<char*> pointers(size_t(n), nullptr);
        if (n > 0 && H5Aread(attr.get(), memType.get(), pointers.data()) < 0)
            failLibrary(path_, where, "cannot read the attribute");
        for (char* p : pointers)
            out.emplace_back(p ? p : "");
#if H5_VERSION_GE(1, 12, 0)
        H5Treclaim(memType.get(), space.get(), H5P_DEFAULT, pointers.data());
#else
        H5Dvlen_reclaim(memType.get(), space.get(), H5P_DEFAULT, pointers.data());
#endif
        return out;
    }
    const size_t item = H5Tget_size(type.get());
    const std::optional<uint64_t> total = checkedProduct(uint64_t(n), item);
    if (item == 0 || !total || *total > (256u << 20))
        fail(path_, where, "fixed-length strings larger than 256 MiB in total");
    std::vector<char> bytes(size_t(*total), '\0');
    if (n > 0 && H5Aread(attr.get(), type.get(), bytes.data()) < 0)
        failLibrary(path_, where, "cannot read the attribute");
    const char pad = H5Tget_strpad(type.get()) == H5T_STR_SPACEPAD ? ' ' : '\0';
    for (hssize_t i = 0; i < n; ++i) {
        std::string s(bytes.data() + size_t(i) * item, item);
        if (pad == '\0')
            s.resize(std::strlen(s.c_str()));
        else
            s.erase(s.find_last_not_of(' ') + 1);
        out.push_back(std::move(s));
    }
    return out;
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
