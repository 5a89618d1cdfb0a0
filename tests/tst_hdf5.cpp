// HDF5 files and Keras .h5 models: the tree and its datasets read exactly as
// h5py wrote them, hostile files answered with errors naming the file and the
// object (and nothing printed by HDF5), Keras Sequential and Functional configs
// turned into graphs with the right weight layouts, unsupported configs into
// weights-only models with a warning, checkpoints into weights-only models.
#include <QtTest>

#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

#include "io/hdf5_file.h"
#include "io/npy.h"

using namespace qs;

namespace {

const QString kPython = QStringLiteral("/usr/bin/python3");

// Runs `call` with stderr redirected; returns what was written to it.
template <class F>
std::string capturedStderr(F&& call)
{
    std::fflush(stderr);
    char name[] = "/tmp/tst_hdf5_stderr_XXXXXX";
    const int fd = mkstemp(name);
    const int saved = dup(2);
    dup2(fd, 2);
    try {
        call();
    } catch (...) {
        std::fflush(stderr);
        dup2(saved, 2);
        close(saved);
        close(fd);
        unlink(name);
        throw;
    }
    std::fflush(stderr);
    dup2(saved, 2);
    close(saved);
    std::string text;
    lseek(fd, 0, SEEK_SET);
    char buffer[4096];
    for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;)
        text.append(buffer, size_t(n));
    close(fd);
    unlink(name);
    return text;
}

bool sameBytes(const Tensor& a, const Tensor& b)
{
    return a.dtype() == b.dtype() && a.shape() == b.shape() &&
           std::memcmp(a.rawData(), b.rawData(), a.nbytes()) == 0;
}

} // namespace

class TestHdf5 : public QObject {
    Q_OBJECT

private:
    QString dir_;
    std::string file(const char* name) const { return (dir_ + "/" + name).toStdString(); }
    Tensor npy(const QString& name) const { return readNpy((dir_ + "/" + name).toStdString()); }

    // The Error message open() or `call` throws; fails the test when none is.
    template <class F>
    QString errorOf(F&& call)
    {
        try {
            call();
        } catch (const Error& e) {
            return QString::fromStdString(e.what());
        }
        return {};
    }

private slots:
    void initTestCase()
    {
        dir_ = QDir::currentPath() + "/hdf5_fixtures";
        QDir(dir_).removeRecursively();
        QProcess p;
        p.start(kPython, {QStringLiteral(QUANTSCOPE_TEST_DATA "/hdf5/make_hdf5_fixtures.py"), dir_});
        QVERIFY(p.waitForFinished(120000));
        QVERIFY2(p.exitCode() == 0, qPrintable("fixture generation failed (python3-h5py installed?): " +
                                                QString::fromLocal8Bit(p.readAllStandardError())));
    }

    void treeListsDatasetsAndGroupsInNameOrder()
    {
        const Hdf5File f = Hdf5File::open(file("generic.h5"));
        QStringList paths;
        for (const Hdf5Dataset& d : f.datasets())
            paths << QString::fromStdString(d.path);
        // The hard link encoder/again -> encoder is listed once; soft and
        // external links are not followed.
        const QStringList expected{"/be_f32", "/empty",   "/encoder/layer0/bias", "/encoder/layer0/weight",
                                   "/f16",    "/f64",     "/flags",               "/gzip",
                                   "/huge",   "/i32",     "/null",                "/records",
                                   "/scalar", "/text",    "/u8"};
        QCOMPARE(paths, expected);
        QCOMPARE(f.groups(), (std::vector<std::string>{"/", "/encoder", "/encoder/layer0"}));
        QVERIFY(f.isGroup("encoder/layer0/"));
        QVERIFY(!f.isGroup("/f16"));

        QCOMPARE(f.find("encoder/layer0/weight")->shape, (Shape{4, 3}));
        QCOMPARE(*f.find("/f16")->dtype, DType::F16);
        QCOMPARE(*f.find("/be_f32")->dtype, DType::F32);
        QCOMPARE(f.find("/be_f32")->fileType, std::string("float32 big-endian"));
        QCOMPARE(*f.find("/flags")->dtype, DType::Bool);
        QCOMPARE(*f.find("/u8")->dtype, DType::U8);
        QCOMPARE(f.find("/scalar")->shape, Shape{});
        for (const char* skipped : {"/text", "/records", "/null", "/huge"}) {
            const Hdf5Dataset* d = f.find(skipped);
            QVERIFY2(d && !d->dtype && !d->skipReason.empty(), skipped);
        }
        QVERIFY(f.find("/null")->skipReason.find("null") != std::string::npos);
        QVERIFY(f.find("/text")->skipReason.find("string") != std::string::npos);
        QVERIFY(f.find("/soft/layer0/weight") == nullptr);
    }

