#pragma once
// Checkpoints without a graph as weights-only Models: every tensor becomes an
// initializer named as in the file, and the quantizable layers are inferred
// from names and shapes (graph/weight_layout.h, PyTorch layouts assumed).
//
// - safetensors (single or sharded): every tensor, borrowed from the mapping;
//   `__metadata__` becomes the model's metadata. format = "safetensors".
// - .npz: every array. format = "npz".
// - a generic HDF5 file: its floating-point datasets, named by their path
//   without the leading `/` ("encoder/layer0/weight", module "encoder/layer0").
//   Datasets that are not floating point, or that cannot be read (see
//   io/hdf5_file.h), are left out and listed in a warning. format = "hdf5".
//
// loadCheckpointModel() picks the reader by file name: `.safetensors` or
// `.index.json` (sharded), `.npz`, `.h5`/`.hdf5`/`.hdf`/`.he5` (Keras weights
// when the file holds them, io/keras_model.h, else a generic HDF5 tree).

#include <filesystem>

#include "graph/model.h"
#include "io/hdf5_file.h"
#include "io/npz.h"
#include "io/safetensors.h"

namespace qs {

Model checkpointModel(const SafetensorsFile& file);
Model checkpointModel(const NpzFile& file);
Model checkpointModel(const Hdf5File& file);

// Throws an Error naming the file for an extension none of these readers takes.
Model loadCheckpointModel(const std::filesystem::path& path);

} // namespace qs
