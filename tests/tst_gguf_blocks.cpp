// GGUF's block formats against llama.cpp itself: the libggml-base.so that the
// npm package @node-llama-cpp/linux-x64@3.21.1 ships (installed into the build
// tree by the fixture `ggml_install`, path passed in as QUANTSCOPE_GGML_LIBRARY).
// Our encoder must write the bytes ggml's reference quantizer writes, our
// decoder the floats ggml's decoder returns, and the engine's fake-quantized
// weights must be ggml's dequantize(quantize(w)), bit for bit.

#include <QtTest>

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "graph/weight_layout.h"
#include "numerics/gguf_blocks.h"
#include "quant/gguf_quantization.h"
#include "quant/kernels.h"
#include "quantization/quantization_plan.h"
#include "quantization/weight_quantizer.h"
#include "rules/ruleset.h"
#include "model_support.h"

using namespace qs;

namespace {

// ggml's C entry points, as libggml-base.so exports them (ggml.h / ggml-quants.h):
//   void    quantize_row_<t>_ref(const float * x, block_<t> * y, int64_t k);
//   void    dequantize_row_<t>(const block_<t> * x, float * y, int64_t k);
//   size_t  ggml_type_size(enum ggml_type type);
//   int64_t ggml_blck_size(enum ggml_type type);
using QuantizeRowRef = void (*)(const float*, void*, int64_t);
using DequantizeRow = void (*)(const void*, float*, int64_t);
using TypeSize = size_t (*)(int);
using BlockSize = int64_t (*)(int);

struct GgmlType {
    QType type;
    const char* ggmlName; // as in ggml's symbol names
    int ggmlType;         // enum ggml_type
};
// enum ggml_type values: Q4_0 2, Q4_1 3, Q5_0 6, Q5_1 7, Q8_0 8, Q4_K 12, Q5_K 13, Q6_K 14.
const GgmlType kTypes[] = {
    {QType::Q8_0, "q8_0", 8}, {QType::Q4_0, "q4_0", 2}, {QType::Q4_1, "q4_1", 3}, {QType::Q5_0, "q5_0", 6},
    {QType::Q5_1, "q5_1", 7}, {QType::Q4K, "q4_K", 12}, {QType::Q5K, "q5_K", 13}, {QType::Q6K, "q6_K", 14},
};

struct Ggml {
    void* handle = nullptr;
    TypeSize typeSize = nullptr;
    BlockSize blockSize = nullptr;
    std::map<QType, QuantizeRowRef> quantize;
    std::map<QType, DequantizeRow> dequantize;
    QString error;

    bool load()
    {
        handle = dlopen(QUANTSCOPE_GGML_LIBRARY, RTLD_NOW | RTLD_LOCAL);
        if (!handle) {
            error = QString::fromUtf8(dlerror());
            return false;
        }
        auto sym = [&](const std::string& name) {
            void* p = dlsym(handle, name.c_str());
            if (!p)
                error += QString::fromStdString(" missing " + name);
            return p;
        };
        typeSize = reinterpret_cast<TypeSize>(sym("ggml_type_size"));
        blockSize = reinterpret_cast<BlockSize>(sym("ggml_blck_size"));
        for (const GgmlType& t : kTypes) {
            quantize[t.type] =
                reinterpret_cast<QuantizeRowRef>(sym(std::string("quantize_row_") + t.ggmlName + "_ref"));
            dequantize[t.type] = reinterpret_cast<DequantizeRow>(sym(std::string("dequantize_row_") + t.ggmlName));
        }
        return error.isEmpty();
    }
};

// The first index at which two byte strings differ, or −1 when they are equal
// (a length difference counts as a difference at the shorter length).
int64_t firstByteMismatch(std::span<const uint8_t> a, std::span<const uint8_t> b)
{
    const size_t n = std::min(a.size(), b.size());
    for (size_t i = 0; i < n; ++i)
        if (a[i] != b[i])
            return int64_t(i);
    return a.size() == b.size() ? -1 : int64_t(n);
}

// The same for floats, bit for bit (−0 ≠ +0; equal NaN patterns are equal).
int64_t firstFloatMismatch(std::span<const float> a, std::span<const float> b)
{
    const size_t n = std::min(a.size(), b.size());
    for (size_t i = 0; i < n; ++i)
        if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0)
            return int64_t(i);
    return a.size() == b.size() ? -1 : int64_t(n);
}

