#include "gui/export_dialog.h"

#include <QFileInfo>

#include <QDialogButtonBox>
#include <QFile>
#include <QLabel>
#include <QLocale>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "export/checkpoint.h"
#include "export/gguf.h"
#include "export/checkpoint_reader.h"
#include "export/odml.h"
#include "export/onnx_qdq.h"
#include "export/tflite.h"
#include "gui/workspace.h"
#include "io/model_loader.h"
#include "quantization/weight_quantizer.h"
#include "runtime/interpreter.h"

namespace qs {

namespace {

QString passed(const QString& text)
{
    return QStringLiteral("✔ ") + text;
}

QString failed(const QString& text)
{
    return QStringLiteral("✘ ") + text;
}

QString bytesText(int64_t bytes)
{
    return QLocale().formattedDataSize(bytes);
}

} // namespace

bool ExportOutcome::allChecksPassed() const
{
    return std::all_of(checks.begin(), checks.end(),
                       [](const QString& c) { return c.startsWith(QStringLiteral("✔")); });
}

ExportOutcome exportCheckpointChecked(const ExportInputs& in, const QString& path, const CancellationToken& cancel,
                                      const ProgressCallback& progress)
{
    ExportOutcome out;
    out.title = QObject::tr("Quantized checkpoint");
    out.path = path;
    auto writing = [&progress](double f, std::string_view step) {
        if (progress)
            progress(0.8 * f, step);
    };
    const ExportSummary summary =
        exportCheckpoint(*in.model, *in.plan, *in.weights, *in.rules, path.toStdString(), {}, cancel, writing);
    out.floatBytes = summary.floatBytes;
    out.quantizedBytes = summary.quantizedBytes;
    for (const std::string& n : summary.notes)
        out.notes << QString::fromStdString(n);
    if (progress)
        progress(0.85, "reopening the checkpoint");
    try {
        const QuantizedCheckpoint checkpoint = QuantizedCheckpoint::open(path.toStdString());
        out.checks << passed(QObject::tr("reopened: %1 quantized and %2 float tensors, manifest read")
                                 .arg(checkpoint.quantizedTensors().size())
                                 .arg(checkpoint.floatTensors().size()));
        // The stored codes must give back exactly the weights the simulation used.
        double worst = 0;
        int compared = 0;
        for (const auto& [layer, weight] : in.weights->weights()) {
            cancel.check();
            const std::string& name = in.model->layers[layer].weightName;
            if (!checkpoint.isQuantized(name))
                continue;
            const Tensor restored = checkpoint.dequantized(name);
            const auto a = restored.values<float>();
            const Tensor fake = WeightQuantizer::fakeQuantOf(*in.model, *weight);
            const auto b = fake.values<float>();
            if (a.size() != b.size()) {
                worst = std::numeric_limits<double>::infinity();
                break;
            }
            for (size_t i = 0; i < a.size(); ++i)
                worst = std::max(worst, double(std::fabs(a[i] - b[i])));
            ++compared;
        }
        const QString text = QObject::tr("dequantized weights of %1 layers against the simulation: max |difference| %2")
                                 .arg(compared)
                                 .arg(worst, 0, 'g', 3);
        out.checks << (worst <= 1e-6 ? passed(text) : failed(text));
    } catch (const Error& e) {
        out.checks << failed(QObject::tr("reopening failed: %1").arg(QString::fromUtf8(e.what())));
    }
    return out;
}

ExportOutcome exportOnnxChecked(const ExportInputs& in, const QString& path, const CancellationToken& cancel,
                                const ProgressCallback& progress, const OnnxExportOptions& options)
{
    ExportOutcome out;
    out.title = QObject::tr("ONNX QDQ model");
    out.path = path;
    std::map<size_t, StaticActivation> statics;
    if (in.statistics)
        statics = staticActivations(*in.plan, *in.statistics);
    if (progress)
        progress(0.1, "writing the QDQ model");
    const OnnxExportSummary summary = exportOnnxQdq(*in.model, *in.plan, *in.weights, statics, path.toStdString(), options);
    cancel.check();
    out.floatBytes = summary.floatBytes;
    out.quantizedBytes = summary.quantizedBytes;
    out.checks
        << (summary.checked
                ? passed(
                      QObject::tr("onnx::checker passed (opset %1, IR %2)").arg(summary.opset).arg(summary.irVersion))
                : QObject::tr("– onnx::checker not run: libonnx does not know opset %1").arg(summary.opset));
    out.notes << QObject::tr("int4 form '%1'").arg(QString::fromUtf8(int4FormName(summary.int4Form)));
    out.notes << QObject::tr("8-bit form '%1': %2")
                     .arg(QString::fromUtf8(eightBitFormName(summary.eightBitForm)),
                          QString::fromStdString(eightBitFormReason(summary.eightBitForm)));
    for (const PassReport& p : summary.passes)
        if (p.changes > 0)
            out.notes << QObject::tr("pass %1: %2 rewrites").arg(QString::fromStdString(p.pass)).arg(p.changes);
    for (const std::string& v : summary.dynamicActivations)
        out.notes << QObject::tr("%1 left float for the runtime's dynamic quantization").arg(QString::fromStdString(v));
    for (const std::string& w : summary.warnings)
        out.notes << QString::fromStdString(w);
    if (progress)
        progress(0.7, "reloading the QDQ model");
    try {
        Model reloaded = loadModel(path.toStdString());
        const size_t nodes = reloaded.nodes.size();
        out.checks << passed(QObject::tr("reloaded: %1 nodes").arg(nodes));
        Interpreter runnable(std::move(reloaded));
        out.checks << passed(QObject::tr("the runtime can run it (every op has a kernel)"));
    } catch (const Error& e) {
        out.checks << failed(QObject::tr("reload failed: %1").arg(QString::fromUtf8(e.what())));
    }
    return out;
}

ExportOutcome exportGgufChecked(const ExportInputs& in, const QString& path, const CancellationToken& cancel,
                                const ProgressCallback& progress)
{
    ExportOutcome out;
    out.title = QObject::tr("GGUF model (llama.cpp)");
    out.path = path;
    const ExportSummary summary = exportGguf(*in.model, *in.plan, path.toStdString(), cancel, progress);
    out.floatBytes = summary.floatBytes;
    out.quantizedBytes = summary.quantizedBytes;
    out.notes << QObject::tr("%1 tensors, %2 of them in GGUF block formats; layers left float keep their stored dtype")
                     .arg(summary.tensors)
                     .arg(summary.quantizedWeights);
    try {
        const GgufHeader header = readGgufHeader(path.toStdString());
        const bool matches = header.version == 3 && int64_t(header.tensors) == summary.tensors;
        out.checks << (matches ? passed(QObject::tr("reread: GGUF version %1, %2 tensors, %3 metadata keys")
                                            .arg(header.version)
                                            .arg(header.tensors)
                                            .arg(header.metadata))
                               : failed(QObject::tr("reread: GGUF version %1 with %2 tensors, %3 were written")
                                            .arg(header.version)
                                            .arg(header.tensors)
                                            .arg(summary.tensors)));
    } catch (const Error& e) {
        out.checks << failed(QObject::tr("rereading failed: %1").arg(QString::fromUtf8(e.what())));
    }
    return out;
}

ExportOutcome exportOdmlChecked(const ExportInputs& in, const QString& path, const CancellationToken& cancel,
                                const ProgressCallback& progress)
{
    ExportOutcome out;
    out.title = QObject::tr("ODML annotations");
    out.path = path;
    if (!in.interpreter || !in.calibration)
        throw Error("ODML export needs a model the runtime can run and calibration data");
    auto data = in.openData(*in.calibration);
    OdmlOptions options;
    options.maxBatches = in.calibration->maxBatches;
    const OdmlSummary summary =
        exportOdml(*in.interpreter, *in.plan, *in.weights, *data, options, path.toStdString(), cancel, progress);
    out.notes << QObject::tr("%1 activation, %2 weight, %3 bias and %4 constant quantization points over %5 ops, "
                             "calibrated on %6 batches")
                     .arg(summary.activations)
                     .arg(summary.weights)
                     .arg(summary.biases)
                     .arg(summary.constants)
                     .arg(summary.ops)
                     .arg(summary.batches);
    if (in.calibration->kind == DataConfig::Kind::Synthetic)
        out.notes << QObject::tr("calibrated on synthetic data: the ranges are not representative");
    std::ifstream file(summary.path);
    const auto text = nlohmann::json::parse(file, nullptr, false);
    out.checks << (text.is_discarded() ? failed(QObject::tr("rereading: not valid JSON"))
                                       : passed(QObject::tr("reread: valid JSON")));
    return out;
}

ExportOutcome exportTfliteChecked(const ExportInputs& in, const QString& path, const CancellationToken& cancel,
                                  const ProgressCallback& progress, bool int8Io)
{
    ExportOutcome out;
    out.title = QObject::tr("LiteRT model (.tflite)");
    out.path = path;
    if (!in.interpreter || !in.calibration)
        throw Error("the LiteRT export needs a model the runtime can run and calibration data");
    auto data = in.openData(*in.calibration);
    TfliteOptions options;
    options.odml.maxBatches = in.calibration->maxBatches;
    options.int8Io = int8Io;
    const TfliteSummary summary =
        exportTflite(*in.interpreter, *in.plan, *in.weights, *data, options, path.toStdString(), cancel, progress);
    out.floatBytes = summary.floatWeightBytes;
    out.quantizedBytes = summary.bytes;
    QStringList ops;
    for (const auto& [op, count] : summary.operatorsByType)
        ops << QStringLiteral("%1 %2").arg(QString::fromStdString(op)).arg(count);
    out.notes << QObject::tr("%1 operators (%2), %3 tensors; int8 NHWC with %4 inputs and outputs; calibrated "
                             "on %5 batches")
                     .arg(summary.operators)
                     .arg(ops.join(QStringLiteral(", ")))
                     .arg(summary.tensors)
                     .arg(int8Io ? QStringLiteral("int8") : QStringLiteral("float32"))
                     .arg(summary.batches);
    for (const std::string& note : summary.notes)
        out.notes << QString::fromStdString(note);
    if (in.calibration->kind == DataConfig::Kind::Synthetic)
        out.notes << QObject::tr("calibrated on synthetic data: the ranges are not representative");
    try {
        const TfliteContents c = readTflite(summary.path);
        const bool matches = c.version == 3 && int64_t(c.tensors.size()) == summary.tensors &&
                             int64_t(c.operatorCodes.size()) == summary.operators;
        out.checks << (matches ? passed(QObject::tr("reread: LiteRT schema version %1, %2 tensors, %3 operators")
                                            .arg(c.version)
                                            .arg(c.tensors.size())
                                            .arg(c.operatorCodes.size()))
                               : failed(QObject::tr("reread: %1 tensors and %2 operators, %3 and %4 were written")
                                            .arg(c.tensors.size())
                                            .arg(c.operatorCodes.size())
                                            .arg(summary.tensors)
                                            .arg(summary.operators)));
    } catch (const Error& e) {
        out.checks << failed(QObject::tr("rereading failed: %1").arg(QString::fromUtf8(e.what())));
    }
    return out;
}

QString ExportResultDialog::summaryHtml(const ExportOutcome& o)
{
    QString html = QStringLiteral("<h3>%1</h3><p>%2</p>").arg(o.title.toHtmlEscaped(), o.path.toHtmlEscaped());
    if (o.floatBytes > 0 && o.quantizedBytes > 0)
        html += QObject::tr("<p>Quantized weights: %1 as float → %2 quantized (compression %3×)</p>")
                    .arg(bytesText(o.floatBytes), bytesText(o.quantizedBytes))
                    .arg(double(o.floatBytes) / double(o.quantizedBytes), 0, 'f', 2);
    html += QStringLiteral("<p><b>%1</b></p><ul>").arg(QObject::tr("Checks"));
    for (const QString& c : o.checks)
        html += QStringLiteral("<li style='color:%1'>%2</li>")
                    .arg(c.startsWith(QStringLiteral("✘")) ? QStringLiteral("#c62828") : QStringLiteral("inherit"),
                         c.toHtmlEscaped());
    html += QStringLiteral("</ul>");
    if (!o.notes.isEmpty()) {
        html += QStringLiteral("<p><b>%1</b></p><ul>").arg(QObject::tr("Notes"));
        for (const QString& n : o.notes)
            html += QStringLiteral("<li>%1</li>").arg(n.toHtmlEscaped());
        html += QStringLiteral("</ul>");
    }
    return html;
}

ExportResultDialog::ExportResultDialog(const ExportOutcome& outcome, QWidget* parent) : QDialog(parent)
{
    setWindowTitle(tr("Export: %1").arg(outcome.title));
    auto* label = new QLabel(summaryHtml(outcome), this);
    label->setWordWrap(true);
    label->setTextInteractionFlags(Qt::TextSelectableByMouse);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok, this);
    connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(label);
    layout->addWidget(buttons);
    setMinimumWidth(520);
}

QString withDefaultSuffix(const QString& path, const QString& suffix)
{
    if (path.isEmpty() || !QFileInfo(path).suffix().isEmpty())
        return path;
    return path + QLatin1Char('.') + suffix;
}

} // namespace qs
