// quantscope-cli run: a model's outputs on given inputs, float or fake-quantized
// by a rule file, written as an .npz.
#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
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

// Rows [first, first + count) of a row-major tensor, sharing its storage.
Tensor rowsOf(const Tensor& t, int64_t first, int64_t count)
{
    Shape shape = t.shape();
    shape[0] = count;
    const size_t rowBytes = t.nbytes() / size_t(t.dim(0));
    return Tensor::borrow(t.dtype(), shape, static_cast<const std::byte*>(t.rawData()) + size_t(first) * rowBytes,
                          t.storage());
}

// The pieces one after another along axis 0.
Tensor concatenatedRows(const std::vector<Tensor>& pieces)
{
    Shape shape = pieces[0].shape();
    shape[0] = 0;
    for (const Tensor& p : pieces)
        shape[0] += p.dim(0);
    Tensor out = Tensor::uninitialized(pieces[0].dtype(), shape);
    auto* to = static_cast<std::byte*>(out.mutableRawData());
    for (const Tensor& p : pieces) {
        if (p.nbytes())
            std::memcpy(to, p.rawData(), p.nbytes());
        to += p.nbytes();
    }
    return out;
}

// The rows every input shares along axis 0 when they are more than one batch
// of `sizing` (a fixed batch of N then needs a multiple of N rows); 0 when
// the inputs run whole, as one batch.
int64_t inputRows(const std::map<std::string, Tensor>& inputs, const BatchSizing& sizing, const std::string& modelFile)
{
    std::optional<int64_t> rows;
    std::string first;
    for (const auto& [name, t] : inputs) {
        if (t.rank() == 0)
            return 0;
        if (rows && *rows != t.dim(0)) {
            if (sizing.batchSize < std::max(*rows, t.dim(0)))
                throw Error(modelFile + ": inputs '" + first + "' and '" + name + "' have different row counts (" +
                            std::to_string(*rows) + " and " + std::to_string(t.dim(0)) +
                            "), so they cannot be run in batches of " + std::to_string(sizing.batchSize));
            return 0;
        }
        rows = t.dim(0);
        first = name;
    }
    if (!rows || *rows <= sizing.batchSize)
        return 0;
    if (sizing.fixed() && *rows % sizing.batchSize != 0)
        throw Error(modelFile + ": the inputs have " + std::to_string(*rows) + " rows; the model's input '" +
                    sizing.fixedBy + "' takes batches of exactly " + std::to_string(sizing.batchSize) +
                    ", so give a multiple of " + std::to_string(sizing.batchSize) + " rows");
    return *rows;
}

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
    const Exploration quantization = openExploration(options);

    const Model& model = quantization.model();
    const std::string modelFile = options.modelFile.string();
    std::string inputNames;
    for (const ValueInfo& v : model.inputs)
        inputNames += (inputNames.empty() ? "" : ", ") + v.name;
    for (const auto& [inputName, file] : inputFiles) {
        const std::string& name = inputName; // clang before 16 cannot capture a structured binding in a lambda
        if (std::none_of(model.inputs.begin(), model.inputs.end(), [&](const ValueInfo& v) { return v.name == name; }))
            throw Error("--input " + name + "=" + file + ": " + modelFile + " has no input '" + name +
                        "'; its inputs: " + inputNames);
    }
    const std::map<std::string, Shape> shapes = shapeOptions(args, model, modelFile);
    const int64_t batch = batchSizingFor(model, std::nullopt, 1).batchSize;
    std::map<std::string, Tensor> inputs;
    std::vector<std::string> synthetic;
    std::mt19937_64 random(kSyntheticSeed);
    for (const ValueInfo& v : model.inputs) {
        const auto file = inputFiles.find(v.name);
        const auto shape = shapes.find(v.name);
        if (shape != shapes.end()) // the declared rank and fixed dimensions
            syntheticShape(v, shape->second, batch, modelFile, "");
        if (file != inputFiles.end()) {
            Tensor t = readNpy(file->second);
            if (shape != shapes.end() && t.shape() != shape->second)
                throw Error("--input " + v.name + "=" + file->second + ": the array is " + shapeToString(t.shape()) +
                            ", --shape says " + shapeToString(shape->second));
            inputs[v.name] = std::move(t);
        } else if (shape != shapes.end()) {
            inputs[v.name] = syntheticTensor(v, shape->second, syntheticIdBound(model, v.name), random);
            synthetic.push_back(v.name + " " + shapeToString(shape->second));
        } else {
            throw Error(modelFile + ": input '" + v.name + "' (" + v.toString() + ") needs --input " + v.name +
                        "=FILE.npy, or --shape " + shapeExample(v, batch) + " for seeded random values" +
                        dynamicDimsText(v));
        }
    }
    const Interpreter& interpreter = *quantization.interpreter();
    std::optional<QuantizationHook> hook;
    std::map<size_t, StaticActivation> statics;
    if (options.rulesFile) {
        statics = requiredStaticActivations(model, *quantization.plan(), quantization.statistics().get());
        hook.emplace(model, *quantization.plan(), *quantization.weights(), statics);
    }
    const BatchSizing sizing = cliBatchSizing(model, options.batchSize, std::numeric_limits<int64_t>::max());
    const int64_t rows = inputRows(inputs, sizing, modelFile);
    std::map<std::string, std::vector<Tensor>> pieces;
    int64_t first = 0;
    do {
        const int64_t count = rows ? std::min(sizing.batchSize, rows - first) : 0;
        std::map<std::string, Tensor> batch;
        for (const auto& [name, t] : inputs)
            batch[name] = rows ? rowsOf(t, first, count) : t;
        std::map<std::string, Tensor> out =
            interpreter.run(std::move(batch), {CancellationToken(), hook ? &*hook : nullptr});
        for (auto& [name, t] : out) {
            if (rows && (t.rank() == 0 || t.dim(0) != count))
                throw Error(modelFile + ": output '" + name + "' is " + shapeToString(t.shape()) + " for a batch of " +
                            std::to_string(count) + " rows: its axis 0 is not the batch, so the " +
                            std::to_string(rows) + " input rows cannot be run in batches of " +
                            std::to_string(sizing.batchSize));
            pieces[name].push_back(std::move(t));
        }
        first += count;
    } while (first < rows);
    std::map<std::string, Tensor> outputs;
    for (auto& [name, parts] : pieces)
        outputs[name] = parts.size() == 1 ? std::move(parts[0]) : concatenatedRows(parts);
    const std::string out = *args.value("--out");
    writeNpz(out, outputs);
    std::string names;
    for (const auto& [name, t] : outputs)
        names += (names.empty() ? "" : ", ") + name + " " + shapeToString(t.shape());
    std::string seeded;
    for (const std::string& s : synthetic)
        seeded += (seeded.empty() ? "; seeded random input " : ", ") + s;
    std::printf("%s -> %s: %s (%s%s)\n", modelFile.c_str(), out.c_str(), names.c_str(),
                options.rulesFile ? "fake-quantized" : "float", seeded.c_str());
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
        {"--calib",
         "DATA",
         "calibration data (.npz, .npy, HDF5) for rules with act_static_scale or algorithm gptq/awq/adaround",
         {},
         false},
        {"--batch-size",
         "B",
         "rows per batch of the inputs and of --calib (default: the model's fixed batch dimension)",
         {},
         false},
        {"--out", "OUT.npz", "where every graph output goes, by name, as an .npz (written atomically)", {}, true},
    };
    spec.notes = "Every graph input needs an --input or a --shape. An input with only --shape gets seeded\n"
                 "random values of that shape: float inputs standard normal, integer inputs ids below the row\n"
                 "count of the embedding table (Gather) they feed, else in [0, 10); the shape must keep the\n"
                 "model's fixed dimensions. An input given neither is an error naming its dynamic dimensions.\n"
                 "Batches: a model whose inputs fix axis 0 runs the inputs in batches of exactly that size (they\n"
                 "need a multiple of it in rows; --batch-size must equal it); a dynamic batch runs them whole,\n"
                 "or in batches of --batch-size. The outputs of the batches are joined along axis 0 and keep\n"
                 "the model's dtypes. Without --rules the model runs in float; with --rules every layer a rule\n"
                 "applies to runs with its fake-quantized weight and, when the rule sets act_qtype, its\n"
                 "fake-quantized input activation (static ranges from --calib, dynamic ranges from each\n"
                 "batch's own values). Calibration reads DATA in batches of the model's fixed batch dimension\n"
                 "(rows after the last whole batch are left out, with a warning), else of --batch-size\n"
                 "(default 32). Unused rules and layers a rule cannot apply to are warnings on stderr.";
    return {spec, runRun};
}

} // namespace qs::cli
