// quantscope-cli run: a model's outputs on given inputs, float or fake-quantized
// by a rule file, written as an .npz.
#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/input_shapes.h"
#include "cli/model_quantization.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "io/npy.h"
#include "io/npz.h"
#include "io/synthetic_data.h"
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
    options.batchSize = batchSizeArgument(args);
    if (options.batchSize && !options.calibFile)
        throw UsageError("--batch-size needs --calib (it sets the rows per calibration batch)");
    const ModelQuantization quantization(options);
    for (const std::string& w : quantization.warnings())
        std::fprintf(stderr, "warning: %s\n", w.c_str());

    const Model& model = quantization.model();
    const std::string modelFile = options.modelFile.string();
    std::string inputNames;
    for (const ValueInfo& v : model.inputs)
        inputNames += (inputNames.empty() ? "" : ", ") + v.name;
    for (const auto& [name, file] : inputFiles)
        if (std::none_of(model.inputs.begin(), model.inputs.end(), [&](const ValueInfo& v) { return v.name == name; }))
            throw Error("--input " + name + "=" + file + ": " + modelFile + " has no input '" + name +
                        "'; its inputs: " + inputNames);
    const std::map<std::string, Shape> shapes = shapeOptions(args, model, modelFile);
    const int64_t batch = batchSizingFor(model, std::nullopt, 1).batchSize;
    std::map<std::string, Tensor> inputs;
    std::vector<std::string> synthetic;
    std::mt19937_64 random(kSyntheticSeed);
    for (const ValueInfo& v : model.inputs) {
        const auto file = inputFiles.find(v.name);
        const auto shape = shapes.find(v.name);
        if (file != inputFiles.end()) {
            Tensor t = readNpy(file->second);
            if (shape != shapes.end() && t.shape() != shape->second)
                throw Error("--input " + v.name + "=" + file->second + ": the array is " + shapeToString(t.shape()) +
                            ", --shape says " + shapeToString(shape->second));
            inputs[v.name] = std::move(t);
        } else if (shape != shapes.end()) {
            // The declared rank and fixed dimensions are checked; the values are seeded.
            syntheticShape(v, shape->second, batch, modelFile, "");
            inputs[v.name] = syntheticTensor(v, shape->second, syntheticIdBound(model, v.name), random);
            synthetic.push_back(v.name + " " + shapeToString(shape->second));
        } else {
            throw Error(modelFile + ": input '" + v.name + "' (" + v.toString() + ") needs --input " + v.name +
                        "=FILE.npy, or --shape " + shapeExample(v, batch) + " for seeded random values" +
                        dynamicDimsText(v));
        }
    }
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
    std::string seeded;
    for (const std::string& s : synthetic)
        seeded += (seeded.empty() ? "; seeded random input " : ", ") + s;
    std::printf("%s -> %s: %s (%s%s)\n", modelFile.c_str(), out.c_str(), names.c_str(),
                quantization.rules() ? "fake-quantized" : "float", seeded.c_str());
    return kExitOk;
}

} // namespace

Command runCommand()
{
    CommandSpec spec;
    spec.name = "run";
    spec.summary = "Run a model on .npy inputs, float or fake-quantized by a rule file; outputs to an .npz";
    spec.synopsis = "run MODEL (--input NAME=FILE.npy | --shape NAME=AxBxC) ... [--rules R.json [--calib DATA]\n"
                    "                      [--batch-size B]] --out OUT.npz";
    spec.positionalName = "MODEL";
    spec.options = {
        {"--input", "NAME=FILE.npy", "the graph input NAME, as an .npy array", {}, false, true},
        {"--shape",
         "NAME=AxBxC",
         "input NAME's shape, e.g. x=1x3x48x320: checks its --input, else seeded random values",
         {},
         false,
         true},
        {"--rules", "R.json", "a rule file: run fake-quantized (weights and activations as the rules say)", {}, false},
        {"--calib", "DATA", "calibration data (.npz, .npy, HDF5) for rules with act_static_scale", {}, false},
        {"--batch-size",
         "B",
         "rows per batch of --calib (default: the model's fixed batch dimension, else 32)",
         {},
         false},
        {"--out", "OUT.npz", "where every graph output goes, by name, as an .npz (written atomically)", {}, true},
    };
    spec.notes = "Every graph input needs an --input or a --shape. An --input array runs as given (all its rows\n"
                 "at once). An input with only --shape gets seeded random values of that shape: float inputs\n"
                 "standard normal, integer inputs ids below the row count of the embedding table (Gather) they\n"
                 "feed, else in [0, 10); the shape must keep the model's fixed dimensions. An input given neither\n"
                 "is an error naming its dynamic dimensions. The outputs keep the model's dtypes and shapes.\n"
                 "Without --rules the model runs in float; with --rules every layer a rule applies to runs with\n"
                 "its fake-quantized weight and, when the rule sets act_qtype, its fake-quantized input\n"
                 "activation (static ranges from --calib, dynamic ranges from each run's own values).\n"
                 "Calibration reads DATA in batches of the model's fixed batch dimension (--batch-size must\n"
                 "then equal it; rows after the last whole batch are left out, with a warning), else of\n"
                 "--batch-size (default 32). Unused rules and layers a rule cannot apply to are warnings on\n"
                 "stderr.";
    return {spec, runRun};
}

} // namespace qs::cli
