#include "gui/export_options_dialog.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QLabel>
#include <QPushButton>
#include <QSettings>
#include <QVBoxLayout>

namespace qs {

namespace {

// The opsets the QDQ writer can be asked for: 13 is the first with per-channel
// DequantizeLinear; 21 the newest it writes (int4, uint4, int16, block_size).
constexpr int64_t kFirstOpset = 13;
constexpr int64_t kLastOpset = 21;

const QString kOpsetKey = QStringLiteral("export/onnx_opset");
const QString kInt4Key = QStringLiteral("export/onnx_int4_form");
const QString kEightBitKey = QStringLiteral("export/onnx_eight_bit_form");
const QString kTfliteIoKey = QStringLiteral("export/tflite_io");

struct FormatFilters {
    QStringList filters;  // the save dialog's name filters, the default first
    QStringList suffixes; // the default suffix of each filter
};

FormatFilters filtersOf(ExportFormat format)
{
    switch (format) {
    case ExportFormat::Checkpoint:
        return {{QObject::tr("safetensors checkpoints (*.safetensors)"), QObject::tr("HDF5 checkpoints (*.h5 *.hdf5)")},
                {QStringLiteral("safetensors"), QStringLiteral("h5")}};
    case ExportFormat::Onnx:
        return {{QObject::tr("ONNX models (*.onnx)")}, {QStringLiteral("onnx")}};
    case ExportFormat::Odml:
        return {{QObject::tr("ODML annotations (*.json)")}, {QStringLiteral("json")}};
    case ExportFormat::Gguf:
        return {{QObject::tr("GGUF models (*.gguf)")}, {QStringLiteral("gguf")}};
    case ExportFormat::Tflite:
        break;
    }
    return {{QObject::tr("LiteRT models (*.tflite)")}, {QStringLiteral("tflite")}};
}

void selectData(QComboBox* box, const QVariant& value)
{
    const int i = box->findData(value);
    box->setCurrentIndex(i >= 0 ? i : 0);
}

} // namespace

OnnxExportOptions ExportChoices::onnxOptions() const
{
    OnnxExportOptions options;
    options.opset = onnxOpset;
    options.int4Form = onnxInt4Form;
    options.eightBitForm = onnxEightBitForm;
    return options;
}

ExportChoices loadExportChoices()
{
    QSettings settings;
    ExportChoices c;
    bool ok = false;
    const qlonglong opset = settings.value(kOpsetKey).toLongLong(&ok);
    if (ok && opset >= kFirstOpset && opset <= kLastOpset)
        c.onnxOpset = opset;
    if (const auto form = parseInt4Form(settings.value(kInt4Key).toString().toStdString()))
        c.onnxInt4Form = *form;
    if (const auto form = parseEightBitForm(settings.value(kEightBitKey).toString().toStdString()))
        c.onnxEightBitForm = *form;
    c.tfliteInt8Io = settings.value(kTfliteIoKey).toString() == QStringLiteral("int8");
    return c;
}

void saveExportChoices(const ExportChoices& c)
{
    QSettings settings;
    if (c.onnxOpset)
        settings.setValue(kOpsetKey, qlonglong(*c.onnxOpset));
    else
        settings.remove(kOpsetKey);
    settings.setValue(kInt4Key, QString::fromLatin1(int4FormName(c.onnxInt4Form)));
    settings.setValue(kEightBitKey, QString::fromLatin1(eightBitFormName(c.onnxEightBitForm)));
    settings.setValue(kTfliteIoKey, c.tfliteInt8Io ? QStringLiteral("int8") : QStringLiteral("float32"));
}

bool hasExportOptions(ExportFormat format)
{
    return format == ExportFormat::Onnx || format == ExportFormat::Tflite;
}

QString exportSuffix(ExportFormat format)
{
    return filtersOf(format).suffixes.first();
}

ExportOptionsDialog::ExportOptionsDialog(ExportFormat format, const ExportChoices& choices, QWidget* parent)
    : QDialog(parent), base_(choices)
{
    auto* form = new QFormLayout;
    if (format == ExportFormat::Onnx) {
        setWindowTitle(tr("ONNX QDQ export options"));
        opset_ = new QComboBox(this);
        opset_->addItem(tr("Automatic: the model's, raised as the types need"), QVariant());
        for (int64_t v = kFirstOpset; v <= kLastOpset; ++v)
            opset_->addItem(QString::number(v), qlonglong(v));
        opset_->setToolTip(tr("The default-domain opset written. int4, uint4, int16 and tiled (block_size) weights "
                              "need 21; a lower opset than they need, or than the model's, is refused with a reason."));
        selectData(opset_, choices.onnxOpset ? QVariant(qlonglong(*choices.onnxOpset)) : QVariant());
        form->addRow(tr("Opset:"), opset_);

        int4_ = new QComboBox(this);
        int4_->addItem(tr("DequantizeLinear with block_size (standard ONNX, opset 21)"),
                       QString::fromLatin1(int4FormName(Int4Form::Dequantize)));
        int4_->addItem(tr("com.microsoft.MatMulNBits (ONNX Runtime's int4 kernel)"),
                       QString::fromLatin1(int4FormName(Int4Form::MatMulNBits)));
        int4_->setToolTip(tr("How MatMul/Gemm weights of int4/uint4 in tiles along K are written; other int4 layers "
                             "keep DequantizeLinear, with a warning naming them."));
        selectData(int4_, QString::fromLatin1(int4FormName(choices.onnxInt4Form)));
        form->addRow(tr("int4 form:"), int4_);

        eightBit_ = new QComboBox(this);
        eightBit_->addItem(tr("uint8 (int8 codes + 128): exact in ONNX Runtime on every x86 CPU"),
                           QString::fromLatin1(eightBitFormName(EightBitForm::Unsigned)));
        eightBit_->addItem(tr("As the rules say (int8): faster with VNNI, saturates on AVX2 CPUs without it"),
                           QString::fromLatin1(eightBitFormName(EightBitForm::AsRules)));
        eightBit_->setToolTip(QString::fromStdString(eightBitFormReason(EightBitForm::Unsigned)));
        selectData(eightBit_, QString::fromLatin1(eightBitFormName(choices.onnxEightBitForm)));
        form->addRow(tr("8-bit integers:"), eightBit_);
    } else if (format == ExportFormat::Tflite) {
        setWindowTitle(tr("LiteRT export options"));
        tfliteIo_ = new QComboBox(this);
        tfliteIo_->addItem(tr("float32 (QUANTIZE at the inputs, DEQUANTIZE at the outputs)"),
                           QStringLiteral("float32"));
        tfliteIo_->addItem(tr("int8 (the caller quantizes inputs and dequantizes outputs)"), QStringLiteral("int8"));
        selectData(tfliteIo_, choices.tfliteInt8Io ? QStringLiteral("int8") : QStringLiteral("float32"));
        form->addRow(tr("Inputs and outputs:"), tfliteIo_);
    }
    auto* note = new QLabel(tr("These choices are remembered for the next export."), this);
    note->setEnabled(false);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    buttons->button(QDialogButtonBox::Ok)->setText(tr("Choose File…"));
    connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(form);
    layout->addWidget(note);
    layout->addWidget(buttons);
}

ExportChoices ExportOptionsDialog::choices() const
{
    ExportChoices c = base_;
    if (opset_) {
        const QVariant v = opset_->currentData();
        c.onnxOpset = v.isValid() ? std::optional<int64_t>(v.toLongLong()) : std::nullopt;
    }
    if (int4_)
        c.onnxInt4Form = parseInt4Form(int4_->currentData().toString().toStdString()).value_or(Int4Form::Dequantize);
    if (eightBit_)
        c.onnxEightBitForm =
            parseEightBitForm(eightBit_->currentData().toString().toStdString()).value_or(EightBitForm::Unsigned);
    if (tfliteIo_)
        c.tfliteInt8Io = tfliteIo_->currentData().toString() == QStringLiteral("int8");
    return c;
}

QFileDialog* newExportFileDialog(ExportFormat format, const QString& folder, QWidget* parent)
{
    const FormatFilters f = filtersOf(format);
    auto* dialog = new QFileDialog(parent, QObject::tr("Export"), folder);
    dialog->setAcceptMode(QFileDialog::AcceptSave);
    dialog->setFileMode(QFileDialog::AnyFile);
    dialog->setNameFilters(f.filters);
    dialog->setDefaultSuffix(f.suffixes.first());
    // Choosing the HDF5 filter makes "model" model.h5, not model.safetensors.
    QObject::connect(dialog, &QFileDialog::filterSelected, dialog, [dialog, f](const QString& filter) {
        const qsizetype i = f.filters.indexOf(filter);
        if (i >= 0)
            dialog->setDefaultSuffix(f.suffixes[i]);
    });
    return dialog;
}

} // namespace qs
