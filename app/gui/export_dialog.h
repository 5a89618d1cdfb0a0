#pragma once
// The exports of the engine (export/): a quantized checkpoint (safetensors or
// HDF5), an ONNX QDQ model, a GGUF model for llama.cpp, ODML full-integer
// annotations and the full-integer LiteRT model (.tflite).
// Each runs as a background job that writes the file and then checks it the
// way a user would: the checkpoint is reopened and its dequantized weights are
// compared with the simulation's; the QDQ model is checked by onnx::checker
// (when libonnx knows the opset), reloaded and planned by the runtime; the
// ODML file is reread. ExportResultDialog shows float vs quantized size, the
// compression ratio and each check's outcome.

#include <cstdint>
#include <memory>

#include <QDialog>
#include <QString>
#include <QStringList>

#include "core/cancellation.h"
#include "export/onnx_qdq.h"
#include "session/exploration.h"

namespace qs {

struct ExportOutcome {
    QString title; // "Quantized checkpoint", "ONNX QDQ model", "ODML annotations"
    QString path;
    int64_t floatBytes = 0; // the quantized weights as float in the model (0: not reported)
    int64_t quantizedBytes = 0;
    QStringList checks; // one line per post-export check, each starting with "✔" or "✘"
    QStringList notes;  // what the user should know (layers left float, dynamic activations ...)
    bool allChecksPassed() const;
};

// What an export reads: the exploration's snapshot, shared and immutable while the job runs.
using ExportInputs = ExplorationSnapshot;

ExportOutcome exportCheckpointChecked(const ExportInputs& in, const QString& path, const CancellationToken& cancel,
                                      const ProgressCallback& progress);
// `options`: the opset, int4 and 8-bit forms the user chose (ExportOptionsDialog).
ExportOutcome exportOnnxChecked(const ExportInputs& in, const QString& path, const CancellationToken& cancel,
                                const ProgressCallback& progress, const OnnxExportOptions& options = {});
// GGUF for llama.cpp (Llama-family Hugging Face folders): written, then its header reread.
ExportOutcome exportGgufChecked(const ExportInputs& in, const QString& path, const CancellationToken& cancel,
                                const ProgressCallback& progress);
ExportOutcome exportOdmlChecked(const ExportInputs& in, const QString& path, const CancellationToken& cancel,
                                const ProgressCallback& progress);
// The full-integer LiteRT model (ODML mode): written, then reread with the bounds-checked reader.
// `int8Io`: int8 inputs and outputs instead of float32 with QUANTIZE/DEQUANTIZE (TfliteOptions::int8Io).
ExportOutcome exportTfliteChecked(const ExportInputs& in, const QString& path, const CancellationToken& cancel,
                                  const ProgressCallback& progress, bool int8Io = false);

// `path` with `suffix` ("onnx") appended when the name the user typed has none
// (a save dialog on some platforms adds nothing).
QString withDefaultSuffix(const QString& path, const QString& suffix);

class ExportResultDialog : public QDialog {
    Q_OBJECT
public:
    explicit ExportResultDialog(const ExportOutcome& outcome, QWidget* parent = nullptr);
    // The dialog's text (also what the log gets).
    static QString summaryHtml(const ExportOutcome& outcome);
};

} // namespace qs
