// HDF5 files and Keras .h5 models: the tree and its datasets read exactly as
// h5py wrote them, hostile files answered with errors naming the file and the
// object (and nothing printed by HDF5), Keras Sequential and Functional configs
// turned into graphs with the right weight layouts, unsupported configs into
// weights-only models with a warning, checkpoints into weights-only models.
#include <QtTest>

#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sys/resource.h>
#include <unistd.h>

#include "io/checkpoint_model.h"
#include "io/hdf5_file.h"
#include "io/keras_model.h"
#include "io/npy.h"
#include "io/safetensors.h"
#include "test_support.h"

using namespace qs;

namespace {

const QString kPython = QStringLiteral("/usr/bin/python3");

// Runs `call` with stderr redirected; returns what was written to it.
template <class F> std::string capturedStderr(F&& call)
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

const QuantizableLayer* layerAt(const Model& m, const std::string& path)
{
    for (const QuantizableLayer& l : m.layers)
        if (l.modulePath == path)
            return &l;
    return nullptr;
}

const Node* nodeProducing(const Model& m, const std::string& value)
{
    for (const Node& n : m.nodes)
        if (!n.outputs.empty() && n.outputs[0] == value)
            return &n;
    return nullptr;
}

QStringList opSequence(const Model& m)
{
    QStringList ops;
    for (const Node& n : m.nodes)
        ops << QString::fromStdString(n.opType);
    return ops;
}

// The fuzz corpus's regression inputs (tests/fuzz/make_seeds.py, docs/robustness.md).
std::string regressionInput(const char* name)
{
    return std::string(QUANTSCOPE_TEST_DATA) + "/../fuzz/corpus/hdf5/" + name;
}

bool sameBytes(const Tensor& a, const Tensor& b)
{
    return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.rawData(), b.rawData(), a.nbytes()) == 0;
}

} // namespace

class TestHdf5 : public QObject {
    Q_OBJECT

private:
    QString dir_;
    std::string file(const char* name) const { return (dir_ + "/" + name).toStdString(); }
    Tensor npy(const QString& name) const { return readNpy((dir_ + "/" + name).toStdString()); }

