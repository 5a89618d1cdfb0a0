// Image-folder data sources (io/image_folder.h) with the QImage decoder
// (widgets/qt_image_decoder.h): PNG, BMP and JPEG files written with QImage at
// test time; the recipe's values against hand computations and against a plain
// resize-then-crop reference; NCHW vs NHWC; BGR; labels from sub-folders.
#include <QtTest>

#include <QImage>

#include <cmath>
#include <functional>
#include <random>

#include "core/error.h"
#include "io/image_folder.h"
#include "widgets/qt_image_decoder.h"

using namespace qs;

namespace {

using Pattern = std::function<QRgb(int y, int x)>;

// R = 10y + x, G = 50 + y, B = 200 - x: every pixel tells where it is.
QRgb positional(int y, int x)
{
    return qRgb(10 * y + x, 50 + y, 200 - x);
}

QImage makeImage(int height, int width, const Pattern& pattern)
{
    QImage image(width, height, QImage::Format_RGB888);
    for (int y = 0; y < height; ++y)
        for (int x = 0; x < width; ++x)
            image.setPixel(x, y, pattern(y, x));
    return image;
}

void writeImage(const QString& path, int height, int width, const Pattern& pattern = positional)
{
    QDir().mkpath(QFileInfo(path).path());
    QVERIFY2(makeImage(height, width, pattern).save(path), qPrintable(path));
}

Rgb8Image rgb8(int height, int width, const Pattern& pattern)
{
    Rgb8Image image{height, width, std::vector<uint8_t>(size_t(height * width * 3))};
    for (int y = 0; y < height; ++y)
        for (int x = 0; x < width; ++x) {
            const QRgb c = pattern(y, x);
            uint8_t* p = image.pixels.data() + (y * width + x) * 3;
            p[0] = uint8_t(qRed(c));
            p[1] = uint8_t(qGreen(c));
            p[2] = uint8_t(qBlue(c));
        }
    return image;
}

float at(const Tensor& t, int64_t c, int64_t y, int64_t x, ImageLayout layout)
{
    const Shape& s = t.shape();
    const int64_t i = layout == ImageLayout::NCHW ? (c * s[1] + y) * s[2] + x : (y * s[1] + x) * 3 + c;
    return t.values<float>()[size_t(i)];
}

// The recipe done the obvious way, in double: resize the whole image, then crop.
std::vector<double> referenceRecipe(const Rgb8Image& image, const ImageRecipe& r)
{
    const int64_t h = image.height, w = image.width;
    int64_t rh = h, rw = w;
    if (r.resizeShorter > 0) {
        if (h <= w) {
            rh = r.resizeShorter;
            rw = std::llround(double(w) * double(r.resizeShorter) / double(h));
        } else {
            rw = r.resizeShorter;
            rh = std::llround(double(h) * double(r.resizeShorter) / double(w));
        }
    }
    std::vector<double> resized(size_t(rh * rw * 3));
    for (int64_t y = 0; y < rh; ++y)
        for (int64_t x = 0; x < rw; ++x) {
            const double sy = std::clamp((y + 0.5) * double(h) / double(rh) - 0.5, 0.0, double(h - 1));
            const double sx = std::clamp((x + 0.5) * double(w) / double(rw) - 0.5, 0.0, double(w - 1));
            const int64_t y0 = int64_t(sy), x0 = int64_t(sx);
            const int64_t y1 = std::min(y0 + 1, h - 1), x1 = std::min(x0 + 1, w - 1);
            const double fy = sy - double(y0), fx = sx - double(x0);
            for (int c = 0; c < 3; ++c) {
                auto px = [&](int64_t yy, int64_t xx) { return double(image.pixels[size_t((yy * w + xx) * 3 + c)]); };
                resized[size_t((y * rw + x) * 3 + c)] = (1 - fy) * ((1 - fx) * px(y0, x0) + fx * px(y0, x1)) +
                                                        fy * ((1 - fx) * px(y1, x0) + fx * px(y1, x1));
            }
        }
    const int64_t top = (rh - r.cropHeight) / 2, left = (rw - r.cropWidth) / 2;
    std::vector<double> out; // [c][y][x], output channel order
    for (int c = 0; c < 3; ++c) {
        const int source = r.channels == ChannelOrder::RGB ? c : 2 - c;
        for (int64_t y = 0; y < r.cropHeight; ++y)
            for (int64_t x = 0; x < r.cropWidth; ++x)
                out.push_back((resized[size_t(((top + y) * rw + left + x) * 3 + source)] / 255.0 - r.mean[size_t(c)]) /
                              r.std[size_t(c)]);
    }
    return out;
}

ImageRecipe smallRecipe()
{
    ImageRecipe r;
    r.resizeShorter = 2;
    r.cropHeight = 2;
    r.cropWidth = 2;
    r.mean = {0.5f, 0.4f, 0.3f};
    r.std = {0.2f, 0.25f, 0.5f};
    return r;
}

} // namespace

