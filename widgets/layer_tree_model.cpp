#include "widgets/layer_tree_model.h"

#include <QBrush>
#include <QColor>
#include <QFont>
#include <QHash>
#include <QLocale>
#include <QStringList>

#include <algorithm>
#include <cmath>
#include <limits>

namespace qs {

namespace {

QString shapeText(const Shape& shape)
{
    QStringList dims;
    for (const int64_t d : shape)
        dims << QString::number(d);
    return QLatin1Char('[') + dims.join(QStringLiteral(", ")) + QLatin1Char(']');
}

QString sqnrText(double db)
{
    if (std::isinf(db))
        return QStringLiteral("∞ dB");
    return QStringLiteral("%1 dB").arg(db, 0, 'f', 1);
}

QString metricsTooltip(const ErrorMetrics& m)
{
    return QObject::tr("SQNR %1, MSE %2, max |error| %3, cosine %4")
        .arg(sqnrText(m.sqnrDb))
        .arg(m.mse, 0, 'g', 3)
        .arg(m.maxAbsError, 0, 'g', 3)
        .arg(m.cosine, 0, 'f', 5);
}

} // namespace

LayerTreeModel::LayerTreeModel(QObject* parent) : QAbstractItemModel(parent), root_(std::make_unique<TreeNode>()) {}

QColor LayerTreeModel::sqnrColor(double sqnrDb)
{
    // Hue from red (0) at 10 dB to green (120) at 40 dB.
    const double t = std::isinf(sqnrDb) ? 1.0 : std::clamp((sqnrDb - 10.0) / 30.0, 0.0, 1.0);
    QColor c = QColor::fromHsv(int(t * 120), 200, 220);
    c.setAlpha(110);
    return c;
}

void LayerTreeModel::setLayers(std::vector<QuantizableLayer> layers)
{
    beginResetModel();
    layers_ = std::move(layers);
    root_ = std::make_unique<TreeNode>();
    leafOfLayer_.assign(layers_.size(), nullptr);
    // Groups by full path: a module with hundreds of layers is not searched child by child for each.
    QHash<QString, TreeNode*> groups;
    for (size_t i = 0; i < layers_.size(); ++i) {
        const QStringList parts = QString::fromStdString(layers_[i].modulePath).split(QLatin1Char('/'));
        TreeNode* node = root_.get();
        for (int p = 0; p < parts.size(); ++p) {
            const bool last = p + 1 == parts.size();
            TreeNode* next = nullptr;
            // A group is reused; a leaf is always new (paths are unique, but a
            // layer's path may also be another layer's group prefix).
            const QString path = node == root_.get() ? parts[p] : node->path + QLatin1Char('/') + parts[p];
            if (!last)
                next = groups.value(path, nullptr);
            if (!next) {
                auto child = std::make_unique<TreeNode>();
                child->name = parts[p];
                child->path = path;
                child->parent = node;
                child->row = int(node->children.size());
                next = child.get();
                node->children.push_back(std::move(child));
                if (!last)
                    groups.insert(path, next);
            }
            if (!layers_[i].sharesWeightOf) // a shared weight counts once, under its first reader
                next->parameters += layers_[i].parameterCount;
            node = next;
        }
        node->layer = i;
        leafOfLayer_[i] = node;
    }
    rules_ = {};
    assignments_.clear();
    weightMetrics_.clear();
    weightProblems_.clear();
    activation_.clear();
    rulesGeneration_ = weightGeneration_ = activationGeneration_ = 0;
    highlighted_.reset();
    endResetModel();
}

void LayerTreeModel::setRules(const RuleSet& rules, std::vector<Assignment> assignments, uint64_t generation)
{
    rules_ = rules;
    assignments_ = std::move(assignments);
    assignments_.resize(layers_.size());
    rulesGeneration_ = generation;
    refreshColumns(0, ColumnCount - 1);
}

bool LayerTreeModel::setWeightResults(uint64_t generation, std::map<size_t, ErrorMetrics> metrics,
                                      std::map<size_t, std::string> problems)
{
    if (generation < weightGeneration_)
        return false;
    weightGeneration_ = generation;
    weightMetrics_ = std::move(metrics);
    weightProblems_ = std::move(problems);
    refreshColumns(WeightSqnrColumn, WeightSqnrColumn);
    return true;
}

bool LayerTreeModel::setActivationResults(uint64_t generation, std::map<size_t, ActivationResult> results)
{
    if (generation < activationGeneration_)
        return false;
    activationGeneration_ = generation;
    activation_ = std::move(results);
    refreshColumns(IsolatedSqnrColumn, AccumulatedSqnrColumn);
    return true;
}

void LayerTreeModel::setHighlightedRule(std::optional<size_t> rule)
{
    if (highlighted_ == rule)
        return;
    highlighted_ = rule;
    refreshColumns(0, ColumnCount - 1);
}

void LayerTreeModel::refreshColumns(int first, int last)
{
    // Every leaf's row; groups show only totals, which these edits do not change.
    for (TreeNode* leaf : leafOfLayer_)
        emit dataChanged(createIndex(leaf->row, first, leaf), createIndex(leaf->row, last, leaf));
}

QModelIndex LayerTreeModel::indexOfLayer(size_t layer) const
{
    if (layer >= leafOfLayer_.size())
        return {};
    return createIndex(leafOfLayer_[layer]->row, 0, leafOfLayer_[layer]);
}

LayerTreeModel::TreeNode* LayerTreeModel::nodeOf(const QModelIndex& index) const
{
    return index.isValid() ? static_cast<TreeNode*>(index.internalPointer()) : root_.get();
}

QModelIndex LayerTreeModel::index(int row, int column, const QModelIndex& parent) const
{
    if (column < 0 || column >= ColumnCount || row < 0 || (parent.isValid() && parent.column() != 0))
        return {};
    const TreeNode* node = nodeOf(parent);
    if (row >= int(node->children.size()))
        return {};
    return createIndex(row, column, node->children[size_t(row)].get());
}

QModelIndex LayerTreeModel::parent(const QModelIndex& child) const
{
    if (!child.isValid())
        return {};
    const TreeNode* node = nodeOf(child);
    if (!node->parent || node->parent == root_.get())
        return {};
    return createIndex(node->parent->row, 0, node->parent);
}

int LayerTreeModel::rowCount(const QModelIndex& parent) const
{
    if (parent.isValid() && parent.column() != 0)
        return 0;
    return int(nodeOf(parent)->children.size());
}

int LayerTreeModel::columnCount(const QModelIndex&) const
{
    return ColumnCount;
}

QVariant LayerTreeModel::data(const QModelIndex& index, int role) const
{
    if (!index.isValid() || !checkIndex(index, CheckIndexOption::IndexIsValid))
        return {};
    const TreeNode& node = *nodeOf(index);
    if (role == LayerRole)
        return node.layer ? int(*node.layer) : -1;
    if (role == ModulePathRole)
        return node.path;
    if (node.layer)
        return layerData(node, index.column(), role);
    // A group: its name and the parameters under it.
    switch (role) {
    case Qt::DisplayRole:
        if (index.column() == NameColumn)
            return node.name;
        if (index.column() == ParametersColumn)
            return QLocale().toString(qlonglong(node.parameters));
        return {};
    case SortRole:
        if (index.column() == ParametersColumn)
            return double(node.parameters);
        return index.column() == NameColumn ? QVariant(node.name) : QVariant();
    case Qt::TextAlignmentRole:
        return index.column() == ParametersColumn ? QVariant(int(Qt::AlignRight | Qt::AlignVCenter)) : QVariant();
    default:
        return {};
    }
}

QVariant LayerTreeModel::layerData(const TreeNode& node, int column, int role) const
{
    const size_t layer = *node.layer;
    const QuantizableLayer& l = layers_[layer];
    const Assignment* assignment = layer < assignments_.size() ? &assignments_[layer] : nullptr;
    const auto weight = weightMetrics_.find(layer);
    const auto activation = activation_.find(layer);
    const std::optional<ErrorMetrics> isolated =
        activation != activation_.end() ? activation->second.isolated : std::nullopt;
    const std::optional<ErrorMetrics> accumulated =
        activation != activation_.end() ? activation->second.accumulated : std::nullopt;
    const std::optional<ErrorMetrics>* metrics = nullptr;
    std::optional<ErrorMetrics> weightMetric =
        weight != weightMetrics_.end() ? std::optional<ErrorMetrics>(weight->second) : std::nullopt;
    bool stale = false;
    if (column == WeightSqnrColumn) {
        metrics = &weightMetric;
        stale = weightGeneration_ != rulesGeneration_;
    } else if (column == IsolatedSqnrColumn || column == AccumulatedSqnrColumn) {
        metrics = column == IsolatedSqnrColumn ? &isolated : &accumulated;
        stale = activationGeneration_ != rulesGeneration_;
    }
    const bool highlighted = highlighted_ && assignment && assignment->rule == highlighted_;

    switch (role) {
    case Qt::DisplayRole:
        switch (column) {
        case NameColumn:
            return node.name;
        case OpTypeColumn:
            return QString::fromStdString(l.opType);
        case ShapeColumn:
            return shapeText(l.weightShape);
        case ParametersColumn:
            if (l.sharesWeightOf)
                return tr("shared");
            return QLocale().toString(qlonglong(l.parameterCount));
        case RuleColumn:
            return assignment && assignment->rule ? QString::number(*assignment->rule) : QStringLiteral("—");
        case WeightQTypeColumn:
            return assignment && !assignment->weightQType.empty() ? QString::fromStdString(assignment->weightQType)
                                                                  : tr("float");
        case ActQTypeColumn:
            return assignment && !assignment->actQType.empty() ? QString::fromStdString(assignment->actQType)
                                                               : tr("float");
        default:
            if (column == WeightSqnrColumn && weightProblems_.count(layer))
                return tr("problem");
            if (metrics && *metrics)
                return sqnrText((*metrics)->sqnrDb) + (stale ? tr(" (stale)") : QString());
            return {};
        }
    case SortRole:
        switch (column) {
        case ParametersColumn:
            return l.sharesWeightOf ? 0.0 : double(l.parameterCount);
        case RuleColumn:
            return assignment && assignment->rule ? double(*assignment->rule) : -1.0;
        case WeightSqnrColumn:
        case IsolatedSqnrColumn:
        case AccumulatedSqnrColumn:
            return metrics && *metrics ? (*metrics)->sqnrDb : std::numeric_limits<double>::infinity();
        default:
            return layerData(node, column, Qt::DisplayRole);
        }
    case StaleRole:
        return stale && metrics && metrics->has_value();
    case HighlightRole:
        return highlighted;
    case Qt::BackgroundRole:
        if (metrics && *metrics && !stale)
            return QBrush(sqnrColor((*metrics)->sqnrDb));
        if (highlighted)
            return QBrush(QColor(60, 130, 230, 90));
        return {};
    case Qt::ForegroundRole:
        if (stale && metrics && *metrics)
            return QBrush(QColor(128, 128, 128));
        return {};
    case Qt::FontRole:
        if ((stale && metrics && *metrics) || highlighted) {
            QFont font;
            font.setItalic(stale);
            font.setBold(highlighted && !stale);
            return font;
        }
        return {};
    case Qt::TextAlignmentRole:
        if (column >= ParametersColumn && column != WeightQTypeColumn && column != ActQTypeColumn)
            return int(Qt::AlignRight | Qt::AlignVCenter);
        return {};
    case Qt::ToolTipRole: {
        if (metrics && *metrics)
            return metricsTooltip(**metrics) +
                   (stale ? tr("\nstale: computed from rules older than the ones shown") : QString());
        if (column == WeightSqnrColumn && weightProblems_.count(layer))
            return QString::fromStdString(weightProblems_.at(layer));
        QStringList lines;
        lines << QStringLiteral("%1 (%2)").arg(QString::fromStdString(l.modulePath), QString::fromStdString(l.opType));
        if (l.sharesWeightOf && *l.sharesWeightOf < layers_.size())
            lines << tr("reads the weight of %1 (%2 parameters, counted there): one quantizer for both")
                         .arg(QString::fromStdString(layers_[*l.sharesWeightOf].modulePath))
                         .arg(QLocale().toString(qlonglong(l.parameterCount)));
        if (rules_.empty())
            lines << tr("no rules: the layer stays float");
        for (const auto& e : rules_.explain(l.modulePath, l.opType))
            lines << QString::fromStdString(e.text);
        if (assignment && !assignment->problem.empty())
            lines << tr("problem: %1").arg(QString::fromStdString(assignment->problem));
        return lines.join(QLatin1Char('\n'));
    }
    default:
        return {};
    }
}

QVariant LayerTreeModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal)
        return {};
    static const char* const names[ColumnCount] = {
        QT_TR_NOOP("Layer"),       QT_TR_NOOP("Op"),           QT_TR_NOOP("Weight shape"),
        QT_TR_NOOP("Parameters"),  QT_TR_NOOP("Rule"),         QT_TR_NOOP("Weight qtype"),
        QT_TR_NOOP("Act qtype"),   QT_TR_NOOP("Weight SQNR"),  QT_TR_NOOP("Act SQNR (isolated)"),
        QT_TR_NOOP("Act SQNR (accumulated)")};
    static const char* const tips[ColumnCount] = {
        QT_TR_NOOP("Module path component; rules match the full path"),
        QT_TR_NOOP("Op type of the layer"),
        QT_TR_NOOP("Shape of the weight tensor"),
        QT_TR_NOOP("Elements of the weight"),
        QT_TR_NOOP("Index of the rule that applies (— = stays float)"),
        QT_TR_NOOP("Quantized type of the weight"),
        QT_TR_NOOP("Quantized type of the input activation"),
        QT_TR_NOOP("Fake-quantized weight against the float weight"),
        QT_TR_NOOP("Layer output with only this layer quantized, against float (needs Evaluate)"),
        QT_TR_NOOP("Layer output with every layer quantized, against float (needs Evaluate)")};
    if (section < 0 || section >= ColumnCount)
        return {};
    if (role == Qt::DisplayRole)
        return tr(names[section]);
    if (role == Qt::ToolTipRole)
        return tr(tips[section]);
    return {};
}

} // namespace qs
