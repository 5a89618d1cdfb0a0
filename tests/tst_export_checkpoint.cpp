// Quantized checkpoints (export/checkpoint.h, export/checkpoint_reader.h):
// every qtype family reads back bit for bit equal to the weight quantizer's
// fake-quant, in safetensors and HDF5; an independent python reader agrees;
// the documented shapes and dtypes hold; writes are atomic; a weights-only
// safetensors model is streamed with memory near one tensor.
#include <QtTest>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/half.h"
#include "export/checkpoint.h"
#include "export/checkpoint_reader.h"
#include "io/model_loader.h"
#include "io/safetensors.h"
#include "rules/ruleset.h"
#include "quantization/quantization_plan.h"
#include "quantization/weight_quantizer.h"

using namespace qs;
namespace fs = std::filesystem;

namespace {

// Normal values with adversarial rows: all zero, constant, one huge outlier, tiny.
Tensor weightTensor(const Shape& shape, uint32_t seed)
{
    Tensor t(DType::F32, shape);
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 0.05f);
    auto v = t.mutableValues<float>();
    for (float& x : v)
        x = normal(rng);
    const int64_t row = t.numel() / shape[0];
    for (int64_t i = 0; i < row; ++i) {
        v[size_t(i)] = 0.0f;            // row 0: all zero
        v[size_t(row + i)] = 0.25f;     // row 1: constant
        v[size_t(3 * row + i)] *= 1e-6f; // row 3: tiny
    }
    v[size_t(2 * row + 1)] = 40.0f; // row 2: an outlier
    return t;
}

struct Family {
    std::string module; // the layer (and rule) name
    Shape shape;
    std::string rule;   // the rule's fields besides module_path
};

// One layer per family, each with its own rule.
const std::vector<Family>& families()
{
    static const std::vector<Family> f = {
        {"int8_pc", {24, 40}, R"("weight_qtype": "int8")"},
        {"int8_asym_pt", {24, 40}, R"("weight_qtype": "int8", "weight_calibration": "minmax", "granularity": "per_tensor")"},
        {"int4_tile", {24, 64}, R"("weight_qtype": "int4", "tile_size": 16)"},
        {"int4_conv_tile", {16, 8, 3, 3}, R"("weight_qtype": "int4", "tile_size": 4)"},
        {"int8_conv", {16, 8, 3, 3}, R"("weight_qtype": "int8", "narrow_range": true)"},
        {"uint8_asym", {24, 40}, R"("weight_qtype": "uint8", "weight_calibration": "minmax")"},
        {"uint2_asym", {24, 38}, R"("weight_qtype": "uint2", "weight_calibration": "minmax")"},
        {"int3", {24, 40}, R"("weight_qtype": "int3", "scale_restriction": "pow2")"},
        {"int16", {24, 40}, R"("weight_qtype": "int16")"},
        {"int8_stochastic", {24, 40}, R"("weight_qtype": "int8", "rounding": "stochastic", "rounding_seed": 7)"},
        {"fp8", {24, 40}, R"("weight_qtype": "fp8_e4m3")"},
        {"fp8_e5m2", {24, 40}, R"("weight_qtype": "fp8_e5m2", "granularity": "per_tensor")"},
        {"nf4", {24, 64}, R"("weight_qtype": "nf4", "tile_size": 32)"},
        {"mxfp4", {24, 96}, R"("weight_qtype": "mxfp4")"},
        {"mxfp8_conv", {16, 40, 1, 1}, R"("weight_qtype": "mxfp8")"},
        {"nvfp4", {24, 64}, R"("weight_qtype": "nvfp4")"},
        {"binary", {24, 40}, R"("weight_qtype": "binary")"},
        {"ternary", {24, 40}, R"("weight_qtype": "ternary")"},
    };
    return f;
}

std::string rulesText()
{
    std::string text = R"({"version": 1, "rules": [)";
    for (size_t i = 0; i < families().size(); ++i)
        text += (i ? ", " : "") + std::string(R"({"module_path": ")") + families()[i].module + "\", " +
                families()[i].rule + "}";
    return text + "]}";
}

