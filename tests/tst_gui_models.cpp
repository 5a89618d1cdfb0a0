// The item models of the app (widgets/): the layer tree and the rule table run
// under QAbstractItemModelTester through loads and edits; editing a rule
// through the model updates match counts and unused flags; undo/redo restores
// the rule list exactly; an invalid regex marks its cell with the position;
// the regex editor validates as you type.
#include <QtTest>

#include <QComboBox>

#include <QAbstractItemModelTester>
#include <QLineEdit>
#include <QSortFilterProxyModel>
#include <QStyleOptionViewItem>
#include <QUndoStack>

#include "rules/ruleset.h"
#include "rules/schema.h"
#include "widgets/layer_tree_model.h"
#include "widgets/rule_field_delegate.h"
#include "widgets/rule_table_model.h"

using namespace qs;

namespace {

QuantizableLayer layer(const std::string& path, const std::string& op, Shape shape)
{
    QuantizableLayer l;
    l.modulePath = path;
    l.opType = op;
    l.weightShape = shape;
    l.parameterCount = 1;
    for (const int64_t d : shape)
        l.parameterCount *= d;
    return l;
}

std::vector<QuantizableLayer> demoLayers()
{
    return {layer("features/conv1", "Conv", {8, 1, 3, 3}), layer("features/conv2", "Conv", {16, 8, 3, 3}),
            layer("features/conv3", "Conv", {16, 16, 3, 3}), layer("classifier/fc1", "Gemm", {32, 64}),
            layer("classifier/fc2", "Gemm", {10, 32})};
}

std::vector<RuleTarget> targetsOf(const std::vector<QuantizableLayer>& layers)
{
    std::vector<RuleTarget> t;
    for (const auto& l : layers)
        t.push_back({l.modulePath, l.opType});
    return t;
}

// What the app's Workspace does for the rule table: the engine resolves the
// rules once per edit and hands the table the result.
void resolveOnEdit(RuleTableModel& model, const std::vector<RuleTarget>& targets)
{
    QObject::connect(&model, &RuleTableModel::rulesChanged, &model,
                     [&model, targets] { model.setResolution(model.effectiveRules().resolve(targets)); });
    model.setResolution(model.effectiveRules().resolve(targets));
}

int column(std::string_view field)
{
    return RuleTableModel::columnOfField(field);
}

} // namespace

class TestGuiModels : public QObject {
    Q_OBJECT
private slots:
    void layerTreeBuildsGroupsFromPaths();
    void layerTreeShowsSharedWeights();
    void layerTreeMarksStaleResults();
    void layerTreeFiltersByPath();
    void ruleEditsUpdateMatchCounts();
    void undoRedoRestoresRulesExactly();
    void invalidRegexMarksCellWithPosition();
    void valueFromTextFollowsFieldTypes();
    void regexEditorValidatesAsYouType();
};

void TestGuiModels::layerTreeBuildsGroupsFromPaths()
{
    LayerTreeModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setLayers(demoLayers());
    QCOMPARE(model.rowCount(), 2); // features, classifier
    const QModelIndex features = model.index(0, 0);
    QCOMPARE(features.data().toString(), QStringLiteral("features"));
    QCOMPARE(model.rowCount(features), 3);
    QCOMPARE(model.index(1, 0, features).data(LayerTreeModel::ModulePathRole).toString(),
             QStringLiteral("features/conv2"));
    QCOMPARE(model.index(1, LayerTreeModel::ShapeColumn, features).data().toString(), QStringLiteral("[16, 8, 3, 3]"));
    // The group sums its layers' parameters.
    QCOMPARE(model.index(0, LayerTreeModel::ParametersColumn).data(LayerTreeModel::SortRole).toDouble(),
             double(72 + 1152 + 2304));
    QCOMPARE(model.indexOfLayer(3).data().toString(), QStringLiteral("fc1"));
    QCOMPARE(model.indexOfLayer(3).data(LayerTreeModel::LayerRole).toInt(), 3);
}

