// NumPy .npy reading and writing: files numpy wrote (every dtype, both byte
// orders, C and Fortran order, versions 1-3), round trips, numpy reading what we
// write, hostile files rejected with the file named, atomic writes.
#include <QtTest>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>

#include "core/half.h"
#include "io/npy.h"

using namespace qs;

namespace {

const QString kPython = QStringLiteral("/usr/bin/python3");

bool numpyAvailable()
{
    QProcess p;
    p.start(kPython, {"-c", "import numpy"});
    return p.waitForFinished(30000) && p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0;
}

// The value make_npy_fixtures.py stores at flat index i, as a double.
double pattern(char kind, int64_t i)
{
    const int64_t base = (7 * i) % 11;
    switch (kind) {
    case 'b':
        return i % 3 == 0 ? 1 : 0;
    case 'u':
        return double(base);
    case 'i':
        return double(base - 5);
    default:
        return double(base - 5) / 4.0;
    }
}

double elementAsDouble(const Tensor& t, int64_t i)
{
    const void* p = static_cast<const std::byte*>(t.rawData()) + i * int64_t(dtypeSize(t.dtype()));
    auto load = [p]<class T>(T) {
        T v;
        std::memcpy(&v, p, sizeof v);
        return double(v);
    };
    switch (t.dtype()) {
    case DType::Bool:
    case DType::U8:
        return load(uint8_t{});
    case DType::I8:
        return load(int8_t{});
    case DType::I16:
        return load(int16_t{});
    case DType::U16:
        return load(uint16_t{});
    case DType::I32:
        return load(int32_t{});
    case DType::U32:
        return load(uint32_t{});
    case DType::I64:
        return load(int64_t{});
    case DType::U64:
        return load(uint64_t{});
    case DType::F16:
        return fp16ToFloat(uint16_t(load(uint16_t{})));
    case DType::BF16:
        return bf16ToFloat(uint16_t(load(uint16_t{})));
    case DType::F32:
        return load(float{});
    case DType::F64:
        return load(double{});
    }
    return NAN;
}

DType dtypeOfCode(const QString& code)
{
    static const QMap<QString, DType> map{{"b1", DType::Bool}, {"i1", DType::I8},  {"u1", DType::U8},
                                          {"i2", DType::I16},  {"u2", DType::U16}, {"i4", DType::I32},
                                          {"u4", DType::U32},  {"i8", DType::I64}, {"u8", DType::U64},
                                          {"f2", DType::F16},  {"f4", DType::F32}, {"f8", DType::F64}};
    return map.value(code);
}

// Checks every fixture of make_npy_fixtures.py found in `dir`; returns how many.
int checkFixtureFolder(const QString& dir)
{
    int checked = 0;
    const QStringList names = QDir(dir).entryList({"*.npy"}, QDir::Files, QDir::Name);
    for (const QString& name : names) {
        const Tensor t = readNpy((dir + "/" + name).toStdString());
        const QString stem = name.chopped(4);
        if (stem == "scalar_f8") {
            if (t.dtype() != DType::F64 || t.rank() != 0 || t.values<double>()[0] != 2.5)
                qFatal("scalar_f8.npy read wrong");
        } else if (stem == "empty_f4") {
            if (t.dtype() != DType::F32 || t.shape() != Shape{0, 3} || t.numel() != 0)
                qFatal("empty_f4.npy read wrong");
        } else if (stem == "vector_i4") {
            if (t.dtype() != DType::I32 || t.shape() != Shape{5} || t.values<int32_t>()[4] != 4)
                qFatal("vector_i4.npy read wrong");
        } else {
            const QStringList parts = stem.split('_'); // code, le|be, c|f, vN
            const Shape expectedShape = parts[2] == "c" ? Shape{2, 3, 4} : Shape{3, 4, 5};
            if (t.dtype() != dtypeOfCode(parts[0]) || t.shape() != expectedShape)
                qFatal("%s: dtype or shape read wrong", qPrintable(name));
            const char kind = parts[0][0].toLatin1();
            for (int64_t i = 0; i < t.numel(); ++i)
                if (elementAsDouble(t, i) != pattern(kind, i))
                    qFatal("%s: element %lld is %g, expected %g", qPrintable(name), static_cast<long long>(i),
                           elementAsDouble(t, i), pattern(kind, i));
        }
        ++checked;
    }
    return checked;
}

// An .npy image with the given header dict text, version and data bytes.
// `lengthOverride` (when >= 0) replaces the header length field.
QByteArray makeNpy(const QByteArray& dict, int major = 1, const QByteArray& data = {}, int64_t lengthOverride = -1)
{
    QByteArray header = dict + "\n";
    QByteArray out("\x93NUMPY", 6);
    out += char(major);
    out += char(0);
    const int64_t length = lengthOverride >= 0 ? lengthOverride : header.size();
    for (int i = 0; i < (major == 1 ? 2 : 4); ++i)
        out += char((length >> (8 * i)) & 0xff);
    return out + header + data;
}

Tensor randomTensor(DType dtype, const Shape& shape, std::mt19937& rng)
{
    Tensor t(dtype, shape);
    auto* bytes = static_cast<uint8_t*>(t.mutableRawData());
    for (size_t i = 0; i < t.nbytes(); ++i)
        bytes[i] = uint8_t(rng());
    if (dtype == DType::Bool)
        for (size_t i = 0; i < t.nbytes(); ++i)
            bytes[i] &= 1;
    return t;
}

bool sameTensor(const Tensor& a, const Tensor& b)
{
    return a.dtype() == b.dtype() && a.shape() == b.shape() &&
           (a.nbytes() == 0 || std::memcmp(a.rawData(), b.rawData(), a.nbytes()) == 0);
}

QByteArray readAll(const QString& path)
{
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

} // namespace

class TestNpy : public QObject {
    Q_OBJECT
private slots:
    void readsCommittedNumpyFiles() { QCOMPARE(checkFixtureFolder(QStringLiteral(QUANTSCOPE_TEST_DATA "/npy")), 11); }

