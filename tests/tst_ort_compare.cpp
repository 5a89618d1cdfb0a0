// The interpreter against ONNX Runtime (onnxruntime-node 1.30.0, CPU) on whole
// models: torchvision's ResNet-18 and MobileNetV3-Small, a small Transformer
// encoder and a set of Conv/Gemm nodes shaped to hit the edges of the runtime's
// fast paths, on wide-range data (all exported at test time by
// tests/ort/export_models.py with random seeded weights), and the demo digits
// CNN. Same seeded batch-2 inputs through both; every output must agree to a
// relative L2 error of 1e-4. Also checks that
// tests/ort_support.h hands back ONNX Runtime's own message when it refuses a run.
//
// With QUANTSCOPE_ORT_BENCH=R set, each model is also timed, R runs after one
// warm-up, on 2 threads in both runtimes, and "model ours_ms ort_ms ratio"
// lines are printed (fastest run of each: on a shared machine the least
// disturbed estimate): how docs/benchmarks.md measured its earlier rounds
// (tests/ort/bench_models.sh now runs the zoo benchmark, tests/bench/bench_zoo).
// Nothing is asserted about time.
#include <QtTest>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include <tbb/global_control.h>

#include "core/allocator.h"
#include "io/onnx_loader.h"
#include "ort_support.h"
#include "runtime/interpreter.h"

using namespace qs;

namespace {

constexpr double kMaxRelativeL2 = 1e-4;
constexpr int kBenchThreads = 2;

enum class InputKind {
    Normal,    // float32 N(0, 1)
    WideRange, // float32 N(0, 1) times 10^U(-3, 3), one value in 16 exactly zero
    Tokens,    // int64 token ids in [0, 1000)
};

struct InputSpec {
    const char* name;
    Shape shape;
    InputKind kind;
};

struct ModelCase {
    const char* name;
    std::filesystem::path file;
    std::vector<InputSpec> inputs;
};

std::vector<ModelCase> modelCases()
{
    const std::filesystem::path models = QUANTSCOPE_ORT_MODELS;
    return {
        {"digits_cnn", QUANTSCOPE_DEMO_MODEL, {{"input", {2, 1, 8, 8}, InputKind::Normal}}},
        {"resnet18", models / "resnet18.onnx", {{"input", {2, 3, 224, 224}, InputKind::Normal}}},
        {"mobilenet_v3_small", models / "mobilenet_v3_small.onnx", {{"input", {2, 3, 224, 224}, InputKind::Normal}}},
        {"transformer_encoder", models / "transformer_encoder.onnx", {{"tokens", {2, 16}, InputKind::Tokens}}},
        {"kernel_shapes",
         models / "kernel_shapes.onnx",
         {{"x", {2, 29, 23, 19}, InputKind::WideRange}, {"v", {2, 700}, InputKind::WideRange}}},
    };
}

Tensor seededInput(const InputSpec& spec, std::mt19937& rng)
{
    if (spec.kind == InputKind::Tokens) {
        Tensor t(DType::I64, spec.shape);
        std::uniform_int_distribution<int64_t> token(0, 999);
        for (int64_t& v : t.mutableValues<int64_t>())
            v = token(rng);
        return t;
    }
    Tensor t(DType::F32, spec.shape);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> decades(-3.0f, 3.0f);
    std::uniform_int_distribution<int> sixteenth(0, 15);
    for (float& v : t.mutableValues<float>()) {
        v = normal(rng);
        if (spec.kind == InputKind::WideRange)
            v = sixteenth(rng) == 0 ? 0.0f : v * std::pow(10.0f, decades(rng));
    }
    return t;
}

std::map<std::string, Tensor> seededInputs(const ModelCase& c, uint32_t seed)
{
    std::mt19937 rng(seed);
    std::map<std::string, Tensor> inputs;
    for (const InputSpec& spec : c.inputs)
        inputs[spec.name] = seededInput(spec, rng);
    return inputs;
}

// ||ours - reference|| / ||reference||, in double.
double relativeL2(const Tensor& ours, const Tensor& reference)
{
    const auto a = ours.values<float>();
    const auto b = reference.values<float>();
    double diff = 0, norm = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        diff += (double(a[i]) - double(b[i])) * (double(a[i]) - double(b[i]));
        norm += double(b[i]) * double(b[i]);
    }
    return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
}

} // namespace

