// ODML annotations (export/odml.h) on the demo CNN: every value the integer
// model holds gets a quantization point with the scheme's parameters (int8
// per-channel narrow-range weights, per-tensor minmax activations, int32 biases
// at input × weight scale, Relu fused into the layer before it, pass-through ops
// sharing their input's scale, fixed output scales of Sigmoid/Softmax/Tanh),
// fixed ranges for inputs, and strict mode naming every node it cannot quantize.
#include <QtTest>

#include <cmath>
#include <fstream>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model_support.h"
#include "export/odml.h"
#include "graph/weight_layout.h"
#include "io/data_source.h"
#include "io/model_loader.h"
#include "io/npz.h"
#include "rules/ruleset.h"

using namespace qs;
namespace fs = std::filesystem;

namespace {

const std::string kDemoDir = QUANTSCOPE_TEST_DATA "/../../resources/demo/digits/";
const char* kAllInt8 =
    R"({"version": 1, "rules": [{"weight_qtype": "int8", "act_qtype": "int8", "act_static_scale": true}]})";

nlohmann::json readJson(const fs::path& p)
{
    std::ifstream in(p);
    return nlohmann::json::parse(in);
}

const nlohmann::json* findPoint(const nlohmann::json& doc, const std::string& tensor)
{
    for (const nlohmann::json& p : doc.at("quantization_points"))
        if (p.at("tensor") == tensor)
            return &p;
    return nullptr;
}

std::string errorOf(const std::function<void()>& f)
{
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return {};
}

} // namespace

class TestExportOdml : public QObject {
    Q_OBJECT
private:
    QTemporaryDir dir_;
    Model demo_;
    fs::path out(const char* name) const { return fs::path(dir_.path().toStdString()) / name; }

    nlohmann::json exportDemo(const Model& model, const char* rulesJson, const OdmlOptions& options,
                              const char* file, int64_t batchSize = 64)
    {
        const QuantizationPlan plan = QuantizationPlan::build(model, RuleSet::fromJson(rulesJson), QuantizationMode::Odml);
        WeightQuantizer weights;
        weights.update(model, plan);
        const Interpreter interpreter(model);
        auto data = openDataSource(kDemoDir + "digits_calib.npz", {.batchSize = batchSize}, &model);
        const OdmlSummary s = exportOdml(interpreter, plan, weights, *data, options, out(file));
        if (s.batches != data->batchCount())
            throw Error("not every calibration batch ran");
        return readJson(out(file));
    }

private slots:
    void initTestCase() { demo_ = loadModel(kDemoDir + "digits_cnn.onnx"); }

