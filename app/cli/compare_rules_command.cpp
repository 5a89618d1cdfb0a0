// quantscope-cli compare-rules: one model quantized by two rule files, A and B,
// on the same data; per layer and per output the differences B − A
// (session/rule_comparison.h), as a table or, with --json, as JSON.
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/input_shapes.h"
#include "cli/model_quantization.h"
#include "cli/quantize_report.h"
#include "cli/text_table.h"
#include "core/error.h"
#include "core/sha256.h"
#include "session/rule_comparison.h"

namespace qs::cli {
namespace {

std::string dbText(const std::optional<double>& v)
{
    if (!v)
        return "-";
    if (std::isinf(*v))
        return *v > 0 ? "inf" : "-inf";
    return formatNumber(*v, "%.2f");
}

std::string deltaText(const std::optional<double>& v, const char* format = "%+.2f")
{
    return v ? formatNumber(*v, format) : "-";
}

std::string percentText(const std::optional<double>& v)
{
    return v ? formatNumber(100.0 * *v, "%.2f") + "%" : "-";
}

std::string figureLine(const std::string& name, const ComparedFigure& f, bool percent, const char* deltaFormat)
{
    const std::optional<double> d = f.delta();
    return name + ": A " + (percent ? percentText(f.a) : dbText(f.a)) + ", B " +
           (percent ? percentText(f.b) : dbText(f.b)) + ", B - A " +
           (d ? formatNumber(percent ? 100.0 * *d : *d, deltaFormat) + (percent ? " points" : "") : "-") + "\n";
}

std::string comparisonText(const RuleComparison& c, const std::string& a, const std::string& b)
{
    std::string s = "A: " + a + "\nB: " + b + "\n\n";
    std::vector<std::vector<std::string>> rows{{"module path", "A weight / act", "B weight / act", "d weight SQNR",
                                                "d isolated SQNR", "d accum. SQNR", "d weight bytes", "note"}};
    for (const LayerComparison& r : c.layers)
        rows.push_back({r.modulePath, r.a.summary(), r.b.summary(), deltaText(r.deltaWeightSqnr),
                        deltaText(r.deltaIsolatedSqnr), deltaText(r.deltaAccumulatedSqnr),
                        r.deltaWeightBytes ? formatNumber(double(*r.deltaWeightBytes), "%+.0f") : "-", r.note});
    s += alignedTable(rows, {false, false, false, true, true, true, true, false});
    s += "\n(d = B - A in dB; '-' where a side has no finite figure: float, exact, absent or not evaluated)\n\n";
    for (const OutputComparison& o : c.outputs)
        s += figureLine("output " + o.name + " SQNR (dB)", o.sqnrDb, false, "%+.2f");
    if (c.quantizedTop1.a || c.quantizedTop1.b) {
        s += figureLine("float top-1", c.floatTop1, true, "%+.2f");
        s += figureLine("quantized top-1", c.quantizedTop1, true, "%+.2f");
    }
    if (c.top1Agreement.a || c.top1Agreement.b)
        s += figureLine("top-1 agreement with float", c.top1Agreement, true, "%+.2f");
    if (c.quantizedPerplexity.a || c.quantizedPerplexity.b) {
        s += figureLine("float perplexity", c.floatPerplexity, false, "%+.4f");
        s += figureLine("quantized perplexity", c.quantizedPerplexity, false, "%+.4f");
    }
    s += "weight bytes: float " + std::to_string(c.totalA.floatBytes) + ", A " +
         std::to_string(c.totalA.quantizedBytes) + ", B " + std::to_string(c.totalB.quantizedBytes) + ", B - A " +
         formatNumber(double(c.totalB.quantizedBytes - c.totalA.quantizedBytes), "%+.0f") + "\n";
    return s;
}

int runCompareRules(const Arguments& args)
{
    if (args.positionals().size() != 3)
        throw UsageError("expected MODEL A.json B.json");
    const std::string ruleFiles[2] = {args.positionals()[1], args.positionals()[2]};
    std::optional<ComparisonColumn> column = ComparisonColumn::Order;
    if (const auto sort = args.value("--sort"))
        column = parseComparisonColumn(*sort);
    if (!column)
        throw UsageError("--sort takes one of " + comparisonColumnNames());
    // Both rule files are read before the model: a bad one is reported at once.
    for (const std::string& f : ruleFiles)
        RuleSet::load(f);

    ModelQuantizationOptions options;
    options.modelFile = args.positionals()[0];
    options.mode = *parseQuantizationMode(args.valueOr("--mode", "ptq"));
    if (const auto calib = args.value("--calib"))
        options.calibFile = *calib;
    options.batchSize = batchSizeArgument(args);
    options.maxBatches = args.integer("--max-batches", 1, int64_t(1) << 40);
    options.sequenceLength = args.integer("--seq-len", 2, int64_t(1) << 20).value_or(0);
    options.needsInterpreter = args.value("--eval") || args.value("--calib");
    const LoadedModel loaded = loadModel(options);
    const std::string modelSha256 = sha256OfModel(options.modelFile);

    std::vector<Exploration> sides;
    std::vector<QuantizeReport> reports(2);
    for (int i = 0; i < 2; ++i) {
        options.rulesFile = ruleFiles[i];
        QuantizeReport& report = reports[size_t(i)];
        sides.push_back(openExploration(options, &report.times, &loaded));
        Exploration& x = sides.back();
        report.modelFile = options.modelFile.string();
        report.modelSha256 = modelSha256;
        report.rulesFile = ruleFiles[i];
        report.calibFile = x.statistics() ? options.calibFile->string() : "";
        if (const auto evalFile = args.value("--eval")) {
            report.evalFile = *evalFile;
            x.setEvaluationData(fileData(*evalFile, options.maxBatches, options.sequenceLength));
            const EvaluationRun run = x.evaluate({}, terminalProgress());
            printWarnings(run.warnings);
            report.evaluation = run.result;
            report.evaluationSeconds = run.seconds;
        }
    }
    for (int i = 0; i < 2; ++i)
        reports[size_t(i)].exploration = &sides[size_t(i)];

    RuleComparison comparison = compareRules(sides[0], sides[1]);
    sortLayers(comparison.layers, *column);
    if (args.flag("--json")) {
        nlohmann::json j = comparison.toJson();
        j["a"] = quantizeReportJson(reports[0]);
        j["b"] = quantizeReportJson(reports[1]);
        std::fputs((j.dump(2) + "\n").c_str(), stdout);
    } else {
        std::fputs(comparisonText(comparison, ruleFiles[0], ruleFiles[1]).c_str(), stdout);
    }
    return kExitOk;
}

} // namespace

Command compareRulesCommand()
{
    CommandSpec spec;
    spec.name = "compare-rules";
    spec.summary = "Quantize a model by two rule files on the same data; per-layer and output differences B - A";
    spec.synopsis = "compare-rules MODEL A.json B.json [--mode ptq|odml] [--calib DATA] [--eval DATA]\n"
                    "                      [--batch-size B] [--max-batches N] [--seq-len T] [--sort COLUMN] [--json]";
    spec.positionalName = "MODEL A.json B.json";
    spec.positionalCount = 3;
    spec.options = {
        {"--mode", "M", "how rules apply, default ptq (odml: act_calibration defaults to minmax):", {"ptq", "odml"}},
        {"--calib", "DATA", "calibration data for rules with act_static_scale (both sides use it)", {}, false},
        {"--eval", "DATA", "evaluation data: isolated/accumulated and output SQNR, top-1, perplexity", {}, false},
        {"--batch-size", "B", "rows per batch of --calib and --eval (as quantize)", {}, false},
        {"--max-batches", "N", "use at most N batches of --calib and of --eval (default all)", {}, false},
        {"--seq-len", "T", "tokens per row when --calib or --eval is a .txt file (default 512)", {}, false},
        {"--sort",
         "COLUMN",
         "order of the layer rows (default order: model order):",
         {"order", "path", "weight", "isolated", "accumulated", "bytes"}},
        {"--json", "", "print JSON: the comparison and both sides' quantize reports", {}, false},
    };
    spec.notes =
        "Each side is what `quantize MODEL --rules A.json` (B.json) with the same options reports; the\n"
        "model is loaded once. Layers are matched by module path. d = B - A: a delta is shown only when\n"
        "both sides have a finite figure, else '-': a layer float in a side has no weight or isolated\n"
        "SQNR there (the note says which side; its accumulated SQNR, the error reaching it, is still\n"
        "measured), exact is inf dB. Sorting by a delta puts the most negative first\n"
        "(B worse, or for bytes B smaller) and rows without it last. Weight bytes: codes at the qtype's\n"
        "bits, float32 scales, one byte per zero point (docs/cli.md, \"Weight bytes\").\n"
        "JSON: {\"layers\": [...], \"outputs\": [...], \"top1_agreement\": {a, b, delta}, ..., \"a\": REPORT,\n"
        "\"b\": REPORT} (docs/cli.md, \"compare-rules\").";
    return {spec, runCompareRules};
}

} // namespace qs::cli
