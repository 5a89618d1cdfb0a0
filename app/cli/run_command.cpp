// quantscope-cli run: a model's outputs on given inputs, float or fake-quantized
// by a rule file, written as an .npz.
#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/model_quantization.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "io/npy.h"
#include "io/npz.h"
#include "runtime/quantization_hook.h"
#include "session/evaluation.h"

namespace qs::cli {
namespace {

int runRun(const Arguments& args)
{
    if (args.positionals().empty())
        throw UsageError("missing MODEL");
    if (args.value("--calib") && !args.value("--rules"))
        throw UsageError("--calib needs --rules");
    std::map<std::string, std::string> inputFiles;
    for (const std::string& spec : args.values("--input")) {
        const size_t eq = spec.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
            throw UsageError("--input takes NAME=FILE.npy, got '" + spec + "'");
        if (!inputFiles.emplace(spec.substr(0, eq), spec.substr(eq + 1)).second)
            throw UsageError("--input " + spec.substr(0, eq) + " given twice");
    }

    ModelQuantizationOptions options;
    options.modelFile = args.positionals()[0];
    if (const auto rules = args.value("--rules"))
        options.rulesFile = *rules;
    if (const auto calib = args.value("--calib"))
        options.calibFile = *calib;
    const ModelQuantization quantization(options);
    for (const std::string& w : quantization.warnings())
        std::fprintf(stderr, "warning: %s\n", w.c_str());

    const Model& model = quantization.model();
    std::string inputNames;
    for (const ValueInfo& v : model.inputs)
        inputNames += (inputNames.empty() ? "" : ", ") + v.name;
    for (const auto& [name, file] : inputFiles)
        if (std::none_of(model.inputs.begin(), model.inputs.end(), [&](const ValueInfo& v) { return v.name == name; }))
            throw Error("--input " + name + "=" + file + ": " + options.modelFile.string() + " has no input '" + name +
                        "'; its inputs: " + inputNames);
    for (const ValueInfo& v : model.inputs)
        if (!inputFiles.count(v.name))
            throw Error(options.modelFile.string() + ": input '" + v.name + "' (" + v.toString() + ") needs --input " +
                        v.name + "=FILE.npy");
    std::map<std::string, Tensor> inputs;
    for (const auto& [name, file] : inputFiles)
        inputs[name] = readNpy(file);
    const Interpreter& interpreter = *quantization.interpreter();
    std::map<std::string, Tensor> outputs;
    if (quantization.rules()) {
        const std::map<size_t, StaticActivation> statics =
            requiredStaticActivations(model, quantization.plan(), quantization.statistics());
        QuantizationHook hook(model, quantization.plan(), quantization.weights(), statics);
        outputs = interpreter.run(std::move(inputs), {CancellationToken(), &hook});
    } else {
        outputs = interpreter.run(std::move(inputs));
    }
    const std::string out = *args.value("--out");
    writeNpz(out, outputs);
    std::string names;
    for (const auto& [name, t] : outputs)
        names += (names.empty() ? "" : ", ") + name + " " + shapeToString(t.shape());
    std::printf("%s -> %s: %s (%s)\n", options.modelFile.string().c_str(), out.c_str(), names.c_str(),
                quantization.rules() ? "fake-quantized" : "float");
    return kExitOk;
}

} // namespace

Command runCommand()
{
    CommandSpec spec;
    spec.name = "run";
    spec.summary = "Run a model on .npy inputs, float or fake-quantized by a rule file; outputs to an .npz";
    spec.synopsis = "run MODEL --input NAME=FILE.npy ... [--rules R.json [--calib DATA]] --out OUT.npz";
    spec.positionalName = "MODEL";
    spec.options = {
        {"--input", "NAME=FILE.npy", "the graph input NAME, as an .npy array", {}, true, true},
        {"--rules", "R.json", "a rule file: run fake-quantized (weights and activations as the rules say)", {}, false},
        {"--calib", "DATA", "calibration data (.npz, .npy, HDF5) for rules with act_static_scale", {}, false},
        {"--out", "OUT.npz", "where every graph output goes, by name, as an .npz (written atomically)", {}, true},
    };
    spec.notes = "Every graph input needs one --input. The outputs keep the model's dtypes and shapes. Without\n"
                 "--rules the model runs in float; with --rules every layer a rule applies to runs with its\n"
                 "fake-quantized weight and, when the rule sets act_qtype, its fake-quantized input activation\n"
                 "(static ranges from --calib, dynamic ranges from each run's own values). Calibration reads DATA\n"
                 "in batches of 32. Unused rules and layers a rule cannot apply to are warnings on stderr.";
    return {spec, runRun};
}

} // namespace qs::cli
