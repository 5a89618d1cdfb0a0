#include "widgets/rule_table_model.h"

#include <QBrush>
#include <QColor>
#include <QFont>
#include <QStringList>
#include <QUndoCommand>
#include <QUndoStack>

#include <algorithm>

#include "core/error.h"
#include "rules/schema.h"

namespace qs {

namespace {

using Json = nlohmann::ordered_json;

// The rule list of before and after one edit: undo and redo swap whole lists,
// so undo restores exactly what the table held.
class RowsCommand : public QUndoCommand {
public:
    RowsCommand(RuleTableModel* model, std::vector<Json> before, std::vector<Json> after, const QString& label)
        : QUndoCommand(label), model_(model), before_(std::move(before)), after_(std::move(after))
    {
    }
    void undo() override { model_->restoreRows(before_); }
    void redo() override { model_->restoreRows(after_); }

private:
    RuleTableModel* model_;
    std::vector<Json> before_, after_;
};

// A rule that matches no layer, standing in for a row with an error so the
// engine's rule indices stay the table's rows.
QuantizationRule inertRule()
{
    QuantizationRule rule;
    rule.opTypes = {"(rule with an error)"};
    return rule;
}

} // namespace

const RuleField* RuleTableModel::fieldOfColumn(int column)
{
    const auto fields = ruleFields();
    if (column <= kMatchesColumn || column > int(fields.size()))
        return nullptr;
    return &fields[size_t(column - 1)];
}

int RuleTableModel::columnOfField(std::string_view name)
{
    const auto fields = ruleFields();
    for (size_t i = 0; i < fields.size(); ++i)
        if (fields[i].name == name)
            return int(i) + 1;
    return -1;
}

RuleTableModel::RuleTableModel(QUndoStack* undoStack, QObject* parent) : QAbstractTableModel(parent), undo_(undoStack)
{
    rebuild();
}

void RuleTableModel::setResolution(std::optional<RuleResolution> resolution)
{
    resolution_ = resolution ? std::move(*resolution) : RuleResolution{};
    if (!rows_.empty())
        emit dataChanged(index(0, kMatchesColumn), index(rowCount() - 1, kMatchesColumn));
}

std::optional<size_t> RuleTableModel::matchCount(int row) const
{
    if (row < 0 || size_t(row) >= resolution_.matchCount.size())
        return std::nullopt;
    return resolution_.matchCount[size_t(row)];
}

void RuleTableModel::setRuleSet(const RuleSet& rules, const QString& label)
{
    std::vector<Json> rows;
    for (const auto& rule : rules.rules())
        rows.push_back(ruleToJson(rule));
    pushRows(std::move(rows), label);
}

bool RuleTableModel::allValid() const
{
    for (const auto& e : errors_)
        if (!e.empty())
            return false;
    return true;
}

QString RuleTableModel::firstError() const
{
    for (const auto& e : errors_)
        if (!e.empty())
            return QString::fromStdString(e);
    return {};
}

std::string RuleTableModel::errorField(int row) const
{
    return row >= 0 && size_t(row) < errorFields_.size() ? errorFields_[size_t(row)] : std::string();
}

std::string RuleTableModel::toJsonText() const
{
    Json file = Json::object();
    file["version"] = RuleSet::kVersion;
    file["rules"] = Json::array();
    for (const auto& row : rows_)
        file["rules"].push_back(row);
    return file.dump(2) + "\n";
}

void RuleTableModel::insertRule(int row, Json rule, const QString& label)
{
    auto rows = rows_;
    row = std::clamp(row, 0, int(rows.size()));
    rows.insert(rows.begin() + row, std::move(rule));
    pushRows(std::move(rows), label);
}

void RuleTableModel::duplicateRule(int row)
{
    if (row < 0 || row >= rowCount())
        return;
    insertRule(row + 1, rows_[size_t(row)], tr("Duplicate rule %1").arg(row));
}

void RuleTableModel::removeRule(int row)
{
    if (row < 0 || row >= rowCount())
        return;
    auto rows = rows_;
    rows.erase(rows.begin() + row);
    pushRows(std::move(rows), tr("Delete rule %1").arg(row));
}

void RuleTableModel::moveRule(int row, int delta)
{
    const int to = row + delta;
    if (row < 0 || row >= rowCount() || to < 0 || to >= rowCount())
        return;
    auto rows = rows_;
    std::swap(rows[size_t(row)], rows[size_t(to)]);
    pushRows(std::move(rows), delta < 0 ? tr("Move rule %1 up").arg(row) : tr("Move rule %1 down").arg(row));
}

void RuleTableModel::setField(int row, std::string_view field, const Json& value)
{
    if (row < 0 || row >= rowCount())
        return;
    auto rows = rows_;
    Json& object = rows[size_t(row)];
    const std::string key(field);
    if (value.is_null())
        object.erase(key);
    else
        object[key] = value;
    if (object == rows_[size_t(row)])
        return;
    pushRows(std::move(rows), tr("Set %1 of rule %2").arg(QString::fromStdString(key)).arg(row));
}

void RuleTableModel::setFields(int row, const Json& fields, const QString& label)
{
    if (row < 0 || row >= rowCount() || !fields.is_object())
        return;
    auto rows = rows_;
    Json& object = rows[size_t(row)];
    for (const auto& [key, value] : fields.items()) {
        if (value.is_null())
            object.erase(key);
        else
            object[key] = value;
    }
    if (object == rows_[size_t(row)])
        return;
    pushRows(std::move(rows), label);
}

void RuleTableModel::pushRows(std::vector<Json> rows, const QString& label)
{
    if (undo_)
        undo_->push(new RowsCommand(this, rows_, std::move(rows), label)); // push() runs redo()
    else
        restoreRows(std::move(rows));
}

void RuleTableModel::restoreRows(std::vector<Json> rows)
{
    if (rows.size() != rows_.size()) {
        // Rows inserted or removed: every row below moves.
        beginResetModel();
        rows_ = std::move(rows);
        rebuild();
        endResetModel();
    } else {
        // The same rows with fields edited: only the changed rows are redrawn,
        // and the views keep their selection and editors.
        std::vector<size_t> changed;
        for (size_t i = 0; i < rows.size(); ++i)
            if (rows[i] != rows_[i])
                changed.push_back(i);
        rows_ = std::move(rows);
        rebuild();
        for (const size_t i : changed)
            emit dataChanged(index(int(i), 0), index(int(i), columnCount() - 1));
    }
    emit rulesChanged();
}

void RuleTableModel::rebuild()
{
    const std::vector<QuantizationRule> previous = effective_.rules();
    std::vector<std::string> previousErrors = std::move(errors_), previousFields = std::move(errorFields_);
    errors_.assign(rows_.size(), {});
    errorFields_.assign(rows_.size(), {});
    std::vector<QuantizationRule> rules;
    rules.reserve(rows_.size());
    for (size_t i = 0; i < rows_.size(); ++i) {
        if (i < parsedRows_.size() && i < previous.size() && parsedRows_[i] == rows_[i]) {
            rules.push_back(previous[i]); // shares its compiled regex
            errors_[i] = std::move(previousErrors[i]);
            errorFields_[i] = std::move(previousFields[i]);
            continue;
        }
        try {
            rules.push_back(ruleFromJson(rows_[i], i));
        } catch (const RuleError& e) {
            errors_[i] = e.what();
            errorFields_[i] = e.field();
            rules.push_back(inertRule());
        } catch (const Error& e) {
            errors_[i] = e.what();
            rules.push_back(inertRule());
        }
    }
    parsedRows_ = rows_;
    effective_ = RuleSet(std::move(rules));
}

int RuleTableModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : int(rows_.size());
}

int RuleTableModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : int(ruleFields().size()) + 1;
}

QString RuleTableModel::cellText(int row, const RuleField& field) const
{
    const Json& object = rows_[size_t(row)];
    const auto it = object.find(std::string(field.name));
    if (it == object.end() || it->is_null())
        return QString::fromUtf8(field.absentText.data(), qsizetype(field.absentText.size()));
    if (it->is_string())
        return QString::fromStdString(it->get<std::string>());
    if (it->is_array()) {
        QStringList parts;
        for (const auto& v : *it)
            parts << (v.is_string() ? QString::fromStdString(v.get<std::string>()) : QString::fromStdString(v.dump()));
        return parts.join(QStringLiteral(", "));
    }
    return QString::fromStdString(it->dump());
}

QVariant RuleTableModel::data(const QModelIndex& index, int role) const
{
    if (!index.isValid() || !checkIndex(index, CheckIndexOption::IndexIsValid))
        return {};
    const int row = index.row();
    const bool valid = errors_[size_t(row)].empty();
    const std::optional<size_t> matches = matchCount(row);
    const bool unused = valid && matches == size_t(0);
    const RuleField* field = fieldOfColumn(index.column());
    const bool errorCell =
        !valid && (field ? errorFields_[size_t(row)] == field->name
                         : errorFields_[size_t(row)].empty() || columnOfField(errorFields_[size_t(row)]) < 0);

    switch (role) {
    case Qt::DisplayRole:
        if (!field) {
            if (!valid)
                return tr("error");
            if (!matches)
                return QString();
            return *matches == 0 ? tr("unused") : QString::number(*matches);
        }
        return cellText(row, *field);
    case Qt::EditRole:
        if (!field)
            return {};
        return rows_[size_t(row)].contains(std::string(field->name)) ? cellText(row, *field) : QString();
    case Qt::ToolTipRole:
        if (errorCell || (!valid && !field))
            return QString::fromStdString(errors_[size_t(row)]);
        if (!field) {
            if (!matches)
                return tr("Open a model to see which layers this rule matches.");
            return unused ? tr("This rule matches no layer: an earlier rule takes them, or its module_path and "
                               "op_types fit none.")
                          : tr("%n layer(s) get this rule.", nullptr, int(*matches));
        }
        return QStringLiteral("<b>%1</b> (%2; default %3)<br>%4")
            .arg(QString::fromUtf8(field->name.data(), qsizetype(field->name.size())),
                 QString::fromUtf8(field->jsonType.data(), qsizetype(field->jsonType.size())),
                 QString::fromUtf8(field->defaultValue.data(), qsizetype(field->defaultValue.size())).toHtmlEscaped(),
                 QString::fromUtf8(field->description.data(), qsizetype(field->description.size())).toHtmlEscaped());
    case Qt::BackgroundRole:
        if (errorCell)
            return QBrush(QColor(220, 40, 40, 110));
        if (!field && unused)
            return QBrush(QColor(230, 160, 20, 90));
        return {};
    case Qt::ForegroundRole:
        if (field && !rows_[size_t(row)].contains(std::string(field->name)))
            return QBrush(QColor(128, 128, 128));
        return {};
    case Qt::FontRole:
        if (!field && (unused || !valid)) {
            QFont font;
            font.setItalic(true);
            return font;
        }
        return {};
    case Qt::TextAlignmentRole:
        return field ? QVariant() : QVariant(int(Qt::AlignRight | Qt::AlignVCenter));
    case ErrorRole:
        return QString::fromStdString(errors_[size_t(row)]);
    case UnusedRole:
        return unused;
    case AllowedValuesRole: {
        QStringList values;
        if (field && field->allowedValues)
            for (const auto& v : field->allowedValues())
                values << QString::fromStdString(v);
        return values;
    }
    case IsDefaultRole:
        return field && !rows_[size_t(row)].contains(std::string(field->name));
    default:
        return {};
    }
}