class TstOrtCompare : public QObject {
    Q_OBJECT

private slots:
    void modelsAgreeWithOnnxRuntime_data();
    void modelsAgreeWithOnnxRuntime();
    void onnxRuntimeErrorsReachTheTest();
};

void TstOrtCompare::modelsAgreeWithOnnxRuntime_data()
{
    QTest::addColumn<int>("index");
    const auto cases = modelCases();
    for (size_t i = 0; i < cases.size(); ++i)
        QTest::newRow(cases[i].name) << int(i);
}

void TstOrtCompare::modelsAgreeWithOnnxRuntime()
{
    QFETCH(int, index);
    const ModelCase c = modelCases()[size_t(index)];
    QVERIFY2(std::filesystem::exists(c.file),
             qPrintable(QString::fromStdString(c.file.string() + " is missing: the CTest fixture ort_models "
                                                                 "(tests/ort/export_models.py) generates it")));
    const std::map<std::string, Tensor> inputs = seededInputs(c, 1234 + uint32_t(index));

    const Interpreter interpreter(loadOnnx(c.file));
    const std::map<std::string, Tensor> ours = interpreter.run(inputs);
    const std::map<std::string, Tensor> reference = runOnnxRuntime(c.file, inputs);

    QCOMPARE(ours.size(), reference.size());
    for (const auto& [name, expected] : reference) {
        QVERIFY2(ours.count(name), qPrintable(QString::fromStdString("the interpreter gave no output '" + name + "'")));
        const Tensor& got = ours.at(name);
        QCOMPARE(got.dtype(), expected.dtype());
        QCOMPARE(shapeToString(got.shape()), shapeToString(expected.shape()));
        const double error = relativeL2(got, expected);
        qInfo("%s: output '%s' %s, relative L2 error vs ONNX Runtime %.3g", c.name, name.c_str(),
              shapeToString(got.shape()).c_str(), error);
        QVERIFY2(error <= kMaxRelativeL2, qPrintable(QStringLiteral("%1 output '%2': relative L2 error %3 > %4")
                                                         .arg(c.name, QString::fromStdString(name))
                                                         .arg(error)
                                                         .arg(kMaxRelativeL2)));
    }

    const int benchRuns = qEnvironmentVariableIntValue("QUANTSCOPE_ORT_BENCH");
    if (benchRuns > 0) {
        keepFreedMemoryForReuse(); // as quantscope-cli and the app run
        const tbb::global_control threads(tbb::global_control::max_allowed_parallelism, kBenchThreads);
        (void)interpreter.run(inputs);
        std::vector<double> runs;
        for (int i = 0; i < benchRuns; ++i) {
            const auto start = std::chrono::steady_clock::now();
            (void)interpreter.run(inputs);
            runs.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
        }
        const double oursMs = *std::min_element(runs.begin(), runs.end());
        const double ortMs = timeOnnxRuntime(c.file, inputs, kBenchThreads, 1, benchRuns).minMs;
        std::printf("BENCH %s %.3f %.3f %.2f\n", c.name, oursMs, ortMs, oursMs / ortMs);
        std::fflush(stdout);
    }
}

void TstOrtCompare::onnxRuntimeErrorsReachTheTest()
{
    const ModelCase c = modelCases().front();
    // An input of the wrong rank: ONNX Runtime refuses it and says why.
    const std::map<std::string, Tensor> inputs{{c.inputs.front().name, Tensor(DType::F32, {2, 64})}};
    try {
        runOnnxRuntime(c.file, inputs);
        QFAIL("ONNX Runtime accepted a [2, 64] input for a [N, 1, 8, 8] model");
    } catch (const Error& e) {
        const QString message = QString::fromUtf8(e.what());
        QVERIFY2(message.contains(QStringLiteral("ONNX Runtime")) && message.contains(QStringLiteral("input")),
                 qPrintable(message));
        QVERIFY2(message.contains(QString::fromStdString(c.file.string())), qPrintable(message));
    }
}

QTEST_APPLESS_MAIN(TstOrtCompare)
#include "tst_ort_compare.moc"
