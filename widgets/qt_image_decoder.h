#pragma once
// The image decoder of image-folder data sources (io/image_folder.h), on
// QImage: PNG, JPEG and BMP (the formats Qt's own plugins always provide).
// Grey, palette and alpha images are converted to RGB; alpha is dropped, not
// blended.

#include "io/image_folder.h"

namespace qs {

class QtImageDecoder final : public ImageDecoder {
public:
    // Images with more pixels than this are refused before decoding (QImage's
    // own allocation limit would otherwise decide).
    static constexpr int64_t kMaxPixels = int64_t(1) << 28;

    std::vector<std::string> extensions() const override;
    Rgb8Image decode(const std::filesystem::path& file) const override;
};

} // namespace qs
