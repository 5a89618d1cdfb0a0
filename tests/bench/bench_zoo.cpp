// The interpreter against ONNX Runtime across the model zoo (tests/zoo): for
// each model and batch size, seeded inputs written once as .npy files for
// both; after a warm-up, rounds in which each variant runs untimed (at least K
// calls and S milliseconds) and then once timed, in turn: our float run; one run of a long-lived ONNX Runtime
// child (tests/ort/bench_server.js), which times it itself; our
// calibration-observed and fake-quantized runs (as bench-model measures them,
// cli/model_latency.h). Prints one row per model and batch (fastest round of
// each runtime), then the geometric mean and the largest of the ratios.
//
//     bench_zoo [--zoo DIR] [--models a,b,...] [--batch 1,8] [--runs N] [--threads T]
//               [--untimed K] [--settle-ms S] [--pause-ms P] [--level L] [--work DIR] [--json]
//
// A benchmark, not a test: CTest does not run it (docs/benchmarks.md).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include <QProcess>
#include <QTemporaryDir>

#include <nlohmann/json.hpp>
#include <tbb/global_control.h>

#include "cli/model_latency.h"
#include "cli/text_table.h"
#include "core/allocator.h"
#include "io/model_loader.h"

using namespace qs;
using namespace qs::cli;

namespace {

struct Options {
    std::string zoo = QUANTSCOPE_BENCH_ZOO_DIR;
    std::vector<std::string> models; // empty: every architecture of the zoo
    std::vector<int64_t> batches{1, 8};
    int runs = 20;
    int threads = 2;
    // Idle before each timed call. 0 by default: on this machine (2 vCPUs of a
    // VM) a pause of 2-10 ms slowed both sides, the encoders' runs by up to 3x
    // (idle vCPUs and sleeping thread pools wake late), which is not what
    // back-to-back inference sees.
    int pauseMs = 0;
    // Untimed calls of the same variant right before each timed one, so that
    // each runtime's timed run starts with its own threads awake and its own
    // data in cache, not right after the other's. Measured here: ONNX
    // Runtime's fastest efficientnet_b0 run 2.47 ms with none, 2.21 with one,
    // 2.09 with three, 1.93 with six or ten (1.71 back to back in its own
    // process). Ours on the small models needs ten too: right after ONNX
    // Runtime's runs, whose two threads still spin on the two vCPUs,
    // squeezenet at batch 1 took 0.811 ms with three, 0.645 with ten, 0.625
    // with thirty, as bench-model alone (ONNX Runtime 0.443, 0.420, 0.426).
    int untimed = 10;
    // ... and untimed calls for at least this long. Ten calls of a small model
    // are a millisecond or two, less than ONNX Runtime's process takes to go
    // quiet after its timed run: the variant timed right after it (the
    // observed run) was the slower for it. detection_head at batch 8 read
    // observers +79% with ten calls (every histogram, timed later, +42%),
    // +11% with forty (52 ms), as bench-model alone. Both sides settle alike.
    int settleMs = 50;
    std::string level = "all";
    std::string work; // where the inputs and ONNX Runtime's outputs go; empty: a temporary folder
    bool json = false;
};

const char* kUsage = "usage: bench_zoo [--zoo DIR] [--models a,b,...] [--batch 1,8] [--runs N] [--threads T]\n"
                     "                 [--untimed K] [--settle-ms S] [--pause-ms P] [--level L] [--work DIR]\n"
                     "                 [--json]\n";

std::vector<std::string> splitList(const std::string& text)
{
    std::vector<std::string> items;
    std::stringstream in(text);
    for (std::string item; std::getline(in, item, ',');)
        if (!item.empty())
            items.push_back(item);
    return items;
}

int64_t positive(const std::string& option, const std::string& text)
{
    size_t used = 0;
    long long v = 0;
    try {
        v = std::stoll(text, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used != text.size() || v < 1)
        throw Error(option + " takes a whole number of at least 1, not '" + text + "'");
    return v;
}

Options parseOptions(int argc, char** argv)
{
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string key = argv[i];
        if (key == "--json") {
            o.json = true;
            continue;
        }
        if (i + 1 >= argc)
            throw Error(std::string(key) + " needs a value\n" + kUsage);
        const std::string value = argv[++i];
        if (key == "--zoo")
            o.zoo = value;
        else if (key == "--models")
            o.models = splitList(value);
        else if (key == "--batch") {
            o.batches.clear();
            for (const std::string& b : splitList(value))
                o.batches.push_back(positive(key, b));
        } else if (key == "--runs")
            o.runs = int(positive(key, value));
        else if (key == "--threads")
            o.threads = int(positive(key, value));
        else if (key == "--untimed")
            o.untimed = value == "0" ? 0 : int(positive(key, value));
        else if (key == "--settle-ms")
            o.settleMs = value == "0" ? 0 : int(positive(key, value));
        else if (key == "--pause-ms")
            o.pauseMs = value == "0" ? 0 : int(positive(key, value));
        else if (key == "--level")
            o.level = value;
        else if (key == "--work")
            o.work = value;
        else
            throw Error("unknown option " + key + "\n" + kUsage);
    }
    return o;
}

// tests/ort/bench_server.js as a child process: one JSON request per line,
// one reply per line.
class OnnxRuntimeServer {
public:
    OnnxRuntimeServer()
    {
        process_.setProcessChannelMode(QProcess::ForwardedErrorChannel);
        process_.start(QStringLiteral(QUANTSCOPE_NODE),
                       {QStringLiteral(QUANTSCOPE_ORT_BENCH_SERVER), QStringLiteral("--ort-dir"),
                        QStringLiteral(QUANTSCOPE_ORT_DIR)});
        if (!process_.waitForStarted())
            throw Error("cannot start " + std::string(QUANTSCOPE_NODE) + " " + QUANTSCOPE_ORT_BENCH_SERVER);
    }
    ~OnnxRuntimeServer()
    {
        process_.write("{\"op\": \"quit\"}\n");
        process_.closeWriteChannel();
        if (!process_.waitForFinished(10000))
            process_.kill();
    }