// A copy of the q4_0 encoder with the nibble order wrong (element j in the
// high nibble, j + 16 in the low one): what the comparison must catch.
std::vector<uint8_t> encodeQ4_0WrongNibbles(std::span<const float> x)
{
    std::vector<uint8_t> bytes(ggufRowBytes(QType::Q4_0, int64_t(x.size())));
    ggufEncodeRow(QType::Q4_0, x, bytes);
    for (size_t b = 0; b < bytes.size(); b += 18)
        for (size_t j = 2; j < 18; ++j)
            bytes[b + j] = uint8_t((bytes[b + j] >> 4) | (bytes[b + j] << 4));
    return bytes;
}

struct Row {
    std::string name;
    std::vector<float> values;
};

// Varied rows, each a multiple of 256 long (so every type takes them).
std::vector<Row> testRows()
{
    std::mt19937 rng(1234);
    std::normal_distribution<float> normal(0.f, 1.f);
    std::student_t_distribution<float> studentT(2.5f);
    std::uniform_real_distribution<float> uniform(-1.f, 1.f);
    auto make = [&](const std::string& name, size_t n, auto fn) {
        Row r{name, std::vector<float>(n)};
        for (size_t i = 0; i < n; ++i)
            r.values[i] = fn(i);
        return r;
    };
    std::vector<Row> rows;
    rows.push_back(make("gaussian", 4096, [&](size_t) { return 0.02f * normal(rng); }));
    rows.push_back(make("student-t 2.5", 4096, [&](size_t) { return 0.05f * studentT(rng); }));
    rows.push_back(
        make("gaussian with outliers", 4096, [&](size_t i) { return i % 97 == 5 ? 40.f * normal(rng) : normal(rng); }));
    rows.push_back(make("all zeros", 512, [](size_t) { return 0.f; }));
    rows.push_back(make("constant", 512, [](size_t) { return 0.37f; }));
    rows.push_back(make("negative constant", 512, [](size_t) { return -2.5f; }));
    rows.push_back(make("tiny 1e-30", 1024, [&](size_t) { return 1e-30f * normal(rng); }));
    rows.push_back(make("small 1e-6 (fp16-subnormal scales)", 1024, [&](size_t) { return 1e-6f * normal(rng); }));
    rows.push_back(make("huge 1e4", 1024, [&](size_t) { return 1e4f * normal(rng); }));
    rows.push_back(
        make("mixed signs", 1024, [&](size_t i) { return (i % 2 ? -1.f : 1.f) * (0.5f + std::fabs(normal(rng))); }));
    rows.push_back(make("all positive", 1024, [&](size_t) { return 1.f + std::fabs(normal(rng)); }));
    rows.push_back(make("all negative", 1024, [&](size_t) { return -0.1f - std::fabs(normal(rng)); }));
    rows.push_back(make("single non-zero", 1024, [](size_t i) { return i == 300 ? -3.25f : 0.f; }));
    rows.push_back(make("integers -8..7", 1024, [](size_t i) { return float(int(i * 7 % 16) - 8); }));
    rows.push_back(make("uniform", 2048, [&](size_t) { return uniform(rng); }));
    rows.push_back(make("scale per block 1e-8..1e4", 4096, [&, s = 1.f](size_t i) mutable {
        if (i % 32 == 0)
            s = std::pow(10.f, 12.f * (uniform(rng) + 1.f) / 2.f - 8.f);
        return s * normal(rng);
    }));
    rows.push_back(make("ties at the absmax", 512, [](size_t i) {
        return i % 3 == 0 ? 1.f : i % 3 == 1 ? -1.f : 0.25f;
    }));
    return rows;
}

double sqnrDb(std::span<const float> x, std::span<const float> y)
{
    double signal = 0, noise = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        signal += double(x[i]) * x[i];
        noise += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    }
    return 10 * std::log10(signal / noise);
}

RuleSet rules(const std::string& json)
{
    return RuleSet::fromJson(R"({"version": 1, "rules": )" + json + "}");
}

