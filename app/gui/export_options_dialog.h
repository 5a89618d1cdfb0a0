#pragma once
// What the user chooses before an export writes its file: the export's own
// options (ONNX: opset, int4 form, 8-bit form; LiteRT: float or int8 inputs and
// outputs), asked in a small dialog before the save dialog and remembered in
// QSettings, and the save dialog itself, a QFileDialog whose default suffix is
// the format's (so "model" typed in it becomes "model.onnx" in the dialog, on
// every platform). The options are the exporters' (export/onnx_qdq.h,
// export/tflite.h); none is invented here.

#include <cstdint>
#include <optional>

#include <QDialog>
#include <QString>

#include "export/onnx_qdq.h"

class QCheckBox;
class QComboBox;
class QFileDialog;

namespace qs {

enum class ExportFormat { Checkpoint, Onnx, Odml, Gguf, Tflite };

// The options of the exports that have any, as the user last chose them.
struct ExportChoices {
    std::optional<int64_t> onnxOpset;                       // none: the source's, raised as the types need
    Int4Form onnxInt4Form = Int4Form::Dequantize;           // blocked int4 MatMul/Gemm weights
    EightBitForm onnxEightBitForm = EightBitForm::Unsigned; // int8 as uint8 (exact in ORT) or as the rules say
    bool tfliteInt8Io = false;                              // LiteRT inputs/outputs int8 instead of float32

    OnnxExportOptions onnxOptions() const;
    bool operator==(const ExportChoices&) const = default;
};

// Read from / written to QSettings ("export/..."); a value the settings hold
// that names no option (an older or hand-edited file) reads as the default.
ExportChoices loadExportChoices();
void saveExportChoices(const ExportChoices& choices);

// Whether `format` has options the dialog below shows.
bool hasExportOptions(ExportFormat format);
// The file suffix (without dot) a name without one gets: "safetensors", "onnx" ...
QString exportSuffix(ExportFormat format);

// The options of one export, shown before its save dialog.
class ExportOptionsDialog : public QDialog {
    Q_OBJECT
public:
    ExportOptionsDialog(ExportFormat format, const ExportChoices& choices, QWidget* parent = nullptr);
    ExportChoices choices() const;

    // The option widgets (null where the format has not that option); the tests drive them.
    QComboBox* opsetBox() const { return opset_; }
    QComboBox* int4FormBox() const { return int4_; }
    QComboBox* eightBitFormBox() const { return eightBit_; }
    QComboBox* tfliteIoBox() const { return tfliteIo_; }

private:
    ExportChoices base_;
    QComboBox* opset_ = nullptr;
    QComboBox* int4_ = nullptr;
    QComboBox* eightBit_ = nullptr;
    QComboBox* tfliteIo_ = nullptr;
};

// The save dialog of an export (not yet shown): save mode, the format's name
// filters, the default suffix of the selected filter, opened in `folder`.
QFileDialog* newExportFileDialog(ExportFormat format, const QString& folder, QWidget* parent);

} // namespace qs
