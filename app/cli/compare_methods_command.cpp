// quantscope-cli compare-methods: every calibration method on one tensor, best first.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include <nlohmann/json.hpp>

#include "analysis/method_comparison.h"
#include "cli/commands.h"
#include "cli/input_shapes.h"
#include "cli/model_quantization.h"
#include "cli/quantization_options.h"
#include "cli/text_table.h"
#include "core/error.h"
#include "numerics/qtype.h"
#include "session/algorithm_comparison.h"
#include "session/exploration.h"

namespace qs::cli {
namespace {

std::string number(double v, const char* format = "%.4g")
{
    return formatNumber(v, format);
}

// "[-0.31, 0.29]" for one group; "[-0.31, 0.29] over 64 groups" (the hull) for many.
std::string rangeSummary(const std::vector<Range>& ranges)
{
    float lo = ranges.front().min, hi = ranges.front().max;
    for (const Range& r : ranges) {
        lo = std::min(lo, r.min);
        hi = std::max(hi, r.max);
    }
    std::string s = "[" + number(lo) + ", " + number(hi) + "]";
    return ranges.size() == 1 ? s : s + " hull of " + std::to_string(ranges.size());
}

// "0.0024" for one scale; "0.0011..0.0093" (min..max) for many.
std::string scaleSummary(const MethodResult& r)
{
    const auto [lo, hi] = std::minmax_element(r.scales.begin(), r.scales.end());
    std::string s = r.scales.size() == 1 ? number(*lo) : number(*lo) + ".." + number(*hi);
    if (!r.zeroPoints.empty()) {
        const auto [zlo, zhi] = std::minmax_element(r.zeroPoints.begin(), r.zeroPoints.end());
        s += *zlo == *zhi ? " zp " + std::to_string(*zlo) : " zp " + std::to_string(*zlo) + ".." + std::to_string(*zhi);
    }
    return s;
}

std::string sqnrText(double db)
{
    return std::isinf(db) ? (db > 0 ? "inf" : "-inf") : number(db, "%.2f");
}

nlohmann::json methodJson(const MethodResult& r)
{
    nlohmann::json j{{"method", r.method}, {"symmetric", r.symmetric}};
    if (r.ranges.size() == 1) {
        j["range"] = {{"min", r.ranges[0].min}, {"max", r.ranges[0].max}};
        j["scales"] = r.scales[0];
        if (!r.zeroPoints.empty())
            j["zero_points"] = r.zeroPoints[0];
    } else {
        std::vector<float> mins, maxs;
        for (const Range& g : r.ranges) {
            mins.push_back(g.min);
            maxs.push_back(g.max);
        }
        j["range"] = {{"min", mins}, {"max", maxs}};
        j["scales"] = r.scales;
        if (!r.zeroPoints.empty())
            j["zero_points"] = r.zeroPoints;
    }
    j["mse"] = r.metrics.mse;
    // JSON has no infinity: an exact reconstruction (infinite SQNR) is null.
    j["sqnr_db"] = std::isinf(r.metrics.sqnrDb) ? nlohmann::json() : nlohmann::json(r.metrics.sqnrDb);
    j["fraction_clipped"] = r.metrics.fractionClipped;
    if (!r.note.empty())
        j["note"] = r.note;
    return j;
}

nlohmann::json jsonNumber(double v)
{
    return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); // JSON has no infinity: exact is null
}

// --algorithms: the layer's weight rounded by each algorithm under its rule (session/algorithm_comparison.h).
int runCompareAlgorithms(const Arguments& args)
{
    if (args.positionals().empty() || !args.value("--tensor"))
        throw UsageError("--algorithms compares one layer of a model: give MODEL --tensor NAME");
    for (const char* option : {"--npy", "--qtype", "--granularity", "--axis", "--tile", "--method"})
        if (args.value(option))
            throw UsageError(std::string("--algorithms takes the layer's weight_qtype, granularity and tile_size from "
                                         "its rule in --rules; remove ") +
                             option);
    if (!args.value("--rules"))
        throw UsageError("--algorithms compares under the layer's rule: give --rules R.json");
    if (!args.value("--calib"))
        throw UsageError("--algorithms measures the layer's output on calibration inputs (and gptq, awq and adaround "
                         "read them): give --calib DATA");
    const RuleSet rules = RuleSet::load(*args.value("--rules"));
    ModelQuantizationOptions options;
    options.modelFile = args.positionals()[0];
    options.batchSize = batchSizeArgument(args);
    options.maxBatches = args.integer("--max-batches", 1, int64_t(1) << 40);
    options.sequenceLength = args.integer("--seq-len", 2, int64_t(1) << 20).value_or(0);
    options.needsInterpreter = true;
    Exploration e;
    e.setModel(loadModel(options));
    e.setRequestedBatchSize(options.batchSize);
    const std::string tensor = *args.value("--tensor");
    const Exploration::NamedTensor named = e.namedTensor(tensor);
    if (!named.layer)
        throw Error(options.modelFile.string() + ": '" + tensor +
                    "' is not a layer's weight; --algorithms takes a layer's module path or weight name (inspect "
                    "lists them)");
    const size_t layer = *named.layer;
    e.setRules(rulesReadingInputsOf(e.model(), rules, layer), *args.value("--rules"));
    const LayerQuantization* lq = e.plan()->forLayer(layer);
    if (!lq || !lq->problem.empty())
        throw Error("layer '" + e.model().layers[layer].modulePath +
                    "': its calibration inputs cannot be gathered as rows of its weight's contraction (" +
                    (lq ? lq->problem : std::string("no plan")) + ")");
    e.setCalibrationData(fileData(*args.value("--calib"), options.maxBatches, options.sequenceLength));
    const double start = nowSeconds();
    e.calibrate(KeptHistograms::AsPlanNeeds, {}, terminalProgress());
    const double calibrationSeconds = secondsSince(start);
    const auto hessian = e.statistics()->hessians().find(layer);
    if (hessian == e.statistics()->hessians().end() || hessian->second->rows() == 0)
        throw Error(*args.value("--calib") + ": the calibration gave layer '" + e.model().layers[layer].modulePath +
                    "' no input rows");
    const AlgorithmComparison c = compareAlgorithms(e.model(), rules, layer, *hessian->second);

    if (args.flag("--json")) {
        nlohmann::json j{{"model", options.modelFile.string()},
                         {"layer", c.modulePath},
                         {"weight", c.weightName},
                         {"rule", nlohmann::json::parse(c.rule)},
                         {"calibration_rows", c.calibrationRows},
                         {"calibration_seconds", calibrationSeconds},
                         {"algorithms", nlohmann::json::array()},
                         {"skipped", nlohmann::json::array()}};
        for (const AlgorithmRow& r : c.rows) {
            if (!r.skipped.empty()) {
                j["skipped"].push_back({{"variant", r.variant}, {"reason", r.skipped}});
                continue;
            }
            j["algorithms"].push_back({{"variant", r.variant},
                                       {"algorithm", r.algorithm},
                                       {"bias_correction", r.biasCorrection},
                                       {"qtype", r.qtype},
                                       {"weight_sqnr_db", jsonNumber(r.weight.sqnrDb)},
                                       {"weight_mse", r.weight.mse},
                                       {"output_sqnr_db", jsonNumber(r.outputSqnrDb)},
                                       {"output_mse", r.outputMse},
                                       {"seconds", r.seconds}});
        }
        std::printf("%s\n", j.dump(2).c_str());
        return kExitOk;
    }
    std::printf("%s, layer %s (weight %s), rule %s; output on %lld calibration rows, only this layer quantized\n\n",
                options.modelFile.string().c_str(), c.modulePath.c_str(), c.weightName.c_str(), c.rule.c_str(),
                static_cast<long long>(c.calibrationRows));
    std::vector<std::vector<std::string>> rows{
        {"variant", "weight SQNR dB", "output SQNR dB", "output MSE", "time ms"}};
    std::vector<std::string> notes;
    for (const AlgorithmRow& r : c.rows) {
        if (!r.skipped.empty()) {
            notes.push_back("skipped " + r.variant + ": " + r.skipped);
            continue;
        }
        rows.push_back({r.variant, sqnrText(r.weight.sqnrDb), sqnrText(r.outputSqnrDb), number(r.outputMse, "%.4e"),
                        number(1000.0 * r.seconds, "%.1f")});
    }
    std::printf("%s", alignedTable(rows, {false, true, true, true, true}).c_str());
    for (const std::string& n : notes)
        std::printf("%s\n", n.c_str());
    return kExitOk;
}

int runCompareMethods(const Arguments& args)
{
    if (args.flag("--algorithms"))
        return runCompareAlgorithms(args);
    if (!args.value("--qtype"))
        throw UsageError("missing required option --qtype Q (or --algorithms, which takes the layer's rule)");
    const bool hasModel = !args.positionals().empty();
    if (hasModel == bool(args.value("--npy")))
        throw UsageError("give either --npy FILE or MODEL --tensor NAME");
    if (hasModel != bool(args.value("--tensor")))
        throw UsageError(hasModel ? "MODEL needs --tensor NAME" : "--tensor needs a MODEL argument");
    QuantizationSpec spec = quantizationSpecFrom(args);
    std::string file;
    Tensor x;
    if (hasModel) {
        file = args.positionals()[0] + ":" + *args.value("--tensor");
        // The tensor MODEL --tensor NAME names: a layer's weight by module path or
        // weight name (its channel axis is then the default --axis), or an initializer.
        LoadOptions load;
        load.interpreter = false;
        Exploration exploration;
        exploration.setModel(loadExplorationModel(args.positionals()[0], load));
        Exploration::NamedTensor named = exploration.namedTensor(*args.value("--tensor"));
        x = std::move(named.values);
        if (named.channelAxis && !args.value("--axis"))
            spec.axis = *named.channelAxis;
    } else {
        file = *args.value("--npy");
        x = loadNpyArgument(args);
    }
    const std::vector<MethodResult> results = namingFile(file, [&] { return compareMethods(x, spec, file); });
    const std::string layout = layoutText(spec, x.shape());

    if (args.flag("--json")) {
        nlohmann::json j{{"file", file},
                         {"shape", x.shape()},
                         {"qtype", std::string(qtypeName(spec.qtype))},
                         {"granularity", layout},
                         {"methods", nlohmann::json::array()},
                         {"skipped", nlohmann::json::array()}};
        for (const MethodResult& r : results) {
            if (r.skipped.empty())
                j["methods"].push_back(methodJson(r));
            else
                j["skipped"].push_back({{"method", r.method}, {"reason", r.skipped}});
        }
        std::printf("%s\n", j.dump(2).c_str());
        return kExitOk;
    }

    std::printf("%s %s, %s, %s; best first by MSE\n\n", file.c_str(), shapeToString(x.shape()).c_str(),
                std::string(qtypeName(spec.qtype)).c_str(), layout.c_str());
    std::vector<std::vector<std::string>> rows{{"method", "range", "scale(s)", "MSE", "SQNR dB", "% clipped"}};
    std::vector<std::string> notes;
    for (const MethodResult& r : results) {
        if (!r.skipped.empty()) {
            notes.push_back("skipped " + r.method + ": " + r.skipped);
            continue;
        }
        rows.push_back({r.method, rangeSummary(r.ranges), scaleSummary(r), number(r.metrics.mse, "%.4e"),
                        sqnrText(r.metrics.sqnrDb), number(100.0 * r.metrics.fractionClipped, "%.4f")});
        if (!r.note.empty())
            notes.push_back(r.method + ": " + r.note);
    }
    std::vector<size_t> width(rows[0].size(), 0);
    for (const auto& row : rows)
        for (size_t c = 0; c < row.size(); ++c)
            width[c] = std::max(width[c], row[c].size());
    for (const auto& row : rows) {
        std::string line;
        for (size_t c = 0; c < row.size(); ++c) {
            const std::string pad(width[c] - row[c].size(), ' ');
            line += c < 3 ? row[c] + pad : pad + row[c]; // text left, numbers right
            line += c + 1 < row.size() ? "  " : "";
        }
        std::printf("%s\n", line.c_str());
    }
    for (const std::string& n : notes)
        std::printf("%s\n", n.c_str());
    return kExitOk;
}

} // namespace