Tensor gaussian(const Shape& shape, unsigned seed, float sigma = 0.05f)
{
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.f, sigma);
    Tensor t(DType::F32, shape);
    for (float& v : t.mutableValues<float>())
        v = normal(rng);
    return t;
}

// A graph model with one MatMul (weight [K, N]), one Gemm with transB = 1
// (weight [N, K]) and one Conv (weight [O, I, kh, kw]).
Model threeLayerModel(const Tensor& matmul, const Tensor& gemm, const Tensor& conv)
{
    Model m;
    m.opsetImports[""] = 13;
    using test::graphNode;
    m.inputs.push_back({"x", DType::F32, "float32", std::nullopt});
    m.inputs.push_back({"c", DType::F32, "float32", std::nullopt});
    m.outputs.push_back({"y", DType::F32, "float32", std::nullopt});
    m.outputs.push_back({"z", DType::F32, "float32", std::nullopt});
    m.nodes.push_back(graphNode("/mm/MatMul", "MatMul", {"x", "w_mm"}, "h"));
    Node g = graphNode("/fc/Gemm", "Gemm", {"h", "w_fc"}, "y");
    Attribute transB;
    transB.name = "transB";
    transB.i = 1;
    g.attributes.push_back(transB);
    m.nodes.push_back(g);
    m.nodes.push_back(graphNode("/conv/Conv", "Conv", {"c", "w_conv"}, "z"));
    m.addInitializer("w_mm", matmul);
    m.addInitializer("w_fc", gemm);
    m.addInitializer("w_conv", conv);
    m.layers = findGraphLayers(m);
    return m;
}

} // namespace

class TestGgufBlocks : public QObject {
    Q_OBJECT
    Ggml ggml_;

    // ggml's bytes and floats for one row.
    std::vector<uint8_t> ggmlEncode(QType t, std::span<const float> x)
    {
        std::vector<uint8_t> bytes(ggufRowBytes(t, int64_t(x.size())));
        ggml_.quantize.at(t)(x.data(), bytes.data(), int64_t(x.size()));
        return bytes;
    }
    std::vector<float> ggmlDecode(QType t, std::span<const uint8_t> bytes, size_t n)
    {
        std::vector<float> y(n);
        ggml_.dequantize.at(t)(bytes.data(), y.data(), int64_t(n));
        return y;
    }

private slots:
    void initTestCase()
    {
        QVERIFY2(ggml_.load(), qPrintable("cannot load llama.cpp's ggml from " QUANTSCOPE_GGML_LIBRARY ": " +
                                          ggml_.error + " (run the ggml_install fixture)"));
    }

    void blockSizesAreGgmls()
    {
        for (const GgmlType& t : kTypes) {
            const GgufBlockFormat f = ggufBlockFormat(t.type);
            QCOMPARE(int64_t(f.blockSize), ggml_.blockSize(t.ggmlType));
            QCOMPARE(size_t(f.blockBytes), ggml_.typeSize(t.ggmlType));
            QCOMPARE(qtypeInfo(t.type).blockSize, f.blockSize);
            QCOMPARE(bitsPerWeight(t.type),
                     double(ggml_.typeSize(t.ggmlType)) * 8 / double(ggml_.blockSize(t.ggmlType)));
        }
        QCOMPARE(bitsPerWeight(QType::Q4_0), 4.5);
        QCOMPARE(bitsPerWeight(QType::Q4K), 4.5);
        QCOMPARE(bitsPerWeight(QType::Q6K), 6.5625);
        QCOMPARE(bitsPerWeight(QType::Q8_0), 8.5);
    }

