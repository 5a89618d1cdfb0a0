// Core: tensors, dtype conversion (fp16/bf16 bit-exact), block layouts and tile sizes, SHA-256 digests.
#include <QtTest>

#include <algorithm>
#include <bit>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <sys/resource.h>

#include "core/allocator.h"
#include "core/block_layout.h"
#include "core/half.h"
#include "core/sha256.h"
#include "core/tensor.h"

using namespace qs;

class TestCore : public QObject {
    Q_OBJECT
private slots:
    // First: a block freed earlier in the process could raise glibc's own
    // mapping threshold past the size used here.
    void freedBlocksStayInTheProcess()
    {
#if defined(__GLIBC__)
        // A 24 MiB block comes from the heap and, freed, stays there for the
        // next run's tensors instead of being unmapped (glibc maps blocks above
        // 128 KiB and unmaps them on free unless told otherwise).
        keepFreedMemoryForReuse();
        constexpr size_t size = size_t(24) << 20;
        char* block = static_cast<char*>(std::malloc(size));
        QVERIFY(block);
        std::fill(block, block + size, char(1));
        QVERIFY(mallinfo2().hblkhd < size); // not a mapping of its own
        std::free(block);
        QVERIFY(mallinfo2().fordblks >= size); // kept as free heap
#else
        QSKIP("keepFreedMemoryForReuse() tunes glibc's allocator only");
#endif
    }

    void largeTensorBlocksAreKeptForTheNextRun()
    {
        // A block past glibc's largest mapping threshold is mapped on each
        // allocation and unmapped on each free: every run of a model would
        // fault in (and the kernel zero) its largest activations again.
        keepFreedMemoryForReuse();
        const size_t keptBefore = keptTensorBlockBytes();
        const Shape shape{int64_t(kKeptBlockMinBytes / sizeof(float)) / 4 * 5};
        auto minorFaults = [] {
            rusage usage{};
            getrusage(RUSAGE_SELF, &usage);
            return usage.ru_minflt;
        };
        auto touchedRun = [&](const void** data) {
            const long before = minorFaults();
            Tensor t = Tensor::uninitialized(DType::F32, shape);
            auto v = t.mutableValues<float>();
            std::fill(v.begin(), v.end(), 1.0f);
            *data = t.rawData();
            return minorFaults() - before;
        };
        const void* first = nullptr;
        const void* second = nullptr;
        const long firstFaults = touchedRun(&first);
        QCOMPARE(reinterpret_cast<uintptr_t>(first) % 64, uintptr_t(0));
        QCOMPARE(keptTensorBlockBytes(), keptBefore + shape[0] * sizeof(float));
        const long secondFaults = touchedRun(&second);
        QCOMPARE(second, first);
        QVERIFY2(secondFaults * 10 < firstFaults,
                 qPrintable(QString("faults: first run %1, second %2").arg(firstFaults).arg(secondFaults)));

        // A tenth smaller fits the kept block (at most an eighth of the
        // tensor's size to spare); a fifth smaller does not.
        const Shape slightlySmaller{shape[0] - shape[0] / 10};
        QCOMPARE(Tensor::uninitialized(DType::F32, slightlySmaller).rawData(), first);
        const Shape muchSmaller{shape[0] - shape[0] / 5};
        QVERIFY(Tensor::uninitialized(DType::F32, muchSmaller).rawData() != first);

        // Blocks below the threshold are the system allocator's.
        const size_t kept = keptTensorBlockBytes();
        {
            Tensor small = Tensor::uninitialized(DType::F32, Shape{1 << 20});
        }
        QCOMPARE(keptTensorBlockBytes(), kept);

        // At most kKeptBlocksMaxBytes are kept, the most recently freed.
        {
            std::vector<Tensor> many;
            for (size_t i = 0; i * kKeptBlockMinBytes <= kKeptBlocksMaxBytes; ++i)
                many.push_back(Tensor::uninitialized(DType::F32, shape));
        }
        QVERIFY(keptTensorBlockBytes() <= kKeptBlocksMaxBytes);
        QVERIFY(keptTensorBlockBytes() + shape[0] * sizeof(float) > kKeptBlocksMaxBytes);
    }