void TestGuiModels::layerTreeShowsSharedWeights()
{
    // encoder/layer1/proj reads the weight of encoder/layer0/proj: one quantizer.
    std::vector<QuantizableLayer> layers = {layer("encoder/layer0/proj", "Gemm", {64, 64}),
                                            layer("encoder/layer1/proj", "Gemm", {64, 64}),
                                            layer("head", "Gemm", {10, 64})};
    layers[1].sharesWeightOf = 0;
    LayerTreeModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setLayers(layers);
    const QModelIndex shared = model.indexOfLayer(1);
    const QModelIndex parameters = shared.siblingAtColumn(LayerTreeModel::ParametersColumn);
    QCOMPARE(parameters.data().toString(), QStringLiteral("shared"));
    QCOMPARE(parameters.data(LayerTreeModel::SortRole).toDouble(), 0.0);
    const QString tip = shared.siblingAtColumn(LayerTreeModel::OpTypeColumn).data(Qt::ToolTipRole).toString();
    QVERIFY2(tip.contains(QStringLiteral("reads the weight of encoder/layer0/proj")), qPrintable(tip));
    // The group counts the shared weight once.
    QCOMPARE(model.index(0, LayerTreeModel::ParametersColumn).data(LayerTreeModel::SortRole).toDouble(), 4096.0);
    QCOMPARE(model.indexOfLayer(0).siblingAtColumn(LayerTreeModel::ParametersColumn).data().toString(),
             QLocale().toString(4096));
}

void TestGuiModels::layerTreeMarksStaleResults()
{
    LayerTreeModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setLayers(demoLayers());
    const RuleSet rules = RuleSet::fromJson(R"({"version":1,"rules":[{"op_types":["Conv"],"weight_qtype":"int8"}]})");
    std::vector<LayerTreeModel::Assignment> a(5);
    for (size_t i = 0; i < 3; ++i)
        a[i] = {0, "int8", "", ""};
    model.setRules(rules, a, 1);
    QCOMPARE(model.indexOfLayer(0).siblingAtColumn(LayerTreeModel::WeightQTypeColumn).data().toString(),
             QStringLiteral("int8"));
    QCOMPARE(model.indexOfLayer(3).siblingAtColumn(LayerTreeModel::WeightQTypeColumn).data().toString(),
             QStringLiteral("float"));
    QVERIFY(model.indexOfLayer(3).data(Qt::ToolTipRole).toString().contains(QStringLiteral("rule 0")));

    ErrorMetrics m;
    m.sqnrDb = 38.5;
    QVERIFY(model.setWeightResults(1, {{0, m}}, {}));
    const QModelIndex cell = model.indexOfLayer(0).siblingAtColumn(LayerTreeModel::WeightSqnrColumn);
    QCOMPARE(cell.data().toString(), QStringLiteral("38.5 dB"));
    QVERIFY(!cell.data(LayerTreeModel::StaleRole).toBool());
    QVERIFY(cell.data(Qt::BackgroundRole).isValid()); // coloured by error

    // The rules change: the same numbers are now stale until generation 2 arrives.
    model.setRules(rules, a, 2);
    QVERIFY(cell.data(LayerTreeModel::StaleRole).toBool());
    QVERIFY(cell.data().toString().contains(QStringLiteral("stale")));
    QVERIFY(!cell.data(Qt::BackgroundRole).isValid()); // no error colour on a stale value
    // A result of generation 1 arriving late is refused once 2 is shown.
    m.sqnrDb = 20;
    QVERIFY(model.setWeightResults(2, {{0, m}}, {}));
    QVERIFY(!cell.data(LayerTreeModel::StaleRole).toBool());
    QVERIFY(!model.setWeightResults(1, {{0, ErrorMetrics{}}}, {}));
    QCOMPARE(cell.data().toString(), QStringLiteral("20.0 dB"));

    model.setHighlightedRule(0);
    QVERIFY(model.indexOfLayer(1).data(LayerTreeModel::HighlightRole).toBool());
    QVERIFY(!model.indexOfLayer(4).data(LayerTreeModel::HighlightRole).toBool());
}

