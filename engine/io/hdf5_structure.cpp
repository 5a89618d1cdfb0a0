#include "io/hdf5_structure.h"

#include <cstring>
#include <limits>

#include "core/error.h"
#include "io/hdf5_library.h"

namespace qs::hdf5 {

std::string Walker::identity(hid_t object, const std::string& path)
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

void Walker::walkGroup(hid_t group, const std::string& path, int depth)
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

Hdf5Dataset Walker::describe(hid_t dataset, const std::string& path)
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

namespace {

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

} // namespace

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

} // namespace qs::hdf5