    void fp16RoundTripsEveryCode()
    {
        for (uint32_t h = 0; h < 0x10000; ++h) {
            const float f = fp16ToFloat(uint16_t(h));
            if (std::isnan(f))
                continue;
            QCOMPARE(floatToFp16(f), uint16_t(h));
        }
    }

    void fp16RoundsHalfToEven()
    {
        // 1 + 2^-11 lies exactly between 1 and 1 + 2^-10: ties go to the even mantissa (1).
        QCOMPARE(floatToFp16(1.0f + 0x1p-11f), uint16_t(0x3c00));
        // 1 + 3·2^-11 is between 1+2^-10 (odd) and 1+2^-9 (even): goes up.
        QCOMPARE(floatToFp16(1.0f + 3 * 0x1p-11f), uint16_t(0x3c02));
        // Smallest subnormal 2^-24; half of it ties to zero, a bit more rounds up.
        QCOMPARE(floatToFp16(0x1p-25f), uint16_t(0));
        QCOMPARE(floatToFp16(0x1.01p-25f), uint16_t(1));
        QCOMPARE(floatToFp16(65504.f), uint16_t(0x7bff));
        QCOMPARE(floatToFp16(65519.f), uint16_t(0x7bff));
        QCOMPARE(floatToFp16(65520.f), uint16_t(0x7c00));
        QCOMPARE(floatToFp16(-INFINITY), uint16_t(0xfc00));
        QVERIFY(std::isnan(fp16ToFloat(floatToFp16(NAN))));
    }

    void fp16MatchesDoubleRoundingOnRandomFloats()
    {
        // Reference: the nearest of the two fp16 neighbours, computed in double.
        uint32_t state = 12345;
        for (int i = 0; i < 200000; ++i) {
            state = state * 1664525u + 1013904223u;
            const float f = std::bit_cast<float>((state & 0x8fffffffu) | 0x30000000u); // |f| in [2^-31, 2^2]
            const uint16_t h = floatToFp16(f);
            // Distance from f to a code's value; codes past the ends (NaN patterns) never win.
            auto distance = [f](uint16_t code) {
                const double v = fp16ToFloat(code);
                return std::isnan(v) ? INFINITY : std::abs(v - double(f));
            };
            QVERIFY2(distance(h) <= distance(uint16_t(h + 1)) && distance(h) <= distance(uint16_t(h - 1)) &&
                         distance(h) <= distance(uint16_t(h ^ 0x8000u)),
                     qPrintable(QString::number(double(f), 'g', 10)));
        }
    }

    void bf16RoundsHalfToEven()
    {
        QCOMPARE(floatToBf16(1.0f), uint16_t(0x3f80));
        QCOMPARE(floatToBf16(std::bit_cast<float>(0x3f808000u)), uint16_t(0x3f80)); // tie, even stays
        QCOMPARE(floatToBf16(std::bit_cast<float>(0x3f818000u)), uint16_t(0x3f82)); // tie, odd goes up
        QCOMPARE(floatToBf16(std::bit_cast<float>(0x3f808001u)), uint16_t(0x3f81));
        QVERIFY(std::isnan(bf16ToFloat(floatToBf16(NAN))));
    }

    void tensorConvertsToFloat32()
    {
        const Tensor t = Tensor::fromVector<int16_t>(DType::I16, {2, 2}, {-3, 0, 7, 32767});
        const Tensor f = t.toFloat32();
        QCOMPARE(f.dtype(), DType::F32);
        QCOMPARE(f.values<float>()[3], 32767.f);
        QCOMPARE(f.values<float>()[0], -3.f);
    }

    void tensorRejectsBadShapes()
    {
        QVERIFY_THROWS_EXCEPTION(Error, Tensor(DType::F32, {2, -1}));
        QVERIFY_THROWS_EXCEPTION(Error, Tensor(DType::F32, {1LL << 40, 1LL << 40}));
        const Tensor t(DType::F32, {2, 3});
        QVERIFY_THROWS_EXCEPTION(Error, t.reshaped({4, 2}));
        QCOMPARE(t.reshaped({3, 2}).shape(), (Shape{3, 2}));
    }

    void borrowedTensorsAreReadOnly()
    {
        static const float data[2] = {1, 2};
        Tensor t = Tensor::borrow(DType::F32, {2}, data, nullptr);
        QVERIFY_THROWS_EXCEPTION(Error, t.mutableRawData());
        QCOMPARE(t.clone().mutableValues<float>()[1], 2.f);
    }

