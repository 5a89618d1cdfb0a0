// quantscope-cli compare-methods: every calibration method on one tensor, best first.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/quantization_options.h"
#include "cli/text_table.h"
#include "core/error.h"
#include "numerics/qtype.h"
#include "analysis/method_comparison.h"
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

int runCompareMethods(const Arguments& args)
{
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
                    "                           [--tile T] [--json]";
    spec.positionalName = "MODEL";
    spec.options = {{"--npy", "FILE", "the tensor, as an .npy array", {}, false},
                    {"--tensor", "NAME", "a weight of MODEL: an initializer name or a layer's module path", {}, false}};
    for (OptionSpec& o : layoutOptions())
        spec.options.push_back(std::move(o));
    spec.options.push_back({"--json", "", "print JSON instead of a table", {}, false});
    spec.notes = layoutNotes() +
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
                 "several groups.";
    return {spec, runCompareMethods};
}

} // namespace qs::cli