    void readsFilesNumpyWritesNow()
    {
        if (!numpyAvailable())
            QSKIP("python3-numpy is not installed; the committed fixtures cover a subset");
        QTemporaryDir dir;
        QProcess p;
        p.start(kPython, {QStringLiteral(QUANTSCOPE_TEST_DATA "/make_npy_fixtures.py"), dir.path()});
        QVERIFY(p.waitForFinished(60000));
        QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
        // 12 dtypes × (le, be for multi-byte) × (c, f) × 3 versions + 3 edge shapes.
        QCOMPARE(checkFixtureFolder(dir.path()), (3 * 1 + 9 * 2) * 2 * 3 + 3);
    }

    void roundTripsEveryDtype()
    {
        std::mt19937 rng(7);
        QTemporaryDir dir;
        const std::vector<DType> dtypes{DType::Bool, DType::I8,  DType::U8,  DType::I16, DType::U16, DType::I32,
                                        DType::U32,  DType::I64, DType::U64, DType::F16, DType::F32, DType::F64};
        const std::vector<Shape> shapes{{}, {0}, {7}, {3, 5}, {2, 0, 4}, {2, 3, 4, 5}};
        for (DType dtype : dtypes) {
            for (const Shape& shape : shapes) {
                const Tensor t = randomTensor(dtype, shape, rng);
                const std::string path = (dir.path() + "/rt.npy").toStdString();
                writeNpy(path, t);
                QVERIFY2(sameTensor(readNpy(path), t), dtypeName(dtype).data());
                const std::vector<std::byte> image = encodeNpy(t);
                QVERIFY(sameTensor(parseNpy(image, "memory"), t));
                // Data starts 64-byte aligned, as numpy writes it.
                QCOMPARE((image.size() - t.nbytes()) % 64, size_t(0));
            }
        }
    }

