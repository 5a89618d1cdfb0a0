// ODML annotations (export/odml.h) on the demo CNN: every value the integer
// model holds gets a quantization point with the scheme's parameters (int8
// per-channel narrow-range weights, per-tensor minmax activations, int32 biases
// at input × weight scale, pass-through ops sharing their input's scale), fixed
// ranges for inputs, and strict mode naming what cannot be quantized.
#include <QtTest>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model_support.h"
#include "export/odml.h"
#include "io/data_source.h"
#include "io/model_loader.h"
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
        // Every node output and the input are activation points.
        for (const Node& n : demo_.nodes)
            for (const std::string& o : n.outputs)
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

        // Pass-through ops share their input's parameters; layers get their own.
        const nlohmann::json& conv1 = *findPoint(doc, "/features/conv1/Conv_output_0");
        const nlohmann::json& relu1 = *findPoint(doc, "/features/relu1/Relu_output_0");
        QCOMPARE(relu1.at("scale"), conv1.at("scale"));
        QCOMPARE(relu1.at("zero_point"), conv1.at("zero_point"));
        QCOMPARE(relu1.at("shares_scale_with"), "/features/conv1/Conv_output_0");
        const nlohmann::json& flat = *findPoint(doc, "/classifier/flatten/Flatten_output_0");
        QCOMPARE(flat.at("shares_scale_with"), "/features/conv3/Conv_output_0");

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

    void strictModeNamesWhatCannotBeQuantized()
    {
        // An op outside the table.
        Model withSoftmax = demo_;
        Node softmax;
        softmax.name = "/head/Softmax";
        softmax.opType = "Softmax";
        softmax.inputs = {"logits"};
        softmax.outputs = {"probabilities"};
        withSoftmax.nodes.push_back(softmax);
        withSoftmax.outputs = {ValueInfo{"probabilities", DType::F32, "float32", std::nullopt}};
        std::string why = errorOf([&] { exportDemo(withSoftmax, kAllInt8, {}, "softmax.json"); });
        QVERIFY2(why.find("/head/Softmax") != std::string::npos && why.find("Softmax") != std::string::npos,
                 why.c_str());
        // A layer no rule quantizes.
        why = errorOf([&] {
            exportDemo(demo_,
                       R"({"version": 1, "rules": [{"module_path": "features/.*", "weight_qtype": "int8",
                           "act_qtype": "int8"}]})",
                       {}, "partial.json");
        });
        QVERIFY2(why.find("/classifier/fc1/Gemm") != std::string::npos, why.c_str());
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
        QVERIFY(!fs::exists(out("softmax.json")) && !fs::exists(out("partial.json")) && !fs::exists(out("ptq.json")));
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
