#include "gui/data_dialog.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QStackedWidget>
#include <QVBoxLayout>

namespace qs {

namespace {

QString triple(const std::array<float, 3>& v)
{
    return QStringLiteral("%1, %2, %3").arg(v[0]).arg(v[1]).arg(v[2]);
}

std::array<float, 3> parseTriple(const QString& text, std::array<float, 3> fallback)
{
    const QStringList parts = text.split(QLatin1Char(','));
    if (parts.size() != 3)
        return fallback;
    std::array<float, 3> v{};
    for (int i = 0; i < 3; ++i) {
        bool ok = false;
        v[size_t(i)] = parts[i].trimmed().toFloat(&ok);
        if (!ok)
            return fallback;
    }
    return v;
}

QSpinBox* spin(int lo, int hi, int value, QWidget* parent)
{
    auto* s = new QSpinBox(parent);
    s->setRange(lo, hi);
    s->setValue(value);
    return s;
}

} // namespace

DataDialog::DataDialog(const QString& title, const std::optional<DataConfig>& config, const QString& startFolder,
                       QWidget* parent)
    : QDialog(parent), startFolder_(startFolder)
{
    setWindowTitle(title);
    const DataConfig c = config.value_or(DataConfig{});
    kind_ = new QComboBox(this);
    kind_->addItem(tr("Data file (.npz, .npy, HDF5)"));
    kind_->addItem(tr("Folder of images"));
    kind_->addItem(tr("Synthetic (random normal inputs)"));
    kind_->setCurrentIndex(int(c.kind));

    path_ = new QLineEdit(QString::fromStdString(c.path.string()), this);
    auto* browse = new QPushButton(tr("Browse…"), this);
    auto* pathRow = new QHBoxLayout;
    pathRow->addWidget(path_, 1);
    pathRow->addWidget(browse);
    batchSize_ = spin(1, 1 << 20, int(c.batchSize), this);
    maxBatches_ = spin(0, 1 << 20, int(c.maxBatches.value_or(0)), this);
    maxBatches_->setSpecialValueText(tr("all"));
    sequenceLength_ = spin(0, 1 << 20, int(c.sequenceLength), this);
    sequenceLength_->setSpecialValueText(tr("default (512)"));
    sequenceLength_->setToolTip(tr("Tokens per row when the file is text (.txt) for a language model"));

    // Page 0: nothing more for files; page 1: the image recipe; page 2: synthetic.
    pages_ = new QStackedWidget(this);
    pages_->addWidget(new QWidget(pages_));
    auto* recipe = new QWidget(pages_);
    auto* rf = new QFormLayout(recipe);
    resize_ = spin(0, 8192, int(c.recipe.resizeShorter), recipe);
    resize_->setSpecialValueText(tr("no resize"));
    cropH_ = spin(1, 8192, int(c.recipe.cropHeight), recipe);
    cropW_ = spin(1, 8192, int(c.recipe.cropWidth), recipe);
    mean_ = new QLineEdit(triple(c.recipe.mean), recipe);
    std_ = new QLineEdit(triple(c.recipe.std), recipe);
    layout_ = new QComboBox(recipe);
    layout_->addItems({QStringLiteral("NCHW"), QStringLiteral("NHWC")});
    layout_->setCurrentIndex(c.recipe.layout == ImageLayout::NCHW ? 0 : 1);
    channels_ = new QComboBox(recipe);
    channels_->addItems({QStringLiteral("RGB"), QStringLiteral("BGR")});
    channels_->setCurrentIndex(c.recipe.channels == ChannelOrder::RGB ? 0 : 1);
    labelsFromFolders_ = new QCheckBox(tr("Sub-folder names are the classes (labels)"), recipe);
    labelsFromFolders_->setChecked(c.recipe.labelsFromFolders);
    rf->addRow(tr("Resize shorter side to"), resize_);
    rf->addRow(tr("Center crop height"), cropH_);
    rf->addRow(tr("Center crop width"), cropW_);
    rf->addRow(tr("Mean (per channel, after ÷255)"), mean_);
    rf->addRow(tr("Std (per channel)"), std_);
    rf->addRow(tr("Layout"), layout_);
    rf->addRow(tr("Channel order"), channels_);
    rf->addRow(labelsFromFolders_);
    pages_->addWidget(recipe);
    auto* synthetic = new QWidget(pages_);
    auto* sf = new QFormLayout(synthetic);
    samples_ = spin(1, 1 << 20, int(c.syntheticSamples), synthetic);
    seed_ = spin(0, 1 << 30, int(c.syntheticSeed), synthetic);
    sf->addRow(tr("Samples"), samples_);
    sf->addRow(tr("Seed"), seed_);
    pages_->addWidget(synthetic);

    warning_ = new QLabel(tr("⚠ Synthetic data is not representative: calibrated ranges and errors measured on it "
                             "do not predict the model's behaviour on real inputs."),
                          this);
    warning_->setWordWrap(true);
    warning_->setStyleSheet(QStringLiteral("QLabel { color: #b26a00; font-weight: bold; }"));

    auto* form = new QFormLayout;
    form->addRow(tr("Source"), kind_);
    form->addRow(tr("Path"), pathRow);
    form->addRow(tr("Batch size"), batchSize_);
    form->addRow(tr("Batches to use"), maxBatches_);
    form->addRow(tr("Sequence length (text)"), sequenceLength_);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(form);
    layout->addWidget(pages_);
    layout->addWidget(warning_);
    layout->addWidget(buttons);

    connect(kind_, &QComboBox::currentIndexChanged, this, &DataDialog::updateKind);
    connect(browse, &QPushButton::clicked, this, &DataDialog::browse);
    connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    updateKind();
}

void DataDialog::updateKind()
{
    const int k = kind_->currentIndex();
    pages_->setCurrentIndex(k);
    path_->setEnabled(k != int(DataConfig::Kind::Synthetic));
    warning_->setVisible(k == int(DataConfig::Kind::Synthetic));
}

void DataDialog::browse()
{
    const QString start = path_->text().isEmpty() ? startFolder_ : path_->text();
    QString chosen;
    if (kind_->currentIndex() == int(DataConfig::Kind::ImageFolder))
        chosen = QFileDialog::getExistingDirectory(this, tr("Folder of images"), start);
    else
        chosen = QFileDialog::getOpenFileName(this, tr("Data file"), start,
                                              tr("Data (*.npz *.npy *.h5 *.hdf5 *.txt);;All files (*)"));
    if (!chosen.isEmpty())
        path_->setText(chosen);
}

DataConfig DataDialog::config() const
{
    DataConfig c;
    c.kind = DataConfig::Kind(kind_->currentIndex());
    c.path = path_->text().toStdString();
    c.batchSize = batchSize_->value();
    if (maxBatches_->value() > 0)
        c.maxBatches = maxBatches_->value();
    c.sequenceLength = sequenceLength_->value();
    c.recipe.resizeShorter = resize_->value();
    c.recipe.cropHeight = cropH_->value();
    c.recipe.cropWidth = cropW_->value();
    c.recipe.mean = parseTriple(mean_->text(), c.recipe.mean);
    c.recipe.std = parseTriple(std_->text(), c.recipe.std);
    c.recipe.layout = layout_->currentIndex() == 0 ? ImageLayout::NCHW : ImageLayout::NHWC;
    c.recipe.channels = channels_->currentIndex() == 0 ? ChannelOrder::RGB : ChannelOrder::BGR;
    c.recipe.labelsFromFolders = labelsFromFolders_->isChecked();
    c.syntheticSamples = samples_->value();
    c.syntheticSeed = uint64_t(seed_->value());
    return c;
}

} // namespace qs