    void numpyReadsWhatWeWrite()
    {
        if (!numpyAvailable())
            QSKIP("python3-numpy is not installed");
        QTemporaryDir dir;
        const std::vector<std::pair<const char*, DType>> cases{
            {"i1", DType::I8},  {"u2", DType::U16}, {"i8", DType::I64}, {"f2", DType::F16},
            {"f4", DType::F32}, {"f8", DType::F64}, {"b1", DType::Bool}};
        for (auto [code, dtype] : cases) {
            Tensor t(dtype, {3, 4, 2});
            for (int64_t i = 0; i < t.numel(); ++i) {
                const double v = pattern(code[0], i);
                void* p = static_cast<std::byte*>(t.mutableRawData()) + i * int64_t(dtypeSize(dtype));
                switch (dtype) {
                case DType::I8:
                    *static_cast<int8_t*>(p) = int8_t(v);
                    break;
                case DType::U16:
                    *static_cast<uint16_t*>(p) = uint16_t(v);
                    break;
                case DType::I64:
                    *static_cast<int64_t*>(p) = int64_t(v);
                    break;
                case DType::F16:
                    *static_cast<uint16_t*>(p) = floatToFp16(float(v));
                    break;
                case DType::F32:
                    *static_cast<float*>(p) = float(v);
                    break;
                case DType::F64:
                    *static_cast<double*>(p) = v;
                    break;
                default:
                    *static_cast<uint8_t*>(p) = uint8_t(v);
                    break;
                }
            }
            writeNpy((dir.path() + "/" + code + ".npy").toStdString(), t);
        }
        const QString script = QStringLiteral(R"(
import sys, numpy as np
sys.path.insert(0, sys.argv[2])
from make_npy_fixtures import pattern
for code in ['i1', 'u2', 'i8', 'f2', 'f4', 'f8', 'b1']:
    a = np.load(sys.argv[1] + '/' + code + '.npy', allow_pickle=False)
    assert a.shape == (3, 4, 2) and a.dtype == np.dtype(code), (code, a.shape, a.dtype)
    assert (a.reshape(-1) == pattern(code[0], 24).astype(code)).all(), code
)");
        QProcess p;
        p.start(kPython, {"-B", "-c", script, dir.path(), QStringLiteral(QUANTSCOPE_TEST_DATA)});
        QVERIFY(p.waitForFinished(60000));
        QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
    }

