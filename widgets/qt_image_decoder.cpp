#include "widgets/qt_image_decoder.h"

#include <cstring>

#include <QImage>
#include <QImageReader>
#include <QString>

#include "core/error.h"

namespace qs {

std::vector<std::string> QtImageDecoder::extensions() const
{
    return {".png", ".jpg", ".jpeg", ".bmp"};
}

Rgb8Image QtImageDecoder::decode(const std::filesystem::path& file) const
{
    const std::string name = file.string();
    QImageReader reader(QString::fromStdString(name));
    reader.setAutoTransform(true); // JPEG orientation, as viewers show it
    const QSize size = reader.size();
    if (size.isValid() && int64_t(size.width()) * size.height() > kMaxPixels)
        throw Error(name + ": image of " + std::to_string(size.width()) + "x" + std::to_string(size.height()) +
                    " pixels is larger than the " + std::to_string(kMaxPixels) + " pixels accepted");
    QImage image = reader.read();
    if (image.isNull())
        throw Error(name + ": cannot decode the image (" + reader.errorString().toStdString() + ")");
    image.convertTo(QImage::Format_RGB888);
    Rgb8Image out;
    out.height = image.height();
    out.width = image.width();
    const size_t rowBytes = size_t(out.width) * 3;
    out.pixels.resize(size_t(out.height) * rowBytes);
    for (int64_t y = 0; y < out.height; ++y) // QImage rows are padded to 4 bytes
        std::memcpy(out.pixels.data() + size_t(y) * rowBytes, image.constScanLine(int(y)), rowBytes);
    return out;
}

} // namespace qs
