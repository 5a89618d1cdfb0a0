#include "io/hdf5_file.h"

#include <hdf5.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <mutex>
#include <set>
#include <system_error>

#include "core/contained_call.h"
#include "core/error.h"

namespace qs {

namespace {

// Switches HDF5's automatic error printing off for its lifetime. Used only in
// the child processes that call the library (see Hdf5File in the header); each
// is single-threaded, so no lock is needed.
class QuietLibrary {
public:
    QuietLibrary()
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

// A string attribute of `object` as a list (see stringsAttribute in the
// header); empty when there is no such attribute.
std::optional<std::vector<std::string>> readStringsAttribute(hid_t file, const std::filesystem::path& path,
                                                             const std::string& object, const std::string& attrName)
{
    const std::string where = object + " attribute '" + attrName + "'";
    const htri_t exists = H5Aexists_by_name(file, object.c_str(), attrName.c_str(), H5P_DEFAULT);
    if (exists < 0)
        failLibrary(path, object, "cannot look up attribute '" + attrName + "'");
    if (exists == 0)
        return std::nullopt;
    const Id attr(H5Aopen_by_name(file, object.c_str(), attrName.c_str(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    const Id type(attr.valid() ? H5Aget_type(attr.get()) : -1, H5Tclose);
    const Id space(attr.valid() ? H5Aget_space(attr.get()) : -1, H5Sclose);
    if (!type.valid() || !space.valid())
        failLibrary(path, where, "cannot open the attribute");
    const hssize_t n = H5Sget_simple_extent_npoints(space.get());
    // An empty list has no element type to speak of: h5py stores Python's []
    // (Keras's weight_names of a layer without weights) as float64.
    if (H5Tget_class(type.get()) != H5T_STRING && n == 0 && H5Sget_simple_extent_type(space.get()) == H5S_SIMPLE)
        return std::vector<std::string>{};
    if (H5Tget_class(type.get()) != H5T_STRING)
        fail(path, where, "expected a string attribute, found " + chooseType(type.get()).words);
    if (n < 0 || n > (1 << 24))
        fail(path, where, "holds " + std::to_string(n) + " strings (at most 2^24 accepted)");

    std::vector<std::string> out;
    if (H5Tis_variable_str(type.get()) > 0) {
        const Id memType(H5Tcopy(H5T_C_S1), H5Tclose);
        H5Tset_size(memType.get(), H5T_VARIABLE);
        H5Tset_cset(memType.get(), H5Tget_cset(type.get()));
        std::vector<char*> pointers(size_t(n), nullptr);
        if (n > 0 && H5Aread(attr.get(), memType.get(), pointers.data()) < 0)
            failLibrary(path, where, "cannot read the attribute");
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
        fail(path, where, "fixed-length strings larger than 256 MiB in total");
    std::vector<char> bytes(size_t(*total), '\0');
    if (n > 0 && H5Aread(attr.get(), type.get(), bytes.data()) < 0)
        failLibrary(path, where, "cannot read the attribute");
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

// Opens `path` read-only in the calling (child) process; closing the file
// closes every object still open in it.
hid_t openFile(const std::filesystem::path& path)
{
    const Id access(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
    H5Pset_fclose_degree(access.get(), H5F_CLOSE_STRONG);
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, access.get());
    if (file < 0)
        failLibrary(path, {}, "cannot open the HDF5 file (truncated or corrupted?)");
    return file;
}

// The answers of the child processes, as bytes: little-endian integers and
// length-prefixed strings. The parent checks every length it reads.
class AnswerWriter {
public:
    void number(uint64_t v)
    {
        for (int i = 0; i < 8; ++i, v >>= 8)
            bytes_.push_back(char(v & 0xff));
    }
    void text(std::string_view s)
    {
        number(s.size());
        bytes_.append(s);
    }
    std::string take() { return std::move(bytes_); }

private:
    std::string bytes_;
};

class AnswerReader {
public:
    AnswerReader(std::string_view bytes, const std::filesystem::path& file) : bytes_(bytes), file_(file) {}
    uint64_t number()
    {
        need(8);
        uint64_t v = 0;
        for (int i = 7; i >= 0; --i)
            v = (v << 8) | uint8_t(bytes_[size_t(i)]);
        bytes_.remove_prefix(8);
        return v;
    }
    // A count of items that each take at least `minBytes` of what is left.
    size_t count(size_t minBytes)
    {
        const uint64_t n = number();
        if (n > bytes_.size() / std::max<size_t>(minBytes, 1))
            garbled();
        return size_t(n);
    }
    std::string text()
    {
        const uint64_t n = number();
        need(n);
        std::string s(bytes_.substr(0, size_t(n)));
        bytes_.remove_prefix(size_t(n));
        return s;
    }
    bool done() const { return bytes_.empty(); }

private:
    void need(uint64_t n)
    {
        if (n > bytes_.size())
            garbled();
    }
    [[noreturn]] void garbled() const { fail(file_, {}, "the HDF5 reading process sent a garbled answer"); }

    std::string_view bytes_;
    const std::filesystem::path& file_;
};

// Throws the Error for a child that did not answer, naming the file and the
// object and saying what it was doing.
[[noreturn]] void failContained(const std::filesystem::path& file, std::string_view object,
                                const ContainedOutcome& outcome, const std::string& doing)
{
    using Status = ContainedOutcome::Status;
    switch (outcome.status) {
    case Status::Crashed:
        fail(file, object, "the HDF5 library " + outcome.reason() + " while " + doing + ": the file is corrupted");
    case Status::OutOfMemory:
        fail(file, object,
             "the HDF5 library " + outcome.reason() + " while " + doing + ": the file is corrupted or too large");
    case Status::TimedOut:
        fail(file, object, "the HDF5 library " + outcome.reason() + " while " + doing + " (corrupted file?)");
    default:
        fail(file, object, "the HDF5 reading process " + outcome.reason() + " while " + doing);
    }
}

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

// Attributes of the listed groups and datasets, read once by open().
struct Hdf5File::Attributes {
    struct Attribute {
        std::string name;
        std::optional<std::vector<std::string>> strings; // the value, when it holds strings
        std::string error;                               // else the Error stringsAttribute() throws
    };
    struct OfObject {
        std::string listError;             // the Error attributeNames() throws, when listing failed
        std::vector<Attribute> attributes; // in name order
    };
    std::unordered_map<std::string, OfObject> byObject;
};

// Small datasets open() read along with the tree, until read() takes them.
struct Hdf5File::Prefetched {
    std::mutex mutex;
    std::unordered_map<std::string, Tensor> tensors;     // by dataset path
    std::unordered_map<std::string, std::string> errors; // the Error reading a dataset gave
};

namespace {

Hdf5File::Attributes::OfObject readAttributes(hid_t file, const std::filesystem::path& path, const std::string& object)
{
    Hdf5File::Attributes::OfObject out;
    std::vector<std::string> names;
    auto collect = [](hid_t, const char* name, const H5A_info_t*, void* data) -> herr_t {
        static_cast<std::vector<std::string>*>(data)->push_back(name);
        return 0;
    };
    hsize_t index = 0;
    if (H5Aiterate_by_name(file, object.c_str(), H5_INDEX_NAME, H5_ITER_INC, &index, collect, &names, H5P_DEFAULT) <
        0) {
        try {
            failLibrary(path, object, "cannot list the attributes");
        } catch (const Error& e) {
            out.listError = e.what();
        }
        return out;
    }
    for (const std::string& name : names) {
        Hdf5File::Attributes::Attribute a;
        a.name = name;
        try {
            a.strings = readStringsAttribute(file, path, object, name);
            if (!a.strings)
                a.error = path.string() + ": " + object + ": attribute '" + name + "' vanished while being read";
        } catch (const Error& e) {
            a.error = e.what();
        }
        out.attributes.push_back(std::move(a));
    }
    return out;
}

std::string encodeStructure(const std::vector<std::string>& groups, const std::vector<Hdf5Dataset>& datasets,
                            const Hdf5File::Attributes& attributes)
{
    AnswerWriter w;
    w.number(groups.size());
    for (const std::string& g : groups)
        w.text(g);
    w.number(datasets.size());
    for (const Hdf5Dataset& d : datasets) {
        w.text(d.path);
        w.number(d.shape.size());
        for (int64_t dim : d.shape)
            w.number(uint64_t(dim));
        w.number(d.dtype ? uint64_t(*d.dtype) + 1 : 0);
        w.text(d.skipReason);
        w.text(d.fileType);
        w.number(d.storedBytes);
    }
    w.number(attributes.byObject.size());
    for (const auto& [object, of] : attributes.byObject) {
        w.text(object);
        w.text(of.listError);
        w.number(of.attributes.size());
        for (const auto& a : of.attributes) {
            w.text(a.name);
            w.text(a.error);
            w.number(a.strings ? a.strings->size() + 1 : 0);
            if (a.strings)
                for (const std::string& s : *a.strings)
                    w.text(s);
        }
    }
    return w.take();
}

void decodeStructure(std::string_view bytes, const std::filesystem::path& path, std::vector<std::string>& groups,
                     std::vector<Hdf5Dataset>& datasets, Hdf5File::Attributes& attributes)
{
    AnswerReader r(bytes, path);
    for (size_t n = r.count(8); n > 0; --n)
        groups.push_back(r.text());
    for (size_t n = r.count(48); n > 0; --n) {
        Hdf5Dataset d;
        d.path = r.text();
        for (size_t rank = r.count(8); rank > 0; --rank)
            d.shape.push_back(int64_t(r.number() & uint64_t(std::numeric_limits<int64_t>::max())));
        const uint64_t dtype = r.number();
        if (dtype > 0)
            d.dtype = DType(uint8_t(std::min<uint64_t>(dtype - 1, uint64_t(DType::Bool))));
        d.skipReason = r.text();
        d.fileType = r.text();
        d.storedBytes = r.number();
        datasets.push_back(std::move(d));
    }
    for (size_t n = r.count(24); n > 0; --n) {
        const std::string object = r.text();
        Hdf5File::Attributes::OfObject& of = attributes.byObject[object];
        of.listError = r.text();
        for (size_t count = r.count(24); count > 0; --count) {
            Hdf5File::Attributes::Attribute a;
            a.name = r.text();
            a.error = r.text();
            if (const uint64_t strings = r.number(); strings > 0) {
                a.strings.emplace();
                for (uint64_t i = 1; i < strings; ++i)
                    a.strings->push_back(r.text());
            }
            of.attributes.push_back(std::move(a));
        }
    }
    if (!r.done())
        fail(path, {}, "the HDF5 reading process sent a garbled answer");
}

} // namespace

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
                channel.send("S" + start.take());
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
