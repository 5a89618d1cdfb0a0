#pragma once
// Reading HDF5 files (HDF5 C library): the tree of groups and datasets, the
// numeric datasets as tensors, and the string attributes Keras files carry.
//
// open() walks the whole tree once (hard links only: soft and external links
// are not followed, and an object reached twice is listed once, so a cyclic
// file cannot loop) and describes every dataset: path, shape, storage type.
// Datasets that cannot become a tensor are listed with the reason and skipped
// by read(): strings, compounds, references, variable-length and opaque data,
// null dataspaces, data kept in external files or virtual mappings (which
// would read outside this file), floats of unusual layouts.
//
// Sizes are checked before anything is allocated: every dimension and the
// element count × item size must fit in 63 bits; a contiguous dataset must
// store exactly that many bytes inside the file; a chunked (possibly
// compressed) dataset may not expand more than kHdf5MaxExpansion times its
// stored bytes (deflate cannot do better than ~1032:1), except below
// kHdf5SmallDatasetBytes, which a fill value alone may cover.
//
// HDF5's error stack is never printed: every failure becomes a qs::Error that
// names the file, the object path and what was being done, followed by
// HDF5's innermost description.
//
// libhdf5 (1.10 in Debian 12) can crash, or allocate without end, on a
// corrupted file (docs/robustness.md). So this process never calls it: every
// call runs in a forked child under core/contained_call.h's bounds (1 GiB of
// memory beyond the process's size, plus one read slab; 60 s without
// progress), and a child that crashes, runs out of its budget or stalls
// becomes an Error naming the file and the dataset. open() runs one child that
// walks the tree, reads every attribute of the listed groups and datasets (so
// the attribute accessors need no child) and the small datasets (so loading a
// Keras file takes one child, not one per weight: a child costs a fork, about
// 3-10 ms). Every other read() / readRows() runs one child that opens the file
// again and streams the rows back in slabs of at most kHdf5ReadSlabBytes.
// Objects may be used from several threads.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"

namespace qs {

// How many times its stored size a chunked dataset may expand when read.
inline constexpr uint64_t kHdf5MaxExpansion = 1100;
// Datasets up to this many bytes need no stored bytes (fill values).
inline constexpr uint64_t kHdf5SmallDatasetBytes = 1ull << 20;
// Deepest group nesting walked.
inline constexpr int kHdf5MaxDepth = 64;
// Rows are read and sent back in slabs of at most this many bytes (at least one row).
inline constexpr uint64_t kHdf5ReadSlabBytes = uint64_t(64) << 20;
// open() also reads datasets of at most kHdf5PrefetchDatasetBytes, in file
// order, until they total kHdf5PrefetchTotalBytes; read() hands each over once.
inline constexpr uint64_t kHdf5PrefetchDatasetBytes = uint64_t(16) << 20;
inline constexpr uint64_t kHdf5PrefetchTotalBytes = uint64_t(64) << 20;

struct Hdf5Dataset {
    std::string path;           // absolute, "/model_weights/dense/dense/kernel:0"
    Shape shape;                // [] for a scalar dataspace
    std::optional<DType> dtype; // the tensor type read() returns; empty when skipped
    std::string skipReason;     // why read() refuses it (empty when dtype is set)
    std::string fileType;       // the stored type in words: "float32 little-endian", "string", ...
    uint64_t storedBytes = 0;   // bytes the dataset occupies in the file
};

class Hdf5File {
public:
    // Opens and walks `path`; throws an Error naming the file when it is not a
    // readable HDF5 file (missing, truncated, corrupted superblock, ...).
    static Hdf5File open(const std::filesystem::path& path);

    const std::filesystem::path& path() const { return path_; }

    // Every dataset, depth-first with group members in name order.
    const std::vector<Hdf5Dataset>& datasets() const { return datasets_; }
    // Every group, "/" first, in the same order.
    const std::vector<std::string>& groups() const { return groups_; }
    // Absolute or relative-to-root path; nullptr when there is no such dataset.
    const Hdf5Dataset* find(std::string_view path) const;
    bool isGroup(std::string_view path) const;

    // The whole dataset as a native row-major tensor. Throws an Error naming
    // the file and the dataset when it is skipped (with the reason) or when
    // HDF5 fails to read it (corrupted chunk, missing filter, ...).
    Tensor read(const Hdf5Dataset& dataset) const;
    Tensor read(std::string_view path) const;
    // Rows [begin, begin + count) along axis 0 (for streaming data sources).
    Tensor readRows(const Hdf5Dataset& dataset, int64_t begin, int64_t count) const;

    // Names of the attributes of a group or dataset, in name order.
    std::vector<std::string> attributeNames(std::string_view objectPath) const;
    // A string attribute (fixed- or variable-length, ASCII or UTF-8; trailing
    // NULs of fixed-length strings removed), as a list: a scalar attribute
    // gives one string; an empty array of any type gives none (h5py stores
    // an empty Python list as float64). Empty optional when the object has no such attribute;
    // an Error when it exists but does not hold strings.
    std::optional<std::vector<std::string>> stringsAttribute(std::string_view objectPath, std::string_view name) const;
    // The same for an attribute that must hold exactly one string.
    std::optional<std::string> stringAttribute(std::string_view objectPath, std::string_view name) const;

    struct Attributes; // every attribute of the listed objects, read by open()
    struct Prefetched; // small datasets read by open(), until read() takes them

private:
    Hdf5File() = default; // only open() makes one

    std::filesystem::path path_;
    std::shared_ptr<const Attributes> attributes_;
    std::shared_ptr<Prefetched> prefetched_;
    std::vector<Hdf5Dataset> datasets_;
    std::vector<std::string> groups_;
    std::unordered_map<std::string, size_t> datasetByPath_;
};

// Held by every caller of libhdf5 in this process (the HDF5 checkpoint writer)
// and by Hdf5File around each contained child it forks, so that no child is
// forked while another thread is inside the library and inherits its state
// halfway through a call.
std::recursive_mutex& hdf5LibraryMutex();

// "/a/b" for "a/b", "/a/b" and "a/b/".
std::string normalizeHdf5Path(std::string_view path);

} // namespace qs
