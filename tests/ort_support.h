#pragma once
// ONNX Runtime as the reference runtime of the tests: runs an .onnx model with
// onnxruntime-node (CPU) through tests/ort/run_model.js and hands the outputs
// back as Tensors.
//
// How a test opts in (tests/CMakeLists.txt):
//     quantscope_add_test(tst_NAME conformance quantscope_runtime ...)
//     quantscope_use_ort(tst_NAME)
// quantscope_use_ort (tests/ort/ort.cmake) defines QUANTSCOPE_NODE,
// QUANTSCOPE_ORT_DIR and QUANTSCOPE_ORT_SCRIPT for the target, links
// quantscope_io (the .npy files exchanged with node) and makes the test require
// the CTest fixture `onnxruntime`, whose setup test `ort_install` installs the
// pinned onnxruntime-node into <build>/tests/ort/node_modules. Run a test by
// hand after `ctest -R ort_install` once.
//
// Everything here throws qs::Error: a missing node or ONNX Runtime install
// (saying how to get it), or ONNX Runtime's own message when it refuses a
// model or an input.

#include <QByteArray>
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QStandardPaths>
#include <QStringList>
#include <QTemporaryDir>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "io/npy.h"

#if !defined(QUANTSCOPE_NODE) || !defined(QUANTSCOPE_ORT_DIR) || !defined(QUANTSCOPE_ORT_SCRIPT)
#error "ort_support.h needs quantscope_use_ort(<target>) in tests/CMakeLists.txt"
#endif