Command compareMethodsCommand()
{
    CommandSpec spec;
    spec.name = "compare-methods";
    spec.summary = "Compare calibration methods on one tensor: ranges, scales, MSE, SQNR, clipping";
    spec.synopsis = "compare-methods (--npy FILE | MODEL --tensor NAME) --qtype Q [--granularity G] [--axis A]\n"
                    "                           [--tile T] [--json]\n"
                    "quantscope-cli compare-methods MODEL --tensor NAME --algorithms --rules R.json --calib DATA\n"
                    "                           [--batch-size B] [--max-batches N] [--seq-len T] [--json]";
    spec.positionalName = "MODEL";
    spec.options = {{"--npy", "FILE", "the tensor, as an .npy array", {}, false},
                    {"--tensor", "NAME", "a weight of MODEL: an initializer name or a layer's module path", {}, false}};
    for (OptionSpec& o : layoutOptions()) {
        o.required = false; // --qtype: required unless --algorithms (checked when the command runs)
        spec.options.push_back(std::move(o));
    }
    spec.options.push_back({"--algorithms",
                            "",
                            "MODEL --tensor NAME: compare rtn, gptq, awq, adaround, bias_correction and lutN on "
                            "the layer under its rule in --rules",
                            {},
                            false});
    spec.options.push_back(
        {"--rules", "R.json", "--algorithms: the rule file whose rule for the layer is compared", {}, false});
    spec.options.push_back({"--calib", "DATA", "--algorithms: calibration data (the layer's inputs)", {}, false});
    spec.options.push_back({"--batch-size", "B", "--algorithms: rows per batch of --calib", {}, false});
    spec.options.push_back({"--max-batches", "N", "--algorithms: use at most N batches of --calib", {}, false});
    spec.options.push_back({"--seq-len", "T", "--algorithms: tokens per row when --calib is a .txt file", {}, false});
    spec.options.push_back({"--json", "", "print JSON instead of a table", {}, false});
    spec.notes =
        layoutNotes() +
        "\nMODEL --tensor NAME: any model format; a layer's weight defaults --axis to the layer's channel\n"
        "axis (inspect shows it); file in the JSON is MODEL:NAME.\n"
        "Methods: absmax, minmax, rms,3 (3 standard deviations), percentile,99.9, percentile,99.99, mse,\n"
        "entropy. Asymmetric methods (minmax) are skipped, with a note, for types without a zero point\n"
        "(float formats, nf4, binary, ternary). MX types show one row: their own block scales.\n"
        "SQNR dB = 10 log10(sum x^2 / sum (x - q(x))^2); % clipped = elements that saturate under the scale\n"
        "used (pow2/fp16 restrictions and narrow range included). A method's note (entropy: groups too\n"
        "small for a histogram kept their whole range) follows the table. JSON: {file, shape, qtype,\n"
        "granularity, methods: [{method, symmetric, range: {min, max}, scales, zero_points (asymmetric),\n"
        "mse, sqnr_db (null when exact), fraction_clipped, note (when there is one)}],\n"
        "skipped: [{method, reason}]}; range, scales and zero_points are per-group arrays when there are\n"
        "several groups.\n"
        "--algorithms: the layer's weight under its rule with algorithm rtn, gptq, awq and adaround (the rule's\n"
        "options when it names that algorithm), each without and with bias_correction, and lutN (k-means\n"
        "palettization at the rule's bits, same granularity); variants the layer cannot take are listed as\n"
        "skipped with why.\n"
        "output SQNR/MSE: the layer's output before its bias on the --calib inputs, only this layer quantized,\n"
        "from the inputs' second moments (docs/algorithms.md); time: the rounding alone. JSON: {model, layer,\n"
        "weight, rule, calibration_rows, calibration_seconds, algorithms: [{variant, algorithm,\n"
        "bias_correction, qtype, weight_sqnr_db, weight_mse, output_sqnr_db, output_mse, seconds}],\n"
        "skipped: [{variant, reason}]}; an exact SQNR is null.";
    return {spec, runCompareMethods};
}

} // namespace qs::cli