void TestGuiModels::layerTreeFiltersByPath()
{
    LayerTreeModel model;
    model.setLayers(demoLayers());
    QSortFilterProxyModel proxy;
    proxy.setSourceModel(&model);
    proxy.setRecursiveFilteringEnabled(true);
    proxy.setFilterRole(LayerTreeModel::ModulePathRole);
    QAbstractItemModelTester tester(&proxy, QAbstractItemModelTester::FailureReportingMode::QtTest);
    proxy.setFilterRegularExpression(QRegularExpression(QStringLiteral("^classifier/fc\\d$")));
    QCOMPARE(proxy.rowCount(), 1);
    QCOMPARE(proxy.rowCount(proxy.index(0, 0)), 2);
    proxy.setFilterRegularExpression(QRegularExpression(QStringLiteral("conv2")));
    QCOMPARE(proxy.rowCount(), 1);
    QCOMPARE(proxy.rowCount(proxy.index(0, 0)), 1);
}

void TestGuiModels::ruleEditsUpdateMatchCounts()
{
    QUndoStack undo;
    RuleTableModel model(&undo);
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    resolveOnEdit(model, targetsOf(demoLayers()));
    model.setRuleSet(RuleSet::fromJson(R"({"version":1,"rules":[
        {"module_path":"features/.*","weight_qtype":"int8"},
        {"op_types":["Gemm"],"weight_qtype":"int4"},
        {"module_path":"nothing","weight_qtype":"int8"}]})"),
                     QStringLiteral("load"));
    QSignalSpy changed(&model, &RuleTableModel::rulesChanged);
    QCOMPARE(model.index(0, RuleTableModel::kMatchesColumn).data().toString(), QStringLiteral("3"));
    QCOMPARE(model.index(1, RuleTableModel::kMatchesColumn).data().toString(), QStringLiteral("2"));
    QVERIFY(model.index(2, 0).data(RuleTableModel::UnusedRole).toBool());
    QCOMPARE(model.resolution().unusedRules, std::vector<size_t>{2});

    // Narrow rule 0 to conv1: rule 2 still unused, rule 0 matches 1.
    QVERIFY(model.setData(model.index(0, column("module_path")), QStringLiteral("features/conv1")));
    QCOMPARE(changed.count(), 1);
    QCOMPARE(model.index(0, RuleTableModel::kMatchesColumn).data().toString(), QStringLiteral("1"));
    // Point rule 2 at conv2: it is used now.
    QVERIFY(model.setData(model.index(2, column("module_path")), QStringLiteral(".*conv2")));
    QCOMPARE(model.index(2, RuleTableModel::kMatchesColumn).data().toString(), QStringLiteral("1"));
    QVERIFY(!model.index(2, 0).data(RuleTableModel::UnusedRole).toBool());
    QCOMPARE(model.effectiveRules().firstMatch("features/conv2", "Conv"), std::optional<size_t>(2));
    // Move it above rule 0 and give rule 0's path to conv2 too: rule 0 is shadowed.
    model.setData(model.index(0, column("module_path")), QStringLiteral("features/conv2"));
    QCOMPARE(model.index(0, RuleTableModel::kMatchesColumn).data().toString(), QStringLiteral("1"));
    model.moveRule(2, -1);
    model.moveRule(1, -1);
    QCOMPARE(model.rows()[0]["module_path"], ".*conv2");
    QVERIFY(model.index(1, 0).data(RuleTableModel::UnusedRole).toBool());
    QCOMPARE(model.index(1, RuleTableModel::kMatchesColumn).data().toString(), QStringLiteral("unused"));
    // Combos come from the engine's tables.
    const QStringList qtypes =
        model.index(0, column("weight_qtype")).data(RuleTableModel::AllowedValuesRole).toStringList();
    QVERIFY(qtypes.contains(QStringLiteral("int8")) && qtypes.contains(QStringLiteral("nf4")));
    // Clearing a field returns it to its default (shown greyed).
    model.setData(model.index(0, column("weight_qtype")), QString());
    QVERIFY(model.index(0, column("weight_qtype")).data(RuleTableModel::IsDefaultRole).toBool());
    QCOMPARE(model.index(0, column("weight_qtype")).data().toString(), QStringLiteral("float"));
}

