// Memory-mapped files and safetensors checkpoints: every dtype read zero-copy
// and equal to what Python wrote, misaligned tensors copied, sharded checkpoints
// in a deterministic order, the writer's round trip and atomicity. Random
// truncations and byte flips must end in an Error or a valid file, never a crash.
// The corpus of malformed files runs in tst_malformed_corpus.
#include <QtTest>

#include <cstring>
#include <fstream>
#include <random>
#include <unistd.h>

#include "core/mapped_file.h"
#include "io/npy.h"
#include "io/safetensors.h"

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

// Opens a checkpoint and touches every tensor, as a loader would.
void openAndReadAll(const std::filesystem::path& path)
{
    const SafetensorsFile f = SafetensorsFile::open(path);
    for (const auto& e : f.entries()) {
        const Tensor t = f.tensor(e);
        QCOMPARE(t.nbytes(), size_t(e.end - e.begin));
    }
}

uint64_t headerLength(const std::string& path)
{
    const std::string bytes = readFile(path);
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    return n;
}

} // namespace

class TestSafetensors : public QObject {
    Q_OBJECT
private:
    QTemporaryDir dir_;
    QString valid_;

    std::string validPath(const QString& name) const { return (valid_ + "/" + name).toStdString(); }

private slots:
    void initTestCase()
    {
        QVERIFY(dir_.isValid());
        valid_ = dir_.path() + "/valid";
        if (!runGenerator("make_valid_archives.py", valid_))
            QSKIP("/usr/bin/python3 with numpy is needed to generate the fixtures");
    }

    void mappedFileMapsTheWholeFile()
    {
        const std::string path = (dir_.path() + "/bytes.bin").toStdString();
        std::string content(10000, '\0');
        for (size_t i = 0; i < content.size(); ++i)
            content[i] = char(i * 7 + 3);
        writeFile(path, content);
        const auto m = MappedFile::open(path);
        QCOMPARE(m->size(), content.size());
        QCOMPARE(m->path(), std::filesystem::path(path));
        QVERIFY(std::memcmp(m->data(), content.data(), content.size()) == 0);

        const std::string empty = (dir_.path() + "/empty.bin").toStdString();
        writeFile(empty, "");
        const auto e = MappedFile::open(empty);
        QCOMPARE(e->size(), size_t(0));
        QVERIFY(e->bytes().empty());
    }

    void mappedFileErrorsNameTheFile()
    {
        auto expectError = [](const std::string& path, const char* phrase) {
            try {
                MappedFile::open(path);
                QFAIL(qPrintable(QString::fromStdString(path) + " opened"));
            } catch (const Error& err) {
                const QString msg = err.what();
                QVERIFY2(msg.contains(QString::fromStdString(path)) && msg.contains(phrase), qPrintable(msg));
            }
        };
        expectError((dir_.path() + "/no_such_file").toStdString(), "no such file");
        expectError(dir_.path().toStdString(), "is a folder");
        expectError("/dev/null", "not a regular file");
        if (::geteuid() != 0) { // root reads anything
            const std::string locked = (dir_.path() + "/locked.bin").toStdString();
            writeFile(locked, "secret");
            std::filesystem::permissions(locked, std::filesystem::perms::none);
            expectError(locked, "cannot open");
        }
    }

    void readsEveryDtypeZeroCopy()
    {
        const SafetensorsFile f = SafetensorsFile::open(validPath("all_dtypes.safetensors"));
        const QStringList names{"f64",    "i64",   "u64", "model.layers.0.q_proj.weight",
                                "scalar", "i32",   "u32", "f16",
                                "bf16",   "i16",   "u16", "i8",
                                "u8",     "flags", "fp8", "fp8b",
                                "empty"};
        QCOMPARE(f.entries().size(), size_t(names.size()));
        QVERIFY(!f.isSharded());
        QCOMPARE(f.metadata().at("format"), std::string("pt"));
        QCOMPARE(f.metadata().size(), size_t(2));
        const auto mapping = MappedFile::open(validPath("all_dtypes.safetensors"));
        for (int i = 0; i < names.size(); ++i) {
            const SafetensorsEntry& e = f.entries()[size_t(i)];
            QCOMPARE(QString::fromStdString(e.name), names[i]);
            const Tensor ref = readNpy(validPath("all_dtypes.safetensors.ref/" + QString::number(i) + ".npy"));
            const Tensor t = f.tensor(e.name);
            QCOMPARE(t.shape(), ref.shape());
            QCOMPARE(t.nbytes(), ref.nbytes());
            QCOMPARE(bytesOf(t), bytesOf(ref));
            if (!t.empty())
                QVERIFY2(t.isBorrowed(), qPrintable(names[i])); // the writer aligned every tensor
        }
        QCOMPARE(f.find("bf16")->dtype, DType::BF16);
        QCOMPARE(f.find("fp8")->dtype, DType::U8);
        QCOMPARE(f.find("fp8")->sourceDtype, std::string("F8_E4M3"));
        QCOMPARE(f.find("fp8b")->sourceDtype, std::string("F8_E5M2"));
        QCOMPARE(f.find("flags")->dtype, DType::Bool);
        QCOMPARE(f.find("scalar")->shape, Shape{});
        QCOMPARE(f.find("empty")->shape, (Shape{0, 3}));
        QVERIFY(f.find("nope") == nullptr);
        try {
            f.tensor("nope");
            QFAIL("absent tensor returned");
        } catch (const Error& e) {
            QVERIFY(QString(e.what()).contains("all_dtypes.safetensors") && QString(e.what()).contains("\"nope\""));
        }
    }