    nlohmann::json request(const nlohmann::json& message)
    {
        process_.write(QByteArray::fromStdString(message.dump() + "\n"));
        while (!process_.canReadLine())
            if (!process_.waitForReadyRead(-1))
                throw Error("ONNX Runtime's bench_server.js ended (exit status " + std::to_string(process_.exitCode()) +
                            ") while asked " + message.dump());
        const nlohmann::json reply = nlohmann::json::parse(process_.readLine().toStdString());
        if (reply.contains("error"))
            throw Error(reply["error"].get<std::string>());
        return reply;
    }

private:
    QProcess process_;
};

// The largest relative L2 distance of our float outputs from ONNX Runtime's
// (written by bench_server.js into `dir`): the rows time the same computation.
double largestRelativeL2(const std::map<std::string, Tensor>& ours, const std::filesystem::path& dir)
{
    std::ifstream manifestFile(dir / "outputs.json");
    const nlohmann::json manifest = nlohmann::json::parse(manifestFile);
    double largest = 0;
    for (const auto& [name, file] : manifest.items()) {
        const Tensor theirs = readNpy(dir / file.get<std::string>());
        const auto found = ours.find(name);
        if (found == ours.end() || found->second.numel() != theirs.numel())
            throw Error("output '" + name + "': ours and ONNX Runtime's differ in presence or size");
        if (theirs.dtype() != DType::F32 || found->second.dtype() != DType::F32)
            continue;
        const auto a = found->second.values<float>(), b = theirs.values<float>();
        double signal = 0, noise = 0;
        for (size_t i = 0; i < a.size(); ++i) {
            signal += double(b[i]) * b[i];
            noise += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
        }
        largest = std::max(largest, signal > 0 ? std::sqrt(noise / signal) : std::sqrt(noise));
    }
    return largest;
}

struct Row {
    std::string model;
    int64_t batch = 0;
    std::string skipped; // why the row was not measured; empty when it was
    Latency ours, ort, observed, everyHistogram, fakeQuant;
    double relativeL2 = 0;
    double ratio() const { return ours.min / ort.min; }
};

Row measureModel(OnnxRuntimeServer& server, const Options& options, const std::string& name,
                 const std::filesystem::path& work, int64_t batch, std::string& runtime)
{
    Row row;
    row.model = name;
    row.batch = batch;
    const std::filesystem::path file = std::filesystem::path(options.zoo) / (name + ".onnx");
    Model model = loadModel(file);
    const BatchSizing sizing = batchSizingFor(model, std::nullopt, batch);
    if (sizing.fixed() && sizing.batchSize != batch) {
        row.skipped = "input '" + sizing.fixedBy + "' fixes the batch at " + std::to_string(sizing.batchSize) +
                      " (make_zoo.py --dynamic-batch writes a zoo with a dynamic batch)";
        return row;
    }
    const std::map<std::string, Tensor> inputs = syntheticInputs(model, batch, {}, file.string(), [](const ValueInfo&) {
        return std::string("the zoo's models have no dynamic dimension but the batch");
    });
    const std::filesystem::path dir = work / (name + "_batch" + std::to_string(batch));
    const std::filesystem::path inputsFile = writeInputsForOnnxRuntime(dir / "inputs", inputs);
    const nlohmann::json loaded = server.request({{"op", "load"},
                                                  {"model", std::filesystem::absolute(file).string()},
                                                  {"inputs", std::filesystem::absolute(inputsFile).string()},
                                                  {"threads", options.threads},
                                                  {"level", options.level},
                                                  {"outputs", std::filesystem::absolute(dir / "ort").string()}});
    runtime = loaded["runtime"].get<std::string>();

    const Interpreter interpreter(std::move(model));
    row.relativeL2 = largestRelativeL2(interpreter.run(inputs), dir / "ort");
    const RuleSet rules = RuleSet::fromJson(kDefaultFakeQuantRules, "<default rules>");
    QuantizedRunVariants variants(interpreter, rules, inputs);
    const auto pause = [&] {
        if (options.pauseMs > 0)
            std::this_thread::sleep_for(std::chrono::milliseconds(options.pauseMs));
    };
    const auto ours = [&](std::function<void()> run) {
        return [&options, pause, run, timed = wallClock(run)] {
            const auto settled = std::chrono::steady_clock::now() + std::chrono::milliseconds(options.settleMs);
            for (int i = 0; i < options.untimed || std::chrono::steady_clock::now() < settled; ++i)
                run();
            pause();
            return timed();
        };
    };
    const std::vector<Latency> measured = measureInterleaved(
        options.runs, {ours([&] { variants.runFloat(); }),
                       [&] {
                           pause();
                           return server.request({{"op", "run"}, {"untimed", options.untimed}, {"settle_ms", options.settleMs}})["ms"].get<double>();
                       },
                       ours([&] { variants.runObserved(); }), ours([&] { variants.runObservedEveryHistogram(); }),
                       ours([&] { variants.runFakeQuant(); })});
    row.ours = measured[0];
    row.ort = measured[1];
    row.observed = measured[2];
    row.everyHistogram = measured[3];
    row.fakeQuant = measured[4];
    return row;
}

// The zoo's architectures in zoo.json's order (tests/zoo/make_zoo.py marks them).
std::vector<std::string> zooArchitectures(const std::filesystem::path& zoo)
{
    std::ifstream in(zoo / "zoo.json");
    if (!in)
        throw Error((zoo / "zoo.json").string() +
                    " is missing: run /usr/bin/python3 tests/zoo/make_zoo.py --dynamic-batch " + zoo.string());
    const nlohmann::ordered_json manifest = nlohmann::ordered_json::parse(in);
    std::vector<std::string> names;
    for (const auto& [name, entry] : manifest.items()) {
        if (!entry.contains("architecture"))
            throw Error((zoo / "zoo.json").string() + " predates the architecture marks: run make_zoo.py again");
        if (entry["architecture"].get<bool>())
            names.push_back(name);
    }
    return names;
}

double geometricMean(const std::vector<double>& values)
{
    double logSum = 0;
    for (double v : values)
        logSum += std::log(v);
    return values.empty() ? 0 : std::exp(logSum / double(values.size()));
}

void printText(const Options& options, const std::string& runtime, const std::vector<Row>& rows)
{
    std::printf("zoo %s; %d threads (ours: tbb::global_control; %s: intra-op %d, inter-op 1, sequential, "
                "level %s)\n",
                options.zoo.c_str(), options.threads, runtime.c_str(), options.threads, options.level.c_str());
    std::printf("%d interleaved rounds after a warm-up; in each, every variant runs untimed (at least %d calls "
                "and %d ms), then once timed%s;\nours and ORT: fastest of the rounds; observers and fake-quant: "
                "medians over float's median, as bench-model (int8 weights, int8 dynamic activations)\n\n",
                options.runs, options.untimed, options.settleMs,
                options.pauseMs > 0 ? (" after " + std::to_string(options.pauseMs) + " ms idle").c_str() : "");
    std::vector<std::vector<std::string>> table{{"model", "batch", "ours ms", "ORT ms", "ratio", "observers",
                                                 "+every histogram", "fake-quant/float", "rel. L2 vs ORT"}};
    for (const Row& r : rows) {
        if (!r.skipped.empty()) {
            table.push_back({r.model, std::to_string(r.batch), "skipped", "", "", "", "", "", ""});
            continue;
        }
        table.push_back({r.model, std::to_string(r.batch), formatNumber(r.ours.min, "%.3f"),
                         formatNumber(r.ort.min, "%.3f"), formatNumber(r.ratio(), "%.2f"),
                         formatNumber(100 * (r.observed.median / r.ours.median - 1), "%+.1f%%"),
                         formatNumber(100 * (r.everyHistogram.median / r.ours.median - 1), "%+.1f%%"),
                         formatNumber(r.fakeQuant.median / r.ours.median, "%.2f"), formatNumber(r.relativeL2, "%.1e")});
    }
    std::printf("%s", alignedTable(table, {false, true, true, true, true, true, true, true, true}).c_str());
    for (const Row& r : rows)
        if (!r.skipped.empty())
            std::printf("skipped %s, batch %lld: %s\n", r.model.c_str(), static_cast<long long>(r.batch),
                        r.skipped.c_str());
}

} // namespace