// A weights-only safetensors model: one weight per family plus float tensors.
fs::path writeFamilyModel(const fs::path& dir)
{
    std::vector<SafetensorsTensor> tensors;
    uint32_t seed = 1;
    for (const Family& f : families())
        tensors.push_back({f.module + ".weight", weightTensor(f.shape, seed++), ""});
    tensors.push_back({"int8_pc.bias", weightTensor({24, 1}, 99).reshaped({24}), ""});
    tensors.push_back({"norm.running_mean", weightTensor({40, 1}, 98).reshaped({40}), ""});
    const fs::path path = dir / "families.safetensors";
    writeSafetensors(path, tensors, {{"format", "pt"}});
    return path;
}

bool sameBits(const Tensor& a, const Tensor& b)
{
    return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.rawData(), b.rawData(), a.nbytes()) == 0;
}

// The cached fake-quant of every quantized layer, by weight name, as a safetensors dump.
// `perturb`: a weight whose first element is moved by one ulp (the checker must notice).
fs::path writeReference(const fs::path& dir, const Model& model, const WeightQuantizer& weights,
                        const std::string& perturb = {})
{
    std::vector<SafetensorsTensor> tensors;
    for (const auto& [layer, q] : weights.weights()) {
        Tensor t = q->fakeQuant.clone();
        if (model.layers[layer].weightName == perturb)
            t.mutableValues<float>()[0] = std::nextafter(t.values<float>()[0], INFINITY);
        tensors.push_back({model.layers[layer].weightName, t, ""});
    }
    for (const NamedTensor& t : model.initializers())
        if (t.tensor.dtype() == DType::F32 && std::none_of(tensors.begin(), tensors.end(), [&](const auto& x) {
                return x.name == t.name;
            }))
            tensors.push_back({t.name, t.tensor.clone(), ""});
    const fs::path path = dir / (perturb.empty() ? "reference.safetensors" : "perturbed.safetensors");
    writeSafetensors(path, tensors);
    return path;
}

// The float32 values of `shape` from weightTensor, stored as float16 or bfloat16.
Tensor halfTensor(DType dtype, const Shape& shape, uint32_t seed)
{
    const Tensor f = weightTensor(shape, seed);
    Tensor t(dtype, shape);
    for (int64_t i = 0; i < f.numel(); ++i)
        t.mutableValues<uint16_t>()[size_t(i)] = dtype == DType::F16 ? floatToFp16(f.values<float>()[size_t(i)])
                                                                     : floatToBf16(f.values<float>()[size_t(i)]);
    return t;
}

int64_t statusKiB(const char* field)
{
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind(field, 0) == 0)
            return std::stoll(line.substr(std::strlen(field)));
    return -1;
}

} // namespace