    void tensorsKeepTheMappingAlive()
    {
        Tensor t;
        {
            const SafetensorsFile f = SafetensorsFile::open(validPath("all_dtypes.safetensors"));
            t = f.tensor("model.layers.0.q_proj.weight");
        }
        const Tensor ref = readNpy(validPath("all_dtypes.safetensors.ref/3.npy"));
        QVERIFY(t.isBorrowed());
        QCOMPARE(bytesOf(t), bytesOf(ref));
    }

    void misalignedTensorsAreCopied()
    {
        const std::string path = validPath("misaligned.safetensors");
        const uint64_t dataStart = 8 + headerLength(path);
        const SafetensorsFile f = SafetensorsFile::open(path);
        int copied = 0;
        for (size_t i = 0; i < f.entries().size(); ++i) {
            const SafetensorsEntry& e = f.entries()[i];
            const Tensor t = f.tensor(e);
            const Tensor ref = readNpy(validPath("misaligned.safetensors.ref/" + QString::number(i) + ".npy"));
            QCOMPARE(bytesOf(t), bytesOf(ref));
            const bool aligned = (dataStart + e.begin) % dtypeSize(e.dtype) == 0;
            QCOMPARE(t.isBorrowed(), aligned);
            QCOMPARE(reinterpret_cast<uintptr_t>(t.rawData()) % dtypeSize(e.dtype), uintptr_t(0));
            copied += !aligned;
        }
        QVERIFY(copied >= 2); // "w" at data offset 3 is misaligned whatever the header length
    }

    void shardedCheckpointInDeterministicOrder()
    {
        const SafetensorsFile f = SafetensorsFile::open(validPath("sharded/model.safetensors.index.json"));
        QVERIFY(f.isSharded());
        const auto files = f.files();
        QCOMPARE(files.size(), size_t(2));
        QCOMPARE(files[0].filename().string(), std::string("model-00001-of-00002.safetensors"));
        QCOMPARE(files[1].filename().string(), std::string("model-00002-of-00002.safetensors"));
        QStringList names;
        for (const auto& e : f.entries())
            names << QString::fromStdString(e.name);
        QCOMPARE(names, (QStringList{"model.embed.weight", "model.layers.0.mlp.weight", "lm_head.weight",
                                     "model.norm.weight"}));
        QCOMPARE(f.metadata().at("total_size"), std::string("212"));
        QCOMPARE(f.fileMetadata(1).at("format"), std::string("pt"));
        const QStringList refs{
            "model-00001-of-00002.safetensors.ref/0.npy", "model-00001-of-00002.safetensors.ref/1.npy",
            "model-00002-of-00002.safetensors.ref/0.npy", "model-00002-of-00002.safetensors.ref/1.npy"};
        for (int i = 0; i < refs.size(); ++i) {
            const Tensor t = f.tensor(f.entries()[size_t(i)]);
            QCOMPARE(bytesOf(t), bytesOf(readNpy(validPath("sharded/" + refs[i]))));
            QCOMPARE(f.entries()[size_t(i)].file, size_t(i / 2));
        }
    }

    void writerRoundTripsRandomTensors()
    {
        std::mt19937 rng(7);
        const DType dtypes[] = {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I8,  DType::U8,
                                DType::I16, DType::U16, DType::I32,  DType::U32, DType::I64, DType::U64};
        for (int round = 0; round < 20; ++round) {
            std::vector<SafetensorsTensor> tensors;
            const int count = 1 + int(rng() % 12);
            for (int i = 0; i < count; ++i) {
                const DType d = dtypes[rng() % std::size(dtypes)];
                Shape shape;
                for (int r = int(rng() % 4); r > 0; --r)
                    shape.push_back(int64_t(rng() % 6)); // zero dims included
                Tensor t(d, shape);
                auto* p = static_cast<uint8_t*>(t.mutableRawData());
                for (size_t b = 0; b < t.nbytes(); ++b)
                    p[b] = uint8_t(rng());
                // Names a JSON writer must escape.
                tensors.push_back({"layer." + std::to_string(i) + (i % 3 == 0 ? ".\"q\\k\".é" : ".w"), t, {}});
            }
            if (round % 2) { // fp8 codes travel as U8 with their file dtype kept
                Tensor codes(DType::U8, {5});
                codes.mutableValues<uint8_t>()[2] = 0x7e;
                tensors.push_back({"fp8", codes, round % 4 == 1 ? "F8_E4M3" : "F8_E5M2"});
            }
            const std::string path = (dir_.path() + "/round.safetensors").toStdString();
            writeSafetensors(path, tensors, {{"format", "pt"}, {"quantscope", "round " + std::to_string(round)}});
            QCOMPARE((8 + headerLength(path)) % 8, uint64_t(0));
            const SafetensorsFile f = SafetensorsFile::open(path);
            QCOMPARE(f.entries().size(), tensors.size());
            QCOMPARE(f.metadata().at("quantscope"), "round " + std::to_string(round));
            for (size_t i = 0; i < tensors.size(); ++i) {
                const SafetensorsEntry& e = f.entries()[i];
                QCOMPARE(e.name, tensors[i].name); // the header keeps the caller's order
                QCOMPARE(e.dtype, tensors[i].tensor.dtype());
                QCOMPARE(e.shape, tensors[i].tensor.shape());
                QCOMPARE(e.begin % dtypeSize(e.dtype), uint64_t(0));
                if (!tensors[i].dtype.empty())
                    QCOMPARE(e.sourceDtype, tensors[i].dtype);
                const Tensor t = f.tensor(e);
                QVERIFY(t.empty() || t.isBorrowed());
                QCOMPARE(bytesOf(t), bytesOf(tensors[i].tensor));
            }
        }
    }

