#pragma once
// Text as calibration and evaluation data for a causal language model
// (graph/language_model.h) opened from a Hugging Face folder: a UTF-8 `.txt`
// file is tokenized by the folder's tokenizer.json (text/tokenizer.h) and cut
// into rows of DataSourceOptions::sequenceLength tokens (the model's
// `input_ids`, int64 [rows, sequence]). When the tokenizer's post-processor
// puts BOS before a text (Llama 2, Llama 3), every row starts with BOS and
// holds sequenceLength - 1 tokens of text, as a model sees a document's start;
// the tokens after the last whole row are left out. A model that is not a
// causal language model, a folder without tokenizer.json, a file larger than
// kMaxTextDataBytes, invalid UTF-8 or a text shorter than one row is an Error
// naming the file.

#include <cstdint>
#include <filesystem>
#include <memory>

#include "graph/model.h"
#include "io/data_source.h"

namespace qs {

inline constexpr uint64_t kMaxTextDataBytes = 256ull << 20;
inline constexpr int64_t kDefaultSequenceLength = 512;

std::unique_ptr<DataSource> openTextDataSource(const std::filesystem::path& path, const DataSourceOptions& options,
                                               const Model* model);

} // namespace qs