    void readsExactlyWhatH5pyWrote()
    {
        const Hdf5File f = Hdf5File::open(file("generic.h5"));
        QVERIFY(sameBytes(f.read("encoder/layer0/weight"), npy("generic_encoder_layer0_weight.npy")));
        QVERIFY(sameBytes(f.read("f16"), npy("generic_f16.npy")));
        // Big-endian storage comes back native.
        QVERIFY(sameBytes(f.read("be_f32"), npy("generic_be_f32.npy").toFloat32()));
        QVERIFY(sameBytes(f.read("gzip"), npy("generic_gzip.npy")));

        const Tensor i32 = f.read("i32");
        QCOMPARE(i32.shape(), (Shape{3, 4}));
        for (int i = 0; i < 12; ++i)
            QCOMPARE(i32.values<int32_t>()[size_t(i)], i - 6);
        const Tensor flags = f.read("flags");
        QCOMPARE(std::vector<uint8_t>(flags.values<uint8_t>().begin(), flags.values<uint8_t>().end()),
                 (std::vector<uint8_t>{1, 0, 1}));
        QCOMPARE(f.read("scalar").values<float>()[0], 2.5f);
        QCOMPARE(f.read("empty").shape(), (Shape{0, 4}));
    }

    void readsRowRangesForStreaming()
    {
        const Hdf5File f = Hdf5File::open(file("generic.h5"));
        const Tensor whole = npy("generic_gzip.npy");
        const Tensor rows = f.readRows(*f.find("gzip"), 10, 7);
        QCOMPARE(rows.shape(), (Shape{7, 32}));
        QVERIFY(std::memcmp(rows.rawData(), whole.values<float>().data() + 10 * 32, 7 * 32 * sizeof(float)) == 0);
        QCOMPARE(f.readRows(*f.find("gzip"), 64, 0).shape(), (Shape{0, 32}));
        const QString past = errorOf([&] { f.readRows(*f.find("gzip"), 60, 5); });
        QVERIFY2(past.contains("/gzip") && past.contains("outside"), qPrintable(past));
    }

    void stringAttributesFixedAndVariableLength()
    {
        const Hdf5File f = Hdf5File::open(file("generic.h5"));
        QCOMPARE(*f.stringAttribute("/", "note"), std::string("generic tree"));
        QCOMPARE(*f.stringsAttribute("/", "names"), (std::vector<std::string>{"alpha", "beta"}));
        QVERIFY(!f.stringsAttribute("/", "absent"));
        QCOMPARE(f.attributeNames("/"), (std::vector<std::string>{"names", "note", "number"}));
        const QString notString = errorOf([&] { f.stringAttribute("/", "number"); });
        QVERIFY2(notString.contains("generic.h5") && notString.contains("'number'") &&
                     notString.contains("expected a string"),
                 qPrintable(notString));
        const QString notOne = errorOf([&] { f.stringAttribute("/", "names"); });
        QVERIFY2(notOne.contains("expected one string"), qPrintable(notOne));
    }

    void refusesBeforeAllocating()
    {
        const Hdf5File f = Hdf5File::open(file("generic.h5"));
        // 4 TiB declared by a chunked dataset that stores nothing.
        const QString huge = errorOf([&] { f.read("huge"); });
        QVERIFY2(huge.contains("generic.h5") && huge.contains("/huge") && huge.contains("expansion"),
                 qPrintable(huge));
        const QString text = errorOf([&] { f.read("text"); });
        QVERIFY2(text.contains("/text") && text.contains("string"), qPrintable(text));
        const QString absent = errorOf([&] { f.read("nope"); });
        QVERIFY2(absent.contains("/nope") && absent.contains("no such dataset"), qPrintable(absent));
    }

    void hostileFilesNameTheFileAndPrintNothing()
    {
        for (const char* name : {"truncated.h5", "not_hdf5.h5", "does_not_exist.h5"}) {
            QString message;
            const std::string printed = capturedStderr([&] { message = errorOf([&] { Hdf5File::open(file(name)); }); });
            QVERIFY2(message.contains(QString::fromStdString(file(name))), qPrintable(name + (": " + message)));
            QVERIFY2(printed.empty(), printed.c_str());
        }
        QVERIFY(errorOf([&] { Hdf5File::open(file("truncated.h5")); }).contains("truncated"));
        QVERIFY(errorOf([&] { Hdf5File::open(file("not_hdf5.h5")); }).contains("not an HDF5 file"));
    }
};

QTEST_APPLESS_MAIN(TestHdf5)
#include "tst_hdf5.moc"
