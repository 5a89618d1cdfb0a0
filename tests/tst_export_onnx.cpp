// The ONNX QDQ export: every exported model passes ONNX's checkers, holds the
// quantization the rules asked for (types, axes, blocks, scales), and our own
// runtime runs it to the same outputs as the fake-quant simulation of the same
// rules. ONNX Runtime's runs are in tst_export_onnx_ort (conformance).

#include <QtTest>

#include <onnx/onnx_pb.h>

#include <fstream>
#include <random>
#include <set>

#include "export/passes/raise_opset.h"
#include "export_onnx/export_cases.h"
#include "numerics/float_formats.h"

using namespace qs;
using namespace qs::test;

namespace {

onnx::ModelProto readProto(const std::filesystem::path& file)
{
    onnx::ModelProto proto;
    std::ifstream in(file, std::ios::binary);
    if (!proto.ParseFromIstream(&in))
        throw Error(file.string() + ": not a model");
    return proto;
}

int countOps(const onnx::ModelProto& m, const std::string& op)
{
    int n = 0;
    for (const auto& node : m.graph().node())
        n += node.op_type() == op;
    return n;
}

int64_t opsetOf(const onnx::ModelProto& m)
{
    for (const auto& o : m.opset_import())
        if (o.domain().empty())
            return o.version();
    return 0;
}

const onnx::NodeProto& producerOf(const onnx::ModelProto& m, const std::string& value)
{
    for (const auto& node : m.graph().node())
        for (const auto& out : node.output())
            if (out == value)
                return node;
    throw Error("no node produces '" + value + "'");
}

const onnx::TensorProto& initializerOf(const onnx::ModelProto& m, const std::string& name)
{
    for (const auto& t : m.graph().initializer())
        if (t.name() == name)
            return t;
    throw Error("no initializer '" + name + "'");
}

} // namespace

class TestExportOnnx : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;
    std::vector<ExportCase> cases_;

