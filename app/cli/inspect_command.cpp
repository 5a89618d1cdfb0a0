// quantscope-cli inspect: what a model holds, as rules see it — its quantizable
// layers, inputs and outputs, opsets, op types, warnings and totals, and with
// --rules which rule each layer gets.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/text_table.h"
#include "core/error.h"
#include "quantization/rule_resolution.h"
#include "io/model_loader.h"
#include "rules/ruleset.h"
#include "runtime/op_registry.h"

namespace qs::cli {
namespace {

std::string domainName(const std::string& domain)
{
    return domain.empty() ? "ai.onnx" : domain;
}

// "1 layer", "5 layers"
std::string counted(int64_t n, const std::string& noun)
{
    return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

std::string axesText(const std::vector<int>& axes)
{
    std::string s;
    for (int a : axes) {
        if (!s.empty())
            s += ',';
        s += std::to_string(a);
    }
    return s.empty() ? "-" : s;
}

nlohmann::json shapeJson(const ValueInfo& v)
{
    if (!v.shape)
        return nullptr;
    nlohmann::json dims = nlohmann::json::array();
    for (const Dim& d : *v.shape) {
        if (d.isFixed())
            dims.push_back(*d.size);
        else if (d.isSymbolic())
            dims.push_back(d.symbol);
        else
            dims.push_back(nullptr);
    }
    return dims;
}

nlohmann::json valuesJson(const std::vector<ValueInfo>& values)
{
    nlohmann::json list = nlohmann::json::array();
    for (const ValueInfo& v : values)
        list.push_back({{"name", v.name}, {"type", v.typeName}, {"shape", shapeJson(v)}});
    return list;
}

struct Totals {
    int64_t layers = 0;
    int64_t parameters = 0;
    int64_t quantizableParameters = 0;
    int64_t bytes = 0; // of all initializers, as stored
};

Totals totalsOf(const Model& model)
{
    Totals t;
    t.layers = int64_t(model.layers.size());
    t.parameters = model.parameterCount();
    for (const QuantizableLayer& layer : model.layers)
        if (!layer.sharesWeightOf) // a shared weight counts once
            t.quantizableParameters += layer.parameterCount;
    for (const NamedTensor& n : model.initializers())
        t.bytes += int64_t(n.tensor.nbytes());
    return t;
}

// The op types the model uses, with node counts.
nlohmann::json opTypesJson(const std::vector<OpTypeUse>& ops)
{
    nlohmann::json list = nlohmann::json::array();
    for (const OpTypeUse& op : ops)
        list.push_back({{"domain", domainName(op.domain)}, {"op_type", op.opType}, {"count", op.count}});
    return list;
}

std::string opTypesText(const std::vector<OpTypeUse>& ops)
{
    std::string s;
    for (const OpTypeUse& op : ops)
        s += (s.empty() ? "" : ", ") + (op.domain.empty() ? "" : op.domain + ":") + op.opType + " " +
             std::to_string(op.count);
    return s.empty() ? "none (weights only)" : s;
}

std::string ruleText(const std::optional<RuleResolution>& resolution, size_t layer)
{
    if (!resolution || !resolution->ruleOfLayer[layer])
        return "-";
    return std::to_string(*resolution->ruleOfLayer[layer]);
}

nlohmann::json inspectJson(const Model& model, const std::optional<RuleSet>& rules,
                           const std::optional<RuleResolution>& resolution, const std::string& rulesFile)
{
    nlohmann::json j;
    j["file"] = model.sourcePath.string();
    j["format"] = model.format;
    j["producer"] = model.producer;
    j["weights_only"] = model.weightsOnly;
    nlohmann::json opsets = nlohmann::json::object();
    for (const auto& [domain, version] : model.opsetImports)
        opsets[domainName(domain)] = version;
    j["opset_imports"] = opsets;
    j["inputs"] = valuesJson(model.inputs);
    j["outputs"] = valuesJson(model.outputs);
    nlohmann::json layers = nlohmann::json::array();
    for (size_t i = 0; i < model.layers.size(); ++i) {
        const QuantizableLayer& l = model.layers[i];
        nlohmann::json rule = nullptr;
        if (resolution && resolution->ruleOfLayer[i])
            rule = *resolution->ruleOfLayer[i];
        layers.push_back({{"module_path", l.modulePath},
                          {"op_type", l.opType},
                          {"weight", l.weightName},
                          {"shape", l.weightShape},
                          {"dtype", dtypeName(l.weightDType)},
                          {"parameters", l.parameterCount},
                          {"channel_axis", l.channelAxis},
                          {"contraction_axes", l.contractionAxes},
                          {"groups", l.groups},
                          {"shares_weight_of", l.sharesWeightOf ? nlohmann::json(model.layers[*l.sharesWeightOf].modulePath)
                                                                : nlohmann::json(nullptr)},
                          {"rule", rule}});
    }
    j["layers"] = layers;
    j["op_types"] = opTypesJson(model.opTypes());
    j["unsupported_ops"] = unsupportedOps(model);
    j["warnings"] = model.warnings;
    const Totals t = totalsOf(model);
    j["totals"] = {{"layers", t.layers},
                   {"parameters", t.parameters},
                   {"quantizable_parameters", t.quantizableParameters},
                   {"bytes", t.bytes}};
    if (rules) {
        size_t quantized = 0;
        for (const auto& r : resolution->ruleOfLayer)
            quantized += r.has_value();
        j["totals"]["layers_matched"] = quantized;
        j["rules"] = {{"file", rulesFile},
                      {"count", rules->size()},
                      {"match_counts", resolution->matchCount},
                      {"unused", resolution->unusedRules}};
    }
    return j;
}

std::string valuesText(const char* title, const std::vector<ValueInfo>& values)
{
    std::string s = std::string(title) + ":";
    if (values.empty())
        return s + " none\n";
    s += "\n";
    std::vector<std::vector<std::string>> rows;
    for (const ValueInfo& v : values)
        rows.push_back({"  " + v.name, v.toString()});
    return s + alignedTable(rows, {false, false});
}

std::string inspectText(const Model& model, const std::optional<RuleSet>& rules,
                        const std::optional<RuleResolution>& resolution, const std::string& rulesFile)
{
    std::string s = model.sourcePath.string() + ": " + model.format;
    if (!model.producer.empty())
        s += ", producer " + model.producer;
    if (model.weightsOnly)
        s += ", weights only";
    s += "\n";
    if (!model.opsetImports.empty()) {
        s += "opsets:";
        for (const auto& [domain, version] : model.opsetImports)
            s += " " + domainName(domain) + " " + std::to_string(version);
        s += "\n";
    }
    s += valuesText("inputs", model.inputs);
    s += valuesText("outputs", model.outputs);
    s += "op types: " + opTypesText(model.opTypes()) + "\n";
    if (!model.weightsOnly) {
        std::string unsupported;
        for (const std::string& op : unsupportedOps(model))
            unsupported += (unsupported.empty() ? "" : ", ") + op;
        s += "not run by the runtime: " + (unsupported.empty() ? std::string("none") : unsupported) + "\n";
    }
    s += "\n";

    std::vector<std::vector<std::string>> rows{
        {"#", "module path", "op", "weight", "shape", "dtype", "params", "channel", "contraction", "rule"}};
    for (size_t i = 0; i < model.layers.size(); ++i) {
        const QuantizableLayer& l = model.layers[i];
        const std::string weight =
            l.weightName + (l.sharesWeightOf ? " (shared with #" + std::to_string(*l.sharesWeightOf) + ")" : "");
        rows.push_back({std::to_string(i), l.modulePath, l.opType, weight, shapeToString(l.weightShape),
                        std::string(dtypeName(l.weightDType)), std::to_string(l.parameterCount),
                        std::to_string(l.channelAxis), axesText(l.contractionAxes), ruleText(resolution, i)});
    }
    if (model.layers.empty())
        s += "no quantizable layers\n";
    else
        s += alignedTable(rows, {true, false, false, false, false, false, true, true, false, true});

    const Totals t = totalsOf(model);
    s += "\ntotals: " + counted(t.layers, "layer") + ", " + counted(t.parameters, "parameter") + " (" +
         std::to_string(t.quantizableParameters) + " in quantizable layers), " + std::to_string(t.bytes) +
         " bytes of weights\n";
    if (rules) {
        size_t quantized = 0;
        for (const auto& r : resolution->ruleOfLayer)
            quantized += r.has_value();
        s += "rules: " + rulesFile + ", " + counted(int64_t(rules->size()), "rule") + ", " + std::to_string(quantized) +
             " of " + std::to_string(t.layers) + " layers matched\n";
        for (size_t r = 0; r < rules->size(); ++r)
            s += "  rule " + std::to_string(r) + " (" + rules->rules()[r].modulePath.text() +
                 "): " + counted(int64_t(resolution->matchCount[r]), "layer") +
                 (resolution->matchCount[r] == 0 ? " (unused)" : "") + "\n";
    }
    for (const std::string& w : model.warnings)
        s += "warning: " + w + "\n";
    return s;
}

int runInspect(const Arguments& args)
{
    if (args.positionals().empty())
        throw UsageError("missing MODEL");
    // Rules are read first: a bad rule file is reported before a long model load.
    std::optional<RuleSet> rules;
    const std::string rulesFile = args.valueOr("--rules", "");
    if (!rulesFile.empty())
        rules = RuleSet::load(rulesFile);
    const Model model = loadModel(args.positionals()[0]);
    std::optional<RuleResolution> resolution;
    if (rules)
        resolution = resolveRules(*rules, model);
    const std::string out = args.flag("--json") ? inspectJson(model, rules, resolution, rulesFile).dump(2) + "\n"
                                                : inspectText(model, rules, resolution, rulesFile);
    std::fputs(out.c_str(), stdout);
    return kExitOk;
}

} // namespace

Command inspectCommand()
{
    CommandSpec spec;
    spec.name = "inspect";
    spec.summary = "List a model's quantizable layers, inputs, outputs, opsets and op types";
    spec.synopsis = "inspect MODEL [--rules R.json] [--json]";
    spec.positionalName = "MODEL";
    spec.options = {{"--rules", "R.json", "a rule file: show which rule each layer gets and unused rules", {}, false},
                    {"--json", "", "print JSON instead of a table", {}, false}};
    spec.notes = "MODEL: ONNX, safetensors (single or sharded *.index.json), Keras or generic HDF5, NumPy\n"
                 ".npz/.npy, or a Hugging Face folder (config.json + safetensors: the Llama family, Mistral and\n"
                 "Qwen2 open as a graph that runs, other architectures as weights).\n"
                 "The format is recognised by the file's first bytes, then by its name.\n"
                 "Each quantizable layer shows its module path (what rule regexes match), op type, weight\n"
                 "initializer, shape, dtype, parameter count, channel axis (per-channel scales run along it),\n"
                 "contraction axes and the index of the first rule that applies (- = stays float).\n"
                 "Totals: layers, parameters of all weights, parameters in quantizable layers, bytes of weights.\n"
                 "JSON: {file, format, producer, weights_only, opset_imports: {domain: version}, inputs and\n"
                 "outputs: [{name, type, shape (ints, symbol strings, null when unknown; null when the rank is\n"
                 "unknown)}], layers: [{module_path, op_type, weight, shape, dtype, parameters, channel_axis,\n"
                 "contraction_axes, groups, shares_weight_of (the module path of the first layer reading the same\n"
                 "weight, or null), rule (null = float)}], op_types: [{domain, op_type, count}],\n"
                 "unsupported_ops (op types the runtime cannot run at the model's opset: \"Op\", \"domain:Op\",\n"
                 "\"Op (opset N)\" when only other opsets are),\n"
                 "warnings, totals: {layers, parameters, quantizable_parameters, bytes, layers_matched (with\n"
                 "--rules)}, rules (with --rules): {file, count, match_counts, unused}}.";
    return {spec, runInspect};
}

} // namespace qs::cli
