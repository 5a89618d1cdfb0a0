#include "io/image_folder.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"

namespace qs {

namespace {

// For each output index along one axis: the two source indices and the weight of the second.
struct LinearTaps {
    std::vector<int64_t> first, second;
    std::vector<float> weight;
};

// Bilinear taps (half-pixel centres) for output indices [begin, begin + count)
// of a resize from `in` to `out` pixels.
LinearTaps linearTaps(int64_t in, int64_t out, int64_t begin, int64_t count)
{
    LinearTaps taps;
    const double step = double(in) / double(out);
    for (int64_t i = begin; i < begin + count; ++i) {
        const double at = std::clamp((double(i) + 0.5) * step - 0.5, 0.0, double(in - 1));
        const auto lo = int64_t(std::floor(at));
        taps.first.push_back(lo);
        taps.second.push_back(std::min(lo + 1, in - 1));
        taps.weight.push_back(float(at - double(lo)));
    }
    return taps;
}

bool hasExtension(const std::filesystem::path& file, const std::vector<std::string>& extensions)
{
    std::string ext = file.extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return std::find(extensions.begin(), extensions.end(), ext) != extensions.end();
}

} // namespace

Tensor preprocessImage(const Rgb8Image& image, const ImageRecipe& recipe, const std::string& name)
{
    const int64_t h = image.height, w = image.width;
    if (h < 1 || w < 1 || image.pixels.size() != size_t(h * w * 3))
        throw Error(name + ": decoded image of " + std::to_string(h) + "x" + std::to_string(w) + " has " +
                    std::to_string(image.pixels.size()) + " bytes of pixels, expected height x width x 3");
    int64_t rh = h, rw = w; // the resized size
    if (recipe.resizeShorter > 0) {
        const double factor = double(recipe.resizeShorter) / double(std::min(h, w));
        rh = h <= w ? recipe.resizeShorter : std::max<int64_t>(1, std::llround(double(h) * factor));
        rw = h <= w ? std::max<int64_t>(1, std::llround(double(w) * factor)) : recipe.resizeShorter;
    }
    const int64_t ch = recipe.cropHeight, cw = recipe.cropWidth;
    if (rh < ch || rw < cw)
        throw Error(name + ": the image is " + std::to_string(rh) + "x" + std::to_string(rw) +
                    (recipe.resizeShorter > 0 ? " after resizing" : "") + ", smaller than the " + std::to_string(ch) +
                    "x" + std::to_string(cw) + " crop");
    // Only the cropped part of the resized image is computed.
    const LinearTaps ys = linearTaps(h, rh, (rh - ch) / 2, ch);
    const LinearTaps xs = linearTaps(w, rw, (rw - cw) / 2, cw);

    const bool nchw = recipe.layout == ImageLayout::NCHW;
    Tensor out(DType::F32, nchw ? Shape{3, ch, cw} : Shape{ch, cw, 3});
    float* o = out.mutableValues<float>().data();
    const uint8_t* p = image.pixels.data();
    for (int c = 0; c < 3; ++c) {
        const int source = recipe.channels == ChannelOrder::RGB ? c : 2 - c;
        const float scale = 1.0f / (255.0f * recipe.std[size_t(c)]);
        const float shift = recipe.mean[size_t(c)] / recipe.std[size_t(c)];
        for (int64_t y = 0; y < ch; ++y) {
            const uint8_t* row0 = p + ys.first[size_t(y)] * w * 3 + source;
            const uint8_t* row1 = p + ys.second[size_t(y)] * w * 3 + source;
            const float fy = ys.weight[size_t(y)];
            for (int64_t x = 0; x < cw; ++x) {
                const int64_t x0 = xs.first[size_t(x)] * 3, x1 = xs.second[size_t(x)] * 3;
                const float fx = xs.weight[size_t(x)];
                const float top = float(row0[x0]) + fx * (float(row0[x1]) - float(row0[x0]));
                const float bottom = float(row1[x0]) + fx * (float(row1[x1]) - float(row1[x0]));
                const float v = top + fy * (bottom - top);
                o[nchw ? (c * ch + y) * cw + x : (y * cw + x) * 3 + c] = v * scale - shift;
            }
        }
    }
    return out;
}

ImageFolderSource::ImageFolderSource(const std::filesystem::path& folder, const ImageRecipe& recipe,
                                     std::shared_ptr<const ImageDecoder> decoder, const DataSourceOptions& options,
                                     const Model* model)
    : DataSource(folder, options), recipe_(recipe), decoder_(std::move(decoder))
{
    const std::string name = folder.string();
    std::error_code ec;
    if (!std::filesystem::is_directory(folder, ec))
        throw Error(name + ": not a folder of images");
    if (recipe.cropHeight < 1 || recipe.cropWidth < 1 || recipe.resizeShorter < 0)
        throw Error(name + ": the image recipe needs a crop of at least 1x1 and a resize size >= 0");
    for (float s : recipe.std)
        if (!(s > 0.0f))
            throw Error(name + ": the image recipe's std values must be > 0");
    const std::vector<std::string> extensions = decoder_->extensions();

    auto sortedEntries = [&](const std::filesystem::path& dir, bool recursive) {
        std::vector<std::filesystem::path> entries;
        if (recursive) {
            for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
                if (!e.is_directory())
                    entries.push_back(e.path());
        } else {
            for (const auto& e : std::filesystem::directory_iterator(dir))
                entries.push_back(e.path());
        }
        std::sort(entries.begin(), entries.end());
        return entries;
    };
    auto take = [&](const std::filesystem::path& file, int64_t label) {
        if (!hasExtension(file, extensions)) {
            skipped_.push_back(file);
            return;
        }
        files_.push_back(file);
        labelOf_.push_back(label);
    };

    if (recipe.labelsFromFolders) {
        for (const auto& entry : sortedEntries(folder, false)) {
            if (!std::filesystem::is_directory(entry)) {
                if (hasExtension(entry, extensions))
                    throw Error(name + ": image '" + entry.filename().string() +
                                "' is outside the class sub-folders (labels come from sub-folder names)");
                skipped_.push_back(entry);
                continue;
            }
            classNames_.push_back(entry.filename().string());
            for (const auto& file : sortedEntries(entry, false))
                if (!std::filesystem::is_directory(file))
                    take(file, int64_t(classNames_.size() - 1));
        }
    } else {
        for (const auto& file : sortedEntries(folder, true))
            take(file, 0);
    }
    if (files_.empty())
        throw Error(name + ": holds no images the decoder reads (" + std::to_string(skipped_.size()) + " other files)");

    const int64_t n = int64_t(files_.size());
    const bool nchw = recipe.layout == ImageLayout::NCHW;
    DataArray images{
        "input", name, DType::F32,
        nchw ? Shape{3, recipe.cropHeight, recipe.cropWidth} : Shape{recipe.cropHeight, recipe.cropWidth, 3}, n};
    std::vector<DataArray> inputs{images};
    if (model)
        inputs = matchModelInputs(inputs, *model, name);
    std::optional<DataArray> labels;
    if (recipe.labelsFromFolders)
        labels = DataArray{"labels", name, DType::I64, {}, n};
    setArrays(std::move(inputs), std::move(labels));
}

Tensor ImageFolderSource::readRows(size_t index, int64_t count)
{
    if (index == 1) { // labels
        count = std::min(count, int64_t(files_.size()) - labelPosition_);
        Tensor labels(DType::I64, {count});
        for (int64_t i = 0; i < count; ++i)
            labels.mutableValues<int64_t>()[size_t(i)] = labelOf_[size_t(labelPosition_ + i)];
        labelPosition_ += count;
        return labels;
    }
    count = std::min(count, int64_t(files_.size()) - imagePosition_);
    Shape shape{count};
    shape.insert(shape.end(), inputs()[0].rowShape.begin(), inputs()[0].rowShape.end());
    Tensor batch(DType::F32, shape);
    const size_t rowBytes = size_t(shapeElementCount(inputs()[0].rowShape)) * sizeof(float);
    auto* out = static_cast<std::byte*>(batch.mutableRawData());
    for (int64_t i = 0; i < count; ++i) {
        const std::filesystem::path& file = files_[size_t(imagePosition_ + i)];
        const Tensor row = preprocessImage(decoder_->decode(file), recipe_, file.string());
        std::memcpy(out + size_t(i) * rowBytes, row.rawData(), rowBytes);
    }
    imagePosition_ += count;
    return batch;
}

} // namespace qs
