// Data sources (io/data_source.h): .npz, .npy and HDF5 batching, labels,
// streaming of a file many batches long, matching against a model's inputs,
// batch sizes for a model (fixed batch dimensions), synthetic data (token ids
// bounded by their embedding table), and every error path. Fixtures come from
// data/data_sources/make_data_fixtures.py: element (r, k) of an array is r * 1000 + k, labels are r % 3.
#include <QtTest>

#include "core/error.h"
#include "io/data_source.h"
#include "io/onnx_loader.h"
#include "io/synthetic_data.h"

using namespace qs;

namespace {

bool generateFixtures(const QString& outDir)
{
    QProcess p;
    p.setProcessChannelMode(QProcess::ForwardedChannels);
    p.start(QStringLiteral("/usr/bin/python3"),
            {QStringLiteral(QUANTSCOPE_TEST_DATA "/data_sources/make_data_fixtures.py"), outDir});
    return p.waitForFinished(120000) && p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0;
}

// Checks that `t` holds rows [first, first + rows) of the arithmetic pattern.
template <class T> bool holdsRows(const Tensor& t, int64_t first, int64_t rows, const Shape& rowShape)
{
    Shape expected{rows};
    expected.insert(expected.end(), rowShape.begin(), rowShape.end());
    if (t.shape() != expected)
        return false;
    const int64_t perRow = rows ? t.numel() / rows : 0;
    const auto v = t.values<T>();
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t k = 0; k < perRow; ++k)
            if (v[size_t(r * perRow + k)] != T((first + r) * 1000 + k))
                return false;
    return true;
}

bool holdsLabels(const Tensor& t, int64_t first, int64_t rows)
{
    if (t.shape() != Shape{rows} || t.dtype() != DType::I64)
        return false;
    for (int64_t r = 0; r < rows; ++r)
        if (t.values<int64_t>()[size_t(r)] != (first + r) % 3)
            return false;
    return true;
}

ValueInfo input(std::string name, DType dtype, std::vector<Dim> shape)
{
    ValueInfo v;
    v.name = std::move(name);
    v.dtype = dtype;
    v.typeName = std::string(dtypeName(dtype));
    v.shape = std::move(shape);
    return v;
}

Model modelWithInputs(std::vector<ValueInfo> inputs)
{
    Model m;
    m.sourcePath = "model.onnx";
    m.format = "onnx";
    m.inputs = std::move(inputs);
    return m;
}

} // namespace

class TestDataSource : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;
    bool haveFixtures_ = false;

    std::filesystem::path fixture(const char* name) const { return (dir_.path() + "/" + name).toStdString(); }

    void expectError(const std::function<void()>& open, const QStringList& mustContain)
    {
        try {
            open();
            QFAIL("no Error");
        } catch (const Error& e) {
            for (const QString& s : mustContain)
                QVERIFY2(QString(e.what()).contains(s), qPrintable(QString(e.what()) + " lacks " + s));
        }
    }

