// .npz archives: what np.savez and np.savez_compressed write (every dtype and
// layout numpy uses) read back equal to numpy's own .npy, zip64 archives,
// listing without inflating, streaming an entry in pieces. Random truncations
// and byte flips must end in an Error or correct data, never a crash. The corpus
// of malformed zips (bad end record, truncated directory, CRC mismatch, deflate
// bombs, encryption, zip64 damage ...) runs in tst_malformed_corpus.
#include <QtTest>

#include <cstring>
#include <fstream>
#include <map>
#include <random>

#include "io/npy.h"
#include "io/npz.h"
#include "io/zip_archive.h"

#include "test_support.h"

using namespace qs;

namespace {

const QString kArchives = QStringLiteral(QUANTSCOPE_TEST_DATA "/archives");

bool runGenerator(const QString& script, const QString& outDir)
{
    return test::runPython(kArchives + "/" + script, {outDir});
}

using test::bytesOf;
using test::readFile;
using test::writeFile;

void openAndReadAll(const std::filesystem::path& path)
{
    const NpzFile f = NpzFile::open(path);
    for (const auto& a : f.arrays())
        QCOMPARE(f.read(a).shape(), a.header.shape);
}

const QStringList kArrays{"x", "labels", "mask", "big_endian", "fortran", "half_scalar", "empty", "u8", "big", "zeros"};

} // namespace

class TestNpz : public QObject {
    Q_OBJECT
private:
    QTemporaryDir dir_;
    QString valid_;

    std::string validPath(const QString& name) const { return (valid_ + "/" + name).toStdString(); }

    // Every array of `file` equals numpy's .npy of it.
    void compareWithNumpy(const QString& file, bool compressed)
    {
        const NpzFile f = NpzFile::open(validPath(file));
        QStringList names;
        for (const auto& a : f.arrays())
            names << QString::fromStdString(a.name);
        QCOMPARE(names, kArrays);
        QVERIFY(f.otherMembers().empty());
        int borrowed = 0;
        for (const auto& a : f.arrays()) {
            QCOMPARE(a.compressed, compressed);
            const Tensor t = f.read(a);
            const Tensor ref = readNpy(validPath("npz.ref/" + QString::fromStdString(a.name) + ".npy"));
            QCOMPARE(t.dtype(), ref.dtype());
            QCOMPARE(t.shape(), ref.shape());
            QVERIFY2(bytesOf(t) == bytesOf(ref), a.name.c_str());
            if (t.isBorrowed()) { // only stored, native-layout, aligned data is borrowed
                ++borrowed;
                QVERIFY(!compressed && !a.header.bigEndian && !a.header.fortranOrder);
                QCOMPARE(reinterpret_cast<uintptr_t>(t.rawData()) % dtypeSize(t.dtype()), uintptr_t(0));
                const auto* base = f.archive().mapping()->data();
                QVERIFY(static_cast<const std::byte*>(t.rawData()) >= base &&
                        static_cast<const std::byte*>(t.rawData()) + t.nbytes() <=
                            base + f.archive().mapping()->size());
            }
        }
        if (!compressed)
            QVERIFY(borrowed >= 1); // u8 data is aligned wherever it lands
    }

private slots:
    void initTestCase()
    {
        QVERIFY(dir_.isValid());
        valid_ = dir_.path() + "/valid";
        if (!runGenerator("make_valid_archives.py", valid_))
            QSKIP("/usr/bin/python3 with numpy is needed to generate the fixtures");
    }

    void savezMatchesNumpy() { compareWithNumpy("plain.npz", false); }
    void savezCompressedMatchesNumpy() { compareWithNumpy("compressed.npz", true); }