    void everyValueGetsTheSchemesParameters()
    {
        const nlohmann::json doc = exportDemo(demo_, kAllInt8, {}, "digits.json");
        QCOMPARE(doc.at("format"), "quantscope-odml");
        QCOMPARE(doc.at("ops").size(), demo_.nodes.size());
        // Every node output and the input are activation points, except the outputs of
        // the layers a Relu is fused into (never materialised by LiteRT).
        std::set<std::string> fusedInto;
        for (const nlohmann::json& op : doc.at("ops"))
            if (op.at("scheme") == "fused")
                fusedInto.insert(op.at("fused_into").get<std::string>());
        QCOMPARE(fusedInto, (std::set<std::string>{"/features/conv1/Conv", "/features/conv2/Conv",
                                                   "/features/conv3/Conv", "/classifier/fc1/Gemm"}));
        for (const Node& n : demo_.nodes)
            for (const std::string& o : n.outputs)
                if (fusedInto.contains(n.name))
                    QVERIFY2(!findPoint(doc, o), o.c_str());
                else
                    QVERIFY2(findPoint(doc, o) && findPoint(doc, o)->at("kind") == "activation", o.c_str());
        QVERIFY(findPoint(doc, "input"));

        for (const QuantizableLayer& layer : demo_.layers) {
            // Weights: per channel along the channel axis, absmax / 127, zero points 0, narrow range.
            const nlohmann::json& w = *findPoint(doc, layer.weightName);
            QCOMPARE(w.at("dtype"), "i8");
            QCOMPARE(w.at("narrow_range"), true);
            QCOMPARE(w.at("quantization_dimension"), layer.channelAxis);
            const Tensor weight = demo_.initializer(layer.weightName)->toFloat32();
            const int64_t channels = layer.weightShape[size_t(layer.channelAxis)];
            const int64_t per = weight.numel() / channels;
            QCOMPARE(int64_t(w.at("scale").size()), channels);
            for (int64_t c = 0; c < channels; ++c) {
                float absmax = 0;
                for (int64_t j = 0; j < per; ++j)
                    absmax = std::max(absmax, std::fabs(weight.values<float>()[size_t(c * per + j)]));
                QCOMPARE(w.at("scale")[size_t(c)].get<float>(), absmax / 127.0f);
                QCOMPARE(w.at("zero_point")[size_t(c)].get<int64_t>(), int64_t(0));
            }
            // Bias: int32, scale = input scale × weight scale per channel.
            const Node& node = demo_.nodes[*layer.node];
            const nlohmann::json& b = *findPoint(doc, node.inputs[2]);
            QCOMPARE(b.at("dtype"), "i32");
            const nlohmann::json& in = *findPoint(doc, node.inputs[0]);
            const float inputScale = in.at("scale")[0].get<float>();
            for (int64_t c = 0; c < channels; ++c)
                QCOMPARE(b.at("scale")[size_t(c)].get<float>(), inputScale * w.at("scale")[size_t(c)].get<float>());
        }

        // A fused Relu's output has its own range, all of it >= 0 (zero point -128);
        // pass-through ops share their input's parameters.
        const nlohmann::json& relu1 = *findPoint(doc, "/features/relu1/Relu_output_0");
        QVERIFY(!relu1.contains("shares_scale_with"));
        QCOMPARE(relu1.at("zero_point")[0].get<int64_t>(), int64_t(-128));
        const nlohmann::json& pool = *findPoint(doc, "/features/pool/MaxPool_output_0");
        QCOMPARE(pool.at("shares_scale_with"), "/features/relu2/Relu_output_0");
        QCOMPARE(pool.at("scale"), findPoint(doc, "/features/relu2/Relu_output_0")->at("scale"));
        const nlohmann::json& flat = *findPoint(doc, "/classifier/flatten/Flatten_output_0");
        QCOMPARE(flat.at("shares_scale_with"), "/features/relu3/Relu_output_0");

        // The input's range: per-sample min and max averaged over each batch, then over
        // batches (minmax), widened to 0; asymmetric int8.
        auto data = openDataSource(kDemoDir + "digits_calib.npz", {.batchSize = 64}, &demo_);
        double sumMin = 0, sumMax = 0;
        int batches = 0;
        while (auto batch = data->next()) {
            const Tensor x = batch->inputs.at("input");
            const int64_t per = x.numel() / batch->rows;
            double bmin = 0, bmax = 0;
            for (int64_t r = 0; r < batch->rows; ++r) {
                float lo = INFINITY, hi = -INFINITY;
                for (int64_t j = 0; j < per; ++j)
                    lo = std::min(lo, x.values<float>()[size_t(r * per + j)]),
                    hi = std::max(hi, x.values<float>()[size_t(r * per + j)]);
                bmin += lo, bmax += hi;
            }
            sumMin += bmin / double(batch->rows), sumMax += bmax / double(batch->rows);
            ++batches;
        }
        const double lo = std::min(0.0, sumMin / batches), hi = std::max(0.0, sumMax / batches);
        const nlohmann::json& input = *findPoint(doc, "input");
        const double scale = (hi - lo) / 255.0;
        QVERIFY(std::fabs(input.at("scale")[0].get<double>() - scale) <= 1e-5 * scale);
        QCOMPARE(input.at("zero_point")[0].get<int64_t>(), int64_t(std::nearbyint(-128.0 - lo / scale)));
        QCOMPARE(input.at("narrow_range"), false);
    }

    void fixedRangesOverrideCalibration()
    {
        OdmlOptions options;
        options.fixedRanges["input"] = {-1.0f, 3.0f};
        options.fixedRanges["logits"] = {-20.0f, 20.0f};
        const nlohmann::json doc = exportDemo(demo_, kAllInt8, options, "fixed.json");
        const nlohmann::json& input = *findPoint(doc, "input");
        QCOMPARE(input.at("scale")[0].get<float>(), 4.0f / 255.0f);
        QCOMPARE(input.at("zero_point")[0].get<int64_t>(), int64_t(-64)); // round(-128 + 1 / (4/255)) = -64
        QCOMPARE(findPoint(doc, "logits")->at("scale")[0].get<float>(), 40.0f / 255.0f);
        OdmlOptions bad;
        bad.fixedRanges["features.conv1.weight"] = {0, 1};
        QVERIFY(errorOf([&] { exportDemo(demo_, kAllInt8, bad, "bad.json"); }).find("not an input or output") !=
                std::string::npos);
    }

