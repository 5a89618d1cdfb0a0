#pragma once
// Where calibration or evaluation batches come from: a data file
// (.npz/.npy/HDF5), a folder of images with its preprocessing recipe, or
// synthetic data (with a visible warning that results on it are not
// representative); batch size and how many batches to use.

#include <optional>

#include <QDialog>

#include "session/session_file.h"

class QComboBox;
class QLineEdit;
class QSpinBox;
class QDoubleSpinBox;
class QCheckBox;
class QLabel;
class QStackedWidget;

namespace qs {

class DataDialog : public QDialog {
    Q_OBJECT
public:
    DataDialog(const QString& title, const std::optional<DataConfig>& config, const QString& startFolder,
               QWidget* parent = nullptr);

    DataConfig config() const;

private:
    void updateKind();
    void browse();

    QComboBox* kind_;
    QStackedWidget* pages_;
    QLineEdit* path_;
    QSpinBox* batchSize_;
    QSpinBox* maxBatches_;
    QSpinBox* sequenceLength_;
    QSpinBox* resize_;
    QSpinBox* cropH_;
    QSpinBox* cropW_;
    QLineEdit* mean_;
    QLineEdit* std_;
    QComboBox* layout_;
    QComboBox* channels_;
    QCheckBox* labelsFromFolders_;
    QSpinBox* samples_;
    QSpinBox* seed_;
    QLabel* warning_;
    QString startFolder_;
};

} // namespace qs