class TestExportCheckpoint : public QObject {
    Q_OBJECT
private:
    QTemporaryDir dir_;
    fs::path root() const { return fs::path(dir_.path().toStdString()); }

private slots:
    void everyFamilyReadsBackBitExact_data()
    {
        QTest::addColumn<QString>("file");
        QTest::newRow("safetensors") << "families.safetensors";
        QTest::newRow("hdf5") << "families.h5";
    }
    void everyFamilyReadsBackBitExact()
    {
        QFETCH(QString, file);
        const fs::path folder = root() / ("families_" + file.toStdString());
        fs::create_directories(folder);
        const Model model = loadModel(writeFamilyModel(folder));
        const RuleSet rules = RuleSet::fromJson(rulesText());
        const QuantizationPlan plan = QuantizationPlan::build(model, rules);
        WeightQuantizer weights;
        weights.update(model, plan);
        for (const auto& [layer, why] : weights.problems())
            QFAIL(qPrintable(QString::fromStdString(model.layers[layer].modulePath + ": " + why)));
        for (const LayerQuantization& lq : plan.layers())
            QVERIFY2(lq.problem.empty(), lq.problem.c_str());
        QCOMPARE(weights.weights().size(), families().size());

        const fs::path out = folder / file.toStdString();
        const ExportSummary summary = exportCheckpoint(model, plan, weights, rules, out);
        QCOMPARE(summary.quantizedWeights, int64_t(families().size()));
        QVERIFY(summary.quantizedBytes < summary.floatBytes);

        const QuantizedCheckpoint ckpt = readQuantizedCheckpoint(out);
        QCOMPARE(ckpt.toolVersion(), std::string(QUANTSCOPE_VERSION));
        QCOMPARE(ckpt.sourceSha256().size(), size_t(64));
        QCOMPARE(ckpt.quantizedTensors().size(), families().size());
        for (const auto& [layer, q] : weights.weights()) {
            const std::string& name = model.layers[layer].weightName;
            QVERIFY2(sameBits(ckpt.dequantized(name), q->fakeQuant), name.c_str());
        }
        // Untouched tensors are stored as they were.
        for (const char* name : {"int8_pc.bias", "norm.running_mean"})
            QVERIFY2(sameBits(ckpt.dequantized(name), *model.initializer(name)), name);
        QCOMPARE(ckpt.floatTensors().size(), size_t(2));

        // The documented layout: scale shapes, code dtypes, packing, zero points.
        QCOMPARE(ckpt.stored("int8_conv.weight.scale").shape(), (Shape{16, 1, 1, 1}));
        QCOMPARE(ckpt.stored("int8_conv.weight.qvalue").dtype(), DType::I8);
        QCOMPARE(ckpt.stored("int4_conv_tile.weight.scale").shape(), (Shape{16, 2, 1, 1})); // tiles along I, not last
        QCOMPARE(ckpt.info("int4_conv_tile.weight").block, (Shape{1, 4, 3, 3}));
        QCOMPARE(ckpt.stored("int4_tile.weight.scale").shape(), (Shape{24, 4}));
        QCOMPARE(ckpt.stored("int4_tile.weight.qvalue").shape(), (Shape{24, 32})); // two codes per byte
        QCOMPARE(ckpt.stored("int4_tile.weight.qvalue").dtype(), DType::U8);
        QCOMPARE(ckpt.stored("uint2_asym.weight.qvalue").shape(), (Shape{(24 * 38 + 3) / 4})); // 38 % 4 != 0: flat
        QCOMPARE(ckpt.stored("uint8_asym.weight.zero_point").dtype(), DType::U8);
        QCOMPARE(ckpt.stored("int8_asym_pt.weight.zero_point").dtype(), DType::I8);
        QCOMPARE(ckpt.stored("int8_asym_pt.weight.scale").shape(), (Shape{1, 1}));
        QCOMPARE(ckpt.stored("int16.weight.qvalue").dtype(), DType::I16);
        QCOMPARE(ckpt.stored("int3.weight.qvalue").shape(), (Shape{24, 40})); // 3-bit: one code per byte
        QCOMPARE(ckpt.stored("mxfp4.weight.scale").shape(), (Shape{24, 3}));
        QCOMPARE(ckpt.stored("mxfp8_conv.weight.scale").shape(), (Shape{16, 2, 1, 1}));
        QVERIFY(!ckpt.isQuantized("int8_pc.bias"));
        const Tensor global = ckpt.stored("nvfp4.weight.global_scale");
        for (const auto& [layer, q] : weights.weights())
            if (model.layers[layer].weightName == "nvfp4.weight")
                QCOMPARE(global.values<float>()[0], q->quantization.params.globalScale);
        // nvfp4's e4m3 block scales times the global scale are the stored scales.
        const Tensor block = ckpt.stored("nvfp4.weight.block_scale");
        const Tensor scale = ckpt.stored("nvfp4.weight.scale");
        QCOMPARE(block.numel(), scale.numel());

        // An independent reader (python, from the documented layout) agrees.
        const fs::path reference = writeReference(folder, model, weights);
        QProcess python;
        python.start("/usr/bin/python3", {QStringLiteral(QUANTSCOPE_TEST_DATA "/../export/check_checkpoint.py"),
                                          QString::fromStdString(out.string()),
                                          QString::fromStdString(reference.string())});
        QVERIFY(python.waitForFinished(60000));
        const QByteArray said = python.readAllStandardOutput() + python.readAllStandardError();
        QVERIFY2(python.exitStatus() == QProcess::NormalExit && python.exitCode() == 0, said.constData());
        QVERIFY2(said.contains("18 quantized tensors checked, 0 mismatches"), said.constData());
        // ... and notices a one-ulp difference.
        const fs::path perturbed = writeReference(folder, model, weights, "int8_pc.weight");
        python.start("/usr/bin/python3", {QStringLiteral(QUANTSCOPE_TEST_DATA "/../export/check_checkpoint.py"),
                                          QString::fromStdString(out.string()),
                                          QString::fromStdString(perturbed.string())});
        QVERIFY(python.waitForFinished(60000));
        const QByteArray complained = python.readAllStandardOutput();
        QCOMPARE(python.exitCode(), 1);
        QVERIFY2(complained.contains("MISMATCH int8_pc.weight"), complained.constData());
    }