    // writeNpz's archive reads back through NpzFile and through numpy, array by
    // array and byte for byte; a failed write leaves the previous file.
    void writtenArchivesReadBack()
    {
        std::mt19937 rng(3);
        std::map<std::string, Tensor> arrays;
        std::vector<float> xs(2 * 3 * 5);
        for (float& v : xs)
            v = std::normal_distribution<float>()(rng);
        arrays["logits"] = Tensor::fromVector(DType::F32, {2, 3, 5}, xs);
        arrays["labels"] = Tensor::fromVector(DType::I64, {3}, std::vector<int64_t>{4, 0, 9});
        arrays["scalar"] = Tensor::fromVector(DType::F64, {}, std::vector<double>{2.5});
        const std::string path = (dir_.path() + "/written.npz").toStdString();
        writeNpz(path, arrays);

        const NpzFile f = NpzFile::open(path);
        QCOMPARE(f.arrays().size(), size_t(3));
        for (const auto& a : f.arrays()) {
            const Tensor& expected = arrays.at(a.name);
            const Tensor t = f.read(a);
            QCOMPARE(t.dtype(), expected.dtype());
            QCOMPARE(t.shape(), expected.shape());
            QVERIFY2(bytesOf(t) == bytesOf(expected), a.name.c_str());
        }
        // numpy agrees on names, shapes and values.
        const QString check = dir_.path() + "/check_written.py";
        writeFile(check.toStdString(), "import sys, numpy as np\n"
                                      "z = np.load(sys.argv[1])\n"
                                      "assert sorted(z.files) == ['labels', 'logits', 'scalar'], z.files\n"
                                      "assert z['logits'].shape == (2, 3, 5) and z['logits'].dtype == np.float32\n"
                                      "assert list(z['labels']) == [4, 0, 9] and z['scalar'] == 2.5\n");
        QVERIFY(test::runPython(check, {QString::fromStdString(path)}));
        // A member name the zip format cannot hold is an Error naming the file; the
        // archive already there is untouched.
        const std::string before = readFile(path);
        std::map<std::string, Tensor> bad;
        bad[std::string(70000, 'n')] = arrays.at("labels");
        try {
            writeNpz(path, bad);
            QFAIL("a 70000-character member name was written");
        } catch (const Error& e) {
            QVERIFY2(std::string(e.what()).find(path) != std::string::npos, e.what());
        }
        QVERIFY(readFile(path) == before);
    }

    void listingReadsHeadersOnly()
    {
        // y's header is intact but its deflate data is corrupt past the header: listing succeeds,
        // reading fails. A reader that inflated everything on open would fail on open.
        const std::string npy = readFile(validPath("npz.ref/big.npy"));
        const NpzFile good = NpzFile::open(validPath("compressed.npz"));
        const NpzArray* big = good.find("big");
        QVERIFY(big);
        QCOMPARE(big->header.shape, (Shape{1000, 64}));
        QCOMPARE(big->header.dtype, DType::F32);

        const ZipEntry& entry = good.archive().entries()[big->entry];
        std::string archive = readFile(validPath("compressed.npz"));
        // Flip bits near the end of big's compressed data: its header (first bytes) still inflates.
        archive[size_t(entry.dataOffset + entry.compressedSize - 100)] ^= 0x5a;
        const std::string path = (dir_.path() + "/late_damage.npz").toStdString();
        writeFile(path, archive);
        const NpzFile damaged = NpzFile::open(path);
        QCOMPARE(damaged.find("big")->header.shape, (Shape{1000, 64}));
        QCOMPARE(bytesOf(damaged.read("x")), bytesOf(readNpy(validPath("npz.ref/x.npy"))));
        try {
            damaged.read("big");
            QFAIL("damaged array read");
        } catch (const Error& e) {
            QVERIFY2(QString(e.what()).contains("entry \"big.npy\""), e.what());
        }
    }

    void streamsAnEntryInPieces()
    {
        const NpzFile f = NpzFile::open(validPath("compressed.npz"));
        for (const char* name : {"big", "zeros", "labels"}) {
            const ZipEntry& entry = f.archive().entries()[f.find(name)->entry];
            std::vector<std::byte> whole(entry.uncompressedSize);
            ZipEntryReader(f.archive(), entry).read(whole);
            std::mt19937 rng(3);
            ZipEntryReader reader(f.archive(), entry);
            std::vector<std::byte> pieces(whole.size());
            while (reader.position() < reader.size()) {
                const size_t n = std::min<size_t>(reader.size() - reader.position(), 1 + rng() % 5000);
                reader.read(std::span(pieces).subspan(size_t(reader.position()), n));
            }
            QVERIFY(pieces == whole);
            std::byte one[1];
            QVERIFY_THROWS_EXCEPTION(Error, reader.read(one));
            const std::string npy = readFile(validPath("npz.ref/" + QString(name) + ".npy"));
            QVERIFY(std::memcmp(whole.data(), npy.data(), npy.size()) == 0 && npy.size() == whole.size());
        }
    }