    void encoderWritesGgmlsBytes_data()
    {
        QTest::addColumn<int>("type");
        for (size_t i = 0; i < std::size(kTypes); ++i)
            QTest::newRow(kTypes[i].ggmlName) << int(i);
    }
    void encoderWritesGgmlsBytes()
    {
        QFETCH(int, type);
        const QType t = kTypes[type].type;
        int rowsChecked = 0;
        for (const Row& row : testRows()) {
            const std::vector<uint8_t> reference = ggmlEncode(t, row.values);
            std::vector<uint8_t> ours(reference.size());
            ggufEncodeRow(t, row.values, ours);
            const int64_t byte = firstByteMismatch(ours, reference);
            QVERIFY2(byte < 0,
                     qPrintable(QString::fromStdString(row.name) + ": first differing byte " + QString::number(byte) +
                                " (block " + QString::number(byte / ggufBlockFormat(t).blockBytes) + ")"));
            // Both decoders, on the same bytes, give the same floats.
            std::vector<float> decoded(row.values.size());
            ggufDecodeRow(t, reference, decoded);
            const int64_t at = firstFloatMismatch(decoded, ggmlDecode(t, reference, row.values.size()));
            QVERIFY2(at < 0, qPrintable(QString::fromStdString(row.name) + ": decoded value " + QString::number(at) +
                                        " differs"));
            ++rowsChecked;
        }
        QVERIFY(rowsChecked >= 15);
    }

    void manyRowsAsOneTensor()
    {
        // 64 rows of 512 with scales from 1e-3 to 1e3: ggufEncode writes them one
        // after another, as ggml does for a whole tensor; fakeQuantize is
        // ggml's dequantize(quantize(.)).
        Tensor w = gaussian({64, 512}, 77, 1.f);
        auto v = w.mutableValues<float>();
        for (int64_t r = 0; r < 64; ++r)
            for (int64_t i = 0; i < 512; ++i)
                v[size_t(r * 512 + i)] *= std::pow(10.f, float(r % 7) - 3.f);
        for (const GgmlType& t : kTypes) {
            const Tensor bytes = ggufEncode(w, t.type, "w");
            const std::vector<uint8_t> reference = ggmlEncode(t.type, w.values<float>());
            QCOMPARE(firstByteMismatch(bytes.values<uint8_t>(), reference), int64_t(-1));
            const std::vector<float> ggmlFake = ggmlDecode(t.type, reference, size_t(w.numel()));
            const Tensor fake = fakeQuantize(w, ggufBlockParams(w, t.type, "w"));
            QCOMPARE(firstFloatMismatch(fake.values<float>(), ggmlFake), int64_t(-1));
            QCOMPARE(firstFloatMismatch(ggufDecode(bytes, t.type, w.shape()).values<float>(), ggmlFake), int64_t(-1));
            // float16 input: widened exactly, then the same.
            Tensor half(DType::F16, w.shape());
            std::transform(w.values<float>().begin(), w.values<float>().end(), half.mutableValues<uint16_t>().begin(),
                           floatToFp16);
            const std::vector<float> ggmlHalf =
                ggmlDecode(t.type, ggmlEncode(t.type, half.toFloat32().values<float>()), size_t(w.numel()));
            QCOMPARE(
                firstFloatMismatch(fakeQuantize(half, ggufBlockParams(half, t.type, "w")).values<float>(), ggmlHalf),
                int64_t(-1));
        }
    }

    void wrongNibbleOrderIsCaught()
    {
        // The comparison helpers are what the tests above rest on: a copy of the
        // q4_0 encoder with its nibbles swapped must fail them.
        const Row row = testRows().front();
        const std::vector<uint8_t> reference = ggmlEncode(QType::Q4_0, row.values);
        const std::vector<uint8_t> wrong = encodeQ4_0WrongNibbles(row.values);
        QCOMPARE(wrong.size(), reference.size());
        const int64_t byte = firstByteMismatch(wrong, reference);
        QVERIFY(byte >= 2 && byte < 18); // the first block's code bytes, after its fp16 scale
        const std::vector<float> right = ggmlDecode(QType::Q4_0, reference, row.values.size());
        QVERIFY(firstFloatMismatch(ggmlDecode(QType::Q4_0, wrong, row.values.size()), right) >= 0);
        // And the helpers see equal strings as equal, and a length difference.
        QCOMPARE(firstByteMismatch(reference, reference), int64_t(-1));
        QCOMPARE(firstByteMismatch(std::span(reference).first(10), reference), int64_t(10));
        const float plusZero = 0.f, minusZero = -0.f;
        QCOMPARE(firstFloatMismatch(std::span(&plusZero, 1), std::span(&minusZero, 1)), int64_t(0));
    }

