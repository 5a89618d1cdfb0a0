#pragma once
// The quantizable layers of a model as a tree by module path ("features/conv1"
// is the leaf "conv1" under the group "features"), with what rules and results
// say about each: matched rule, weight and activation qtypes, weight SQNR,
// isolated and accumulated activation SQNR. Error cells are coloured by SQNR.
//
// Results are tagged with the rules generation they were computed from; when
// the rules have changed since, the cells are shown stale (grey, italic,
// "stale" in the tooltip), never as current.

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <QAbstractItemModel>

#include "quant/metrics.h"
#include "graph/layer.h"
#include "rules/ruleset.h"

namespace qs {

class LayerTreeModel : public QAbstractItemModel {
    Q_OBJECT
public:
    enum Column {
        NameColumn,
        OpTypeColumn,
        ShapeColumn,
        ParametersColumn,
        RuleColumn,
        WeightQTypeColumn,
        ActQTypeColumn,
        WeightSqnrColumn,
        IsolatedSqnrColumn,
        AccumulatedSqnrColumn,
        ColumnCount
    };
    enum Role {
        LayerRole = Qt::UserRole + 1, // int: index into Model::layers; -1 for a group
        ModulePathRole,               // QString: the full path (groups: their prefix)
        SortRole,                     // numbers as doubles, text as text
        StaleRole,                    // bool: the cell shows a result from older rules
        HighlightRole,                // bool: the layer is matched by the highlighted rule
    };

    // Per layer of the plan: what the rules give it.
    struct Assignment {
        std::optional<size_t> rule; // none: stays float
        std::string weightQType;    // "" = float
        std::string actQType;       // "" = float
        std::string problem;        // why the rule cannot apply as written
    };

    explicit LayerTreeModel(QObject* parent = nullptr);

    // A new model: its layers (model order). Clears everything else.
    void setLayers(std::vector<QuantizableLayer> layers);
    size_t layerCount() const { return layers_.size(); }

    // The rules now in force, their resolution per layer and their generation.
    // Results of another generation become stale.
    void setRules(const RuleSet& rules, std::vector<Assignment> assignments, uint64_t generation);
    uint64_t rulesGeneration() const { return rulesGeneration_; }

    // Weight metrics per layer, computed from the rules of `generation`. An
    // older generation than the one shown is ignored (returns false).
    bool setWeightResults(uint64_t generation, std::map<size_t, ErrorMetrics> metrics,
                          std::map<size_t, std::string> problems);
    // Activation metrics per layer (isolated, accumulated) of an evaluation.
    struct ActivationResult {
        std::optional<ErrorMetrics> isolated, accumulated;
    };
    bool setActivationResults(uint64_t generation, std::map<size_t, ActivationResult> results);
    uint64_t weightGeneration() const { return weightGeneration_; }
    uint64_t activationGeneration() const { return activationGeneration_; }

    // Layers matched by this rule are highlighted (none: no highlight).
    void setHighlightedRule(std::optional<size_t> rule);

    // The index (column 0) of a model layer, or invalid.
    QModelIndex indexOfLayer(size_t layer) const;

    QModelIndex index(int row, int column, const QModelIndex& parent = {}) const override;
    QModelIndex parent(const QModelIndex& child) const override;
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

    // The colour of an SQNR cell: red below 10 dB through green above 40 dB,
    // translucent so it reads on light and dark palettes.
    static QColor sqnrColor(double sqnrDb);

private:
    struct TreeNode {
        QString name; // the path component
        QString path; // full path up to here
        std::optional<size_t> layer;
        TreeNode* parent = nullptr;
        int row = 0;
        int64_t parameters = 0;
        std::vector<std::unique_ptr<TreeNode>> children;
    };

    TreeNode* nodeOf(const QModelIndex& index) const;
    QVariant layerData(const TreeNode& node, int column, int role) const;
    void refreshColumns(int first, int last);

    std::vector<QuantizableLayer> layers_;
    std::unique_ptr<TreeNode> root_;
    std::vector<TreeNode*> leafOfLayer_;
    RuleSet rules_;
    std::vector<Assignment> assignments_;
    uint64_t rulesGeneration_ = 0;
    std::map<size_t, ErrorMetrics> weightMetrics_;
    std::map<size_t, std::string> weightProblems_;
    uint64_t weightGeneration_ = 0;
    std::map<size_t, ActivationResult> activation_;
    uint64_t activationGeneration_ = 0;
    std::optional<size_t> highlighted_;
};

} // namespace qs