    void streamsRowsInBatches()
    {
        std::mt19937 rng(9);
        for (const char* file : {"plain.npz", "compressed.npz"}) {
            const NpzFile f = NpzFile::open(validPath(file));
            for (const auto& a : f.arrays()) {
                if (a.header.shape.empty()) {
                    QVERIFY_THROWS_EXCEPTION(Error, NpzRowReader(f, a));
                    continue;
                }
                const QByteArray whole = bytesOf(f.read(a));
                NpzRowReader rows(f, a);
                QCOMPARE(rows.rowCount(), a.header.shape[0]);
                QByteArray streamed;
                while (rows.position() < rows.rowCount()) {
                    const Tensor batch = rows.next(1 + int64_t(rng() % 300));
                    QCOMPARE(batch.dtype(), a.header.dtype);
                    QCOMPARE(Shape(batch.shape().begin() + 1, batch.shape().end()),
                             Shape(a.header.shape.begin() + 1, a.header.shape.end()));
                    streamed += bytesOf(batch);
                }
                QCOMPARE(rows.next(4).dim(0), int64_t(0));
                QVERIFY2(streamed == whole, a.name.c_str());
            }
        }
    }

    void zip64AndStreamedArchives()
    {
        const NpzFile s = NpzFile::open(validPath("streamed.npz"));
        for (const auto& entry : s.archive().entries())
            QVERIFY(entry.flags & 8); // python wrote data descriptors
        QCOMPARE(bytesOf(s.read("x")), bytesOf(readNpy(validPath("npz.ref/x.npy"))));
        QCOMPARE(bytesOf(s.read("mask")), bytesOf(readNpy(validPath("npz.ref/mask.npy"))));

        const NpzFile z = NpzFile::open(validPath("zipfile_zip64.npz"));
        QCOMPARE(z.arrays().size(), size_t(2));
        QCOMPARE(z.otherMembers(), std::vector<std::string>{"README.txt"});
        QCOMPARE(bytesOf(z.read("x")), bytesOf(readNpy(validPath("npz.ref/x.npy"))));
        QCOMPARE(bytesOf(z.read("labels")), bytesOf(readNpy(validPath("npz.ref/labels.npy"))));

        const NpzFile e = NpzFile::open(validPath("zip64_end.npz"));
        QCOMPARE(e.arrays().size(), size_t(2));
        QVERIFY(!e.find("x")->compressed);
        QVERIFY(e.find("big")->compressed);
        QCOMPARE(bytesOf(e.read("x")), bytesOf(readNpy(validPath("npz.ref/x.npy"))));
        QCOMPARE(bytesOf(e.read("big")), bytesOf(readNpy(validPath("npz.ref/big.npy"))));
    }

    void missingArrayNamesTheArchive()
    {
        const NpzFile f = NpzFile::open(validPath("plain.npz"));
        QVERIFY(f.find("nope") == nullptr);
        try {
            f.read("nope");
            QFAIL("absent array read");
        } catch (const Error& e) {
            QVERIFY(QString(e.what()).contains("plain.npz") && QString(e.what()).contains("\"nope\""));
        }
    }

    // The hostile archives of tests/data/archives/hostile/npz go through the reader in
    // tst_malformed_corpus, with the other formats' malformed files.

    void truncationsAndByteFlipsNeverCrash()
    {
        // A small archive of both kinds of entry, written by numpy.
        const std::string source = readFile(validPath("zipfile_zip64.npz"));
        const std::string path = (dir_.path() + "/mutant.npz").toStdString();
        for (size_t n = 0; n < source.size(); ++n) {
            writeFile(path, source.substr(0, n));
            QVERIFY_THROWS_EXCEPTION(Error, openAndReadAll(path));
        }
        const QByteArray x = bytesOf(readNpy(validPath("npz.ref/x.npy")));
        std::mt19937 rng(5);
        int rejected = 0;
        for (int i = 0; i < 3000; ++i) {
            std::string mutant = source;
            for (int flips = 1 + int(rng() % 3); flips > 0; --flips)
                mutant[rng() % mutant.size()] = char(rng());
            writeFile(path, mutant);
            try {
                const NpzFile f = NpzFile::open(path);
                for (const auto& a : f.arrays()) {
                    const Tensor t = f.read(a);
                    if (a.name == "x" && t.shape() == Shape{3, 5} && t.dtype() == DType::F32)
                        QVERIFY(bytesOf(t) == x); // CRC-32 guards the data
                }
            } catch (const Error& e) {
                ++rejected;
                QVERIFY(QString(e.what()).contains(QString::fromStdString(path)));
            }
        }
        QVERIFY(rejected > 1000);
    }
};

QTEST_APPLESS_MAIN(TestNpz)
#include "tst_npz.moc"