class TestImageFolder : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;
    std::shared_ptr<const QtImageDecoder> decoder_ = std::make_shared<QtImageDecoder>();

    void expectError(const std::function<void()>& run, const QString& mustContain)
    {
        try {
            run();
            QFAIL("no Error");
        } catch (const Error& e) {
            QVERIFY2(QString(e.what()).contains(mustContain), e.what());
        }
    }

private slots:
    // A 4x6 landscape image, shorter side to 2 (so 2x3), center crop 2x2:
    // each output pixel is the mean of a 2x2 block of the source.
    void recipeByHand()
    {
        const ImageRecipe r = smallRecipe();
        const Tensor t = preprocessImage(rgb8(4, 6, positional), r, "hand");
        QCOMPARE(t.shape(), (Shape{3, 2, 2}));
        // Source blocks: rows {0,1} or {2,3}, columns {0,1} or {2,3}.
        const double red[2][2] = {{5.5, 7.5}, {25.5, 27.5}};
        const double green[2] = {50.5, 52.5};
        const double blue[2] = {199.5, 197.5};
        for (int y = 0; y < 2; ++y)
            for (int x = 0; x < 2; ++x) {
                const double rgb[3] = {red[y][x], green[y], blue[x]};
                for (int c = 0; c < 3; ++c) {
                    const double expected = (rgb[c] / 255.0 - r.mean[size_t(c)]) / r.std[size_t(c)];
                    QVERIFY2(std::abs(at(t, c, y, x, ImageLayout::NCHW) - expected) < 1e-5,
                             qPrintable(QString("c%1 y%2 x%3").arg(c).arg(y).arg(x)));
                }
            }
    }

    // Portrait 8x4 to width 2 (4x2), crop 2x2 from resized row 1 (floor((4-2)/2)):
    // output rows average source rows {2,3} and {4,5}, columns {0,1} and {2,3}.
    void recipePortraitAndUpscale()
    {
        ImageRecipe r = smallRecipe();
        r.mean = {0, 0, 0};
        r.std = {1, 1, 1};
        Tensor t = preprocessImage(rgb8(8, 4, positional), r, "portrait");
        QVERIFY(std::abs(at(t, 0, 0, 0, ImageLayout::NCHW) * 255.0 - 25.5) < 1e-4);
        QVERIFY(std::abs(at(t, 0, 1, 1, ImageLayout::NCHW) * 255.0 - 47.5) < 1e-4);
        QVERIFY(std::abs(at(t, 1, 1, 0, ImageLayout::NCHW) * 255.0 - 54.5) < 1e-4);
        // Upscaling 2x2 to 4x4: the edges clamp (pixel 0 exactly), then 3/4-1/4 blends.
        r.resizeShorter = 4;
        r.cropHeight = r.cropWidth = 4;
        t = preprocessImage(rgb8(2, 2, positional), r, "up");
        QVERIFY(std::abs(at(t, 0, 0, 0, ImageLayout::NCHW) * 255.0 - 0.0) < 1e-4);
        QVERIFY(std::abs(at(t, 0, 0, 1, ImageLayout::NCHW) * 255.0 - 0.25) < 1e-4);
        QVERIFY(std::abs(at(t, 0, 1, 0, ImageLayout::NCHW) * 255.0 - 2.5) < 1e-4);
        QVERIFY(std::abs(at(t, 0, 3, 3, ImageLayout::NCHW) * 255.0 - 11.0) < 1e-4);
        // No resize: the crop is the source's center, values exact.
        r.resizeShorter = 0;
        r.cropHeight = 2;
        r.cropWidth = 2;
        t = preprocessImage(rgb8(4, 6, positional), r, "crop");
        QCOMPARE(at(t, 0, 0, 0, ImageLayout::NCHW) * 255.0f, 12.0f);  // source (1, 2)
        QCOMPARE(at(t, 2, 1, 1, ImageLayout::NCHW) * 255.0f, 197.0f); // source (2, 3): B = 200 - 3
    }

    // Random images and recipes against the resize-then-crop reference, in every
    // layout and channel order; NHWC is NCHW transposed, BGR is RGB reversed.
    void recipeMatchesReference()
    {
        std::mt19937 rng(7);
        for (int trial = 0; trial < 60; ++trial) {
            const int h = 1 + int(rng() % 40), w = 1 + int(rng() % 40);
            Rgb8Image image{h, w, std::vector<uint8_t>(size_t(h * w * 3))};
            for (auto& p : image.pixels)
                p = uint8_t(trial % 3 == 0 ? (rng() % 2) * 255 : rng() % 256); // adversarial: only 0 and 255
            ImageRecipe r;
            r.resizeShorter = trial % 5 == 0 ? 0 : 1 + int64_t(rng() % 50);
            int64_t rh = h, rw = w; // the resized size, as the recipe documents it
            if (r.resizeShorter > 0) {
                const double f = double(r.resizeShorter) / double(std::min(h, w));
                rh = h <= w ? r.resizeShorter : std::llround(h * f);
                rw = h <= w ? std::llround(w * f) : r.resizeShorter;
            }
            r.cropHeight = 1 + int64_t(rng() % uint64_t(rh));
            r.cropWidth = 1 + int64_t(rng() % uint64_t(rw));
            r.mean = {0.485f, 0.456f, 0.406f};
            r.std = {0.229f, 0.224f, 0.225f};
            r.channels = trial % 2 ? ChannelOrder::BGR : ChannelOrder::RGB;
            const std::vector<double> expected = referenceRecipe(image, r);
            for (ImageLayout layout : {ImageLayout::NCHW, ImageLayout::NHWC}) {
                r.layout = layout;
                const Tensor t = preprocessImage(image, r, "random");
                const Shape shape = layout == ImageLayout::NCHW ? Shape{3, r.cropHeight, r.cropWidth}
                                                                : Shape{r.cropHeight, r.cropWidth, 3};
                QCOMPARE(t.shape(), shape);
                size_t i = 0;
                for (int c = 0; c < 3; ++c)
                    for (int64_t y = 0; y < r.cropHeight; ++y)
                        for (int64_t x = 0; x < r.cropWidth; ++x, ++i)
                            QVERIFY2(std::abs(at(t, c, y, x, layout) - expected[i]) < 2e-5,
                                     qPrintable(QString("trial %1: %2x%3").arg(trial).arg(h).arg(w)));
            }
        }
    }

    // Sub-folders are classes in name order; files in name order; other files skipped.
    void folderWithLabels()
    {
        const QString root = dir_.path() + "/labelled";
        writeImage(root + "/dog/b.png", 4, 6);
        writeImage(root + "/dog/a.png", 6, 4);
        writeImage(root + "/cat/c.bmp", 5, 5);
        writeImage(root + "/cat/d.jpg", 8, 8, [](int, int) { return qRgb(90, 160, 30); });
        QFile readme(root + "/README.txt");
        QVERIFY(readme.open(QIODevice::WriteOnly));
        readme.close();
        QFile notes(root + "/cat/notes.txt");
        QVERIFY(notes.open(QIODevice::WriteOnly));
        notes.close();

        ImageRecipe r = smallRecipe();
        ImageFolderSource source(root.toStdString(), r, decoder_, {.batchSize = 3});
        QCOMPARE(source.classNames(), (std::vector<std::string>{"cat", "dog"}));
        QCOMPARE(source.files().size(), size_t(4));
        QCOMPARE(source.files()[0].filename().string(), "c.bmp");
        QCOMPARE(source.files()[3].filename().string(), "b.png");
        QCOMPARE(source.skippedFiles().size(), size_t(2));
        QCOMPARE(source.rowCount(), 4);
        QCOMPARE(source.batchCount(), 2);
        QCOMPARE(source.inputs()[0].name, "input");

        const std::vector<Rgb8Image> expected{rgb8(5, 5, positional), Rgb8Image{}, rgb8(6, 4, positional),
                                              rgb8(4, 6, positional)};
        std::vector<int64_t> labels;
        int64_t row = 0;
        while (auto batch = source.next()) {
            const Tensor& images = batch->inputs.at("input");
            QCOMPARE(images.shape(), (Shape{batch->rows, 3, 2, 2}));
            for (int64_t i = 0; i < batch->rows; ++i, ++row) {
                labels.push_back(batch->labels->values<int64_t>()[size_t(i)]);
                const float* got = images.values<float>().data() + i * 12;
                if (row == 1) { // JPEG is lossy: a flat colour comes back within a few levels
                    QVERIFY(std::abs(got[0] * r.std[0] + r.mean[0] - 90 / 255.0) < 4 / 255.0);
                    continue;
                }
                const Tensor want = preprocessImage(expected[size_t(row)], r, "expected");
                for (int k = 0; k < 12; ++k)
                    QCOMPARE(got[k], want.values<float>()[size_t(k)]); // PNG and BMP are lossless
            }
        }
        QCOMPARE(labels, (std::vector<int64_t>{0, 0, 1, 1}));
        source.rewind();
        QCOMPARE(source.next()->firstRow, 0);
    }

    void folderWithoutLabels()
    {
        const QString root = dir_.path() + "/plain";
        writeImage(root + "/z.png", 4, 6);
        writeImage(root + "/sub/a.png", 4, 6);
        ImageRecipe r = smallRecipe();
        r.labelsFromFolders = false;
        r.layout = ImageLayout::NHWC;
        ImageFolderSource source(root.toStdString(), r, decoder_, {.batchSize = 8});
        QVERIFY(!source.labels());
        QCOMPARE(source.files()[0].filename().string(), "a.png"); // "sub/a.png" < "z.png"
        const auto batch = source.next();
        QVERIFY(!batch->labels);
        QCOMPARE(batch->inputs.at("input").shape(), (Shape{2, 2, 2, 3}));
    }

    // The decoder: grey images become R = G = B, alpha is dropped.
    void decoderConvertsToRgb()
    {
        const QString grey = dir_.path() + "/grey.png";
        QImage g(3, 2, QImage::Format_Grayscale8);
        for (int y = 0; y < 2; ++y)
            for (int x = 0; x < 3; ++x)
                g.setPixel(x, y, qRgb(40 * y + x, 40 * y + x, 40 * y + x));
        QVERIFY(g.save(grey));
        Rgb8Image image = decoder_->decode(grey.toStdString());
        QCOMPARE(image.height, 2);
        QCOMPARE(image.width, 3);
        QCOMPARE(int(image.pixels[(1 * 3 + 2) * 3 + 0]), 42);
        QCOMPARE(int(image.pixels[(1 * 3 + 2) * 3 + 2]), 42);
        const QString alpha = dir_.path() + "/alpha.png";
        QImage a(2, 2, QImage::Format_ARGB32);
        a.fill(qRgba(10, 20, 30, 128));
        QVERIFY(a.save(alpha));
        image = decoder_->decode(alpha.toStdString());
        QCOMPARE(int(image.pixels[0]), 10);
        QCOMPARE(int(image.pixels[1]), 20);
        QCOMPARE(int(image.pixels[2]), 30);
    }

    void checkedAgainstModel()
    {
        const QString root = dir_.path() + "/model";
        writeImage(root + "/only/a.png", 4, 6);
        Model model;
        model.sourcePath = "m.onnx";
        ValueInfo in;
        in.name = "pixels";
        in.dtype = DType::F32;
        in.shape = std::vector<Dim>{Dim::named("N"), Dim::fixed(3), Dim::fixed(2), Dim::fixed(2)};
        model.inputs = {in};
        ImageFolderSource source(root.toStdString(), smallRecipe(), decoder_, {}, &model);
        QCOMPARE(source.inputs()[0].name, "pixels");
        QVERIFY(source.next()->inputs.count("pixels"));
        model.inputs[0].shape = std::vector<Dim>{Dim::named("N"), Dim::fixed(3), Dim::fixed(4), Dim::fixed(4)};
        expectError([&] { ImageFolderSource(root.toStdString(), smallRecipe(), decoder_, {}, &model); }, "axis 2");
    }

    void errorsNameTheFile()
    {
        const QString root = dir_.path() + "/bad";
        writeImage(root + "/c/small.png", 1, 1);
        QFile corrupt(root + "/d/corrupt.png");
        QDir().mkpath(root + "/d");
        QVERIFY(corrupt.open(QIODevice::WriteOnly));
        corrupt.write("\x89PNG\r\n\x1a\n garbage");
        corrupt.close();
        ImageRecipe r = smallRecipe();
        r.resizeShorter = 0; // a 1x1 image cannot give a 2x2 crop
        r.labelsFromFolders = false;
        ImageFolderSource small((root + "/c").toStdString(), r, decoder_, {.batchSize = 1});
        expectError([&] { small.next(); }, "small.png");
        ImageFolderSource bad((root + "/d").toStdString(), r, decoder_, {.batchSize = 1});
        expectError([&] { bad.next(); }, "corrupt.png");

        writeImage(root + "/stray.png", 4, 4);
        r.labelsFromFolders = true;
        expectError([&] { ImageFolderSource(root.toStdString(), r, decoder_); }, "stray.png");
        QDir().mkpath(dir_.path() + "/empty");
        expectError([&] { ImageFolderSource((dir_.path() + "/empty").toStdString(), r, decoder_); }, "empty");
        expectError([&] { ImageFolderSource((root + "/stray.png").toStdString(), r, decoder_); }, "not a folder");
        r.std = {1, 0, 1};
        expectError([&] { ImageFolderSource(root.toStdString(), r, decoder_); }, "std");
    }
};

QTEST_APPLESS_MAIN(TestImageFolder)
#include "tst_image_folder.moc"