private slots:
    void initTestCase()
    {
        QVERIFY(dir_.isValid());
        cases_ = exportCasesIn(dir_);
    }

    void ourRuntimeAgreesWithTheSimulation_data()
    {
        QTest::addColumn<int>("index");
        for (size_t i = 0; i < cases_.size(); ++i) // int4 and float8 included: the loader widens them
            QTest::newRow(cases_[i].name.c_str()) << int(i);
    }
    void ourRuntimeAgreesWithTheSimulation()
    {
        QFETCH(int, index);
        const ExportCase& c = cases_[size_t(index)];
        const ExportedCase e = exportCase(c, dir_.path().toStdString());
        if (e.summary.opset <= 17) {    // libonnx 1.12 knows opset 17: ONNX Runtime checks the int4/fp8 models
            QVERIFY(e.summary.checked); // onnx::checker with strict shape inference
            QVERIFY(runPython(kExportScripts + "check_model.py", {QString::fromStdString(e.out.string())}));
        }
        std::set<std::string> names;
        const onnx::ModelProto written = readProto(e.out);
        for (const auto& node : written.graph().node()) {
            QVERIFY2(names.insert(node.name()).second, node.name().c_str());
            if (node.op_type() == "QuantizeLinear") // ONNX Runtime needs it (canonicalize_zero_points.h)
                QCOMPARE(node.input_size(), 3);
        }

        const Interpreter exported(loadOnnx(e.out));
        const auto outputs = exported.run(e.inputs);
        for (const auto& [name, simulated] : e.simulated) {
            const Tensor& ours = outputs.at(name);
            QCOMPARE(ours.shape(), simulated.shape());
            // The outputs are float (no Q after them): the same numbers up to float rounding.
            const double err = relativeMaxError(ours, simulated);
            QVERIFY2(err <= 1e-5, (c.name + ": " + name + " relative error " + std::to_string(err)).c_str());
            qInfo("%s: %s SQNR vs float %.1f dB, float %lld bytes -> %lld bytes", c.name.c_str(), name.c_str(),
                  sqnrDb(ours, e.floatRun.at(name)), (long long)e.summary.floatBytes,
                  (long long)e.summary.quantizedBytes);
        }
        // A quantized model differs from the float one (the comparison above could not pass by accident).
        QVERIFY(relativeMaxError(e.simulated.begin()->second, e.floatRun.begin()->second) > 1e-4);
    }

    void demoW8A8HoldsOneQdqPerWeightAndActivation_data()
    {
        QTest::addColumn<int>("form");
        QTest::newRow("unsigned (default)") << int(EightBitForm::Unsigned);
        QTest::newRow("as-rules") << int(EightBitForm::AsRules);
    }
    void demoW8A8HoldsOneQdqPerWeightAndActivation()
    {
        QFETCH(int, form);
        OnnxExportOptions options;
        options.eightBitForm = EightBitForm(form);
        const bool unsignedForm = options.eightBitForm == EightBitForm::Unsigned;
        const ExportedCase e = exportCase(cases_[0], dir_.path().toStdString(), options);
        const onnx::ModelProto m = readProto(e.out);
        QCOMPARE(opsetOf(m), int64_t(13));
        QCOMPARE(countOps(m, "QuantizeLinear"), 5); // the inputs of conv1..3, fc1, fc2
        QCOMPARE(countOps(m, "DequantizeLinear"), 10);
        QCOMPARE(e.summary.signedEightBit, unsignedForm ? int64_t(0) : int64_t(15));
        // Weights: per output channel, scales as the weight cache has them. As the rules say: int8 codes,
        // zero point dropped (symmetric). Unsigned: uint8 codes = int8 codes + 128, zero points 128.
        for (const LayerQuantization& lq : e.plan.layers()) {
            const QuantizableLayer& layer = e.model.layers[lq.layer];
            const onnx::NodeProto& dq = producerOf(m, layer.weightName);
            QCOMPARE(dq.op_type(), std::string("DequantizeLinear"));
            QCOMPARE(dq.input_size(), unsignedForm ? 3 : 2);
            QCOMPARE(initializerOf(m, dq.input(0)).data_type(),
                     int32_t(unsignedForm ? onnx::TensorProto::UINT8 : onnx::TensorProto::INT8));
            if (unsignedForm) {
                const auto zeroPoints = readIntegerTensor(initializerOf(m, dq.input(2)));
                QVERIFY(zeroPoints);
                QVERIFY(std::all_of(zeroPoints->values.begin(), zeroPoints->values.end(),
                                    [](int32_t z) { return z == 128; }));
            }
            const auto scales = readFloatTensor(initializerOf(m, dq.input(1)));
            QVERIFY(scales);
            QCOMPARE(*scales, e.weights.find(lq.layer)->quantization.params.scales);
            QCOMPARE(intAttribute(dq, "axis", 1), int64_t(layer.channelAxis));
        }
        const auto& names = e.summary.passes;
        QCOMPARE(names.front().pass, std::string("quantize_weights"));
        QCOMPARE(names.front().changes, int64_t(5));
        QVERIFY(e.summary.quantizedBytes * 3 < e.summary.floatBytes);
        // Either way our runtime runs the file to the simulation's numbers.
        const auto outputs = Interpreter(loadOnnx(e.out)).run(e.inputs);
        QVERIFY(relativeMaxError(outputs.at("logits"), e.simulated.at("logits")) <= 1e-5);
    }

    void int4BlockedWeightsRaiseTheOpsetAndHoldTheSimulatedValues()
    {
        const ExportCase& c = cases_[3];
        const ExportedCase e = exportCase(c, dir_.path().toStdString());
        QCOMPARE(e.summary.sourceOpset, int64_t(13));
        QCOMPARE(e.summary.opset, int64_t(21));
        QVERIFY(!e.summary.checked); // libonnx 1.12 knows opset 17: ONNX Runtime checks it instead
        const onnx::ModelProto m = readProto(e.out);
        QCOMPARE(opsetOf(m), int64_t(21));
        QCOMPARE(m.ir_version(), int64_t(10));
        for (const LayerQuantization& lq : e.plan.layers()) {
            const QuantizableLayer& layer = e.model.layers[lq.layer];
            const onnx::NodeProto& dq = producerOf(m, layer.weightName);
            // MatMul weight [K, N]: blocks of 32 along K (axis 0), one per output column.
            QCOMPARE(intAttribute(dq, "block_size", 0), int64_t(32));
            QCOMPARE(intAttribute(dq, "axis", 1), int64_t(0));
            const auto codes = readIntegerTensor(initializerOf(m, dq.input(0)));
            QVERIFY(codes);
            QCOMPARE(codes->elementType, kOnnxInt4);
            QCOMPARE(initializerOf(m, dq.input(0)).raw_data().size(), size_t((layer.parameterCount + 1) / 2));
            const auto scales = readFloatTensor(initializerOf(m, dq.input(1)));
            const Shape scaleDims = tensorDims(initializerOf(m, dq.input(1)));
            QCOMPARE(scaleDims, (Shape{(layer.weightShape[0] + 31) / 32, layer.weightShape[1]}));
            // DequantizeLinear by hand: (code − 0) · scale[k / 32, n] is the simulated weight, element for element.
            const auto fq = e.weights.find(lq.layer)->fakeQuant.values<float>();
            const int64_t n = layer.weightShape[1];
            for (int64_t k = 0; k < layer.weightShape[0]; ++k)
                for (int64_t j = 0; j < n; ++j) {
                    const float v = float(codes->values[size_t(k * n + j)]) * (*scales)[size_t((k / 32) * n + j)];
                    QCOMPARE(v, fq[size_t(k * n + j)]);
                }
        }
        QVERIFY(e.summary.quantizedBytes * 6 < e.summary.floatBytes);
    }

    void externalDataIsWrittenInline()
    {
        const ExportedCase e = exportCase(cases_[4], dir_.path().toStdString());
        const onnx::ModelProto m = readProto(e.out);
        for (const auto& t : m.graph().initializer())
            QVERIFY2(t.data_location() != onnx::TensorProto::EXTERNAL, t.name().c_str());
        // fc1's bias stays float and carries the external file's bytes.
        const auto bias = readFloatTensor(initializerOf(m, "fc1.bias"));
        QVERIFY(bias);
        const auto loaded = e.model.initializer("fc1.bias")->values<float>();
        QVERIFY(std::equal(bias->begin(), bias->end(), loaded.begin()));
    }

    void dynamicActivationsStayFloatAndAreReported()
    {
        ExportCase c = cases_[0];
        c.name = "demo_dynamic";
        c.rules = "[{\"weight_qtype\": \"int8\", \"act_qtype\": \"int8\"}]";
        const ExportedCase e = exportCase(c, dir_.path().toStdString());
        const onnx::ModelProto m = readProto(e.out);
        QCOMPARE(countOps(m, "QuantizeLinear"), 0);
        QCOMPARE(countOps(m, "DequantizeLinear"), 5);
        QCOMPARE(e.summary.dynamicActivations.size(), size_t(5));
        QVERIFY(!e.summary.warnings.empty());
    }

    void passesOffKeepsZeroPointsAndStillRuns()
    {
        OnnxExportOptions options;
        options.runPasses = false;
        const ExportedCase e = exportCase(cases_[0], dir_.path().toStdString(), options);
        // quantize_weights, quantize_activations, use_unsigned_eight_bit (not a clean-up pass: it always runs)
        QCOMPARE(e.summary.passes.size(), size_t(3));
        const onnx::ModelProto m = readProto(e.out);
        for (const auto& node : m.graph().node())
            if (node.op_type() == "DequantizeLinear")
                QCOMPARE(node.input_size(), 3);
        const auto outputs = Interpreter(loadOnnx(e.out)).run(e.inputs);
        QVERIFY(relativeMaxError(outputs.at("logits"), e.simulated.at("logits")) <= 1e-5);
    }

    void typesOnnxCannotHoldAreErrorsNamingLayerAndType()
    {
        for (const char* qtype : {"nf4", "int3", "fp4_e2m1", "mxfp8", "ternary"}) {
            ExportCase c = cases_[1];
            c.name = std::string("demo_") + qtype;
            c.rules = std::string("[{\"weight_qtype\": \"") + qtype + "\"}]";
            // An earlier good export at the same path must survive a failed one (atomic writes).
            const std::filesystem::path out = std::filesystem::path(dir_.path().toStdString()) / (c.name + ".onnx");
            writeFile(out.string(), "previous");
            try {
                exportCase(c, dir_.path().toStdString());
                QFAIL(("no error for " + std::string(qtype)).c_str());
            } catch (const Error& err) {
                const std::string what = err.what();
                QVERIFY2(what.find("features/conv1") != std::string::npos, what.c_str());
                QVERIFY2(what.find(qtype) != std::string::npos || what.find("fp4") != std::string::npos, what.c_str());
            }
            QCOMPARE(readFile(out.string()), std::string("previous"));
        }
    }

    void fp8WeightsAreFloat8BytesAndFp8ActivationsAreRefused()
    {
        ExportCase c = cases_[1];
        c.name = "demo_fp8_e5m2";
        c.rules = "[{\"weight_qtype\": \"fp8_e5m2\"}]";
        const ExportedCase e = exportCase(c, dir_.path().toStdString());
        const onnx::ModelProto m = readProto(e.out);
        QCOMPARE(opsetOf(m), int64_t(19));
        for (const LayerQuantization& lq : e.plan.layers()) {
            const onnx::NodeProto& dq = producerOf(m, e.model.layers[lq.layer].weightName);
            QCOMPARE(dq.input_size(), 2);
            const onnx::TensorProto& codes = initializerOf(m, dq.input(0));
            QCOMPARE(codes.data_type(), 19); // FLOAT8E5M2
            const auto scales = readFloatTensor(initializerOf(m, dq.input(1)));
            const auto fq = e.weights.find(lq.layer)->fakeQuant.values<float>();
            const int64_t perChannel = int64_t(fq.size()) / int64_t(scales->size());
            QCOMPARE(codes.raw_data().size(), fq.size());
            for (size_t k = 0; k < fq.size(); ++k) // DequantizeLinear by hand: decode(byte) · scale[channel]
                QCOMPARE(decodeFp8E5M2(uint8_t(codes.raw_data()[k])) * (*scales)[k / size_t(perChannel)], fq[k]);
        }
        const auto outputs = Interpreter(loadOnnx(e.out)).run(e.inputs); // float8e5m2 widened by our loader
        QVERIFY(relativeMaxError(outputs.at("logits"), e.simulated.at("logits")) <= 1e-5);
        c.name = "demo_fp8_activations";
        c.rules = "[{\"weight_qtype\": \"int8\", \"act_qtype\": \"fp8_e4m3\", \"act_static_scale\": true}]";
        QVERIFY_THROWS_EXCEPTION(Error, exportCase(c, dir_.path().toStdString()));
    }

    void raisesTheDemoToOpset21ForInt4PerChannel()
    {
        ExportCase c = cases_[1];
        c.name = "demo_int4_per_channel";
        c.rules = "[{\"weight_qtype\": \"int4\"}]";
        const ExportedCase e = exportCase(c, dir_.path().toStdString());
        const onnx::ModelProto m = readProto(e.out);
        QCOMPARE(opsetOf(m), int64_t(21));
        QCOMPARE(countOps(m, "DequantizeLinear"), 5);
        QCOMPARE(countOps(m, "Conv"), 3);
    }

    // The MatMulNBits form, decoded by hand from ONNX Runtime's documented
    // layout (B [N, blocks, block / 2] low nibble first, scales [N * blocks],
    // zero points packed two a byte per row, int4 codes + 8), holds exactly the
    // simulated weights; our interpreter runs the file to the simulation.
    void matMulNBitsHoldsTheSimulatedWeights_data()
    {
        QTest::addColumn<QString>("rule");
        QTest::addColumn<bool>("zeroPoints");
        QTest::newRow("int4 symmetric, tile 32") << R"({"weight_qtype": "int4", "tile_size": 32})" << false;
        QTest::newRow("int4 asymmetric, tile 128")
            << R"({"weight_qtype": "int4", "weight_calibration": "minmax", "symmetric": false, "tile_size": 128})"
            << true;
        QTest::newRow("uint4 asymmetric, tile 64")
            << R"({"weight_qtype": "uint4", "weight_calibration": "minmax", "symmetric": false, "tile_size": 64})"
            << true;
    }
    void matMulNBitsHoldsTheSimulatedWeights()
    {
        QFETCH(QString, rule);
        QFETCH(bool, zeroPoints);
        const std::filesystem::path dir = dir_.path().toStdString();
        const ExportCase c{"llm_block_nbits", dir / "llm_block.onnx", "[" + rule.toStdString() + "]",
                           dir / "llm_block_inputs.npz", 16};
        OnnxExportOptions options;
        options.int4Form = Int4Form::MatMulNBits;
        const ExportedCase e = exportCase(c, dir, options);
        QCOMPARE(e.summary.matMulNBits, int64_t(3));
        for (const std::string& w : e.summary.warnings)
            QFAIL(w.c_str());
        // No int4 DequantizeLinear left: the source's opset 13 is kept, and both checkers know it.
        QCOMPARE(e.summary.opset, int64_t(13));
        QVERIFY(e.summary.checked);
        QVERIFY(runPython(kExportScripts + "check_model.py", {QString::fromStdString(e.out.string())}));
        const onnx::ModelProto m = readProto(e.out);
        QCOMPARE(countOps(m, "DequantizeLinear"), 0);
        QCOMPARE(countOps(m, "MatMulNBits"), 3);
        bool imported = false;
        for (const auto& o : m.opset_import())
            imported |= o.domain() == "com.microsoft" && o.version() == 1;
        QVERIFY(imported);
        struct Layer {
            const char* node;
            const char* weight;
            int kAxis; // of the source weight: MatMul [K, N], Gemm transB [N, K]
            const char* bias;
        };
        for (const Layer& l :
             {Layer{"/up/MatMul", "up.weight", 0, ""}, Layer{"/down/Gemm", "down.weight", 1, "down.bias"},
              Layer{"/head/MatMul", "head.weight", 0, ""}}) {
            const onnx::NodeProto* node = nullptr;
            for (const auto& n : m.graph().node())
                if (n.name() == l.node)
                    node = &n;
            QVERIFY(node);
            QCOMPARE(node->op_type(), std::string("MatMulNBits"));
            QCOMPARE(node->domain(), std::string("com.microsoft"));
            const Tensor* fq = nullptr;
            for (size_t i = 0; i < e.model.layers.size(); ++i)
                if (e.model.layers[i].weightName == l.weight)
                    fq = &e.weights.find(i)->fakeQuant;
            QVERIFY(fq);
            const int64_t K = fq->dim(l.kAxis), N = fq->dim(1 - l.kAxis);
            const int64_t block = intAttribute(*node, "block_size", 0), blocks = (K + block - 1) / block;
            QCOMPARE(intAttribute(*node, "K", 0), K);
            QCOMPARE(intAttribute(*node, "N", 0), N);
            QCOMPARE(intAttribute(*node, "bits", 0), int64_t(4));
            QCOMPARE(intAttribute(*node, "accuracy_level", -1), int64_t(0));
            const onnx::TensorProto& b = initializerOf(m, node->input(1));
            QCOMPARE(b.data_type(), int32_t(onnx::TensorProto::UINT8));
            QCOMPARE(tensorDims(b), (Shape{N, blocks, block / 2}));
            const auto scales = readFloatTensor(initializerOf(m, node->input(2)));
            QCOMPARE(int64_t(scales->size()), N * blocks);
            const bool hasZeros = node->input_size() > 3 && !node->input(3).empty();
            QCOMPARE(hasZeros, zeroPoints);
            const std::string zp = hasZeros ? initializerOf(m, node->input(3)).raw_data() : std::string();
            QCOMPARE(zp.size(), hasZeros ? size_t(N * ((blocks + 1) / 2)) : size_t(0));
            QCOMPARE(node->input_size() == 6 ? node->input(5) : std::string(), std::string(l.bias));
            const std::string& packed = b.raw_data();
            const auto w = fq->values<float>();
            for (int64_t n = 0; n < N; ++n)
                for (int64_t k = 0; k < K; ++k) {
                    const int64_t blk = k / block, at = (n * blocks + blk) * (block / 2) + (k % block) / 2;
                    const int code = (uint8_t(packed[size_t(at)]) >> (k % 2 * 4)) & 15;
                    const int zero =
                        hasZeros ? (uint8_t(zp[size_t(n * ((blocks + 1) / 2) + blk / 2)]) >> (blk % 2 * 4)) & 15 : 8;
                    const float expected = w[size_t(l.kAxis == 0 ? k * N + n : n * K + k)];
                    QCOMPARE(float(code - zero) * (*scales)[size_t(n * blocks + blk)], expected);
                }
        }
        const auto outputs = Interpreter(loadOnnx(e.out)).run(e.inputs);
        QCOMPARE(relativeMaxError(outputs.at("y"), e.simulated.at("y")), 0.0);
    }

    // Layers MatMulNBits cannot take keep their DequantizeLinear, each named in a warning.
    void matMulNBitsLeavesConvAndPerChannelWeightsWithAWarning()
    {
        ExportCase c = cases_[1];
        c.name = "demo_int4_per_channel_nbits";
        c.rules = "[{\"weight_qtype\": \"int4\"}]";
        OnnxExportOptions options;
        options.int4Form = Int4Form::MatMulNBits;
        const ExportedCase e = exportCase(c, dir_.path().toStdString(), options);
        QCOMPARE(e.summary.matMulNBits, int64_t(0));
        QCOMPARE(e.summary.opset, int64_t(21)); // int4 DequantizeLinear needs it
        const onnx::ModelProto m = readProto(e.out);
        QCOMPARE(countOps(m, "DequantizeLinear"), 5);
        QCOMPARE(countOps(m, "MatMulNBits"), 0);
        int named = 0;
        for (const std::string& w : e.summary.warnings)
            named += w.starts_with("MatMulNBits: layer '") && w.find("keeps its DequantizeLinear") != std::string::npos;
        QCOMPARE(named, 5);
    }

    // Our MatMulNBits kernel on a hand-built node against the op's formula in
    // double: bits 2, 4 and 8, packed uint8 or float zero points or none, a short last block, a bias.
    void ourMatMulNBitsKernelComputesTheOpsFormula_data()
    {
        QTest::addColumn<int>("bits");
        QTest::addColumn<QString>("zeros"); // none, packed, float
        QTest::newRow("2 bits, packed zero points") << 2 << "packed";
        QTest::newRow("4 bits, no zero points") << 4 << "none";
        QTest::newRow("8 bits, float zero points") << 8 << "float";
    }
    void ourMatMulNBitsKernelComputesTheOpsFormula()
    {
        QFETCH(int, bits);
        QFETCH(QString, zeros);
        const int64_t M = 5, K = 40, N = 3, block = 16, blocks = 3, blob = block * bits / 8, perByte = 8 / bits;
        std::mt19937 rng(11);
        std::vector<int32_t> q(size_t(N * blocks * block)), z(size_t(N * blocks));
        for (auto& v : q)
            v = int32_t(rng() % (1u << bits));
        for (auto& v : z)
            v = int32_t(rng() % (1u << bits));
        std::vector<float> scales(static_cast<size_t>(N * blocks)), bias(static_cast<size_t>(N)),
            a(static_cast<size_t>(M * K));
        std::uniform_real_distribution<float> u(-1, 1);
        for (auto* v : {&scales, &bias, &a})
            for (float& x : *v)
                x = u(rng);
        // B [N, blocks, blob]: code j of a block in byte j / perByte at bit (j % perByte) * bits.
        std::string packed(size_t(N * blocks * blob), '\0'), zeroBytes;
        for (size_t i = 0; i < q.size(); ++i)
            packed[i / size_t(perByte)] = char(uint8_t(packed[i / size_t(perByte)]) | q[i] << (i % perByte * bits));
        const int64_t zeroRow = (blocks * bits + 7) / 8;
        zeroBytes.assign(size_t(N * zeroRow), '\0');
        for (int64_t n = 0; n < N; ++n)
            for (int64_t b = 0; b < blocks; ++b) {
                char& byte = zeroBytes[size_t(n * zeroRow + b / perByte)];
                byte = char(uint8_t(byte) | z[size_t(n * blocks + b)] << (b % perByte * bits));
            }
        onnx::ModelProto m;
        m.set_ir_version(8);
        m.add_opset_import()->set_version(17);
        auto* ms = m.add_opset_import();
        ms->set_domain("com.microsoft");
        ms->set_version(1);
        onnx::GraphProto& g = *m.mutable_graph();
        g.set_name("nbits");
        auto declare = [](onnx::ValueInfoProto* v, const std::string& name, Shape dims) {
            v->set_name(name);
            auto* t = v->mutable_type()->mutable_tensor_type();
            t->set_elem_type(onnx::TensorProto::FLOAT);
            for (int64_t d : dims)
                t->mutable_shape()->add_dim()->set_dim_value(d);
        };
        declare(g.add_input(), "a", {M, K});
        declare(g.add_output(), "y", {M, N});
        auto bytes = [&](const std::string& name, Shape dims, const std::string& raw) {
            onnx::TensorProto& t = *g.add_initializer();
            t.set_name(name);
            t.set_data_type(onnx::TensorProto::UINT8);
            for (int64_t d : dims)
                t.add_dims(d);
            t.set_raw_data(raw);
        };
        bytes("b", {N, blocks, blob}, packed);
        *g.add_initializer() = floatTensorProto("scales", {N * blocks}, scales);
        *g.add_initializer() = floatTensorProto("bias", {N}, bias);
        std::string zeroInput;
        if (zeros == "packed")
            bytes(zeroInput = "zeros", {N * zeroRow}, zeroBytes);
        if (zeros == "float")
            *g.add_initializer() =
                floatTensorProto(zeroInput = "zeros", {N * blocks}, std::vector<float>(z.begin(), z.end()));
        onnx::NodeProto& node = *g.add_node();
        node.set_op_type("MatMulNBits");
        node.set_domain("com.microsoft");
        node.set_name("nbits");
        for (const std::string& in :
             {std::string("a"), std::string("b"), std::string("scales"), zeroInput, std::string(), std::string("bias")})
            node.add_input(in);
        node.add_output("y");
        setIntAttribute(node, "K", K);
        setIntAttribute(node, "N", N);
        setIntAttribute(node, "bits", bits);
        setIntAttribute(node, "block_size", block);
        const std::filesystem::path file = dir_.filePath(QStringLiteral("nbits_%1.onnx").arg(bits)).toStdString();
        std::ofstream(file, std::ios::binary) << m.SerializeAsString();
        const auto y = Interpreter(loadOnnx(file)).run({{"a", Tensor::fromVector(DType::F32, {M, K}, a)}}).at("y");
        QCOMPARE(y.shape(), (Shape{M, N}));
        for (int64_t r = 0; r < M; ++r)
            for (int64_t n = 0; n < N; ++n) {
                double sum = bias[size_t(n)];
                for (int64_t k = 0; k < K; ++k) {
                    const size_t group = size_t(n * blocks + k / block);
                    const double zero = zeros == "none" ? double(1 << (bits - 1)) : double(z[group]);
                    sum += double(a[size_t(r * K + k)]) * (q[size_t(n * blocks * block + k)] - zero) * scales[group];
                }
                QVERIFY2(std::abs(y.values<float>()[size_t(r * N + n)] - sum) <= 1e-4 * (1 + std::abs(sum)),
                         (std::to_string(y.values<float>()[size_t(r * N + n)]) + " vs " + std::to_string(sum)).c_str());
            }
    }

    void raisingTheOpsetAdaptsReduceAxes()
    {
        // ReduceMean's axes attribute (opset 13) is an input from opset 18 on.
        onnx::ModelProto m;
        m.set_ir_version(7);
        m.add_opset_import()->set_version(13);
        for (auto* v : {m.mutable_graph()->add_input(), m.mutable_graph()->add_output()}) {
            auto* t = v->mutable_type()->mutable_tensor_type();
            t->set_elem_type(onnx::TensorProto::FLOAT);
            t->mutable_shape()->add_dim()->set_dim_value(2);
            t->mutable_shape()->add_dim()->set_dim_value(3);
        }
        m.mutable_graph()->mutable_input(0)->set_name("x");
        m.mutable_graph()->mutable_output(0)->set_name("y");
        m.mutable_graph()->set_name("reduce");
        auto* node = m.mutable_graph()->add_node();
        node->set_op_type("ReduceMean");
        node->set_name("mean");
        node->add_input("x");
        node->add_output("y");
        auto* axes = node->add_attribute();
        axes->set_name("axes");
        axes->set_type(onnx::AttributeProto::INTS);
        axes->add_ints(1);
        raiseOpset(m, 21);
        QCOMPARE(opsetOf(m), int64_t(21));
        QCOMPARE(m.graph().node(0).input_size(), 2);
        QVERIFY(!findAttribute(m.graph().node(0), "axes"));
        QCOMPARE(*readInt64Tensor(initializerOf(m, m.graph().node(0).input(1))), std::vector<int64_t>{1});
        QVERIFY_THROWS_EXCEPTION(Error, raiseOpset(m, 17));
    }
};

QTEST_APPLESS_MAIN(TestExportOnnx)
#include "tst_export_onnx.moc"
