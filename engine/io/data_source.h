#pragma once
// Calibration and evaluation data: batches of model inputs, streamed from a
// file (or a folder of images, io/image_folder.h) rather than loaded whole.
//
// A DataSource holds named input arrays and, optionally, a `labels` array, all
// with the same number of rows (axis 0). next() yields batches of
// `batchSize` rows, the last one shorter unless `dropLast` drops it; the
// batch count is known before the first batch. Each array is read front to
// back (NpzRowReader, Hdf5File::readRows), so memory holds one batch at a time.
//
// Given a Model, the arrays are checked against its inputs before any batch
// is read: every model input needs an array of that name, and no array may be
// left over (besides `labels`); a model with a single input also takes an
// .npy, or a file whose only (non-label) array has any name. Each array's
// dtype must equal the input's, its rank the input's rank, and its
// dimensions after axis 0 the input's fixed dimensions (symbolic ones take
// anything). Without a Model every array except `labels` is an input named as
// in the file (an .npy: named after the file's stem).
//
// Errors are qs::Error naming the file and the array (and, for a mismatch,
// the model input or the other array).

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "graph/model.h"

namespace qs {

// One batch: rows [firstRow, firstRow + rows) of every array.
struct Batch {
    std::map<std::string, Tensor> inputs; // model input name -> [rows, ...]
    std::optional<Tensor> labels;         // [rows, ...] when the source has labels
    int64_t firstRow = 0;
    int64_t rows = 0;
};

// An array of a source as batches will carry it.
struct DataArray {
    std::string name;     // the model input it feeds (or "labels")
    std::string fileName; // the name in the file (an HDF5 path, an npz member, the .npy file)
    DType dtype = DType::F32;
    Shape rowShape;   // the shape of one row (axes after 0)
    int64_t rows = 0; // rows in the file (axis 0)
};

// Rows per batch when neither the model nor the user says otherwise.
inline constexpr int64_t kDefaultBatchSize = 32;

struct DataSourceOptions {
    int64_t batchSize = kDefaultBatchSize; // rows per batch, >= 1
    bool dropLast = false;                 // drop a last batch shorter than batchSize
    // Every batch holds exactly batchSize rows (the model's batch dimension is
    // fixed): rows after the last whole batch are left out (droppedRows()),
    // and fewer rows than one batch is an Error naming the file.
    bool exactBatches = false;
    std::string labelsName = "labels"; // the array holding labels (npz member, HDF5 dataset)
    std::string hdf5Group = "/";       // HDF5: the group holding the datasets
    int64_t sequenceLength = 0;        // text data: tokens per row (0: kDefaultSequenceLength, io/text_data_source.h)
};

class DataSource {
public:
    virtual ~DataSource() = default;
    DataSource(const DataSource&) = delete;
    DataSource& operator=(const DataSource&) = delete;

    // What the data comes from, for messages (a file or a folder).
    const std::filesystem::path& path() const { return path_; }
    // The input arrays, in the model's input order (file order without a model).
    const std::vector<DataArray>& inputs() const { return inputs_; }
    const std::optional<DataArray>& labels() const { return labels_; }
    int64_t rowCount() const { return rowCount_; }
    int64_t batchSize() const { return options_.batchSize; }
    bool exactBatches() const { return options_.exactBatches; }
    // Batches next() yields from the start: ceil(rows / batchSize), or
    // floor with dropLast or exactBatches.
    int64_t batchCount() const;
    // Rows after the last batch next() yields (0 unless dropLast or exactBatches).
    int64_t droppedRows() const { return rowCount_ - std::min(rowCount_, batchCount() * options_.batchSize); }

    // The next batch, or none after the last.
    std::optional<Batch> next();
    // Starts again from the first row.
    void rewind();

protected:
    // Subclasses describe their arrays (check() validates them) and read rows.
    DataSource(std::filesystem::path path, DataSourceOptions options);
    // Sets inputs and labels; arrays with different row counts are an Error
    // naming both.
    void setArrays(std::vector<DataArray> arrays, std::optional<DataArray> labels);
    // The next `count` rows of array `index` (inputs in order, then labels),
    // shape [count, rowShape...]; rows are requested front to back.
    virtual Tensor readRows(size_t index, int64_t count) = 0;
    // Positions every array at row 0 again.
    virtual void restart() = 0;

    DataSourceOptions options_;

private:
    std::filesystem::path path_;
    std::vector<DataArray> inputs_;
    std::optional<DataArray> labels_;
    int64_t rowCount_ = 0;
    int64_t position_ = 0;
};

// The arrays of a file matched to a model's inputs (the rules above). `found`
// are the file's non-label arrays; the result names each after the model
// input it feeds, in the model's order. Throws Error naming `source`.
std::vector<DataArray> matchModelInputs(const std::vector<DataArray>& found, const Model& model,
                                        const std::string& source);

// How a model's data is cut into batches.
struct BatchSizing {
    int64_t batchSize = kDefaultBatchSize;
    // The input whose declared axis 0 fixes the batch size; empty when the
    // model's batch dimension is dynamic (or it has no inputs).
    std::string fixedBy;
    bool fixed() const { return !fixedBy.empty(); }
    // `base` with batchSize set and, for a fixed batch, exactBatches.
    DataSourceOptions apply(DataSourceOptions base = {}) const;
};

// The batch size for `model`'s data: the model's fixed batch dimension when an
// input declares axis 0 as a fixed size (the torch.onnx default is 1), else
// `requested`, else `preferred`. A `requested` size other than the fixed one is
// an Error naming the model file, the input and both sizes; inputs fixing
// different sizes along axis 0 are an Error naming both. `requested` is what a
// user demanded (quantscope-cli --batch-size); `preferred` a default that
// yields to the model (the app's batch size, kDefaultBatchSize).
BatchSizing batchSizingFor(const Model& model, std::optional<int64_t> requested, int64_t preferred = kDefaultBatchSize);

// .npz (`labels` member optional), .npy (one input, no labels) or HDF5
// (datasets in options.hdf5Group), chosen by the file's first bytes. `model`
// may be null. Throws Error naming the file.
std::unique_ptr<DataSource> openDataSource(const std::filesystem::path& path, const DataSourceOptions& options = {},
                                           const Model* model = nullptr);

} // namespace qs
