#pragma once
// The rules of the rule editor as an ordered table: one row per rule (row order
// is precedence), one column per field of the engine's rule schema
// (rules/schema.h) after a "matches" column. Each row holds the rule as its
// JSON object, so a half-edited rule (an invalid regex, a value the field
// refuses) stays in the table, marked red with the engine's message, instead
// of being lost; such a row matches no layer until it is fixed.
//
// Every edit goes through the QUndoStack the model is given: undo restores the
// exact rule list (the JSON objects) of before the edit.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <QAbstractTableModel>
#include <QString>

#include <nlohmann/json.hpp>

#include "rules/ruleset.h"

class QUndoStack;

namespace qs {

struct RuleField;

class RuleTableModel : public QAbstractTableModel {
    Q_OBJECT
public:
    static constexpr int kMatchesColumn = 0;
    // The schema field a column edits (columns after kMatchesColumn), or null.
    static const RuleField* fieldOfColumn(int column);
    // The column of the schema field `name`, or -1.
    static int columnOfField(std::string_view name);

    enum Role {
        ErrorRole = Qt::UserRole + 1, // QString: the row's rule error (empty when valid)
        UnusedRole,                   // bool: the rule is valid and matches no layer
        AllowedValuesRole,            // QStringList: the field's values from the engine's tables
        IsDefaultRole,                // bool: the field is absent (its default applies)
    };

    explicit RuleTableModel(QUndoStack* undoStack, QObject* parent = nullptr);

    // The rules resolved over the model's layers, as the exploration resolved
    // them (one resolution per edit, done by the engine, not here): the
    // "matches" column shows its counts. None: no model, no counts.
    void setResolution(std::optional<RuleResolution> resolution);

    // Replaces all rules (an undoable edit; `label` names it in the Edit menu).
    void setRuleSet(const RuleSet& rules, const QString& label);
    // The rules as the engine takes them: a row with an error becomes a rule
    // that matches nothing (so rule indices stay the table's rows).
    const RuleSet& effectiveRules() const { return effective_; }
    // Whether every row is a valid rule (saving needs it).
    bool allValid() const;
    // The first row error as "rule N, field ...: ...", or empty.
    QString firstError() const;
    // The schema field row `row`'s error names (empty: valid, or an error of no one field).
    std::string errorField(int row) const;
    // The rule file text of the rows as written (invalid rows included).
    std::string toJsonText() const;
    // The resolution last given (empty without a model).
    const RuleResolution& resolution() const { return resolution_; }
    // The rows' JSON objects (what undo restores).
    const std::vector<nlohmann::ordered_json>& rows() const { return rows_; }

    // Undoable structural edits.
    void insertRule(int row, nlohmann::ordered_json rule, const QString& label);
    void duplicateRule(int row);
    void removeRule(int row);
    void moveRule(int row, int delta);
    // Sets one field from JSON (null = back to the default), undoable.
    void setField(int row, std::string_view field, const nlohmann::ordered_json& value);
    // Sets several fields at once (`fields`: an object, null = back to the default) as one undo step.
    void setFields(int row, const nlohmann::ordered_json& fields, const QString& label);

    // Replaces the rows without an undo entry (what undo commands call).
    void restoreRows(std::vector<nlohmann::ordered_json> rows);

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    bool setData(const QModelIndex& index, const QVariant& value, int role = Qt::EditRole) override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;
    Qt::ItemFlags flags(const QModelIndex& index) const override;

    // The JSON value a field takes from text typed into its cell: "" = default
    // (null), comma lists for list fields, JSON literals for numbers and
    // booleans; text that is none of these stays a string so the field's own
    // error explains it.
    static nlohmann::ordered_json valueFromText(const RuleField& field, const QString& text);

signals:
    // The effective rules or the resolution changed (after any edit, undo or redo).
    void rulesChanged();

private:
    void pushRows(std::vector<nlohmann::ordered_json> rows, const QString& label);
    // Parses the rows into effective_; rows unchanged since the last parse
    // (same position, same JSON) keep their parsed rule and error.
    void rebuild();
    QString cellText(int row, const RuleField& field) const;
    // The matches count of `row`, or none while no resolution covers it.
    std::optional<size_t> matchCount(int row) const;

    QUndoStack* undo_;
    std::vector<nlohmann::ordered_json> rows_;
    std::vector<std::string> errors_;                // per row; empty = valid
    std::vector<std::string> errorFields_;           // per row; the field the error names
    std::vector<nlohmann::ordered_json> parsedRows_; // the rows effective_ was parsed from
    RuleSet effective_;
    RuleResolution resolution_;
};

} // namespace qs