namespace qs {

// Latencies of repeated ONNX Runtime runs of one model on fixed inputs, in
// milliseconds of wall-clock time per run (session creation not included).
struct OnnxRuntimeTiming {
    std::vector<double> runsMs;
    double medianMs = 0;
    double minMs = 0;
};

namespace ort_detail {

// Throws unless node and the installed onnxruntime-node can be found.
inline void requireInstall()
{
    const std::filesystem::path package =
        std::filesystem::path(QUANTSCOPE_ORT_DIR) / "node_modules" / "onnxruntime-node" / "package.json";
    if (!std::filesystem::exists(package))
        throw Error("ONNX Runtime is not installed: " + package.string() +
                    " is missing (run `ctest -R ort_install` in the build directory; it needs node, npm and the npm "
                    "registry)");
}

// Runs run_model.js; returns its stdout. `extra` are further arguments;
// `wrapper`, when not empty, is a program and its arguments that run node
// (an emulator of another CPU, say).
inline QByteArray runNode(const std::filesystem::path& model, const std::map<std::string, Tensor>& inputs,
                          const QString& outDir, const QTemporaryDir& work, const QStringList& extra,
                          const QStringList& wrapper = {})
{
    requireInstall();
    QJsonObject manifest;
    int index = 0;
    for (const auto& [name, tensor] : inputs) {
        const QString file = work.filePath(QStringLiteral("input_%1.npy").arg(index++));
        writeNpy(file.toStdString(), tensor);
        manifest.insert(QString::fromStdString(name), file);
    }
    const QString manifestFile = work.filePath(QStringLiteral("inputs.json"));
    QFile out(manifestFile);
    if (!out.open(QIODevice::WriteOnly) || out.write(QJsonDocument(manifest).toJson()) < 0)
        throw Error("cannot write " + manifestFile.toStdString());
    out.close();

    QProcess node;
    QStringList arguments{QStringLiteral(QUANTSCOPE_ORT_SCRIPT),
                          QStringLiteral("--ort-dir"),
                          QStringLiteral(QUANTSCOPE_ORT_DIR),
                          QStringLiteral("--model"),
                          QString::fromStdString(model.string()),
                          QStringLiteral("--inputs"),
                          manifestFile,
                          QStringLiteral("--out"),
                          outDir};
    arguments += extra;
    if (wrapper.isEmpty()) {
        node.start(QStringLiteral(QUANTSCOPE_NODE), arguments);
    } else {
        arguments.prepend(QStandardPaths::findExecutable(QStringLiteral(QUANTSCOPE_NODE)));
        node.start(wrapper.front(), wrapper.mid(1) + arguments);
    }
    if (!node.waitForStarted())
        throw Error("cannot start " +
                    (wrapper.isEmpty() ? std::string(QUANTSCOPE_NODE) : wrapper.front().toStdString()));
    node.waitForFinished(-1);
    const QByteArray stdoutBytes = node.readAllStandardOutput();
    if (node.exitStatus() != QProcess::NormalExit || node.exitCode() != 0)
        throw Error("ONNX Runtime failed on " + model.string() + ": " +
                    node.readAllStandardError().trimmed().toStdString());
    return stdoutBytes;
}

} // namespace ort_detail

// How runOnnxRuntime runs a model.
struct OnnxRuntimeRun {
    // A program and its arguments that run node (e.g. {"qemu-x86_64", "-cpu",
    // "Haswell"}: ONNX Runtime then picks the kernels of a CPU with AVX2 and no VNNI).
    QStringList wrapper;
    // > 0: the inputs are cut along axis 0 into batches of this many rows, and
    // each output is the batches' outputs joined along axis 0.
    int64_t batch = 0;
    QString level = QStringLiteral("all"); // graph optimisation: disabled, basic, extended, all
};

// Runs `model` with ONNX Runtime (CPU, 2 intra-op threads) on `inputs` (every
// graph input by name); returns every graph output by name.
inline std::map<std::string, Tensor> runOnnxRuntime(const std::filesystem::path& model,
                                                    const std::map<std::string, Tensor>& inputs,
                                                    const OnnxRuntimeRun& how = {})
{
    QTemporaryDir work;
    if (!work.isValid())
        throw Error("cannot create a temporary folder for ONNX Runtime's inputs and outputs");
    const QString outDir = work.filePath(QStringLiteral("out"));
    QStringList extra{QStringLiteral("--level"), how.level};
    if (how.batch > 0)
        extra << QStringLiteral("--batch") << QString::number(how.batch);
    ort_detail::runNode(model, inputs, outDir, work, extra, how.wrapper);
    QFile manifestFile(QDir(outDir).filePath(QStringLiteral("outputs.json")));
    if (!manifestFile.open(QIODevice::ReadOnly))
        throw Error("ONNX Runtime wrote no outputs.json for " + model.string());
    const QJsonObject manifest = QJsonDocument::fromJson(manifestFile.readAll()).object();
    std::map<std::string, Tensor> outputs;
    for (auto it = manifest.begin(); it != manifest.end(); ++it)
        outputs[it.key().toStdString()] = readNpy(QDir(outDir).filePath(it.value().toString()).toStdString());
    return outputs;
}

// Runs `model` once, then `warmup` + `repeat` more times on the same inputs
// with `threads` intra-op threads, and returns the `repeat` latencies.
inline OnnxRuntimeTiming timeOnnxRuntime(const std::filesystem::path& model,
                                         const std::map<std::string, Tensor>& inputs, int threads, int warmup,
                                         int repeat)
{
    QTemporaryDir work;
    if (!work.isValid())
        throw Error("cannot create a temporary folder for ONNX Runtime's inputs and outputs");
    const QByteArray json =
        ort_detail::runNode(model, inputs, work.filePath(QStringLiteral("out")), work,
                            {QStringLiteral("--threads"), QString::number(threads), QStringLiteral("--warmup"),
                             QString::number(warmup), QStringLiteral("--repeat"), QString::number(repeat)});
    const QJsonObject report = QJsonDocument::fromJson(json.trimmed()).object();
    OnnxRuntimeTiming timing;
    for (const QJsonValue v : report.value(QStringLiteral("runs_ms")).toArray())
        timing.runsMs.push_back(v.toDouble());
    timing.medianMs = report.value(QStringLiteral("median_ms")).toDouble();
    timing.minMs = report.value(QStringLiteral("min_ms")).toDouble();
    if (int(timing.runsMs.size()) != repeat)
        throw Error("ONNX Runtime's timing report for " + model.string() +
                    " is not what run_model.js prints: " + json.trimmed().toStdString());
    return timing;
}

} // namespace qs
