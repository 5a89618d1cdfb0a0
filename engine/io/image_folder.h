#pragma once
// A folder of images as a DataSource: each image decoded, resized, cropped and
// normalised by a recipe into one row of a float32 input, with labels taken
// from sub-folder names.
//
// Decoding is not engine code (the engine links no image library): an
// ImageDecoder turns a file into 8-bit RGB pixels; widgets/ provides one on
// QImage. Everything after decoding is here, so the numbers do not depend on
// the decoder's toolkit:
//   1. resize (bilinear) so that the shorter side is `resizeShorter` and the
//      longer keeps the aspect ratio (rounded to the nearest pixel); 0 skips it.
//      Bilinear with half-pixel centres: output pixel i samples the source at
//      (i + 0.5) · in/out − 0.5, clamped to [0, in − 1], weighting its two
//      neighbours — what OpenCV's INTER_LINEAR and torchvision's
//      resize(antialias=False) compute. No antialiasing filter: a reduction by
//      more than 2× skips source pixels. Values stay float (not rounded to 8 bits).
//   2. center crop cropHeight × cropWidth: offsets floor((resized − crop) / 2);
//      an image smaller than the crop after resizing is an Error naming it.
//   3. scale to [0, 1] (÷ 255), then (v − mean[c]) / std[c] per output channel.
//   4. channel order RGB or BGR; layout NCHW ([N, 3, H, W]) or NHWC ([N, H, W, 3]).
// mean and std are given in the output channel order.
//
// Files: with labelsFromFolders, every sub-folder (sorted by name) is a class,
// its label the index in that order, and its images (sorted by name) are the
// samples; an image directly in the folder is then an Error. Without it, every
// image in the folder and its sub-folders, sorted by relative path, and no
// labels. Files whose extension the decoder does not take are skipped and
// listed by skippedFiles().

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "io/data_source.h"

namespace qs {

// 8-bit RGB pixels, row-major [height, width, 3].
struct Rgb8Image {
    int64_t height = 0;
    int64_t width = 0;
    std::vector<uint8_t> pixels; // height · width · 3 bytes: R, G, B per pixel
};

class ImageDecoder {
public:
    virtual ~ImageDecoder() = default;
    // File name extensions it decodes, lower case with the dot (".png").
    virtual std::vector<std::string> extensions() const = 0;
    // The image as RGB (grey and alpha converted, alpha dropped). Throws Error
    // naming the file when it cannot be decoded.
    virtual Rgb8Image decode(const std::filesystem::path& file) const = 0;
};

enum class ImageLayout { NCHW, NHWC };
enum class ChannelOrder { RGB, BGR };

struct ImageRecipe {
    int64_t resizeShorter = 256;               // the shorter side after resizing; 0 = no resize
    int64_t cropHeight = 224;                  // center crop height
    int64_t cropWidth = 224;                   // center crop width
    std::array<float, 3> mean{0, 0, 0};        // subtracted after scaling to [0, 1], per output channel
    std::array<float, 3> std{1, 1, 1};         // divides after the mean, per output channel; must be > 0
    ImageLayout layout = ImageLayout::NCHW;    // [N, 3, H, W] or [N, H, W, 3]
    ChannelOrder channels = ChannelOrder::RGB; // order of the 3 channels
    bool labelsFromFolders = true;             // sub-folder names (sorted) are the classes
};

// Steps 1–4 on one image: float32 [3, H, W] (NCHW) or [H, W, 3] (NHWC).
// `name` is the image's file, for errors.
Tensor preprocessImage(const Rgb8Image& image, const ImageRecipe& recipe, const std::string& name);

class ImageFolderSource final : public DataSource {
public:
    // Lists the folder (nothing decoded yet). With a model, its single float32
    // input must take [N, 3, H, W] (or NHWC) rows. Throws Error.
    ImageFolderSource(const std::filesystem::path& folder, const ImageRecipe& recipe,
                      std::shared_ptr<const ImageDecoder> decoder, const DataSourceOptions& options = {},
                      const Model* model = nullptr);

    const std::vector<std::filesystem::path>& files() const { return files_; }
    // The class of each label value (sub-folder names); empty without labels.
    const std::vector<std::string>& classNames() const { return classNames_; }
    const std::vector<std::filesystem::path>& skippedFiles() const { return skipped_; }

protected:
    Tensor readRows(size_t index, int64_t count) override;
    void restart() override { imagePosition_ = labelPosition_ = 0; }

private:
    ImageRecipe recipe_;
    std::shared_ptr<const ImageDecoder> decoder_;
    std::vector<std::filesystem::path> files_;
    std::vector<int64_t> labelOf_;
    std::vector<std::string> classNames_;
    std::vector<std::filesystem::path> skipped_;
    int64_t imagePosition_ = 0;
    int64_t labelPosition_ = 0;
};

} // namespace qs