    void sqnrOrdersWithBits()
    {
        // Gaussian weights [256, 1024]: the measured SQNR of each type (printed) must
        // order as the bits do.
        const Tensor w = gaussian({256, 1024}, 5, 0.02f);
        std::map<QType, double> db;
        for (const GgmlType& t : kTypes) {
            const std::vector<float> fake =
                ggmlDecode(t.type, ggmlEncode(t.type, w.values<float>()), size_t(w.numel()));
            db[t.type] = sqnrDb(w.values<float>(), fake);
            qInfo("%s: %.4f bits/weight, SQNR %.2f dB", t.ggmlName, bitsPerWeight(t.type), db[t.type]);
        }
        QVERIFY(db[QType::Q8_0] > db[QType::Q6K]);
        QVERIFY(db[QType::Q6K] > db[QType::Q5K]);
        QVERIFY(db[QType::Q5K] > db[QType::Q4K]);
        QVERIFY(db[QType::Q5_1] > db[QType::Q4_1]);
        QVERIFY(db[QType::Q5_0] > db[QType::Q4_0]);
        QVERIFY(db[QType::Q5_1] > db[QType::Q5_0]);
        QVERIFY(db[QType::Q4_1] > db[QType::Q4_0]);
        QVERIFY(db[QType::Q4K] > db[QType::Q4_0]);
        QVERIFY(db[QType::Q4_0] > 15 && db[QType::Q8_0] < 50);
    }

    void layerWeightsAreGgmlsRows()
    {
        // The engine's fake-quantized weight of each layer is ggml's
        // dequantize(quantize(rows)), rows = the contraction axis:
        //   MatMul [K, N]: rows are columns (K input features), the weight is transposed
        //   Gemm transB=1 [N, K]: rows are rows
        //   Conv [O, I, kh, kw]: rows run along I (the weight as [O, kh, kw, I])
        const Tensor mm = gaussian({512, 24}, 1), fc = gaussian({16, 256}, 2), conv = gaussian({8, 256, 3, 3}, 3);
        const Model m = threeLayerModel(mm, fc, conv);
        QCOMPARE(m.layers.size(), size_t(3));
        for (const GgmlType& t : kTypes) {
            const QuantizationPlan plan =
                QuantizationPlan::build(m, rules(R"([{"weight_qtype": ")" + std::string(qtypeName(t.type)) + R"("}])"));
            WeightQuantizer weights;
            QCOMPARE(weights.update(m, plan).size(), size_t(3));
            QVERIFY2(weights.problems().empty(),
                     weights.problems().empty() ? "" : weights.problems().begin()->second.c_str());
            auto reference = [&](const Tensor& w, const std::vector<int>& toRows) {
                const Tensor rows = toRows.empty() ? w : w.permuted(toRows);
                const std::vector<float> fake =
                    ggmlDecode(t.type, ggmlEncode(t.type, rows.values<float>()), size_t(rows.numel()));
                const Tensor back = Tensor::fromVector(DType::F32, rows.shape(), fake);
                return toRows.empty() ? back : back.permuted(inversePermutation(toRows));
            };
            const Tensor refs[] = {reference(mm, {1, 0}), reference(fc, {}), reference(conv, {0, 2, 3, 1})};
            for (size_t layer = 0; layer < 3; ++layer) {
                const auto q = weights.find(layer);
                QVERIFY(q);
                QCOMPARE(q->fakeQuant.shape(), refs[layer].shape());
                QCOMPARE(firstFloatMismatch(q->fakeQuant.values<float>(), refs[layer].values<float>()), int64_t(-1));
                QVERIFY(q->metrics.mse > 0 && q->metrics.fractionClipped == 0);
            }
        }
    }