    void demoModelExportsInBothFormats()
    {
        const Model model = loadModel(QUANTSCOPE_TEST_DATA "/../../resources/demo/digits/digits_cnn.onnx");
        const RuleSet rules = RuleSet::fromJson(
            R"({"version": 1, "rules": [{"module_path": "features/.*", "weight_qtype": "int4", "tile_size": 4},
                                        {"module_path": ".*", "weight_qtype": "int8", "narrow_range": true}]})");
        const QuantizationPlan plan = QuantizationPlan::build(model, rules);
        WeightQuantizer weights;
        weights.update(model, plan);
        QVERIFY(!weights.weights().empty());
        for (const char* ext : {".safetensors", ".hdf5"}) {
            const fs::path out = root() / (std::string("digits") + ext);
            const ExportSummary s = exportCheckpoint(model, plan, weights, rules, out);
            QCOMPARE(s.quantizedWeights, int64_t(weights.weights().size()));
            const QuantizedCheckpoint ckpt = readQuantizedCheckpoint(out);
            for (const auto& [layer, q] : weights.weights())
                QVERIFY(sameBits(ckpt.dequantized(model.layers[layer].weightName), q->fakeQuant));
            // Biases and other constants come through unchanged.
            for (const std::string& name : ckpt.floatTensors())
                QVERIFY(sameBits(ckpt.stored(name), *model.initializer(name)));
            QVERIFY(nlohmann::json::parse(ckpt.rulesJson()) == nlohmann::json::parse(rules.toJson()));
        }
    }

    void halfFloatModelsKeepTheirDTypes()
    {
        // bfloat16 and float16 weights quantize from their own values; untouched
        // half tensors are stored with their dtype, in both containers.
        const fs::path folder = root() / "half";
        fs::create_directories(folder);
        writeSafetensors(folder / "half.safetensors",
                         {{"h.weight", halfTensor(DType::BF16, {16, 32}, 11), ""},
                          {"c.weight", halfTensor(DType::F16, {8, 4, 3, 3}, 12), ""},
                          {"h.bias", halfTensor(DType::F16, {16, 1}, 13).reshaped({16}), ""},
                          {"c.bias", halfTensor(DType::BF16, {8, 1}, 14).reshaped({8}), ""}});
        const Model model = loadModel(folder / "half.safetensors");
        const RuleSet rules = RuleSet::fromJson(R"({"version": 1, "rules": [
            {"module_path": "h", "weight_qtype": "int4", "tile_size": 8},
            {"module_path": "c", "weight_qtype": "uint8", "weight_calibration": "minmax", "tile_size": 2}]})");
        const QuantizationPlan plan = QuantizationPlan::build(model, rules);
        WeightQuantizer weights;
        weights.update(model, plan);
        QCOMPARE(weights.weights().size(), size_t(2));
        for (const char* file : {"half_q.safetensors", "half_q.h5"}) {
            const QuantizedCheckpoint ckpt = readQuantizedCheckpoint(
                exportCheckpoint(model, plan, weights, rules, folder / file).path);
            for (const auto& [layer, q] : weights.weights())
                QVERIFY2(sameBits(ckpt.dequantized(model.layers[layer].weightName), q->fakeQuant), file);
            QCOMPARE(ckpt.info("h.weight").dtype, std::string("BF16"));
            QCOMPARE(ckpt.stored("c.weight.scale").shape(), (Shape{8, 2, 1, 1}));
            for (const char* name : {"h.bias", "c.bias"})
                QVERIFY2(sameBits(ckpt.stored(name), *model.initializer(name)), name);
        }
    }

    void shardedCheckpointsStream()
    {
        // Two shards and their index: every weight is read from its own shard.
        const fs::path folder = root() / "sharded";
        fs::create_directories(folder);
        writeSafetensors(folder / "model-00001-of-00002.safetensors",
                         {{"a.weight", weightTensor({16, 48}, 21), ""}, {"a.bias", weightTensor({16, 1}, 22).reshaped({16}), ""}});
        writeSafetensors(folder / "model-00002-of-00002.safetensors",
                         {{"b.weight", weightTensor({32, 16}, 23), ""}});
        {
            std::ofstream index(folder / "model.safetensors.index.json");
            index << R"({"metadata": {"total_size": 5248}, "weight_map": {"a.weight": "model-00001-of-00002.safetensors",
                "a.bias": "model-00001-of-00002.safetensors", "b.weight": "model-00002-of-00002.safetensors"}})";
        }
        const Model model = loadModel(folder / "model.safetensors.index.json");
        const RuleSet rules = RuleSet::fromJson(R"({"version": 1, "rules": [{"weight_qtype": "int4", "tile_size": 16}]})");
        const QuantizationPlan plan = QuantizationPlan::build(model, rules);
        WeightQuantizer cached;
        cached.update(model, plan);
        const fs::path out = folder / "quantized.safetensors";
        exportCheckpoint(model, plan, WeightQuantizer(), rules, out);
        const QuantizedCheckpoint ckpt = readQuantizedCheckpoint(out);
        QCOMPARE(ckpt.quantizedTensors().size(), size_t(2));
        for (const auto& [layer, q] : cached.weights())
            QVERIFY(sameBits(ckpt.dequantized(model.layers[layer].weightName), q->fakeQuant));
        QVERIFY(sameBits(ckpt.stored("a.bias"), *model.initializer("a.bias")));
    }

    void uncachedWeightsAreQuantizedTheSameWay()
    {
        // The exporter quantizes what the cache lacks itself, with the same results.
        const fs::path folder = root() / "uncached";
        fs::create_directories(folder);
        const Model model = loadModel(writeFamilyModel(folder));
        const RuleSet rules = RuleSet::fromJson(rulesText());
        const QuantizationPlan plan = QuantizationPlan::build(model, rules);
        WeightQuantizer cached, empty;
        cached.update(model, plan);
        const fs::path out = folder / "uncached.safetensors";
        exportCheckpoint(model, plan, empty, rules, out);
        const QuantizedCheckpoint ckpt = readQuantizedCheckpoint(out);
        for (const auto& [layer, q] : cached.weights())
            QVERIFY2(sameBits(ckpt.dequantized(model.layers[layer].weightName), q->fakeQuant),
                     model.layers[layer].weightName.c_str());
    }

    void writesAreAtomic()
    {
        const fs::path folder = root() / "atomic";
        fs::create_directories(folder);
        std::vector<SafetensorsTensor> tensors{{"good.weight", weightTensor({8, 16}, 3), ""},
                                               {"bad.weight", weightTensor({8, 16}, 4), ""}};
        tensors[1].tensor.mutableValues<float>()[37] = NAN;
        writeSafetensors(folder / "nan.safetensors", tensors);
        const Model model = loadModel(folder / "nan.safetensors");
        const RuleSet rules = RuleSet::fromJson(R"({"version": 1, "rules": [{"weight_qtype": "int8"}]})");
        const QuantizationPlan plan = QuantizationPlan::build(model, rules);
        WeightQuantizer weights;
        weights.update(model, plan);
        QCOMPARE(weights.problems().size(), size_t(1));

        // An existing file survives a failed export, and no temporary file is left behind.
        const fs::path out = folder / "out.safetensors";
        { std::ofstream(out) << "previous"; }
        for (const char* name : {"out.safetensors", "out.h5"}) {
            try {
                exportCheckpoint(model, plan, weights, rules, folder / name);
                QFAIL("a NaN weight was exported");
            } catch (const Error& e) {
                QVERIFY2(std::string(e.what()).find("bad.weight") != std::string::npos, e.what());
            }
        }
        std::ifstream in(out);
        std::string content;
        in >> content;
        QCOMPARE(content, std::string("previous"));
        QCOMPARE(std::distance(fs::directory_iterator(folder), fs::directory_iterator()), 2); // nan + out

        // Cancellation leaves nothing either.
        CancellationToken cancel;
        cancel.cancel();
        const RuleSet goodOnly =
            RuleSet::fromJson(R"({"version": 1, "rules": [{"module_path": "good", "weight_qtype": "int8"}]})");
        const QuantizationPlan goodPlan = QuantizationPlan::build(model, goodOnly);
        QVERIFY_THROWS_EXCEPTION(Cancelled, exportCheckpoint(model, goodPlan, weights, goodOnly,
                                                             folder / "c.safetensors", {}, cancel));
        QVERIFY_THROWS_EXCEPTION(Cancelled,
                                 exportCheckpoint(model, goodPlan, weights, goodOnly, folder / "c.h5", {}, cancel));
        QCOMPARE(std::distance(fs::directory_iterator(folder), fs::directory_iterator()), 2);
        // Cancelled while the data is being written (the temporary file exists by then).
        for (const char* name : {"late.safetensors", "late.h5"}) {
            CancellationToken late;
            bool sawData = false;
            const ProgressCallback cancelInDataPhase = [&](double f, std::string_view) {
                if (f > 0.5) {
                    sawData = true;
                    late.cancel();
                }
            };
            QVERIFY_THROWS_EXCEPTION(Cancelled, exportCheckpoint(model, goodPlan, weights, goodOnly, folder / name,
                                                                 {}, late, cancelInDataPhase));
            QVERIFY(sawData);
        }
        QCOMPARE(std::distance(fs::directory_iterator(folder), fs::directory_iterator()), 2);

        // An unknown extension is refused, naming the file.
        try {
            exportCheckpoint(model, goodPlan, weights, goodOnly, folder / "c.bin");
            QFAIL("a .bin checkpoint was written");
        } catch (const Error& e) {
            QVERIFY(std::string(e.what()).find("c.bin") != std::string::npos);
        }
        // A file without a manifest is not read as a quantized checkpoint.
        try {
            readQuantizedCheckpoint(folder / "nan.safetensors");
            QFAIL("a plain safetensors file was read as a quantized checkpoint");
        } catch (const Error& e) {
            QVERIFY(std::string(e.what()).find("no quantscope manifest") != std::string::npos);
        }
    }

    void weightsOnlyModelsStreamTensorByTensor()
    {
        // 256 MiB of float32 in 16 tensors of 16 MiB; memory must stay near one tensor.
        // QUANTSCOPE_STREAM_MIB=2048 makes it the benchmark of docs/benchmarks.md.
        const int64_t totalMiB = qEnvironmentVariableIsSet("QUANTSCOPE_STREAM_MIB")
                                     ? qEnvironmentVariableIntValue("QUANTSCOPE_STREAM_MIB")
                                     : 256;
        const int tensors = 16;
        const int64_t cols = 4096, rows = std::max<int64_t>(totalMiB * 1024 * 1024 / 4 / tensors / cols, 1);
        const int64_t tensorMiB = rows * cols * 4 / (1024 * 1024);
        const fs::path folder = root() / "stream";
        fs::create_directories(folder);
        const fs::path source = folder / "big.safetensors";
        {
            const int64_t bytes = rows * cols * 4;
            nlohmann::ordered_json header;
            for (int i = 0; i < tensors; ++i)
                header["layers." + std::to_string(i) + ".weight"] = {
                    {"dtype", "F32"}, {"shape", {rows, cols}}, {"data_offsets", {i * bytes, (i + 1) * bytes}}};
            std::string text = header.dump();
            text.append((8 - text.size() % 8) % 8, ' ');
            std::ofstream out(source, std::ios::binary);
            const uint64_t n = text.size();
            out.write(reinterpret_cast<const char*>(&n), 8);
            out << text;
            std::vector<float> row(static_cast<size_t>(cols));
            std::mt19937 rng(5);
            std::normal_distribution<float> normal(0.0f, 1.0f);
            for (float& x : row)
                x = normal(rng);
            for (int64_t r = 0; r < tensors * rows; ++r) {
                row[size_t(r % cols)] += 1.0f;
                out.write(reinterpret_cast<const char*>(row.data()), std::streamsize(cols * 4));
            }
        }
        const Model model = loadModel(source);
        const RuleSet rules = RuleSet::fromJson(R"({"version": 1, "rules": [{"weight_qtype": "int8"}]})");
        const QuantizationPlan plan = QuantizationPlan::build(model, rules);
        const WeightQuantizer empty; // what the CLI streams with: nothing cached

        // Reset the peak to the current resident size (Linux: "5" to clear_refs).
        std::ofstream("/proc/self/clear_refs") << "5";
        const int64_t before = statusKiB("VmRSS:");
        const fs::path out = folder / "big_int8.safetensors";
        QElapsedTimer timer;
        timer.start();
        const ExportSummary s = exportCheckpoint(model, plan, empty, rules, out);
        const double exportSeconds = double(timer.nsecsElapsed()) * 1e-9;
        const int64_t peak = statusKiB("VmHWM:");
        if (qEnvironmentVariableIsSet("QUANTSCOPE_STREAM_MIB")) {
            // The benchmark's baseline, in the same run: a plain copy of the same file.
            timer.restart();
            fs::copy_file(source, folder / "copy.safetensors");
            const double copySeconds = double(timer.nsecsElapsed()) * 1e-9;
            fs::remove(folder / "copy.safetensors");
            qInfo("export %.2f s (source hashed, each weight read twice), plain copy %.2f s: %.2f× the copy's time",
                  exportSeconds, copySeconds, exportSeconds / copySeconds);
        }
        QVERIFY(before > 0 && peak >= before);
        const int64_t growthMiB = (peak - before) / 1024;
        qInfo("streaming export of a %lld MiB checkpoint (16 tensors of %lld MiB): peak resident growth %lld MiB",
              static_cast<long long>(totalMiB), static_cast<long long>(tensorMiB), static_cast<long long>(growthMiB));
        QCOMPARE(s.quantizedWeights, int64_t(16));
        // One tensor read and its codes (measured: 21 MiB for 16 MiB tensors), far below the file.
        QVERIFY2(growthMiB < 4 * tensorMiB, qPrintable(QString("peak grew by %1 MiB").arg(growthMiB)));
        QVERIFY(fs::file_size(out) < fs::file_size(source) / 3);
        // Spot-check one tensor against the weight quantizer.
        const QuantizedCheckpoint ckpt = readQuantizedCheckpoint(out);
        const LayerQuantization& lq = plan.layers().at(7);
        const QuantizedWeight q = WeightQuantizer::quantize(model, lq);
        QVERIFY(sameBits(ckpt.dequantized(model.layers[lq.layer].weightName), q.fakeQuant));
        fs::remove(source);
        fs::remove(out);
    }
};

QTEST_APPLESS_MAIN(TestExportCheckpoint)
#include "tst_export_checkpoint.moc"
