#pragma once
// The models tst_export_onnx and tst_export_onnx_ort export as QDQ: each case is
// a float ONNX model, a rule set and data; exportCase() quantizes it the way the
// app does (plan, weight cache, calibration), writes the QDQ model, and runs
// the fake-quant simulation (QuantizationHook) and the float model on the same
// batch, which the tests compare every runtime's run of the QDQ model against.

#include <QTemporaryDir>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "../test_support.h"
#include "core/error.h"
#include "export/onnx_qdq.h"
#include "io/data_source.h"
#include "io/onnx_loader.h"
#include "rules/ruleset.h"
#include "runtime/activation_calibration.h"
#include "runtime/interpreter.h"
#include "runtime/quantization_hook.h"
#include "quantization/weight_quantizer.h"

namespace qs::test {

inline const std::string kDemoDir = QUANTSCOPE_TEST_DATA "/../../resources/demo/digits/";
inline const QString kExportScripts = QStringLiteral(QUANTSCOPE_TEST_DATA "/../export_onnx/");

struct ExportCase {
    std::string name;
    std::filesystem::path model;
    std::string rules;          // the "rules" array of a rule file
    std::filesystem::path data; // npz: calibration and the compared batch
    int64_t rows = 64;          // rows of the compared batch
};

struct ExportedCase {
    Model model;
    QuantizationPlan plan;
    WeightQuantizer weights;
    std::map<size_t, StaticActivation> activations;
    OnnxExportSummary summary;
    std::filesystem::path out;
    std::map<std::string, Tensor> inputs;
    std::map<std::string, Tensor> simulated; // QuantizationHook run of the float model
    std::map<std::string, Tensor> floatRun;
};

// The float models of tests/export_onnx/make_models.py, generated into `dir`.
inline std::vector<ExportCase> exportCases(const std::filesystem::path& dir)
{
    if (!runPython(kExportScripts + "make_models.py", {QString::fromStdString(dir.string())}))
        throw Error("tests/export_onnx/make_models.py failed");
    const std::string demo = kDemoDir + "digits_cnn.onnx";
    const std::string all = "[{\"weight_qtype\": \"int8\", \"act_qtype\": \"int8\", \"act_static_scale\": true}]";
    return {
        {"demo_w8a8_static", demo, all, kDemoDir + "digits_calib.npz", 64},
        {"demo_w8_weight_only", demo, "[{\"weight_qtype\": \"int8\"}]", kDemoDir + "digits_calib.npz", 64},
        {"demo_u8_minmax_a8", demo,
         "[{\"weight_qtype\": \"uint8\", \"weight_calibration\": \"minmax\", \"act_qtype\": \"uint8\", "
         "\"act_calibration\": \"minmax\", \"act_static_scale\": true}]",
         kDemoDir + "digits_calib.npz", 64},
        {"mlp_int4_block32", dir / "matmul_mlp.onnx", "[{\"weight_qtype\": \"int4\", \"tile_size\": 32}]",
         dir / "matmul_mlp_inputs.npz", 16},
        {"mlp_w8a8_external_data", dir / "matmul_mlp.onnx", all, dir / "matmul_mlp_inputs.npz", 16},
        {"resnet_like_w8a8_static", dir / "resnet_like.onnx",
         "[{\"weight_qtype\": \"int8\", \"act_qtype\": \"uint8\", \"act_calibration\": \"minmax\", "
         "\"act_static_scale\": true}]",
         dir / "resnet_like_inputs.npz", 16},
        // int4 per channel needs opset 21: the demo's opset 13 is raised (libonnx's converter, then 17 → 21).
        {"demo_int4_per_channel_opset21", demo, "[{\"weight_qtype\": \"int4\"}]", kDemoDir + "digits_calib.npz", 64},
        // fp8 weights: float8 DequantizeLinear at opset 19 (our loader widens the float8 codes to float32).
        {"demo_fp8_e4m3_weights", demo, "[{\"weight_qtype\": \"fp8_e4m3\"}]", kDemoDir + "digits_calib.npz", 64},
    };
}

// exportCases() in a test's temporary folder; with QUANTSCOPE_KEEP_EXPORTS set
// the folder is kept (and named) so the exported models can be looked at afterwards.
inline std::vector<ExportCase> exportCasesIn(QTemporaryDir& dir)
{
    if (qEnvironmentVariableIsSet("QUANTSCOPE_KEEP_EXPORTS")) {
        dir.setAutoRemove(false);
        qInfo("exports in %s", qPrintable(dir.path()));
    }
    return exportCases(dir.path().toStdString());
}

inline std::map<std::string, Tensor> firstBatch(const std::filesystem::path& data, int64_t rows, const Model& model)
{
    auto source = openDataSource(data, {.batchSize = rows}, &model);
    auto batch = source->next();
    if (!batch)
        throw Error(data.string() + ": no rows");
    return batch->inputs;
}

inline ExportedCase exportCase(const ExportCase& c, const std::filesystem::path& dir,
                               const OnnxExportOptions& options = {})
{
    ExportedCase e;
    e.model = loadOnnx(c.model);
    e.plan = QuantizationPlan::build(e.model, RuleSet::fromJson("{\"version\": 1, \"rules\":" + c.rules + "}"));
    e.weights.update(e.model, e.plan);
    if (!e.weights.problems().empty())
        throw Error(c.name + ": " + e.weights.problems().begin()->second);
    const Interpreter interpreter(e.model);
    auto calib = openDataSource(c.data, {.batchSize = 32}, &e.model);
    const ActivationStatistics stats = calibrateActivations(interpreter, e.plan, *calib);
    e.activations = staticActivations(e.plan, stats);
    e.out = dir / (c.name + ".onnx");
    e.summary = exportOnnxQdq(e.model, e.plan, e.weights, e.activations, e.out, options);
    e.inputs = firstBatch(c.data, c.rows, e.model);
    QuantizationHook hook(e.model, e.plan, e.weights, e.activations);
    RunOptions run;
    run.observer = &hook;
    e.simulated = interpreter.run(e.inputs, run);
    e.floatRun = interpreter.run(e.inputs);
    return e;
}

// Largest |a − b| over `reference`'s largest magnitude.
inline double relativeMaxError(const Tensor& a, const Tensor& reference)
{
    const auto x = a.values<float>(), r = reference.values<float>();
    double diff = 0, scale = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        diff = std::max(diff, std::abs(double(x[i]) - double(r[i])));
        scale = std::max(scale, std::abs(double(r[i])));
    }
    return scale > 0 ? diff / scale : diff;
}

// Signal-to-quantization-noise ratio of `a` against `reference`, in dB.
inline double sqnrDb(const Tensor& a, const Tensor& reference)
{
    const auto x = a.values<float>(), r = reference.values<float>();
    double signal = 0, noise = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        signal += double(r[i]) * r[i];
        noise += (double(x[i]) - r[i]) * (double(x[i]) - r[i]);
    }
    return noise == 0 ? INFINITY : 10 * std::log10(signal / noise);
}

} // namespace qs::test