    void boolBytesAreNormalised()
    {
        Tensor flags(DType::Bool, {4});
        auto v = flags.mutableValues<uint8_t>();
        v[0] = 0, v[1] = 1, v[2] = 2, v[3] = 255;
        const std::string path = (dir_.path() + "/bools.safetensors").toStdString();
        writeSafetensors(path, {{"flags", flags, {}}});
        const Tensor t = SafetensorsFile::open(path).tensor("flags");
        QVERIFY(!t.isBorrowed());
        QCOMPARE(std::vector<uint8_t>(t.values<uint8_t>().begin(), t.values<uint8_t>().end()),
                 (std::vector<uint8_t>{0, 1, 1, 1}));
    }

    void writerIsAtomicAndValidates()
    {
        const std::string path = (dir_.path() + "/atomic/model.safetensors").toStdString();
        std::filesystem::create_directories(std::filesystem::path(path).parent_path());
        writeSafetensors(path, {{"a", Tensor(DType::F32, {3}), {}}});
        const std::string before = readFile(path);
        auto expectError = [&](const std::vector<SafetensorsTensor>& tensors, const char* phrase) {
            try {
                writeSafetensors(path, tensors);
                QFAIL("bad write succeeded");
            } catch (const Error& e) {
                QVERIFY2(QString(e.what()).contains(QString::fromStdString(path)) && QString(e.what()).contains(phrase),
                         e.what());
            }
        };
        expectError({{"w", Tensor(DType::F32, {2}), "F8_E4M3"}}, "cannot be written as safetensors dtype \"F8_E4M3\"");
        expectError({{"w", Tensor(DType::F32, {2}), {}}, {"w", Tensor(DType::F32, {2}), {}}}, "given twice");
        expectError({{"__metadata__", Tensor(DType::F32, {2}), {}}}, "cannot write a tensor named");
        QCOMPARE(readFile(path), before);
        QCOMPARE(QDir(dir_.path() + "/atomic").entryList(QDir::Files | QDir::Hidden).size(), 1);

        const std::string nowhere = (dir_.path() + "/no/such/folder/x.safetensors").toStdString();
        try {
            writeSafetensors(nowhere, {});
            QFAIL("write into a missing folder succeeded");
        } catch (const Error& e) {
            QVERIFY(QString(e.what()).contains(QString::fromStdString(nowhere)));
        }
    }

    // The hostile files of tests/data/archives/hostile/safetensors go through the reader in
    // tst_malformed_corpus, with the other formats' malformed files.

    void truncationsAndByteFlipsNeverCrash()
    {
        const std::string original = readFile(validPath("all_dtypes.safetensors"));
        const std::string path = (dir_.path() + "/mutant.safetensors").toStdString();
        // Every strict prefix lacks bytes the header promises.
        for (size_t n = 0; n < original.size(); ++n) {
            writeFile(path, original.substr(0, n));
            QVERIFY_THROWS_EXCEPTION(Error, SafetensorsFile::open(path));
        }
        std::mt19937 rng(11);
        const uint64_t headerEnd = 8 + headerLength(validPath("all_dtypes.safetensors"));
        int rejected = 0;
        for (int i = 0; i < 1500; ++i) {
            std::string mutant = original;
            const size_t at = rng() % headerEnd; // flips in the data section are just other values
            mutant[at] = char(rng());
            writeFile(path, mutant);
            try {
                openAndReadAll(path);
            } catch (const Error& e) {
                ++rejected;
                QVERIFY(QString(e.what()).contains(QString::fromStdString(path)));
            }
        }
        QVERIFY(rejected > 500);
    }
};

QTEST_APPLESS_MAIN(TestSafetensors)
#include "tst_safetensors.moc"
