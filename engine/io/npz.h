#pragma once
// NumPy .npz archives (np.savez, np.savez_compressed): a zip archive whose
// `NAME.npy` members are arrays named NAME.
//
// open() reads the zip directory (io/zip_archive.h validates it) and the .npy
// header of every array (for a deflated member only the header's bytes are
// inflated), so names, dtypes and shapes are known without touching the data.
// read() loads one array: a stored, little-endian, C-order member whose data
// is aligned in memory is borrowed from the mapping (zero copy, after its
// CRC-32 is checked); anything else (deflated, big-endian, Fortran order,
// misaligned, bool) becomes an owned tensor, inflated straight into it where
// the layout allows. Members not ending in `.npy` are listed, not loaded.
//
// Errors are qs::Error naming the archive, the member and the field or offset.

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"
#include "io/npy_header.h"
#include "io/zip_archive.h"

namespace qs {

struct NpzArray {
    std::string name; // member name without ".npy"
    NpyHeader header; // dtype, shape, byte order, Fortran order, data offset within the member
    size_t entry = 0; // index into the archive's entries()
    bool compressed = false;
};

class NpzFile {
public:
    static NpzFile open(const std::filesystem::path& path);

    const std::filesystem::path& path() const { return archive_.path(); }
    // In archive order.
    const std::vector<NpzArray>& arrays() const { return arrays_; }
    // nullptr when absent.
    const NpzArray* find(std::string_view name) const;
    // Members that are not .npy arrays.
    const std::vector<std::string>& otherMembers() const { return otherMembers_; }

    // Loads an array (see above). The name form throws an Error naming the
    // archive when there is no such array.
    Tensor read(const NpzArray& array) const;
    Tensor read(std::string_view name) const;
    // The bytes read(array) allocates (0 when it borrows); read() refuses an
    // array for which this passes the per-file budget of io/load_budget.h.
    uint64_t allocatedBytes(const NpzArray& array) const;

    const ZipArchive& archive() const { return archive_; }

private:
    explicit NpzFile(ZipArchive archive) : archive_(std::move(archive)) {}

    ZipArchive archive_;
    std::vector<NpzArray> arrays_;
    std::unordered_map<std::string, size_t> byName_;
    std::vector<std::string> otherMembers_;
};

// Reads an array's rows (slices along axis 0) front to back without loading
// the whole array: what a data source batching a large compressed .npz needs.
// Rows come out in native layout (byte-swapped, bools 0/1). A Fortran-order
// array has no contiguous rows, so it is read whole on the first call and
// sliced. The NpzFile must outlive the reader.
class NpzRowReader {
public:
    // A 0-d array has no rows: Error.
    NpzRowReader(const NpzFile& file, const NpzArray& array);

    int64_t rowCount() const { return array_.header.shape.at(0); }
    // Rows delivered so far.
    int64_t position() const { return position_; }
    // The next min(count, rows left) rows, shape [n, dims…]; zero rows at the end.
    Tensor next(int64_t count);

private:
    const NpzFile& file_;
    NpzArray array_;
    std::unique_ptr<ZipEntryReader> reader_; // C order: positioned at the next row
    std::optional<Tensor> whole_;            // Fortran order: the array, once read
    int64_t rowBytes_ = 0;
    int64_t position_ = 0;
};

// Writes `arrays` as np.savez does: a zip of stored (uncompressed) `NAME.npy`
// members, in name order, without zip64 (an archive reaching 4 GiB is an Error
// naming the file), written atomically (temporary file renamed into place).
void writeNpz(const std::filesystem::path& path, const std::map<std::string, Tensor>& arrays);

} // namespace qs