    void rejectsHostileFiles_data()
    {
        QTest::addColumn<QByteArray>("bytes");
        QTest::addColumn<QString>("expected"); // part of the message
        const QByteArray f4x4 = "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }";
        const QByteArray sixteen(16, '\0');
        QTest::newRow("empty") << QByteArray() << "magic";
        QTest::newRow("bad magic") << QByteArray("\x93NUMPX\x01\x00\x10\x00", 10) + QByteArray(16, ' ') << "magic";
        QTest::newRow("version 4.0") << makeNpy(f4x4, 4, sixteen) << "version 4.0";
        QTest::newRow("truncated data") << makeNpy(f4x4, 1, sixteen.left(9)) << "truncated";
        QTest::newRow("trailing data") << makeNpy(f4x4, 1, sixteen + "x") << "unexpected data";
        QTest::newRow("huge shape") << makeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (4000000000, "
                                               "4000000000, 4000000000), }",
                                               1, sixteen)
                                    << "'shape'";
        QTest::newRow("huge shape, short file")
            << makeNpy("{'descr': '<f8', 'fortran_order': False, 'shape': (100000000000,), }", 1, sixteen)
            << "truncated";
        QTest::newRow("dimension overflow")
            << makeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }") << "overflow";
        QTest::newRow("negative dim") << makeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -2), }", 1,
                                                 sixteen)
                                      << "negative";
        QTest::newRow("unterminated dict")
            << makeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (4,) ", 1, sixteen) << "expected";
        QTest::newRow("unknown key") << makeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'x': 1}", 1,
                                                sixteen)
                                     << "'x'";
        QTest::newRow("missing key") << makeNpy("{'descr': '<f4', 'shape': (4,), }", 1, sixteen) << "fortran_order";
        QTest::newRow("duplicate key") << makeNpy(
                                              "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (4,)}",
                                              1, sixteen)
                                       << "twice";
        QTest::newRow("shape not a tuple")
            << makeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (4), }", 1, sixteen) << "'shape'";
        QTest::newRow("bad bool") << makeNpy("{'descr': '<f4', 'fortran_order': 0, 'shape': (4,), }", 1, sixteen)
                                  << "fortran_order";
        QTest::newRow("text after dict") << makeNpy(f4x4 + " junk", 1, sixteen) << "after the dict";
        QTest::newRow("header past EOF") << makeNpy(f4x4, 1, {}, 0xfff0) << "past the end";
        QTest::newRow("header too long") << makeNpy(f4x4, 2, sixteen, 0x7fffffff) << "exceeds";
        QTest::newRow("object dtype") << makeNpy("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", 1, sixteen)
                                      << "pickle";
        QTest::newRow("complex dtype") << makeNpy("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", 1,
                                                  sixteen)
                                       << "'descr'";
        QTest::newRow("no byte order") << makeNpy("{'descr': '|f4', 'fortran_order': False, 'shape': (4,), }", 1,
                                                  sixteen)
                                       << "byte order";
        QTest::newRow("structured") << makeNpy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (4,), }", 1,
                                               sixteen)
                                    << "structured";
    }

    void rejectsHostileFiles()
    {
        QFETCH(QByteArray, bytes);
        QFETCH(QString, expected);
        QTemporaryDir dir;
        const QString path = dir.path() + "/hostile.npy";
        QFile f(path);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(bytes);
        f.close();
        // Both the file reader and the in-memory reader refuse it, naming the file.
        try {
            readNpy(path.toStdString());
            QFAIL("readNpy accepted a hostile file");
        } catch (const Error& e) {
            const QString message = QString::fromUtf8(e.what());
            QVERIFY2(message.startsWith(path + ": "), qPrintable(message));
            QVERIFY2(message.contains(expected), qPrintable(message));
        }
        try {
            parseNpy(std::as_bytes(std::span(bytes.constData(), size_t(bytes.size()))), "in-memory.npy");
            QFAIL("parseNpy accepted a hostile image");
        } catch (const Error& e) {
            const QString message = QString::fromUtf8(e.what());
            QVERIFY2(message.startsWith("in-memory.npy: "), qPrintable(message));
            QVERIFY2(message.contains(expected), qPrintable(message));
        }
    }

    void missingFileNamesIt()
    {
        try {
            readNpy("/nonexistent/folder/x.npy");
            QFAIL("no error");
        } catch (const Error& e) {
            QVERIFY(QString(e.what()).startsWith("/nonexistent/folder/x.npy: "));
        }
    }

    void readsBoolBytesAsZeroOrOne()
    {
        const QByteArray bytes =
            makeNpy("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", 1, QByteArray("\x00\x02\x01", 3));
        const Tensor t = parseNpy(std::as_bytes(std::span(bytes.constData(), size_t(bytes.size()))), "b");
        QCOMPARE(t.values<uint8_t>()[1], uint8_t(1));
        QCOMPARE(t.values<uint8_t>()[0], uint8_t(0));
    }

    void failedWriteLeavesTheOldFile()
    {
        QTemporaryDir dir;
        const QString path = dir.path() + "/out.npy";
        const Tensor first = Tensor::fromVector<float>(DType::F32, {2}, {1.f, 2.f});
        writeNpy(path.toStdString(), first);
        const QByteArray before = readAll(path);
        try {
            writeNpy(path.toStdString(), Tensor(DType::BF16, {2})); // bfloat16 has no .npy dtype
            QFAIL("bfloat16 was written");
        } catch (const Error& e) {
            QVERIFY2(QString(e.what()).startsWith(path + ": "), e.what());
        }
        QCOMPARE(readAll(path), before);
        QCOMPARE(QDir(dir.path()).entryList(QDir::Files | QDir::Hidden), QStringList{"out.npy"});
        // A folder that does not exist: an error naming the file, nothing created.
        const QString missing = dir.path() + "/no/such/out.npy";
        QVERIFY_THROWS_EXCEPTION(Error, writeNpy(missing.toStdString(), first));
        QVERIFY(!QFile::exists(missing));
        // A successful write replaces the old file completely.
        writeNpy(path.toStdString(), Tensor::fromVector<double>(DType::F64, {1}, {3.0}));
        QCOMPARE(readNpy(path.toStdString()).values<double>()[0], 3.0);
        QCOMPARE(QDir(dir.path()).entryList(QDir::Files | QDir::Hidden), QStringList{"out.npy"});
    }
};

QTEST_APPLESS_MAIN(TestNpy)
#include "tst_npy.moc"