void TestGuiModels::undoRedoRestoresRulesExactly()
{
    QUndoStack undo;
    RuleTableModel model(&undo);
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    resolveOnEdit(model, targetsOf(demoLayers()));
    const RuleSet original = RuleSet::fromJson(R"({"version":1,"rules":[
        {"module_path":"features/.*","weight_qtype":"int8","act_qtype":"int8","act_calibration":"minmax"},
        {"op_types":["Gemm"],"weight_qtype":"int4","tile_size":16}]})");
    model.setRuleSet(original, QStringLiteral("load"));
    const auto rows0 = model.rows();
    const std::string json0 = model.toJsonText();

    model.setData(model.index(0, column("weight_calibration")), QStringLiteral("percentile,99.9"));
    model.duplicateRule(1);
    model.setData(model.index(2, column("module_path")), QStringLiteral("(")); // invalid
    model.removeRule(0);
    model.moveRule(1, -1);
    QCOMPARE(undo.count(), 6);
    const auto rows5 = model.rows();
    QVERIFY(rows5 != rows0);

    for (int i = 0; i < 5; ++i)
        undo.undo();
    QCOMPARE(model.rows(), rows0);
    QCOMPARE(model.toJsonText(), json0);
    QCOMPARE(model.effectiveRules(), original);
    QCOMPARE(model.index(1, RuleTableModel::kMatchesColumn).data().toString(), QStringLiteral("2"));
    for (int i = 0; i < 5; ++i)
        undo.redo();
    QCOMPARE(model.rows(), rows5);
    undo.undo(); // the move
    undo.undo(); // the removal: the invalid duplicate is back at row 2
    QVERIFY(!model.index(2, 0).data(RuleTableModel::ErrorRole).toString().isEmpty());
}

void TestGuiModels::invalidRegexMarksCellWithPosition()
{
    QUndoStack undo;
    RuleTableModel model(&undo);
    resolveOnEdit(model, targetsOf(demoLayers()));
    model.setRuleSet(RuleSet::fromJson(R"({"version":1,"rules":[{"weight_qtype":"int8"},{"weight_qtype":"int4"}]})"),
                     QStringLiteral("load"));
    QCOMPARE(model.index(0, RuleTableModel::kMatchesColumn).data().toString(), QStringLiteral("5"));
    model.setData(model.index(0, column("module_path")), QStringLiteral("features/(conv"));
    const QModelIndex cell = model.index(0, column("module_path"));
    const QString error = cell.data(Qt::ToolTipRole).toString();
    QVERIFY2(error.contains(QStringLiteral("position 10")), qPrintable(error));
    QVERIFY(error.contains(QStringLiteral("module_path")));
    QVERIFY(cell.data(Qt::BackgroundRole).isValid());
    QVERIFY(!model.index(0, column("weight_qtype")).data(Qt::BackgroundRole).isValid()); // only that cell
    QVERIFY(!model.allValid());
    QCOMPARE(model.firstError(), model.index(0, 0).data(RuleTableModel::ErrorRole).toString());
    // The invalid rule matches nothing; the next rule takes every layer, and indices stay the rows.
    QCOMPARE(model.index(0, RuleTableModel::kMatchesColumn).data().toString(), QStringLiteral("error"));
    QCOMPARE(model.effectiveRules().size(), size_t(2));
    QCOMPARE(model.resolution().matchCount[1], size_t(5));
    // The text stays as typed, so the user can fix it.
    QCOMPARE(cell.data(Qt::EditRole).toString(), QStringLiteral("features/(conv"));
    model.setData(cell, QStringLiteral("features/(conv)\\d"));
    QVERIFY(model.allValid());
    QCOMPARE(model.index(0, RuleTableModel::kMatchesColumn).data().toString(), QStringLiteral("3"));
}

