#pragma once
// What the child process of Hdf5File::open() reads of a file's structure: the
// tree of groups and datasets (Walker) and the attributes of every listed
// object. Internal to io.

#include <hdf5.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "io/hdf5_file.h"

namespace qs {

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

namespace hdf5 {

// Walks the tree of groups from a group in the child process (hard links
// only, each object once) and describes every dataset it reaches; errors
// name the file and the object.
struct Walker {
    const std::filesystem::path& file;
    uint64_t fileSize;
    std::vector<Hdf5Dataset>& datasets;
    std::vector<std::string>& groups;
    std::set<std::string> visited; // object identities already listed

    // A key that is equal for two links to the same object.
    std::string identity(hid_t object, const std::string& path);
    // Lists `group` (at `path`, nested `depth` deep) and everything below it.
    void walkGroup(hid_t group, const std::string& path, int depth);
    // The dataset at `path`: shape, stored type, and why read() refuses it, if it does.
    Hdf5Dataset describe(hid_t dataset, const std::string& path);
};

// Every attribute of `object` (a group or dataset path) in name order; an
// attribute that does not hold strings, or a list that fails, keeps its Error.
Hdf5File::Attributes::OfObject readAttributes(hid_t file, const std::filesystem::path& path, const std::string& object);

} // namespace hdf5

} // namespace qs