    void fixedOutputScales()
    {
        // LiteRT's LOGISTIC and SOFTMAX fix their output at scale 1/256, zero point -128;
        // TANH at 1/128, 0: not calibrated.
        Model model = demo_;
        auto add = [&](const char* op, const std::string& in, const std::string& out) {
            Node n;
            n.name = std::string("/head/") + op;
            n.opType = op;
            n.inputs = {in};
            n.outputs = {out};
            model.nodes.push_back(n);
        };
        add("Sigmoid", "logits", "gate");
        add("Tanh", "gate", "squashed");
        add("Softmax", "squashed", "probabilities");
        model.outputs = {ValueInfo{"probabilities", DType::F32, "float32", std::nullopt}};
        const nlohmann::json doc = exportDemo(model, kAllInt8, {}, "fixed_scales.json");
        const std::vector<std::tuple<const char*, float, int64_t>> expected = {
            {"gate", 1.0f / 256.0f, -128}, {"squashed", 1.0f / 128.0f, 0}, {"probabilities", 1.0f / 256.0f, -128}};
        for (const auto& [tensor, scale, zero] : expected) {
            const nlohmann::json& p = *findPoint(doc, tensor);
            QCOMPARE(p.at("scale")[0].get<float>(), scale);
            QCOMPARE(p.at("zero_point")[0].get<int64_t>(), zero);
            QCOMPARE(p.at("fixed_by_kernel"), true);
        }
        QCOMPARE(doc.at("ops").back().at("scheme"), "fixed_scale");
    }

    void clipAsRelu6IsFusedOtherClipsPassThrough()
    {
        // conv1 -> Clip(0, 6) is fused as RELU6; a Clip(-3, 3) after a MaxPool shares its input's scale.
        Model model = demo_;
        model.addInitializer("zero", Tensor::fromVector(DType::F32, {}, std::vector<float>{0}));
        model.addInitializer("six", Tensor::fromVector(DType::F32, {}, std::vector<float>{6}));
        model.addInitializer("minus3", Tensor::fromVector(DType::F32, {}, std::vector<float>{-3}));
        model.addInitializer("three", Tensor::fromVector(DType::F32, {}, std::vector<float>{3}));
        for (Node& n : model.nodes) {
            if (n.name == "/features/relu1/Relu")
                n.opType = "Clip", n.inputs = {n.inputs[0], "zero", "six"};
            if (n.name == "/features/conv3/Conv")
                n.inputs[0] = "clipped";
        }
        Node clip;
        clip.name = "/features/clip";
        clip.opType = "Clip";
        clip.inputs = {"/features/pool/MaxPool_output_0", "minus3", "three"};
        clip.outputs = {"clipped"};
        for (size_t i = 0; i < model.nodes.size(); ++i)
            if (model.nodes[i].name == "/features/conv3/Conv") {
                model.nodes.insert(model.nodes.begin() + long(i), clip);
                break;
            }
        model.layers = findGraphLayers(model);
        const nlohmann::json doc = exportDemo(model, kAllInt8, {}, "clip.json");
        std::map<std::string, nlohmann::json> ops;
        for (const nlohmann::json& op : doc.at("ops"))
            ops[op.at("node")] = op;
        QCOMPARE(ops.at("/features/relu1/Relu").at("scheme"), "fused");
        QCOMPARE(ops.at("/features/relu1/Relu").at("activation"), "RELU6");
        QCOMPARE(ops.at("/features/clip").at("scheme"), "pass_through");
        QCOMPARE(findPoint(doc, "clipped")->at("shares_scale_with"), "/features/relu2/Relu_output_0");
        QVERIFY(!findPoint(doc, "six") && !findPoint(doc, "three")); // bounds are parameters, not operands
    }