    void rowLengthMustTakeTheBlocks()
    {
        // 24 input features: not a multiple of 32; 96: of 32 but not of 256.
        const Model m = threeLayerModel(gaussian({96, 8}, 1), gaussian({8, 24}, 2), gaussian({4, 32, 1, 1}, 3));
        const QuantizationPlan k = QuantizationPlan::build(m, rules(R"([{"weight_qtype": "q4_k"}])"));
        const std::string& problem = k.forLayer(0)->problem;
        QVERIFY2(problem.find("layer 'mm'") != std::string::npos && problem.find("96") != std::string::npos &&
                     problem.find("256") != std::string::npos,
                 problem.c_str());
        QVERIFY(k.forLayer(1)->problem.find("layer 'fc'") != std::string::npos);
        QVERIFY(!k.forLayer(2)->problem.empty()); // 32 input channels
        const QuantizationPlan q8 = QuantizationPlan::build(m, rules(R"([{"weight_qtype": "q8_0"}])"));
        QVERIFY(q8.forLayer(0)->problem.empty());
        QVERIFY(q8.forLayer(1)->problem.find("24 input features") != std::string::npos);
        QVERIFY(q8.forLayer(2)->problem.empty());
        // The tensor-level functions name the tensor.
        try {
            ggufEncode(gaussian({4, 40}, 1), QType::Q8_0, "blk.0.ffn_up");
            QFAIL("a row of 40 was encoded in blocks of 32");
        } catch (const Error& e) {
            QVERIFY2(std::string(e.what()).find("blk.0.ffn_up") != std::string::npos, e.what());
        }
        Tensor nan = gaussian({2, 32}, 1);
        nan.mutableValues<float>()[33] = std::nanf("");
        QVERIFY_THROWS_EXCEPTION(Error, ggufBlockParams(nan, QType::Q4_0, "w"));
    }

    void rulesTakeTheTypesForWeightsOnly()
    {
        for (const GgmlType& t : kTypes) {
            QCOMPARE(parseQType(qtypeName(t.type)), std::optional<QType>(t.type));
            QCOMPARE(parseQType(t.ggmlName), std::optional<QType>(t.type)); // q4_K as ggml spells it
        }
        const RuleSet ok = rules(R"([{"weight_qtype": "q4_k", "act_qtype": "int8"}])");
        QCOMPARE(ok.rules().size(), size_t(1));
        try {
            rules(R"([{"weight_qtype": "int8"}, {"act_qtype": "q8_0"}])");
            QFAIL("q8_0 was accepted as an act_qtype");
        } catch (const Error& e) {
            const std::string what = e.what();
            QVERIFY2(what.find("rule 1") != std::string::npos && what.find("act_qtype") != std::string::npos &&
                         what.find("weights only") != std::string::npos,
                     e.what());
        }
        // Fields that would change the encoding do not apply: the layer's note names them,
        // and the weight is the plain reference encoding.
        const Model m = threeLayerModel(gaussian({256, 8}, 1), gaussian({8, 256}, 2), gaussian({4, 256, 1, 1}, 3));
        const QuantizationPlan plain = QuantizationPlan::build(m, rules(R"([{"weight_qtype": "q5_k"}])"));
        const QuantizationPlan odd = QuantizationPlan::build(
            m, rules(R"([{"weight_qtype": "q5_k", "granularity": "per_tensor", "narrow_range": true,
                          "scale_restriction": "pow2", "tile_size": 64, "rounding": "stochastic", "rounding_seed": 3}])"));
        const std::string note = odd.forLayer(0)->note;
        for (const char* field : {"tile_size", "granularity", "narrow_range", "scale_restriction", "rounding"})
            QVERIFY2(note.find(field) != std::string::npos, note.c_str());
        QVERIFY(plain.forLayer(0)->note.empty());
        QVERIFY(*odd.forLayer(0)->weight == *plain.forLayer(0)->weight);
        QCOMPARE(odd.forLayer(0)->weightRounding, Rounding::Nearest);
        // Only absmax (the default) as weight_calibration.
        const QuantizationPlan mse =
            QuantizationPlan::build(m, rules(R"([{"weight_qtype": "q4_0", "weight_calibration": "mse"}])"));
        QVERIFY2(mse.forLayer(0)->problem.find("absmax") != std::string::npos, mse.forLayer(0)->problem.c_str());
        // One code per element does not exist for these types.
        const Tensor w = gaussian({2, 32}, 4);
        QVERIFY_THROWS_EXCEPTION(Error, quantize(w, ggufBlockParams(w, QType::Q4_0, "w")));
    }
};

QTEST_GUILESS_MAIN(TestGgufBlocks)
#include "tst_gguf_blocks.moc"
