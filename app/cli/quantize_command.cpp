// quantscope-cli quantize: a model quantized by a rule file — weights,
// calibrated activations, evaluation against float, sensitivity, exports — as
// a table on stdout and, with --report, as JSON.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/input_shapes.h"
#include "cli/model_quantization.h"
#include "cli/quantize_report.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "export/checkpoint.h"
#include "export/gguf.h"
#include "export/odml.h"
#include "export/onnx_qdq.h"
#include "export/tflite.h"
#include "session/evaluation.h"
#include "session/rule_search.h"
#include "session/session_file.h"

namespace qs::cli {
namespace {

// Writes what the --export-* options ask for; returns what each wrote, for the report.
nlohmann::json runExports(const Arguments& args, const Exploration& q, const ModelQuantizationOptions& options)
{
    nlohmann::json exports = nlohmann::json::object();
    const Model& model = q.model();
    if (const auto out = args.value("--export-checkpoint")) {
        if (!checkpointFormatForPath(*out))
            throw Error("--export-checkpoint " + *out + ": the file name must end in .safetensors, .h5 or .hdf5");
        const ExportSummary s =
            exportCheckpoint(model, *q.plan(), *q.weights(), q.rules(), *out, {}, {}, terminalProgress());
        exports["checkpoint"] = {{"path", s.path.string()},
                                 {"tensors", s.tensors},
                                 {"quantized_weights", s.quantizedWeights},
                                 {"float_bytes", s.floatBytes},
                                 {"quantized_bytes", s.quantizedBytes},
                                 {"ratio", s.quantizedBytes ? double(s.floatBytes) / double(s.quantizedBytes) : 0.0},
                                 {"notes", s.notes}};
    }
    if (const auto out = args.value("--export-gguf")) {
        const ExportSummary s = exportGguf(model, *q.plan(), *out, {}, terminalProgress());
        exports["gguf"] = {{"path", s.path.string()},
                           {"tensors", s.tensors},
                           {"quantized_weights", s.quantizedWeights},
                           {"float_bytes", s.floatBytes},
                           {"quantized_bytes", s.quantizedBytes},
                           {"ratio", s.quantizedBytes ? double(s.floatBytes) / double(s.quantizedBytes) : 0.0}};
    }
    if (const auto out = args.value("--export-onnx")) {
        if (model.format != "onnx")
            throw Error("--export-onnx: " + options.modelFile.string() + " is a " + model.format +
                        " model; a QDQ model is written from an ONNX model");
        const std::map<size_t, StaticActivation> statics =
            requiredStaticActivations(model, *q.plan(), q.statistics().get());
        OnnxExportOptions onnxOptions;
        if (const auto form = args.value("--onnx-eight-bit"))
            onnxOptions.eightBitForm = *parseEightBitForm(*form); // the parser checked the name
        if (const auto form = args.value("--onnx-int4"))
            onnxOptions.int4Form = *parseInt4Form(*form);
        const OnnxExportSummary s = exportOnnxQdq(model, *q.plan(), *q.weights(), statics, *out, onnxOptions);
        nlohmann::json passes = nlohmann::json::array();
        for (const PassReport& p : s.passes)
            passes.push_back({{"pass", p.pass}, {"changes", p.changes}});
        exports["onnx"] = {{"path", *out},
                           {"opset", s.opset},
                           {"ir_version", s.irVersion},
                           {"passes", passes},
                           {"dynamic_activations", s.dynamicActivations},
                           {"float_bytes", s.floatBytes},
                           {"quantized_bytes", s.quantizedBytes},
                           {"ratio", s.quantizedBytes ? double(s.floatBytes) / double(s.quantizedBytes) : 0.0},
                           {"checked", s.checked},
                           {"eight_bit_form", eightBitFormName(s.eightBitForm)},
                           {"eight_bit_reason", eightBitFormReason(s.eightBitForm)},
                           {"signed_eight_bit", s.signedEightBit},
                           {"int4_form", int4FormName(s.int4Form)},
                           {"matmul_nbits", s.matMulNBits},
                           {"warnings", s.warnings}};
    }
    if (const auto out = args.value("--export-odml")) {
        if (q.mode() != QuantizationMode::Odml)
            throw UsageError("--export-odml needs --mode odml");
        if (!options.calibFile)
            throw UsageError("--export-odml needs --calib DATA");
        std::vector<ExplorationWarning> dataWarnings;
        const std::unique_ptr<DataSource> calib = q.snapshot().openData(
            fileData(*options.calibFile, options.maxBatches, options.sequenceLength), &dataWarnings);
        printWarnings(dataWarnings);
        OdmlOptions odml;
        odml.maxBatches = options.maxBatches;
        const OdmlSummary s =
            exportOdml(*q.interpreter(), *q.plan(), *q.weights(), *calib, odml, *out, {}, terminalProgress());
        nlohmann::json folded = nlohmann::json::array(), decomposed = nlohmann::json::array(),
                       kept = nlohmann::json::array();
        const BatchNormFolding& batchNorms = q.loaded().batchNorms;
        for (const FoldedBatchNorm& f : batchNorms.folded)
            folded.push_back({{"node", f.batchNorm}, {"into", f.into}});
        for (const FoldedBatchNorm& f : batchNorms.decomposed)
            decomposed.push_back(f.batchNorm);
        for (const KeptBatchNorm& k : batchNorms.kept)
            kept.push_back({{"node", k.batchNorm}, {"reason", k.reason}});
        exports["odml"] = {{"path", s.path.string()},
                           {"activations", s.activations},
                           {"weights", s.weights},
                           {"biases", s.biases},
                           {"constants", s.constants},
                           {"ops", s.ops},
                           {"ops_by_scheme", s.opsByScheme},
                           {"batch_norms", {{"folded", folded}, {"decomposed", decomposed}, {"kept", kept}}},
                           {"batches", s.batches}};
    }
    if (const auto out = args.value("--export-tflite")) {
        if (q.mode() != QuantizationMode::Odml)
            throw UsageError("--export-tflite needs --mode odml");
        if (!options.calibFile)
            throw UsageError("--export-tflite needs --calib DATA");
        std::vector<ExplorationWarning> dataWarnings;
        const std::unique_ptr<DataSource> calib = q.snapshot().openData(
            fileData(*options.calibFile, options.maxBatches, options.sequenceLength), &dataWarnings);
        printWarnings(dataWarnings);
        TfliteOptions tflite;
        tflite.odml.maxBatches = options.maxBatches;
        tflite.int8Io = args.value("--tflite-io") == "int8";
        if (args.value("--tflite-grouped-conv") == "split")
            tflite.groupedConv = TfliteGroupedConv::Split;
        if (args.value("--tflite-transpose-conv-bias") == "add")
            tflite.transposeConvBias = TfliteTransposeConvBias::Add;
        const TfliteSummary s =
            exportTflite(*q.interpreter(), *q.plan(), *q.weights(), *calib, tflite, *out, {}, terminalProgress());
        for (const std::string& note : s.notes)
            std::fprintf(stderr, "note: %s\n", note.c_str());
        exports["tflite"] = {
            {"path", s.path.string()}, {"bytes", s.bytes},         {"float_weight_bytes", s.floatWeightBytes},
            {"tensors", s.tensors},    {"operators", s.operators}, {"operators_by_type", s.operatorsByType},
            {"notes", s.notes},        {"batches", s.batches},
            {"io", tflite.int8Io ? "int8" : "float"},
            {"grouped_conv", tflite.groupedConv == TfliteGroupedConv::Split ? "split" : "native"},
            {"transpose_conv_bias", tflite.transposeConvBias == TfliteTransposeConvBias::Add ? "add" : "input"}};
    }
    return exports;
}

// --search: the rules are found, not given. Returns the search's points file.
std::filesystem::path searchPointsPath(const Arguments& args)
{
    if (const auto f = args.value("--search-points"))
        return *f;
    std::filesystem::path p = *args.value("--out-rules");
    return p.replace_extension(".search.json");
}

// Runs --search on `exploration` (model and data set, no rules); on success it
// holds the chosen rules, evaluated. Writes R.json and the points file.
void runSearch(const Arguments& args, Exploration& exploration, const Model& model)
{
    const SearchCandidates candidates = SearchCandidates::load(*args.value("--search"));
    const SearchTarget target = SearchTarget::parse(*args.value("--target"));
    if (!exploration.calibrationData())
        for (size_t i = 0; i < candidates.candidates.size(); ++i)
            if (candidates.candidates[i].value("act_static_scale", false))
                throw Error(*args.value("--search") + ": candidate " + std::to_string(i) +
                            " sets act_static_scale; static activation scales need calibration data: give --calib "
                            "DATA");
    const RuleSearchResult result = searchRules(exploration, candidates, target, {}, terminalProgress());
    const std::string points = result.toJson(model, candidates).dump(2) + "\n";
    const std::filesystem::path pointsFile = searchPointsPath(args);
    writeFileAtomically(pointsFile, points.data(), points.size());
    if (!result.met)
        throw Error(*args.value("--search") + ": " + result.message + "; the " + std::to_string(result.points.size()) +
                    " points tried are in " + pointsFile.string());
    result.rules.save(*args.value("--out-rules"));
    std::fprintf(stderr, "search: %s; %zu points in %s\n", result.message.c_str(), result.points.size(),
                 pointsFile.string().c_str());
}

int runQuantize(const Arguments& args)
{
    if (args.positionals().empty())
        throw UsageError("missing MODEL");
    if (args.value("--sensitivity") && !args.value("--eval"))
        throw UsageError("--sensitivity needs --eval DATA");
    std::optional<WeightAlgorithm> sensitivityAlgorithm;
    if (const auto text = args.value("--sensitivity-algorithm")) {
        if (!args.value("--sensitivity"))
            throw UsageError("--sensitivity-algorithm goes with --sensitivity one|all-but-one");
        try {
            sensitivityAlgorithm = WeightAlgorithm::parse(*text);
        } catch (const Error& e) {
            throw UsageError(std::string("--sensitivity-algorithm: ") + e.what());
        }
        if (sensitivityAlgorithm->needsCalibration() && !args.value("--calib"))
            throw UsageError("--sensitivity-algorithm " + *text +
                             " rounds each layer's weights from its calibration inputs: give --calib DATA");
    }
    const bool search = args.value("--search").has_value();
    if (search == args.value("--rules").has_value())
        throw UsageError("give either --rules R.json or --search CANDIDATES.json");
    if (search && (!args.value("--target") || !args.value("--out-rules") || !args.value("--eval")))
        throw UsageError("--search needs --target EXPR, --out-rules R.json and --eval DATA");
    if (!search && (args.value("--target") || args.value("--out-rules") || args.value("--search-points")))
        throw UsageError("--target, --out-rules and --search-points go with --search");
    const double start = nowSeconds();

    ModelQuantizationOptions options;
    options.modelFile = args.positionals()[0];
    if (!search)
        options.rulesFile = *args.value("--rules");
    else
        SearchCandidates::load(*args.value("--search")); // a bad file is reported before the model loads
    options.mode = *parseQuantizationMode(args.valueOr("--mode", "ptq"));
    if (const auto calib = args.value("--calib"))
        options.calibFile = *calib;
    options.batchSize = batchSizeArgument(args);
    options.maxBatches = args.integer("--max-batches", 1, int64_t(1) << 40);
    options.sequenceLength = args.integer("--seq-len", 2, int64_t(1) << 20).value_or(0);
    options.needsInterpreter =
        args.value("--eval") || args.value("--calib") || args.value("--export-odml") || args.value("--export-tflite");
    if (args.value("--export-odml") && (options.mode != QuantizationMode::Odml || !options.calibFile))
        throw UsageError("--export-odml needs --mode odml and --calib DATA");
    if (args.value("--export-tflite") && (options.mode != QuantizationMode::Odml || !options.calibFile))
        throw UsageError("--export-tflite needs --mode odml and --calib DATA");
    for (const char* flag : {"--tflite-io", "--tflite-grouped-conv", "--tflite-transpose-conv-bias"})
        if (args.value(flag) && !args.value("--export-tflite"))
            throw UsageError(std::string(flag) + " applies to --export-tflite, which is not given");
    LiteRtSimulation litert;
    if (const auto a = args.value("--tflite-arithmetic")) {
        if (options.mode != QuantizationMode::Odml)
            throw UsageError("--tflite-arithmetic needs --mode odml");
        litert.arithmetic = *parseTfliteArithmetic(*a);
    }
    if (args.value("--tflite-grouped-conv") == "split")
        litert.groupedConv = TfliteGroupedConv::Split;
    if (args.value("--tflite-transpose-conv-bias") == "add")
        litert.transposeConvBias = TfliteTransposeConvBias::Add;
    QuantizeReport report;
    Exploration exploration = openExploration(options, &report.times);
    exploration.setLiteRtSimulation(litert);
    const Exploration& quantization = exploration;
    const BatchNormFolding& batchNorms = quantization.loaded().batchNorms;
    if (!batchNorms.folded.empty() || !batchNorms.decomposed.empty()) {
        std::string into;
        for (const FoldedBatchNorm& f : batchNorms.folded)
            into += (into.empty() ? "" : ", ") + f.batchNorm + " -> " + f.into;
        std::fprintf(stderr,
                     "odml: %zu BatchNormalization folded into the layer before them%s%s; %zu written as Mul and "
                     "Add\n",
                     batchNorms.folded.size(), into.empty() ? "" : ": ", into.c_str(), batchNorms.decomposed.size());
    }

    if (search) {
        exploration.setEvaluationData(fileData(*args.value("--eval"), options.maxBatches, options.sequenceLength));
        runSearch(args, exploration, exploration.model());
        options.rulesFile = *args.value("--out-rules");
    }
    report.exploration = &quantization;
    report.modelFile = options.modelFile.string();
    report.rulesFile = options.rulesFile->string();
    report.calibFile = quantization.statistics() ? options.calibFile->string() : "";
    report.modelSha256 = sha256OfModel(options.modelFile);

    if (const auto evalFile = args.value("--eval")) {
        report.evalFile = *evalFile;
        if (search) {
            // The search's last step evaluated the chosen rules with every metric.
            report.evaluation = quantization.evaluation();
        } else {
            exploration.setEvaluationData(fileData(*evalFile, options.maxBatches, options.sequenceLength));
            const EvaluationRun evaluation = exploration.evaluate({}, terminalProgress());
            printWarnings(evaluation.warnings);
            report.evaluation = evaluation.result;
            report.evaluationSeconds = evaluation.seconds;
        }
        if (const auto kind = args.value("--sensitivity")) {
            const SensitivityRun ranking =
                exploration.runSensitivity(*kind == "one" ? SensitivityKind::OneLayer : SensitivityKind::AllButOne,
                                           sensitivityAlgorithm, {}, terminalProgress());
            report.sensitivity = ranking.result;
            report.sensitivitySeconds = ranking.seconds;
        }
    }

    const double exportStart = nowSeconds();
    report.exports = runExports(args, quantization, options);
    report.exportSeconds = secondsSince(exportStart);
    report.totalSeconds = secondsSince(start);
    std::fputs(quantizeReportText(report).c_str(), stdout);
    if (const auto out = args.value("--report")) {
        const std::string text = quantizeReportJson(report).dump(2) + "\n";
        writeFileAtomically(*out, text.data(), text.size());
    }
    return kExitOk;
}

} // namespace

Command quantizeCommand()
{
    CommandSpec spec;
    spec.name = "quantize";
    spec.summary = "Quantize a model by a rule file; evaluate it against float; report per layer";
    spec.synopsis = "quantize MODEL --rules R.json [--mode ptq|odml] [--calib DATA] [--eval DATA]\n"
                    "                      [--batch-size B] [--max-batches N] [--seq-len T]\n"
                    "                      [--search CANDIDATES.json --target EXPR --out-rules R.json\n"
                    "                       [--search-points F.json]] (instead of --rules; needs --eval)\n"
                    "                      [--sensitivity one|all-but-one [--sensitivity-algorithm A]]\n"
                    "                      [--report REPORT.json] [--export-checkpoint F.safetensors|F.h5]\n"
                    "                      [--export-onnx F.onnx] [--export-odml F.json] [--export-gguf F.gguf]\n"
                    "                      [--export-tflite F.tflite [--tflite-io float|int8]\n"
                    "                       [--tflite-grouped-conv native|split]\n"
                    "                       [--tflite-transpose-conv-bias input|add]] [--tflite-arithmetic A]";
    spec.positionalName = "MODEL";
    spec.options = {
        {"--rules", "R.json", "the rule file (or --search)", {}, false},
        {"--search",
         "CANDIDATES.json",
         "find the smallest rules meeting --target from per-layer candidates, smallest first (docs/search.md)",
         {},
         false},
        {"--target",
         "EXPR",
         "with --search: output_sqnr_db>=DB, top1_agreement>=FRACTION or perplexity_increase<=FRACTION",
         {},
         false},
        {"--out-rules", "R.json", "with --search: where the rules found are written (atomically)", {}, false},
        {"--search-points",
         "F.json",
         "with --search: the size-vs-error points tried (default: R.json's name with .search.json)",
         {},
         false},
        {"--mode", "M", "how rules apply, default ptq (odml: act_calibration defaults to minmax):", {"ptq", "odml"}},
        {"--calib",
         "DATA",
         "calibration data (.npz, .npy, HDF5) for rules with act_static_scale or algorithm gptq/awq/adaround",
         {},
         false},
        {"--eval", "DATA", "evaluation data: per-layer and output errors, accuracy when it has labels", {}, false},
        {"--batch-size",
         "B",
         "rows per batch of --calib and --eval (default: the model's fixed batch dimension, else 32)",
         {},
         false},
        {"--max-batches", "N", "use at most N batches of --calib and of --eval (default all)", {}, false},
        {"--seq-len", "T", "tokens per row when --calib or --eval is a .txt file (default 512)", {}, false},
        {"--sensitivity", "S", "rank layers by output error, needs --eval:", {"one", "all-but-one"}},
        {"--sensitivity-algorithm",
         "A",
         "with --sensitivity: round every layer's weights by algorithm A (rtn, gptq, awq, adaround, with options "
         "as in rules) instead of its rule's; gptq, awq and adaround need --calib",
         {},
         false},
        {"--report", "REPORT.json", "also write the report as JSON (written atomically)", {}, false},
        {"--export-checkpoint", "F", "write a quantized checkpoint (.safetensors, .h5 or .hdf5)", {}, false},
        {"--export-onnx", "F", "write an ONNX QDQ model (ONNX models only)", {}, false},
        {"--export-gguf",
         "F",
         "write a GGUF model for llama.cpp (Llama-family folders; weight qtypes q8_0 ... q6_k, or float)",
         {},
         false},
        {"--onnx-eight-bit",
         "FORM",
         "how --export-onnx writes 8-bit integers: unsigned (default; uint8, exact in ONNX Runtime on every "
         "x86 CPU) or as-rules (the rules' int8: faster with VNNI, saturates on AVX2 CPUs without it):",
         {"unsigned", "as-rules"}},
        {"--onnx-int4",
         "FORM",
         "how --export-onnx writes MatMul/Gemm weights of int4/uint4 in tiles along K: dequantize (default; "
         "opset-21 DequantizeLinear) or matmulnbits (ONNX Runtime's com.microsoft.MatMulNBits; other layers keep "
         "DequantizeLinear, with a warning):",
         {"dequantize", "matmulnbits"}},
        {"--export-odml",
         "F",
         "write the ODML full-integer annotations (JSON); needs --mode odml and --calib",
         {},
         false},
        {"--export-tflite",
         "F",
         "write the full-integer LiteRT model (.tflite: int8, NHWC, float32 inputs and outputs); needs --mode odml "
         "and --calib",
         {},
         false},
        {"--tflite-io",
         "TYPE",
         "the inputs and outputs of --export-tflite: float (default; QUANTIZE and DEQUANTIZE at the edges) or "
         "int8 (at their calibrated scales, for integer-only runtimes):",
         {"float", "int8"}},
        {"--tflite-grouped-conv",
         "FORM",
         "how --export-tflite writes grouped convolutions: native (default; one CONV_2D, as LiteRT and XNNPACK run "
         "it) or split (SLICE, CONV_2D per group, CONCATENATION: the same codes, for Arm NN, whose parser ignores "
         "the groups):",
         {"native", "split"}},
        {"--tflite-transpose-conv-bias",
         "FORM",
         "where --export-tflite puts a transposed convolution's bias: input (default; TRANSPOSE_CONV's fourth "
         "input, as LiteRT runs it) or add (a three-input TRANSPOSE_CONV and an ADD, for Arm NN, whose parser "
         "takes no bias input):",
         {"input", "add"}},
        {"--tflite-arithmetic",
         "A",
         "with --mode odml: whose int8 arithmetic computes the output figures, run on the LiteRT program "
         "--export-tflite writes: xnnpack (default; LiteRT's XNNPACK delegate, as LiteRT.js), reference (LiteRT's "
         "reference kernels) or armnn (Arm NN 20.08's CpuRef; with --tflite-grouped-conv split for grouped "
         "convolutions and --tflite-transpose-conv-bias add for transposed ones):",
         {"xnnpack", "reference", "armnn"}},
    };
    spec.notes = "MODEL: ONNX or a Llama-family folder for --calib and --eval (they run the model); any model\n"
                 "format otherwise.\n"
                 "DATA: arrays named after the model's inputs (a model with one input also takes an .npy or any\n"
                 "single array), plus `labels` ([N] or [N, 1] class indices) for accuracy. A language model\n"
                 "(a Hugging Face folder) also takes token ids (int64 [N, T]) or a .txt file, tokenized by the\n"
                 "folder's tokenizer.json and cut into rows of --seq-len tokens; it reports perplexity.\n"
                 "Batches: a model whose inputs fix axis 0 (torch.onnx exports batch 1 by default) reads DATA\n"
                 "in batches of exactly that size, and --batch-size must equal it (else exit 1 naming the\n"
                 "input); rows after the last whole batch are left out, with a warning. A dynamic batch\n"
                 "dimension takes --batch-size (default 32) and a shorter last batch.\n"
                 "A rule with act_static_scale, smooth_alpha, high_bias_absorption or algorithm gptq, awq or\n"
                 "adaround needs --calib\n"
                 "(else exit 1 naming the rule); dynamic activations are calibrated on each batch. gptq, awq and\n"
                 "adaround round the weights from the calibration run's layer inputs; smooth_alpha first runs the\n"
                 "float model over --calib for the activations' channel maxima, then calibrates the smoothed model;\n"
                 "high_bias_absorption first runs the equalized model for its pre-activation minima\n"
                 "(docs/algorithms.md). Unused rules and layers a rule cannot apply to are warnings on stderr.\n"
                 "The table has one row per layer: module path, op, rule (- = float), weight qtype, the\n"
                 "algorithm that rounded it (rtn, gptq, awq, adaround; - = float), activation qtype, and SQNRs\n"
                 "in dB: weight (the weight against its fake-quantized self), isolated (the layer's output with only\n"
                 "this layer quantized, on the float model's inputs) and accumulated (the layer's output with\n"
                 "every layer quantized), both against the float run over all --eval batches. Then each graph\n"
                 "output's SQNR, cosine and max abs error, and top-1 (top-5 for more than 5 classes) of the\n"
                 "float and the quantized model on the first output.\n"
                 "--sensitivity one quantizes one layer at a time and ranks by lowest output SQNR; all-but-one\n"
                 "quantizes every layer but one and ranks by highest output SQNR (leaving it float helps most).\n"
                 "--sensitivity-algorithm repeats that ranking with every quantized layer's weights rounded by A,\n"
                 "so the layers A rescues drop; a layer A cannot take keeps its rule's rounding (listed under the\n"
                 "ranking and in the report's sensitivity.kept_rounding).\n"
                 "Exports: the checkpoint holds codes, scales and zero points with a JSON manifest; the QDQ model\n"
                 "has QuantizeLinear/DequantizeLinear pairs for static activations and quantized weights (dynamic\n"
                 "activations stay float), cleaned by the graph passes; ODML annotations and the LiteRT model\n"
                 "calibrate on --calib (docs/formats.md, docs/export.md); the GGUF model has each layer in its\n"
                 "rule's block format and the folder's tokenizer (docs/formats.md). Files are written atomically.\n"
                 "--search: each layer gets the first candidate that applies to it; layers are ranked by\n"
                 "sensitivity and raised one candidate at a time along that order; a bisection finds the first\n"
                 "choice that meets --target, a trimming pass lowers what it can; the choice is written as rules\n"
                 "and evaluated again through them (the table and the report are of that run). A target that the\n"
                 "last candidates everywhere miss is exit 1, saying so; the points file is written either way.\n"
                 "REPORT.json is described in docs/cli.md. Progress goes to stderr when it is a terminal.";
    return {spec, runQuantize};
}

} // namespace qs::cli