int main(int argc, char** argv)
{
    try {
        const Options options = parseOptions(argc, argv);
        keepFreedMemoryForReuse(); // as quantscope-cli and the app run
        tbb::global_control limit(tbb::global_control::max_allowed_parallelism, size_t(options.threads));
        const std::vector<std::string> available = zooArchitectures(options.zoo);
        std::vector<std::string> names = options.models.empty() ? available : options.models;
        for (const std::string& name : names)
            if (std::find(available.begin(), available.end(), name) == available.end()) {
                std::string list;
                for (const std::string& a : available)
                    list += (list.empty() ? "" : ", ") + a;
                throw Error("--models: the zoo in " + options.zoo + " has no architecture '" + name + "' (it has " +
                            list + ")");
            }

        QTemporaryDir temporary;
        const std::filesystem::path work = options.work.empty() ? temporary.path().toStdString() : options.work;
        OnnxRuntimeServer server;
        std::string runtime;
        std::vector<Row> rows;
        for (const std::string& name : names)
            for (int64_t batch : options.batches) {
                if (::isatty(STDERR_FILENO) == 1)
                    std::fprintf(stderr, "%s, batch %lld\n", name.c_str(), static_cast<long long>(batch));
                rows.push_back(measureModel(server, options, name, work, batch, runtime));
            }

        std::vector<double> ratios;
        const Row* largest = nullptr;
        for (const Row& r : rows)
            if (r.skipped.empty()) {
                ratios.push_back(r.ratio());
                if (!largest || r.ratio() > largest->ratio())
                    largest = &r;
            }
        if (options.json) {
            nlohmann::ordered_json j{{"zoo", options.zoo},         {"runtime", runtime},
                                     {"threads", options.threads}, {"runs", options.runs},
                                     {"untimed", options.untimed}, {"settle_ms", options.settleMs}, {"pause_ms", options.pauseMs},
                                     {"level", options.level}};
            nlohmann::ordered_json& out = j["rows"] = nlohmann::ordered_json::array();
            for (const Row& r : rows) {
                nlohmann::ordered_json row{{"model", r.model}, {"batch", r.batch}};
                if (!r.skipped.empty()) {
                    row["skipped"] = r.skipped;
                } else {
                    row["ours_ms_min"] = r.ours.min;
                    row["ours_ms_median"] = r.ours.median;
                    row["ort_ms_min"] = r.ort.min;
                    row["ort_ms_median"] = r.ort.median;
                    row["ratio"] = r.ratio();
                    row["observer_overhead"] = r.observed.median / r.ours.median - 1;
                    row["observer_overhead_all_histograms"] = r.everyHistogram.median / r.ours.median - 1;
                    row["fake_quant_ratio"] = r.fakeQuant.median / r.ours.median;
                    row["relative_l2_vs_ort"] = r.relativeL2;
                }
                out.push_back(row);
            }
            j["geomean_ratio"] = geometricMean(ratios);
            j["max_ratio"] = largest ? largest->ratio() : 0.0;
            j["max_ratio_model"] = largest ? largest->model + " batch " + std::to_string(largest->batch) : "";
            std::printf("%s\n", j.dump(2).c_str());
            return 0;
        }
        printText(options, runtime, rows);
        if (largest)
            std::printf("\ngeometric mean of the ratios %.2f over %zu rows; largest %.2f (%s, batch %lld)\n",
                        geometricMean(ratios), ratios.size(), largest->ratio(), largest->model.c_str(),
                        static_cast<long long>(largest->batch));
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_zoo: %s\n", e.what());
        return 1;
    }
}
