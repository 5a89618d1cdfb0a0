#pragma once
// safetensors checkpoints: one file, or shards listed by a `*.index.json`.
//
// A file is an 8-byte little-endian header length N, N bytes of JSON and the
// data section. Everything in the header is checked before it is trusted:
// 8 + N within the file and N ≤ kSafetensorsMaxHeaderBytes; the header a JSON
// object (valid UTF-8, no duplicate keys); every entry has exactly `dtype`,
// `shape` and `data_offsets`; the dtype is known; dimensions are non-negative
// integers; element count × item size (overflow-checked) equals end − begin;
// begin ≤ end ≤ data size; and the ranges, sorted, tile the data section with
// no overlap and no gap (the format requires every byte to belong to a tensor).
// A tensor holds at most kMaxTensorElements (io/load_budget.h) elements. The
// header is read by SAX events in time linear in its size (a 97 MB header of
// 1e6 tensors opens in seconds); its size cap bounds the number of entries.
// `__metadata__`, if present, must map strings to strings and is kept.
//
// Tensors are borrowed from the memory-mapped file (zero copy). A tensor whose
// bytes are not aligned to its item size in memory (the format does not promise
// alignment) is copied into owned storage on access instead; so is a BOOL
// tensor holding bytes other than 0 and 1, which is normalised to 0/1 as the
// .npy reader does.
//
// Sharded checkpoints: `weight_map` maps each tensor to a shard file relative
// to the index's folder. Absolute paths and `..` components are refused (a
// symlink inside the folder is followed, as Hugging Face caches need). Each
// shard is opened once; every mapped tensor must exist in its shard, and every
// tensor of a shard must be mapped to that shard (so none is in two shards).
//
// Order of entries(): within a file, the order of the header's keys; shards in
// the order of their relative path names. The same files always give the same
// order.
//
// Errors are qs::Error naming the file and the field, tensor or byte offset.

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/mapped_file.h"
#include "core/tensor.h"

namespace qs {

// The largest JSON header accepted (real checkpoints have headers of a few MB).
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100ull << 20;

struct SafetensorsEntry {
    std::string name;
    DType dtype = DType::F32; // storage type; F8_E4M3 and F8_E5M2 are held as U8 codes
    std::string sourceDtype;  // the dtype string of the file: "F32", "BF16", "F8_E4M3", ...
    Shape shape;
    uint64_t begin = 0; // byte range in the data section of its file
    uint64_t end = 0;
    size_t file = 0; // index into SafetensorsFile::files()
};

class SafetensorsFile {
public:
    // Opens a single `.safetensors` file or, for a path ending in `.index.json`,
    // a sharded checkpoint.
    static SafetensorsFile open(const std::filesystem::path& path);

    // The path given to open().
    const std::filesystem::path& path() const { return path_; }
    bool isSharded() const { return sharded_; }
    // The data files: one, or the shards in name order.
    std::vector<std::filesystem::path> files() const;

    const std::vector<SafetensorsEntry>& entries() const { return entries_; }
    // nullptr when there is no tensor of that name.
    const SafetensorsEntry* find(std::string_view name) const;

    // The tensor's data, borrowed from the mapping when aligned (see above).
    // The name form throws an Error naming the file when the tensor is absent.
    Tensor tensor(const SafetensorsEntry& entry) const;
    Tensor tensor(std::string_view name) const;
    // The bytes tensor(entry) allocates: 0 when it borrows, else its size.
    uint64_t allocatedBytes(const SafetensorsEntry& entry) const;

    // A single file's `__metadata__`; for a sharded checkpoint the index's
    // `metadata` object, with non-string values as their JSON text
    // (`total_size` is a number there).
    const std::map<std::string, std::string>& metadata() const { return metadata_; }
    // The `__metadata__` of one data file.
    const std::map<std::string, std::string>& fileMetadata(size_t file) const { return shards_.at(file).metadata; }

    // One data file: its mapping, where its data section starts, its metadata.
    struct Shard {
        std::shared_ptr<const MappedFile> mapping;
        uint64_t dataOffset = 0; // 8 + header length
        std::map<std::string, std::string> metadata;
    };

private:
    const std::byte* data(const SafetensorsEntry& entry) const;
    bool borrows(const SafetensorsEntry& entry) const;

    std::filesystem::path path_;
    bool sharded_ = false;
    std::vector<Shard> shards_;
    std::vector<SafetensorsEntry> entries_;
    std::unordered_map<std::string, size_t> byName_;
    std::map<std::string, std::string> metadata_;
};

// A tensor to write. `dtype` overrides the file dtype of a U8 tensor that holds
// fp8 codes ("F8_E4M3", "F8_E5M2"); empty means the tensor's own dtype.
struct SafetensorsTensor {
    std::string name;
    Tensor tensor;
    std::string dtype;
};

// Writes a safetensors file atomically (a temporary file in the same folder,
// renamed into place). The header keeps the given order and is padded with
// spaces so that the data section starts 8-byte aligned; the data is laid out
// by decreasing item size, so every tensor starts at a multiple of its item
// size with no gap (the format forbids gaps, so a stricter alignment could not
// be had without reordering). Names must be unique, non-empty and not
// `__metadata__`.
void writeSafetensors(const std::filesystem::path& path, const std::vector<SafetensorsTensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

} // namespace qs