    // The Error message open() or `call` throws; fails the test when none is.
    template <class F> QString errorOf(F&& call)
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
        const QStringList expected{"/be_f32",
                                   "/empty",
                                   "/encoder/layer0/bias",
                                   "/encoder/layer0/weight",
                                   "/f16",
                                   "/f64",
                                   "/flags",
                                   "/gzip",
                                   "/huge",
                                   "/i32",
                                   "/null",
                                   "/records",
                                   "/scalar",
                                   "/text",
                                   "/u8"};
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
        QVERIFY2(huge.contains("generic.h5") && huge.contains("/huge") && huge.contains("expansion"), qPrintable(huge));
        const QString text = errorOf([&] { f.read("text"); });
        QVERIFY2(text.contains("/text") && text.contains("string"), qPrintable(text));
        const QString absent = errorOf([&] { f.read("nope"); });
        QVERIFY2(absent.contains("/nope") && absent.contains("no such dataset"), qPrintable(absent));
    }

    void kerasSequentialBecomesAGraph()
    {
        const Model m = loadCheckpointModel(file("keras_sequential.h5"));
        QCOMPARE(m.format, std::string("keras-h5"));
        QVERIFY2(!m.weightsOnly, m.warnings.empty() ? "" : m.warnings[0].c_str());
        QCOMPARE(m.producer, std::string("keras 2.13.1"));
        // Every stored variable is an initializer, bit for bit.
        QVERIFY(sameBytes(*m.initializer("conv2d/kernel:0"), npy("sequential_conv2d_kernel.npy")));
        QVERIFY(sameBytes(*m.initializer("separable_conv2d/pointwise_kernel:0"),
                          npy("sequential_separable_conv2d_pointwise_kernel.npy")));
        QVERIFY(sameBytes(*m.initializer("batch_normalization/moving_variance:0"),
                          npy("sequential_batch_normalization_moving_variance.npy")));

        // Layers in file order with Keras kernel layouts.
        QStringList paths;
        for (const QuantizableLayer& l : m.layers)
            paths << QString::fromStdString(l.modulePath);
        QCOMPARE(paths, (QStringList{"conv2d", "depthwise_conv2d", "separable_conv2d/depthwise",
                                     "separable_conv2d/pointwise", "conv2d_1", "dense"}));
        const QuantizableLayer* conv = layerAt(m, "conv2d");
        QCOMPARE(conv->opType, std::string("Conv"));
        QCOMPARE(conv->weightShape, (Shape{3, 3, 3, 4}));
        QCOMPARE(conv->channelAxis, 3);
        QCOMPARE(conv->contractionAxes, std::vector<int>{2});
        const QuantizableLayer* dw = layerAt(m, "depthwise_conv2d");
        QCOMPARE(dw->channelAxis, 2);
        QCOMPARE(dw->contractionAxes, (std::vector<int>{0, 1}));
        QCOMPARE(dw->groups, int64_t(4));
        const QuantizableLayer* dense = layerAt(m, "dense");
        QCOMPARE(dense->opType, std::string("MatMul"));
        QCOMPARE(dense->channelAxis, 1);
        QCOMPARE(dense->contractionAxes, std::vector<int>{0});
        QCOMPARE(dense->parameterCount, int64_t(800));

        // Each layer points at the node that consumes its kernel.
        for (const QuantizableLayer& l : m.layers) {
            QVERIFY2(l.node && l.weightInput, l.modulePath.c_str());
            const Node& n = m.nodes[*l.node];
            QCOMPARE(n.opType, l.opType);
            const std::string& in = n.inputs[*l.weightInput];
            // A Keras conv kernel reaches the Conv through Transpose (and Reshape for depthwise).
            std::string source = in;
            for (const Node* p = nodeProducing(m, source); p; p = nodeProducing(m, source))
                source = p->inputs[0];
            QCOMPARE(source, l.weightName);
        }
        const Node& convNode = m.nodes[*conv->node];
        const Node* perm = nodeProducing(m, convNode.inputs[1]);
        QVERIFY(perm && perm->opType == "Transpose");
        QCOMPARE(perm->attribute("perm")->ints, (std::vector<int64_t>{3, 2, 0, 1}));

        // NHWC input transposed once before the first conv and back once before Flatten.
        QCOMPARE(m.inputs.size(), size_t(1));
        QCOMPARE(m.inputs[0].toString(), std::string("float32[batch, 8, 8, 3]"));
        QCOMPARE(opSequence(m), (QStringList{"Transpose", "Transpose", "Conv",      "BatchNormalization",
                                             "Relu",      "Transpose", "Reshape",   "Conv",
                                             "Relu",      "Transpose", "Reshape",   "Conv",
                                             "Transpose", "Conv",      "MaxPool",   "Transpose",
                                             "Conv",      "Relu",      "Transpose", "Flatten",
                                             "MatMul",    "Add",       "Softmax"}));
        QCOMPARE(m.outputs.size(), size_t(1));
        QCOMPARE(m.outputs[0].toString(), std::string("float32[batch, 10]"));
        QCOMPARE(m.opsetImports.at(""), int64_t(17));
        const Node* pool = nullptr;
        for (const Node& n : m.nodes)
            if (n.opType == "MaxPool")
                pool = &n;
        QCOMPARE(pool->attribute("strides")->ints, (std::vector<int64_t>{2, 2}));
    }

    void kerasFunctionalBecomesAGraph()
    {
        const Model m = loadKerasModel(Hdf5File::open(file("keras_functional.h5")));
        QVERIFY2(!m.weightsOnly, m.warnings.empty() ? "" : m.warnings[0].c_str());
        QCOMPARE(m.inputs[0].toString(), std::string("int32[batch, 6]"));
        QCOMPARE(opSequence(m),
                 (QStringList{"Gather", "MatMul", "Add", "Relu", "Add", "LayerNormalization", "Transpose", "Transpose",
                              "Conv", "Tanh", "Transpose", "Reshape", "MatMul", "Add"}));
        const QuantizableLayer* embedding = layerAt(m, "embedding");
        QCOMPARE(embedding->opType, std::string("Gather"));
        QCOMPARE(embedding->channelAxis, 0);
        QCOMPARE(*embedding->weightInput, size_t(0));
        const QuantizableLayer* conv1d = layerAt(m, "conv1d");
        QCOMPARE(conv1d->weightShape, (Shape{3, 8, 4}));
        QCOMPARE(conv1d->channelAxis, 2);
        QCOMPARE(conv1d->contractionAxes, std::vector<int>{1});
        // The residual Add reads the embedding and the dense output.
        const Node* add = nodeProducing(m, "add/Add");
        QVERIFY(add);
        QCOMPARE(add->inputs, (std::vector<std::string>{"embedding/Gather", "dense/Relu"}));
        // conv1d output [batch, 4, 4] flattened by Reshape to 16, then logits.
        QCOMPARE(m.outputs[0].toString(), std::string("float32[batch, 3]"));
        const Node* conv = nodeProducing(m, "conv1d/Conv");
        QCOMPARE(conv->attribute("pads")->ints, (std::vector<int64_t>{0, 0}));
    }

    void kerasUnsupportedConfigIsWeightsOnlyWithAWarning()
    {
        const Model m = loadCheckpointModel(file("keras_attention.h5"));
        QVERIFY(m.weightsOnly);
        QVERIFY(m.nodes.empty());
        QCOMPARE(m.warnings.size(), size_t(1));
        QVERIFY2(m.warnings[0].find("'mha' (MultiHeadAttention)") != std::string::npos, m.warnings[0].c_str());
        QStringList paths;
        for (const QuantizableLayer& l : m.layers)
            paths << QString::fromStdString(l.modulePath);
        QCOMPARE(paths, (QStringList{"mha/query", "mha/key", "mha/value", "mha/attention_output", "head/inner"}));
        const QuantizableLayer* out = layerAt(m, "mha/attention_output");
        QCOMPARE(out->weightShape, (Shape{2, 4, 8}));
        QCOMPARE(out->contractionAxes, (std::vector<int>{0, 1}));
        QCOMPARE(layerAt(m, "mha/query")->channelAxis, 2);
        QVERIFY(!out->node);
        QVERIFY(m.initializer("head/inner/kernel:0"));
        QVERIFY(m.initializer("mha/query/bias:0"));
    }

    void kerasHostileFilesNameFileAndObject_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<QStringList>("expected");
        QTest::newRow("not JSON") << "bad_json.h5" << QStringList{"model_config", "not valid JSON"};
        QTest::newRow("kernel shape") << "bad_shape.h5"
                                      << QStringList{"/model_weights/conv2d/conv2d/kernel:0", "[5, 5, 3, 4]",
                                                     "expected [3, 3, ?, 4]"};
        QTest::newRow("missing layer") << "missing_layer.h5"
                                       << QStringList{"/model_weights/dense", "listed in layer_names"};
        QTest::newRow("missing variable")
            << "missing_weight.h5" << QStringList{"/model_weights/conv2d/conv2d/bias:0", "missing"};
        QTest::newRow("truncated") << "truncated.h5" << QStringList{"truncated"};
    }

    void kerasHostileFilesNameFileAndObject()
    {
        QFETCH(QString, name);
        QFETCH(QStringList, expected);
        QString message;
        const std::string printed =
            capturedStderr([&] { message = errorOf([&] { loadCheckpointModel(file(name.toUtf8().constData())); }); });
        QVERIFY2(message.startsWith(QString::fromStdString(file(name.toUtf8().constData()))), qPrintable(message));
        for (const QString& part : expected)
            QVERIFY2(message.contains(part), qPrintable(message));
        QVERIFY2(printed.empty(), printed.c_str());
    }

    void genericHdf5IsWeightsOnlyOfItsFloatDatasets()
    {
        const Model m = loadCheckpointModel(file("generic.h5"));
        QCOMPARE(m.format, std::string("hdf5"));
        QVERIFY(m.weightsOnly);
        QStringList names;
        for (const NamedTensor& t : m.initializers())
            names << QString::fromStdString(t.name);
        QCOMPARE(names, (QStringList{"be_f32", "empty", "encoder/layer0/bias", "encoder/layer0/weight", "f16", "f64",
                                     "gzip", "scalar"}));
        const QuantizableLayer* layer = layerAt(m, "encoder/layer0");
        QVERIFY(layer);
        QCOMPARE(layer->weightName, std::string("encoder/layer0/weight"));
        QCOMPARE(layer->opType, std::string("Linear"));
        QCOMPARE(m.warnings.size(), size_t(1));
        for (const char* left : {"/huge", "/text", "/i32", "/records", "/null"})
            QVERIFY2(m.warnings[0].find(left) != std::string::npos, left);
    }

    void safetensorsAndNpzAreWeightsOnlyModels()
    {
        const std::string path = (dir_ + "/tiny.safetensors").toStdString();
        writeSafetensors(path,
                         {{"model.layers.0.q_proj.weight", Tensor(DType::F32, {4, 3}), {}},
                          {"model.layers.0.q_proj.bias", Tensor(DType::F32, {4}), {}},
                          {"model.embed_tokens.weight", Tensor(DType::F16, {10, 4}), {}}},
                         {{"format", "pt"}});
        const Model m = loadCheckpointModel(path);
        QCOMPARE(m.format, std::string("safetensors"));
        QVERIFY(m.weightsOnly);
        QCOMPARE(m.metadata.at("format"), std::string("pt"));
        QCOMPARE(m.initializers().size(), size_t(3));
        QCOMPARE(m.layers.size(), size_t(2));
        QCOMPARE(layerAt(m, "model/layers/0/q_proj")->opType, std::string("Linear"));
        QCOMPARE(layerAt(m, "model/embed_tokens")->opType, std::string("Embedding"));

        const QString unknown = errorOf([&] { loadCheckpointModel((dir_ + "/model.bin").toStdString()); });
        QVERIFY2(unknown.contains("model.bin") && unknown.contains("unknown checkpoint format"), qPrintable(unknown));
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

    // libhdf5 crashes (SIGSEGV in H5Literate) on this file's local heap: the
    // crash stays in the child process and the user gets an error naming it.
    void libraryCrashIsAnErrorNamingTheFile()
    {
        const std::string path = regressionInput("regress_segv_H5Literate_local_heap.h5");
        QString message;
        const std::string printed = capturedStderr([&] { message = errorOf([&] { loadCheckpointModel(path); }); });
        QVERIFY2(message.contains(QString::fromStdString(path)) && message.contains("crashed") &&
                     message.contains("signal 11") && message.contains("corrupted"),
                 qPrintable(message));
        QVERIFY2(printed.empty(), printed.c_str());
    }

    // Reading this 4 KB file's 1 MiB dataset makes libhdf5 build a map of
    // 524 176 chunks, about 2.3 GB. The read runs in a child bounded to 1 GiB
    // plus one slab: the load fails with an error naming the file and the
    // dataset, in seconds. This process is capped at 2 GiB beyond its size, so
    // a read that ran here instead would fail differently (or take the test
    // down) rather than exhaust the machine.
    void runawayLibraryAllocationIsAnErrorNotAnOutage()
    {
        const std::string path = regressionInput("regress_oom_chunk_map_524k_chunks.h5");
        QString message;
        {
            const test::AddressSpaceCap cap(uint64_t(2) << 30);
            QElapsedTimer timer;
            timer.start();
            message = errorOf([&] { loadCheckpointModel(path); });
            QVERIFY2(timer.elapsed() < 60000, qPrintable(QString::number(timer.elapsed()) + " ms"));
        }
        QVERIFY2(message.contains(QString::fromStdString(path)) && message.contains("/chunks") &&
                     message.contains("memory budget"),
                 qPrintable(message));
        // The file's structure is fine: opening it and reading a few rows works.
        const Hdf5File f = Hdf5File::open(path);
        const Tensor rows = f.readRows(*f.find("chunks"), 0, 1);
        QCOMPARE(rows.shape(), (Shape{1, 724}));
    }

    // Rows come back from the reading process in slabs of at most
    // kHdf5ReadSlabBytes; a dataset of several slabs arrives whole and in order.
    void readsSpanningSeveralSlabsArriveInOrder()
    {
        const QString path = dir_ + "/slabs.h5";
        QProcess p;
        p.start(kPython, {"-c",
                          "import h5py, numpy as np, sys\n"
                          "with h5py.File(sys.argv[1], 'w') as f:\n"
                          "    f['big'] = np.arange(20 * 2**20, dtype='<i4').reshape(-1, 1024)\n",
                          path});
        QVERIFY(p.waitForFinished(120000) && p.exitCode() == 0);
        const Hdf5File f = Hdf5File::open(path.toStdString());
        const Hdf5Dataset& big = *f.find("big");
        QVERIFY(uint64_t(big.shape[0]) * 1024 * 4 > kHdf5ReadSlabBytes + 16 * 4096);
        const Tensor all = f.read(big);
        const auto values = all.values<int32_t>();
        QCOMPARE(values.size(), size_t(20) << 20);
        for (size_t i = 0; i < values.size(); i += 4099)
            QCOMPARE(values[i], int32_t(i));
        QCOMPARE(values.back(), int32_t(values.size() - 1));
        // Two slabs again, the second starting 5 rows past the first's end.
        const int64_t slabRows = int64_t(kHdf5ReadSlabBytes / 4096);
        const Tensor rows = f.readRows(big, 5, slabRows + 10);
        QCOMPARE(rows.shape(), (Shape{slabRows + 10, 1024}));
        const auto got = rows.values<int32_t>();
        for (size_t i = 0; i < got.size(); i += 4099)
            QCOMPARE(got[i], int32_t(5 * 1024 + i));
        QCOMPARE(got.back(), int32_t((slabRows + 15) * 1024 - 1));
        QFile::remove(path);
    }
};

QTEST_APPLESS_MAIN(TestHdf5)
#include "tst_hdf5.moc"
