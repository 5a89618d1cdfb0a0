#pragma once
// The thin C++ layer over libhdf5 that Hdf5File's contained child processes
// use (io/hdf5_file.h says why libhdf5 runs only there): quiet error handling,
// identifiers closed on scope exit, errors that name the file and the object,
// and how stored element types map to tensor types. Internal to io.

#include <hdf5.h>

#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "core/dtype.h"

namespace qs::hdf5 {

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

// Throws Error("<file>: <object>: <what>") (no object: "<file>: <what>").
[[noreturn]] void fail(const std::filesystem::path& file, std::string_view object, const std::string& what);
// The same with HDF5's innermost description appended; clears HDF5's error stack.
[[noreturn]] void failLibrary(const std::filesystem::path& file, std::string_view object, const std::string& what);

// What a stored type becomes: the tensor dtype, or a reason to skip it.
struct TypeChoice {
    std::optional<DType> dtype;
    std::string skipReason;
    std::string words;
};
TypeChoice chooseType(hid_t type);

// The native memory type a dataset of `dtype` (chosen by chooseType for
// `fileType`) is read into; the caller closes it.
hid_t memoryType(DType dtype, hid_t fileType);

// a × b, or nothing when it exceeds int64.
inline std::optional<uint64_t> checkedProduct(uint64_t a, uint64_t b)
{
    constexpr uint64_t limit = uint64_t(std::numeric_limits<int64_t>::max());
    if (a != 0 && b > limit / a)
        return std::nullopt;
    return a * b;
}

// Opens `path` read-only in the calling (child) process; closing the file
// closes every object still open in it.
hid_t openFile(const std::filesystem::path& path);

} // namespace qs::hdf5