    void blockLayoutGroups()
    {
        const auto pt = BlockLayout::perTensor({4, 6});
        QCOMPARE(pt.groupCount(), int64_t(1));
        QCOMPARE(pt.describe(), std::string("per_tensor"));

        const auto pc = BlockLayout::perChannel({4, 6}, 0);
        QCOMPARE(pc.gridShape(), (Shape{4, 1}));
        QCOMPARE(pc.groupOf(7), int64_t(1));

        const auto tl = BlockLayout::tiled({4, 10}, 0, 1, 4); // tiles of 4, 4, 2
        QCOMPARE(tl.gridShape(), (Shape{4, 3}));
        QCOMPARE(tl.groupOf(0), int64_t(0));
        QCOMPARE(tl.groupOf(4), int64_t(1));
        QCOMPARE(tl.groupOf(9), int64_t(2));
        QCOMPARE(tl.groupOf(10), int64_t(3));
        QCOMPARE(tl.groupOf(39), int64_t(11));

        const auto conv = BlockLayout::perChannel({8, 3, 3, 3}, -4);
        QCOMPARE(conv.groupOf(27), int64_t(1));
        QVERIFY_THROWS_EXCEPTION(Error, BlockLayout::perChannel({8, 3}, 2));
        QVERIFY_THROWS_EXCEPTION(Error, BlockLayout::tiled({8, 3}, 1, 1, 2));
    }

    void tileSizeFractionsMeanTileCounts()
    {
        QCOMPARE(resolveTileSize(128, 4096), int64_t(128));
        QCOMPARE(resolveTileSize(0.25, 4096), int64_t(1024));
        QCOMPARE(resolveTileSize(0.5, 10), int64_t(5));
        QVERIFY_THROWS_EXCEPTION(Error, resolveTileSize(0.25, 10)); // 4 tiles do not divide 10
        QVERIFY_THROWS_EXCEPTION(Error, resolveTileSize(0.3, 30));  // not 1/n
        QVERIFY_THROWS_EXCEPTION(Error, resolveTileSize(1.5, 30));
        QVERIFY_THROWS_EXCEPTION(Error, resolveTileSize(0, 30));
        QVERIFY_THROWS_EXCEPTION(Error, resolveTileSize(-2, 30));
    }
    void sha256MatchesPublishedVectors()
    {
        // FIPS 180-2 / NIST test vectors.
        auto digest = [](std::string_view text) {
            return sha256Hex({reinterpret_cast<const uint8_t*>(text.data()), text.size()});
        };
        QCOMPARE(digest(""), std::string("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
        QCOMPARE(digest("abc"), std::string("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
        // 56 bytes: the length no longer fits the first block's padding, a second block is added.
        QCOMPARE(digest("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
                 std::string("248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"));
    }

    void sha256StreamsPiecesOfAnySize()
    {
        // One million 'a' added in uneven pieces (crossing block boundaries) gives the published digest.
        Sha256 h;
        const std::string a(1000, 'a');
        size_t added = 0, piece = 1;
        while (added < 1000000) {
            const size_t take = std::min({piece, a.size(), 1000000 - added});
            h.add({reinterpret_cast<const uint8_t*>(a.data()), take});
            added += take;
            piece = piece * 7 % 997 + 1;
        }
        QCOMPARE(h.hex(), std::string("cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"));
    }

    void sha256OfFileReadsPastItsBuffer()
    {
        // Three million 'a': the file is read in 1 MiB pieces, so the digest spans three reads.
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const std::filesystem::path file = dir.filePath("a.bin").toStdString();
        {
            std::ofstream out(file, std::ios::binary);
            const std::string a(1000000, 'a');
            for (int i = 0; i < 3; ++i)
                out << a;
        }
        QCOMPARE(sha256OfFile(file), std::string("2a152c894398719c0570f83fac34ac03a0f6e8e474b995c2403aa5434f7b9dd4"));
        try {
            sha256OfFile(file.parent_path() / "missing.bin");
            QFAIL("a missing file was hashed");
        } catch (const Error& e) {
            QVERIFY(std::string(e.what()).find("missing.bin") != std::string::npos);
        }
    }
};

QTEST_APPLESS_MAIN(TestCore)
#include "tst_core.moc"
