#pragma once
// One entry point for every model format: loadModel() looks at the file's
// first bytes and picks the loader (io/onnx_loader.h, io/checkpoint_model.h,
// io/keras_model.h); the file name decides only when the bytes do not.
//
// Recognised by their bytes:
//   `\x89HDF\r\n\x1a\n` at offset 0, 512, 1024 or 2048 (HDF5 allows a user
//                 block before the superblock) -> Keras when isKerasFile(),
//                 else a generic HDF5 tree of weights
//   `PK\x03\x04` / `PK\x05\x06` (zip)           -> .npz archive of weights
//   `\x93NUMPY`                                 -> .npy: a weights-only model of one
//                                                 tensor named after the file's stem
//   8-byte little-endian length, then `{`      -> safetensors
// By name, when the bytes say nothing:
//   `*.index.json`                              -> sharded safetensors
//   `*.onnx`, or a first byte 0x08 (ModelProto's ir_version field, which every
//   ONNX writer puts first)                     -> ONNX
// A folder holding config.json                -> a Hugging Face checkpoint folder
//                                                 (io/hf_folder.h)
// Anything else is an Error naming the file and listing these formats.

#include <filesystem>
#include <string>

#include "graph/model.h"

namespace qs {

enum class ModelFormat { Onnx, Safetensors, ShardedSafetensors, Npz, Npy, Hdf5, HuggingFaceFolder };

// The format loadModel() would use; an Error for a missing, unreadable or
// unrecognised file (naming it and the supported formats).
ModelFormat detectModelFormat(const std::filesystem::path& path);

// The model in `path`, by the format detectModelFormat() finds. Errors of the
// loaders propagate unchanged (they name the file and the field at fault).
Model loadModel(const std::filesystem::path& path);

// One line naming the formats loadModel() accepts (for help texts and errors).
std::string supportedModelFormats();

} // namespace qs
