#pragma once
// The two containers a quantized checkpoint is written to, fed one tensor at a
// time so that a checkpoint larger than memory can be written: the exporter
// (export/checkpoint.cpp) describes every tensor first (name, dtype, shape) and
// hands over a function producing its bytes, called once, when the tensor is
// written.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/cancellation.h"
#include "core/tensor.h"

namespace qs {

struct CheckpointEntry {
    std::string name;               // safetensors key; HDF5 dataset path without the leading `/`
    std::string dtype;              // safetensors dtype string: "F32", "I8", "U8", "F8_E4M3", ...
    Shape shape;
    std::function<Tensor()> bytes;  // the tensor whose raw bytes are the data (any dtype of the same size)
    std::string attribute;          // HDF5: the dataset's `quantscope` attribute (empty: none)
};

// Bytes per element of a safetensors dtype string; an Error for an unknown one.
size_t checkpointItemSize(std::string_view dtype);
// The safetensors dtype string of a storage type.
std::string_view safetensorsDTypeName(DType t);

// Writes entries in the order given for the header; the data section holds
// them by decreasing item size (each tensor aligned to its item size, the
// header padded to 8 bytes). The file is written atomically. Progress is the
// fraction of the entries written.
void writeSafetensorsCheckpoint(const std::filesystem::path& out, const std::vector<CheckpointEntry>& entries,
                                const std::map<std::string, std::string>& metadata,
                                const CancellationToken& cancel, const ProgressCallback& progress);

// One dataset per entry at `/` + name (intermediate groups created); the root
// group gets the attribute `quantscope` = `manifest`. Written to a temporary
// file in the same folder and renamed into place.
void writeHdf5Checkpoint(const std::filesystem::path& out, const std::vector<CheckpointEntry>& entries,
                         const std::string& manifest, const CancellationToken& cancel,
                         const ProgressCallback& progress);

} // namespace qs