    void strictModeNamesWhatCannotBeQuantized()
    {
        // Ops outside the table: every one is named, in one error.
        Model unsupported = demo_;
        auto add = [&](const char* name, const char* op, const std::string& in, const std::string& out) {
            Node n;
            n.name = name;
            n.opType = op;
            n.inputs = {in};
            n.outputs = {out};
            unsupported.nodes.push_back(n);
        };
        add("/head/Erf", "Erf", "logits", "e");
        add("/head/Sin", "Sin", "e", "s");
        add("/head/Softmax", "Softmax", "s", "probabilities");
        unsupported.outputs = {ValueInfo{"probabilities", DType::F32, "float32", std::nullopt}};
        std::string why = errorOf([&] { exportDemo(unsupported, kAllInt8, {}, "unsupported.json"); });
        QVERIFY2(why.find("2 nodes cannot be") != std::string::npos, why.c_str());
        QVERIFY2(why.find("node '/head/Erf' (Erf)") != std::string::npos, why.c_str());
        QVERIFY2(why.find("node '/head/Sin' (Sin)") != std::string::npos, why.c_str());
        QVERIFY2(why.find("Softmax") == std::string::npos, why.c_str());
        QVERIFY2(why.find("Replace or remove") != std::string::npos, why.c_str());
        // A layer no rule quantizes.
        why = errorOf([&] {
            exportDemo(demo_,
                       R"({"version": 1, "rules": [{"module_path": "features/.*", "weight_qtype": "int8",
                           "act_qtype": "int8"}]})",
                       {}, "partial.json");
        });
        QVERIFY2(why.find("/classifier/fc1/Gemm") != std::string::npos, why.c_str());
        QVERIFY2(why.find("/classifier/fc2/Gemm") != std::string::npos, why.c_str()); // all of them, not the first
        // Not int8, or tiled.
        why = errorOf([&] {
            exportDemo(demo_, R"({"version": 1, "rules": [{"weight_qtype": "int4", "act_qtype": "int8"}]})", {},
                       "int4.json");
        });
        QVERIFY2(why.find("int8") != std::string::npos, why.c_str());
        // A PTQ plan is refused.
        const QuantizationPlan ptq = QuantizationPlan::build(demo_, RuleSet::fromJson(kAllInt8));
        const Interpreter interpreter(demo_);
        auto data = openDataSource(kDemoDir + "digits_calib.npz", {.batchSize = 64}, &demo_);
        why = errorOf([&] { exportOdml(interpreter, ptq, WeightQuantizer(), *data, {}, out("ptq.json")); });
        QVERIFY2(why.find("odml mode") != std::string::npos, why.c_str());
        QVERIFY(!fs::exists(out("unsupported.json")) && !fs::exists(out("partial.json")) && !fs::exists(out("ptq.json")));
    }

    void ownScaleOpsAndConstants()
    {
        // logits + a constant: the Add's output gets its own range, the constant a per-tensor point.
        Model model = demo_;
        model.addInitializer("shift", Tensor::fromVector(DType::F32, {10}, std::vector<float>{-2, -1, 0, 1, 2, 3, 4, 5, 6, 7}));
        Node add;
        add.name = "/head/Add";
        add.opType = "Add";
        add.inputs = {"logits", "shift"};
        add.outputs = {"shifted"};
        model.nodes.push_back(add);
        model.outputs = {ValueInfo{"shifted", DType::F32, "float32", std::nullopt}};
        const nlohmann::json doc = exportDemo(model, kAllInt8, {}, "add.json");
        const nlohmann::json& shifted = *findPoint(doc, "shifted");
        QVERIFY(!shifted.contains("shares_scale_with"));
        QVERIFY(shifted.at("scale") != findPoint(doc, "logits")->at("scale"));
        const nlohmann::json& shift = *findPoint(doc, "shift");
        QCOMPARE(shift.at("kind"), "constant");
        QCOMPARE(shift.at("scale")[0].get<float>(), 9.0f / 255.0f); // [-2, 7]
        QCOMPARE(shift.at("zero_point")[0].get<int64_t>(), int64_t(std::nearbyint(-128.0 + 2.0 / (9.0 / 255.0))));
        QCOMPARE(doc.at("ops").back().at("scheme"), "own_scale");
    }

    void embeddingOfTokenIdsIsAnActivation()
    {
        // ids (int64) -> Gather(table) -> ReduceMean: the embedding is a layer and its
        // output an int8 activation although no float graph input feeds it; the shape
        // arithmetic beside it (Shape -> Gather) is not quantized.
        Model model;
        model.sourcePath = "embedding.onnx";
        model.format = "onnx";
        model.opsetImports[""] = 13;
        model.inputs = {ValueInfo{"ids", DType::I64, "int64", std::vector<Dim>{Dim::named("N"), Dim::fixed(4)}}};
        model.outputs = {ValueInfo{"pooled", DType::F32, "float32", std::nullopt},
                         ValueInfo{"length", DType::I64, "int64", std::nullopt}};
        std::vector<float> table(10 * 6);
        for (size_t i = 0; i < table.size(); ++i)
            table[i] = float(i % 7) - 3.0f;
        model.addInitializer("table", Tensor::fromVector(DType::F32, {10, 6}, table));
        model.addInitializer("one", Tensor::fromVector(DType::I64, {1}, std::vector<int64_t>{1}));
        auto node = [&](const char* name, const char* op, std::vector<std::string> in, std::string out) {
            Node n;
            n.name = name;
            n.opType = op;
            n.inputs = std::move(in);
            n.outputs = {std::move(out)};
            model.nodes.push_back(n);
        };
        node("/embed/Gather", "Gather", {"table", "ids"}, "embedded");
        node("/pool/ReduceMean", "ReduceMean", {"embedded"}, "pooled");
        node("/Shape", "Shape", {"ids"}, "shape");
        node("/length/Gather", "Gather", {"shape", "one"}, "length");
        Attribute axes;
        axes.name = "axes";
        axes.kind = Attribute::Kind::Ints;
        axes.ints = {1};
        model.nodes[1].attributes.push_back(axes);
        model.layers = findGraphLayers(model);
        QCOMPARE(int(model.layers.size()), 1);

        std::vector<int64_t> ids(8 * 4);
        for (size_t i = 0; i < ids.size(); ++i)
            ids[i] = int64_t(i % 10);
        const fs::path calib = out("ids.npz");
        writeNpz(calib, {{"ids", Tensor::fromVector(DType::I64, {8, 4}, ids)}});
        const QuantizationPlan plan = QuantizationPlan::build(model, RuleSet::fromJson(kAllInt8), QuantizationMode::Odml);
        WeightQuantizer weights;
        weights.update(model, plan);
        const Interpreter interpreter(model);
        auto data = openDataSource(calib, {.batchSize = 4}, &model);
        try {
            exportOdml(interpreter, plan, weights, *data, {}, out("embedding.json"));
        } catch (const Error& e) {
            QFAIL(e.what());
        }
        const nlohmann::json doc = readJson(out("embedding.json"));
        QCOMPARE(findPoint(doc, "table")->at("kind"), "weight");
        QCOMPARE(findPoint(doc, "embedded")->at("kind"), "activation");
        QCOMPARE(findPoint(doc, "pooled")->at("kind"), "activation");
        QVERIFY(!findPoint(doc, "ids") && !findPoint(doc, "shape") && !findPoint(doc, "length"));
        std::map<std::string, std::string> schemes;
        for (const nlohmann::json& op : doc.at("ops"))
            schemes[op.at("node")] = op.at("scheme");
        QCOMPARE(schemes.at("/embed/Gather"), "layer");
        QCOMPARE(schemes.at("/pool/ReduceMean"), "own_scale");
        QCOMPARE(schemes.at("/Shape"), "not_quantized");
        QCOMPARE(schemes.at("/length/Gather"), "not_quantized");
    }

    void zeroOrNonFiniteScalesNameTheTensor()
    {
        // Tiny weights and a tiny fixed input range: the bias scale underflows to 0.
        Tensor w = demo_.initializer("features.conv1.weight")->clone();
        for (float& x : w.mutableValues<float>())
            x *= 1e-37f;
        const Model copy = test::withInitializers(demo_, {{"features.conv1.weight", w}});
        OdmlOptions options;
        options.fixedRanges["input"] = {0.0f, 1e-30f};
        const std::string why = errorOf([&] { exportDemo(copy, kAllInt8, options, "tiny.json"); });
        QVERIFY2(why.find("features.conv1.bias") != std::string::npos, why.c_str());
        QVERIFY(!fs::exists(out("tiny.json")));
    }
};

QTEST_APPLESS_MAIN(TestExportOdml)
#include "tst_export_odml.moc"