Json RuleTableModel::valueFromText(const RuleField& field, const QString& text)
{
    const QString trimmed = text.trimmed();
    if (trimmed.isEmpty() || trimmed == QLatin1String("null"))
        return nullptr;
    // Text that is not a value of the field's kind stays a string, so the
    // field's own error says what is wrong with it.
    const auto parsedOrText = [&trimmed] {
        Json parsed = Json::parse(trimmed.toStdString(), nullptr, false);
        return parsed.is_discarded() ? Json(trimmed.toStdString()) : parsed;
    };
    switch (field.kind) {
    case RuleFieldKind::Regex:
        return text.toStdString(); // regexes keep their spaces
    case RuleFieldKind::QType:
    case RuleFieldKind::Method:
    case RuleFieldKind::Choice:
        return trimmed.toStdString();
    case RuleFieldKind::Bool:
    case RuleFieldKind::OptionalBool:
    case RuleFieldKind::Number:
    case RuleFieldKind::Integer:
        return parsedOrText();
    case RuleFieldKind::OpTypeList:
    case RuleFieldKind::IntegerList: {
        if (trimmed.startsWith(QLatin1Char('[')))
            return parsedOrText();
        Json list = Json::array();
        for (const QString& part : trimmed.split(QLatin1Char(','), Qt::SkipEmptyParts)) {
            bool ok = false;
            const qlonglong n = part.trimmed().toLongLong(&ok);
            if (field.kind == RuleFieldKind::IntegerList && ok)
                list.push_back(n);
            else
                list.push_back(part.trimmed().toStdString());
        }
        return list;
    }
    }
    return parsedOrText();
}

bool RuleTableModel::setData(const QModelIndex& index, const QVariant& value, int role)
{
    if (role != Qt::EditRole || !index.isValid() || !checkIndex(index, CheckIndexOption::IndexIsValid))
        return false;
    const RuleField* field = fieldOfColumn(index.column());
    if (!field)
        return false;
    setField(index.row(), field->name, valueFromText(*field, value.toString()));
    return true;
}

QVariant RuleTableModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation == Qt::Vertical) {
        if (role == Qt::DisplayRole && section >= 0 && section < rowCount())
            return QString::number(section);
        return {};
    }
    const RuleField* field = fieldOfColumn(section);
    if (role == Qt::DisplayRole) {
        if (section == kMatchesColumn)
            return tr("matches");
        return field ? QString::fromUtf8(field->name.data(), qsizetype(field->name.size())) : QVariant();
    }
    if (role == Qt::ToolTipRole && field)
        return QString::fromUtf8(field->description.data(), qsizetype(field->description.size()));
    return {};
}

Qt::ItemFlags RuleTableModel::flags(const QModelIndex& index) const
{
    if (!index.isValid() || !checkIndex(index, CheckIndexOption::IndexIsValid))
        return Qt::NoItemFlags;
    Qt::ItemFlags f = Qt::ItemIsEnabled | Qt::ItemIsSelectable;
    if (fieldOfColumn(index.column()))
        f |= Qt::ItemIsEditable;
    return f;
}

} // namespace qs
