#include "io/text_data_source.h"

#include <fstream>

#include "core/error.h"
#include "graph/language_model.h"
#include "text/tokenizer.h"

namespace qs {

namespace {

class TextDataSource final : public DataSource {
public:
    TextDataSource(const std::filesystem::path& path, const DataSourceOptions& options, const Model* model)
        : DataSource(path, options)
    {
        const std::string name = path.string();
        const std::optional<CausalLanguageModel> lm = model ? causalLanguageModel(*model) : std::nullopt;
        if (!lm)
            throw Error(name + ": text is data only for a causal language model (an input_ids input and a logits "
                               "output, as a Hugging Face folder's model has)" +
                        (model ? "; " + model->sourcePath.string() + " is not one" : std::string()) +
                        "; other models read .npz, .npy or HDF5 arrays");
        const std::filesystem::path tokenizerFile = model->sourcePath / "tokenizer.json";
        std::error_code ec;
        if (!std::filesystem::is_regular_file(tokenizerFile, ec))
            throw Error(name + ": text data is tokenized by the model folder's tokenizer.json, and " +
                        model->sourcePath.string() + " has none (give token ids as an int64 [N, T] .npy instead)");
        const int64_t length = options.sequenceLength > 0 ? options.sequenceLength : kDefaultSequenceLength;
        const uint64_t size = std::filesystem::file_size(path, ec);
        if (ec)
            throw Error(name + ": cannot read (" + ec.message() + ")");
        if (size > kMaxTextDataBytes)
            throw Error(name + ": " + std::to_string(size) + " bytes of text is more than the " +
                        std::to_string(kMaxTextDataBytes >> 20) + " MiB text data may have");
        std::string text(size_t(size), '\0');
        std::ifstream in(path, std::ios::binary);
        if (!in.read(text.data(), std::streamsize(size)))
            throw Error(name + ": cannot read");

        const Tokenizer tokenizer = Tokenizer::load(tokenizerFile);
        std::vector<int32_t> ids;
        try {
            ids = tokenizer.encode(text, {.addSpecialTokens = false});
        } catch (const Error& e) {
            throw Error(name + ": " + e.what());
        }
        // BOS first in every row when the tokenizer puts it before a text.
        const std::vector<int32_t> empty = tokenizer.encode("", {.addSpecialTokens = true});
        if (tokenizer.bosId() && !empty.empty() && empty.front() == *tokenizer.bosId())
            bos_ = *tokenizer.bosId();
        const int64_t textPerRow = length - (bos_ ? 1 : 0);
        if (textPerRow < 1)
            throw Error(name + ": a sequence length of " + std::to_string(length) + " leaves no room for text");
        const int64_t rows = int64_t(ids.size()) / textPerRow;
        if (rows == 0)
            throw Error(name + ": the text is " + std::to_string(ids.size()) + " tokens, fewer than one sequence of " +
                        std::to_string(textPerRow) + " (choose a shorter sequence length)");
        ids_ = std::move(ids);
        length_ = length;
        textPerRow_ = textPerRow;
        DataArray array{lm->tokens, path.filename().string(), DType::I64, Shape{length}, rows};
        setArrays({array}, std::nullopt);
    }

protected:
    Tensor readRows(size_t, int64_t count) override
    {
        Tensor out(DType::I64, {count, length_});
        int64_t* values = out.mutableValues<int64_t>().data();
        for (int64_t r = 0; r < count; ++r, ++row_) {
            int64_t* row = values + r * length_;
            int64_t at = 0;
            if (bos_)
                row[at++] = *bos_;
            for (int64_t t = 0; t < textPerRow_; ++t)
                row[at++] = ids_[size_t(row_ * textPerRow_ + t)];
        }
        return out;
    }

    void restart() override { row_ = 0; }

private:
    std::vector<int32_t> ids_;
    std::optional<int32_t> bos_;
    int64_t length_ = 0, textPerRow_ = 0, row_ = 0;
};

} // namespace

std::unique_ptr<DataSource> openTextDataSource(const std::filesystem::path& path, const DataSourceOptions& options,
                                               const Model* model)
{
    return std::make_unique<TextDataSource>(path, options, model);
}

} // namespace qs