void TestGuiModels::valueFromTextFollowsFieldTypes()
{
    auto value = [](std::string_view field, const char* text) {
        return RuleTableModel::valueFromText(*findRuleField(field), QString::fromUtf8(text));
    };
    QCOMPARE(value("op_types", "Conv, Gemm"), nlohmann::ordered_json({"Conv", "Gemm"}));
    QCOMPARE(value("act_batch_axes", "0, 1"), nlohmann::ordered_json({0, 1}));
    QCOMPARE(value("tile_size", "32"), nlohmann::ordered_json(32));
    QCOMPARE(value("narrow_range", "true"), nlohmann::ordered_json(true));
    QCOMPARE(value("weight_qtype", ""), nlohmann::ordered_json(nullptr));
    QCOMPARE(value("module_path", "a b"), nlohmann::ordered_json("a b"));
    QCOMPARE(value("tile_size", "big"), nlohmann::ordered_json("big")); // the field's own error will say why

    QUndoStack undo;
    RuleTableModel model(&undo);
    model.insertRule(0, nlohmann::ordered_json::object(), QStringLiteral("add"));
    model.setData(model.index(0, column("tile_size")), QStringLiteral("big"));
    QVERIFY(model.index(0, column("tile_size")).data(Qt::ToolTipRole).toString().contains(QStringLiteral("tile_size")));
    QVERIFY(model.index(0, column("tile_size")).data(Qt::BackgroundRole).isValid());
}

void TestGuiModels::regexEditorValidatesAsYouType()
{
    QUndoStack undo;
    RuleTableModel model(&undo);
    model.insertRule(0, nlohmann::ordered_json::object(), QStringLiteral("add"));
    RuleFieldDelegate delegate;
    QSignalSpy status(&delegate, &RuleFieldDelegate::regexStatus);
    QWidget parent;
    QWidget* editor = delegate.createEditor(&parent, QStyleOptionViewItem(), model.index(0, column("module_path")));
    auto* edit = qobject_cast<QLineEdit*>(editor);
    QVERIFY(edit);
    const QColor normal = edit->palette().color(QPalette::Base);
    QTest::keyClicks(edit, QStringLiteral("layer[1"));
    QVERIFY(!status.isEmpty());
    QVERIFY2(status.last().first().toString().contains(QStringLiteral("position 6")),
             qPrintable(status.last().first().toString()));
    QVERIFY(edit->palette().color(QPalette::Base) != normal);
    QTest::keyClick(edit, Qt::Key_BracketRight);
    QVERIFY(status.last().first().toString().isEmpty());
    QCOMPARE(edit->palette().color(QPalette::Base), normal);
    delegate.setModelData(edit, &model, model.index(0, column("module_path")));
    QCOMPARE(model.rows()[0]["module_path"], "layer[1]");
    // Combos for table-backed fields.
    QWidget* combo = delegate.createEditor(&parent, QStyleOptionViewItem(), model.index(0, column("weight_qtype")));
    QVERIFY(combo && combo->inherits("QComboBox"));
    // Editors follow the field's kind from the engine's table: numbers take number text or
    // nothing (the default), booleans are a combo with the default first.
    auto* tile = qobject_cast<QLineEdit*>(
        delegate.createEditor(&parent, QStyleOptionViewItem(), model.index(0, column("tile_size"))));
    QVERIFY(tile && tile->validator());
    for (const char* accepted : {"128", "0.25", "", "1e3"}) {
        tile->setText(QString::fromLatin1(accepted));
        QVERIFY2(tile->hasAcceptableInput(), accepted);
    }
    tile->setText(QStringLiteral("big"));
    QVERIFY(!tile->hasAcceptableInput());
    auto* seed = qobject_cast<QLineEdit*>(
        delegate.createEditor(&parent, QStyleOptionViewItem(), model.index(0, column("rounding_seed"))));
    QVERIFY(seed && seed->validator());
    seed->setText(QStringLiteral("-1"));
    QVERIFY(!seed->hasAcceptableInput());
    auto* flag = qobject_cast<QComboBox*>(
        delegate.createEditor(&parent, QStyleOptionViewItem(), model.index(0, column("symmetric"))));
    QVERIFY(flag);
    QCOMPARE(flag->count(), 3); // (default), true, false
    QVERIFY(!flag->isEditable());
    auto* method = qobject_cast<QComboBox*>(
        delegate.createEditor(&parent, QStyleOptionViewItem(), model.index(0, column("act_calibration"))));
    QVERIFY(method && method->isEditable()); // methods take arguments
}

QTEST_MAIN(TestGuiModels)
#include "tst_gui_models.moc"