private slots:
    void initTestCase()
    {
        QVERIFY(dir_.isValid());
        haveFixtures_ = generateFixtures(dir_.path());
    }

    void init()
    {
        if (!haveFixtures_)
            QSKIP("/usr/bin/python3 with numpy and h5py is needed to generate the fixtures");
    }

    // 10 rows in batches of 4: 4, 4, 2 (or 4, 4 with dropLast); every array's
    // rows and the labels line up; rewind starts over.
    void batchesOfEveryFormat_data()
    {
        QTest::addColumn<QString>("file");
        QTest::newRow("npz stored") << "two_inputs.npz";
        QTest::newRow("npz deflated") << "two_inputs_compressed.npz";
        QTest::newRow("hdf5 (chunked, gzip)") << "data.h5";
    }

    void batchesOfEveryFormat()
    {
        QFETCH(QString, file);
        for (const bool dropLast : {false, true}) {
            DataSourceOptions options;
            options.batchSize = 4;
            options.dropLast = dropLast;
            auto source = openDataSource(fixture(file.toUtf8().constData()), options);
            QCOMPARE(source->rowCount(), 10);
            QCOMPARE(source->batchCount(), dropLast ? 2 : 3);
            QCOMPARE(source->inputs().size(), size_t(2));
            QVERIFY(source->labels().has_value());
            for (int pass = 0; pass < 2; ++pass) {
                int64_t row = 0, batches = 0;
                while (auto batch = source->next()) {
                    QCOMPARE(batch->firstRow, row);
                    const int64_t rows = batch->rows;
                    QCOMPARE(rows, std::min<int64_t>(4, 10 - row));
                    QVERIFY(holdsRows<float>(batch->inputs.at("image"), row, rows, {2, 3}));
                    QVERIFY(holdsRows<int64_t>(batch->inputs.at("mask"), row, rows, {4}));
                    QVERIFY(batch->labels && holdsLabels(*batch->labels, row, rows));
                    row += rows;
                    ++batches;
                }
                QCOMPARE(batches, source->batchCount());
                QCOMPARE(row, dropLast ? 8 : 10);
                QVERIFY(!source->next()); // stays at the end
                source->rewind();
            }
        }
    }

    // A compressed array of 20000 rows in batches of 256: every row arrives,
    // in order, a batch at a time (the reader inflates as it goes).
    void streamsALargeFile()
    {
        DataSourceOptions options;
        options.batchSize = 256;
        auto source = openDataSource(fixture("large.npz"), options);
        QCOMPARE(source->batchCount(), (20000 + 255) / 256);
        int64_t row = 0;
        while (auto batch = source->next()) {
            QVERIFY(holdsRows<float>(batch->inputs.at("x"), row, batch->rows, {64}));
            QVERIFY(holdsLabels(*batch->labels, row, batch->rows));
            row += batch->rows;
        }
        QCOMPARE(row, 20000);
    }

    // Every .npy layout gives the same rows: C order (sliced from the
    // mapping), Fortran order, big-endian, bools normalised.
    void npyRows_data()
    {
        QTest::addColumn<QString>("file");
        QTest::newRow("c order") << "single.npy";
        QTest::newRow("fortran order") << "fortran.npy";
        QTest::newRow("big endian") << "big_endian.npy";
    }

    void npyRows()
    {
        QFETCH(QString, file);
        DataSourceOptions options;
        options.batchSize = 3;
        auto source = openDataSource(fixture(file.toUtf8().constData()), options);
        QCOMPARE(source->inputs().size(), size_t(1));
        QCOMPARE(source->inputs()[0].name, QFileInfo(file).completeBaseName().toStdString());
        QVERIFY(!source->labels());
        QCOMPARE(source->batchCount(), 3);
        int64_t row = 0;
        while (auto batch = source->next()) {
            QVERIFY(holdsRows<float>(batch->inputs.begin()->second, row, batch->rows, {3}));
            row += batch->rows;
        }
        QCOMPARE(row, 7);
    }

    void npyBoolsAreZeroOrOne()
    {
        auto source = openDataSource(fixture("bools.npy"), {.batchSize = 7});
        const auto batch = source->next();
        QVERIFY(batch);
        const Tensor& t = batch->inputs.begin()->second;
        QCOMPARE(t.dtype(), DType::Bool);
        for (int64_t i = 0; i < t.numel(); ++i)
            QCOMPARE(int(t.values<uint8_t>()[size_t(i)]), int((i / 3 * 1000 + i % 3) % 2));
    }

    void fortranNpzRows()
    {
        auto source = openDataSource(fixture("fortran.npz"), {.batchSize = 4});
        int64_t row = 0;
        while (auto batch = source->next()) {
            QVERIFY(holdsRows<float>(batch->inputs.at("x"), row, batch->rows, {5}));
            row += batch->rows;
        }
        QCOMPARE(row, 9);
    }

    void hdf5Group()
    {
        DataSourceOptions options;
        options.batchSize = 4;
        options.hdf5Group = "calib";
        auto source = openDataSource(fixture("data.h5"), options);
        QCOMPARE(source->inputs().size(), size_t(1)); // nested/ignored is in a subgroup
        QCOMPARE(source->inputs()[0].name, "input");
        auto batch = source->next();
        QVERIFY(holdsRows<float>(batch->inputs.at("input"), 0, 4, {4}));
        batch = source->next();
        QVERIFY(holdsRows<float>(batch->inputs.at("input"), 4, 2, {4}));
    }

    // With a model: arrays named after its inputs, in its order; symbolic and
    // fixed dimensions; a single-input model takes any one array or an .npy.
    void matchesModelInputs()
    {
        const Model two =
            modelWithInputs({input("mask", DType::I64, {Dim::named("N"), Dim::fixed(4)}),
                             input("image", DType::F32, {Dim::unknown(), Dim::fixed(2), Dim::named("w")})});
        auto source = openDataSource(fixture("two_inputs.npz"), {.batchSize = 5}, &two);
        QCOMPARE(source->inputs()[0].name, "mask");
        QCOMPARE(source->inputs()[1].name, "image");
        QVERIFY(holdsRows<float>(source->next()->inputs.at("image"), 0, 5, {2, 3}));

        const Model one = modelWithInputs({input("x", DType::F32, {Dim::named("N"), Dim::fixed(2), Dim::fixed(3)})});
        source = openDataSource(fixture("single.npz"), {.batchSize = 5}, &one);
        QCOMPARE(source->inputs()[0].name, "x");
        QCOMPARE(source->inputs()[0].fileName, "pixels");
        QVERIFY(holdsRows<float>(source->next()->inputs.at("x"), 0, 5, {2, 3}));

        const Model vector = modelWithInputs({input("v", DType::F32, {Dim::named("N"), Dim::fixed(3)})});
        source = openDataSource(fixture("single.npy"), {.batchSize = 5}, &vector);
        QVERIFY(holdsRows<float>(source->next()->inputs.at("v"), 0, 5, {3}));
    }

    // The bundled demo: its calibration and evaluation sets feed its model.
    void demoDataFeedsDemoModel()
    {
        const std::string demo = QUANTSCOPE_TEST_DATA "/../../resources/demo/digits/";
        const Model model = loadOnnx(demo + "digits_cnn.onnx");
        for (const char* file : {"digits_calib.npz", "digits_eval.npz"}) {
            auto source = openDataSource(demo + file, {.batchSize = 64}, &model);
            QCOMPARE(source->inputs().size(), size_t(1));
            QCOMPARE(source->inputs()[0].name, "input");
            QVERIFY(source->labels());
            int64_t rows = 0, batches = 0;
            while (auto batch = source->next()) {
                QCOMPARE(batch->inputs.at("input").shape(), (Shape{batch->rows, 1, 8, 8}));
                for (int64_t label : batch->labels->values<int64_t>())
                    QVERIFY(label >= 0 && label < 10);
                rows += batch->rows;
                ++batches;
            }
            QCOMPARE(rows, source->rowCount());
            QCOMPARE(batches, source->batchCount());
        }
    }

    // The batch size for a model: its fixed axis 0 (torch.onnx exports 1)
    // whatever the default, and a demanded size that differs is refused
    // naming the input; a dynamic batch takes the demanded size, else the
    // preferred one.
    void batchSizingFollowsTheModel()
    {
        const Model fixed = modelWithInputs({input("x", DType::F32, {Dim::fixed(1), Dim::fixed(4)})});
        BatchSizing b = batchSizingFor(fixed, std::nullopt);
        QCOMPARE(b.batchSize, int64_t(1));
        QCOMPARE(b.fixedBy, std::string("x"));
        QCOMPARE(batchSizingFor(fixed, std::nullopt, 64).batchSize, int64_t(1));
        QCOMPARE(batchSizingFor(fixed, 1).batchSize, int64_t(1));
        expectError([&] { batchSizingFor(fixed, 8); }, {"model.onnx", "'x'", "float32[1, 4]", "exactly 1", "8"});

        const Model dynamic = modelWithInputs({input("x", DType::F32, {Dim::named("N"), Dim::fixed(4)})});
        b = batchSizingFor(dynamic, 8);
        QCOMPARE(b.batchSize, int64_t(8));
        QVERIFY(!b.fixed());
        QCOMPARE(batchSizingFor(dynamic, std::nullopt).batchSize, kDefaultBatchSize);
        QCOMPARE(batchSizingFor(dynamic, std::nullopt, 5).batchSize, int64_t(5));
        QVERIFY(!b.apply().exactBatches);

        const Model clash = modelWithInputs({input("a", DType::F32, {Dim::fixed(1), Dim::fixed(4)}),
                                             input("b", DType::F32, {Dim::fixed(2), Dim::fixed(4)})});
        expectError([&] { batchSizingFor(clash, std::nullopt); }, {"'a'", "'b'", "axis 0"});
    }

    // Exact batches (a fixed batch dimension): 10 rows in batches of 4 are two
    // batches of 4 and 2 rows left out; fewer rows than one batch is an Error.
    void exactBatchesLeaveTheRemainderOut()
    {
        const Model fixed =
            modelWithInputs({input("mask", DType::I64, {Dim::fixed(4), Dim::fixed(4)}),
                             input("image", DType::F32, {Dim::fixed(4), Dim::fixed(2), Dim::fixed(3)})});
        auto source = openDataSource(fixture("two_inputs.npz"), batchSizingFor(fixed, std::nullopt).apply(), &fixed);
        QVERIFY(source->exactBatches());
        QCOMPARE(source->batchCount(), int64_t(2));
        QCOMPARE(source->droppedRows(), int64_t(2));
        int64_t rows = 0;
        while (auto batch = source->next()) {
            QCOMPARE(batch->rows, int64_t(4));
            QVERIFY(holdsRows<float>(batch->inputs.at("image"), rows, 4, {2, 3}));
            rows += batch->rows;
        }
        QCOMPARE(rows, int64_t(8));
        QCOMPARE(openDataSource(fixture("two_inputs.npz"), {.batchSize = 4})->droppedRows(), int64_t(0));

        const Model big = modelWithInputs({input("mask", DType::I64, {Dim::fixed(16), Dim::fixed(4)}),
                                           input("image", DType::F32, {Dim::fixed(16), Dim::fixed(2), Dim::fixed(3)})});
        expectError([&] { openDataSource(fixture("two_inputs.npz"), batchSizingFor(big, std::nullopt).apply(), &big); },
                    {"two_inputs.npz", "10 rows", "exactly 16"});
    }

    // Synthetic token ids stay below the row count of the embedding table
    // they index (here [100, 16], reached through a Cast), and cover it;
    // integer inputs that feed no table get [0, 10); float inputs are normal.
    void syntheticTokenIdsFitTheEmbeddingTable()
    {
        Model m = modelWithInputs({input("ids", DType::I64, {Dim::named("N"), Dim::named("T")}),
                                   input("segment", DType::I32, {Dim::named("N"), Dim::fixed(8)}),
                                   input("x", DType::F32, {Dim::named("N"), Dim::fixed(3)})});
        m.addInitializer("embed.weight", Tensor(DType::F32, {100, 16}));
        Node cast;
        cast.opType = "Cast";
        cast.inputs = {"ids"};
        cast.outputs = {"ids32"};
        Node gather;
        gather.opType = "Gather";
        gather.inputs = {"embed.weight", "ids32"};
        gather.outputs = {"e"};
        m.nodes = {cast, gather};
        QCOMPARE(syntheticIdBound(m, "ids"), int64_t(100));
        QCOMPARE(syntheticIdBound(m, "segment"), kDefaultSyntheticIdBound);

        SyntheticDataSource data(m, 64, 7, {.batchSize = 16}, {{"ids", Shape{1, 20}}});
        QCOMPARE(data.batchCount(), int64_t(4));
        int64_t largest = 0, count = 0;
        std::vector<int64_t> firstPass;
        while (auto batch = data.next()) {
            const Tensor& ids = batch->inputs.at("ids");
            QCOMPARE(ids.dtype(), DType::I64);
            QCOMPARE(ids.shape(), (Shape{16, 20}));
            for (int64_t id : ids.values<int64_t>()) {
                QVERIFY2(id >= 0 && id < 100, qPrintable(QString::number(id)));
                largest = std::max(largest, id);
                firstPass.push_back(id);
                ++count;
            }
            for (int32_t s : batch->inputs.at("segment").values<int32_t>())
                QVERIFY(s >= 0 && s < 10);
            QCOMPARE(batch->inputs.at("x").shape(), (Shape{16, 3}));
        }
        QCOMPARE(count, int64_t(64 * 20));
        QVERIFY2(largest >= 90, qPrintable(QString::number(largest))); // the whole table, not a small range
        data.rewind();
        QCOMPARE(data.next()->inputs.at("ids").values<int64_t>()[5], firstPass[5]); // seeded: the same again

        // A dynamic dimension past axis 0 needs a shape; the error names the input and the dimension.
        expectError([&] { SyntheticDataSource(m, 8, 1, {}); }, {"'ids'", "1 (T)", "dynamic"});
        // A given shape keeps the fixed dimensions.
        expectError(
            [&] {
                SyntheticDataSource(m, 8, 1, {}, {{"ids", Shape{1, 20}}, {"segment", Shape{1, 9}}});
            },
            {"'segment'", "axis 1", "fixed at 8"});
    }

    void errorsNameFileAndArrays()
    {
        const auto open = [this](const char* name, DataSourceOptions options = {}, const Model* model = nullptr) {
            return [=, this] { openDataSource(fixture(name), options, model); };
        };
        const QString dir = dir_.path();
        expectError(open("mismatched_rows.npz"), {"mismatched_rows.npz", "'a'", "'b'", "10", "9"});
        expectError(open("zero_d.npz"), {"zero_d.npz", "'x'", "0-d"});
        expectError(open("truncated.npy"), {"truncated.npy"});
        expectError(open("two_inputs.npz", {.batchSize = 0}), {"two_inputs.npz", "batch size"});
        expectError(open("no_such.npz"), {"no_such.npz"});
        expectError([&] { openDataSource(dir.toStdString()); }, {dir});
        QFile text(dir + "/notes.txt");
        QVERIFY(text.open(QIODevice::WriteOnly));
        text.write("not data");
        text.close();
        expectError(open("notes.txt"), {"notes.txt", ".npz"});
        expectError(open("data.h5", {.hdf5Group = "strings"}), {"data.h5", "/strings/names"});
        expectError(open("data.h5", {.hdf5Group = "nowhere"}), {"data.h5", "nowhere"});

        // Against a model: a missing input, a left-over array, dtype, rank and
        // fixed-dimension mismatches, an .npy for two inputs, a weights-only model.
        const Model two = modelWithInputs({input("image", DType::F32, {Dim::named("N"), Dim::fixed(2), Dim::fixed(3)}),
                                           input("tokens", DType::I64, {Dim::named("N"), Dim::fixed(4)})});
        expectError(open("two_inputs.npz", {}, &two), {"two_inputs.npz", "'tokens'", "'mask'"});
        const Model image =
            modelWithInputs({input("image", DType::F32, {Dim::named("N"), Dim::fixed(2), Dim::fixed(3)})});
        expectError(open("two_inputs.npz", {}, &image), {"two_inputs.npz", "'mask'", "not an input"});
        expectError(open("float64.npz", {}, &image), {"float64.npz", "'image'", "float64", "float32"});
        const Model rank = modelWithInputs({input("image", DType::F32, {Dim::named("N"), Dim::fixed(6)})});
        expectError(open("single.npz", {}, &rank), {"single.npz", "'pixels'", "rank"});
        const Model dims =
            modelWithInputs({input("image", DType::F32, {Dim::named("N"), Dim::fixed(2), Dim::fixed(4)})});
        expectError(open("single.npz", {}, &dims), {"single.npz", "'pixels'", "axis 2", "4"});
        expectError(open("single.npy", {}, &two), {"single.npy", "2 inputs"});
        Model weights;
        weights.sourcePath = "w.safetensors";
        weights.weightsOnly = true;
        expectError(open("single.npy", {}, &weights), {"single.npy", "no inputs"});
        expectError(open("data.h5", {}, &two), {"data.h5", "'tokens'"});
    }
};

QTEST_APPLESS_MAIN(TestDataSource)
#include "tst_data_source.moc"
