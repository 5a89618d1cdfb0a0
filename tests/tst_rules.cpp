// Rules: matching and precedence, resolution counts, explanations, the JSON
// schema and every parser error, regex error positions, round trips, and
// docs/rules.md kept in sync with the schema.
#include <QtTest>

#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>
#include <re2/re2.h>

#include "core/error.h"
#include "graph/module_path.h"
#include "rules/reference.h"
#include "rules/regex_syntax.h"
#include "rules/ruleset.h"
#include "rules/schema.h"

using namespace qs;

namespace {

// The message of the Error `f` throws; fails the test when it throws none.
template <typename F> QString errorOf(F&& f)
{
    try {
        f();
    } catch (const Error& e) {
        return QString::fromStdString(e.what());
    }
    return QStringLiteral("<no error>");
}

QString loadError(const std::string& json)
{
    return errorOf([&] { RuleSet::fromJson(json, "test.json"); });
}

// A file with one rule whose body is `fields`.
std::string oneRule(const std::string& fields)
{
    return R"({"version": 1, "rules": [{}, )" + std::string("{") + fields + "}]}";
}

RuleSet rules(const std::string& list)
{
    return RuleSet::fromJson(R"({"version": 1, "rules": )" + list + "}");
}

const std::string kDocPath = QUANTSCOPE_TEST_DATA "/../../docs/rules.md";

} // namespace

class TestRules : public QObject {
    Q_OBJECT
private slots:
    void firstFullMatchWins()
    {
        const RuleSet set = rules(R"([{"module_path": ".*conv1", "weight_qtype": "int8"},
                                       {"module_path": "layer1/.*", "weight_qtype": "int4"},
                                       {"weight_qtype": "nf4"}])");
        QCOMPARE(set.firstMatch("layer1/conv1", "Conv"), std::optional<size_t>(0)); // rules 1 and 2 match too
        QCOMPARE(set.firstMatch("layer1/conv2", "Conv"), std::optional<size_t>(1));
        QCOMPARE(set.firstMatch("head/fc", "Gemm"), std::optional<size_t>(2));
        const RuleSet none = rules(R"([{"module_path": "layer1/.*", "weight_qtype": "int4"}])");
        QCOMPARE(none.firstMatch("layer2/conv1", "Conv"), std::nullopt); // stays float
    }

    void modulePathMustMatchTheWholePath()
    {
        const RuleSet set = rules(R"([{"module_path": "conv1"}, {"module_path": "layer[0-9]+"}])");
        QCOMPARE(set.firstMatch("conv1", "Conv"), std::optional<size_t>(0));
        QCOMPARE(set.firstMatch("layer1/conv1", "Conv"), std::nullopt); // a search would find "conv1"
        QCOMPARE(set.firstMatch("conv10", "Conv"), std::nullopt);       // nor a prefix
        QCOMPARE(set.firstMatch("layer12", "Conv"), std::optional<size_t>(1));
        QCOMPARE(set.firstMatch("layer12/fc", "Gemm"), std::nullopt);
        QCOMPARE(set.firstMatch("xlayer1", "Gemm"), std::nullopt);
    }

    void opTypesFilterAndEmptyMeansAll()
    {
        const RuleSet set = rules(R"([{"op_types": ["MatMul", "Gemm"], "weight_qtype": "int4"},
                                       {"module_path": "a/.*", "op_types": [], "weight_qtype": "int8"}])");
        QCOMPARE(set.firstMatch("a/fc", "Gemm"), std::optional<size_t>(0));
        QCOMPARE(set.firstMatch("a/conv", "Conv"), std::optional<size_t>(1));
        QCOMPARE(set.firstMatch("b/conv", "Conv"), std::nullopt);
        QCOMPARE(set.firstMatch("b/mm", "matmul"), std::nullopt); // op types are case-sensitive
    }

    void resolutionCountsMatchesAndReportsUnusedRules()
    {
        const RuleSet set = rules(R"([{"module_path": "stem/.*"}, {"op_types": ["Conv"]},
                                       {"module_path": "never/.*"}, {"op_types": ["Conv"], "module_path": "x"}])");
        const std::vector<RuleTarget> layers = {
            {"stem/conv", "Conv"}, {"layer1/conv", "Conv"}, {"layer1/fc", "Gemm"}, {"x", "Conv"}, {"stem/fc", "Gemm"}};
        const RuleResolution r = set.resolve(layers);
        const std::vector<std::optional<size_t>> expected = {0, 1, std::nullopt, 1, 0};
        QCOMPARE(r.ruleOfLayer, expected);
        QCOMPARE(r.matchCount, (std::vector<size_t>{2, 2, 0, 0}));
        // Rule 3 matches "x" but rule 1 shadows it: unused like the rule that matches nothing.
        QCOMPARE(r.unusedRules, (std::vector<size_t>{2, 3}));
        QVERIFY(rules("[]").resolve(layers).ruleOfLayer == std::vector<std::optional<size_t>>(5));
    }

    void explainSaysWhyEachRuleDoesOrDoesNotApply()
    {
        const RuleSet set = rules(R"([{"module_path": "head/.*"}, {"op_types": ["Gemm"]},
                                       {"module_path": "layer1/.*"}, {"module_path": ".*conv"}])");
        const auto e = set.explain("layer1/conv", "Conv");
        QCOMPARE(e.size(), size_t(4));
        QCOMPARE(e[0].verdict, RuleVerdict::PathMismatch);
        QCOMPARE(e[1].verdict, RuleVerdict::OpTypeNotListed);
        QCOMPARE(e[2].verdict, RuleVerdict::Applies);
        QCOMPARE(e[3].verdict, RuleVerdict::Shadowed);
        QCOMPARE(e[3].shadowedBy, std::optional<size_t>(2));
        QCOMPARE(QString::fromStdString(e[0].text),
                 QStringLiteral("rule 0: module_path \"head/.*\" does not match the whole path \"layer1/conv\""));
        QCOMPARE(QString::fromStdString(e[1].text), QStringLiteral("rule 1: op_types [Gemm] does not list Conv"));
        QCOMPARE(QString::fromStdString(e[3].text),
                 QStringLiteral("rule 3: matches, but rule 2 comes first and applies"));
        // The first rule applies even to paths a later rule also matches; rules after it are shadowed.
        const auto head = set.explain("head/x", "Gemm");
        QCOMPARE(head[0].verdict, RuleVerdict::Applies);
        QCOMPARE(head[1].verdict, RuleVerdict::Shadowed);
        QCOMPARE(head[1].shadowedBy, std::optional<size_t>(0));
        // A path mismatch is what is reported when the op type is not listed either.
        const RuleSet both = rules(R"([{"module_path": "a", "op_types": ["Gemm"]}])");
        QCOMPARE(both.explain("b", "Conv")[0].verdict, RuleVerdict::PathMismatch);
        QCOMPARE(both.explain("a", "Conv")[0].verdict, RuleVerdict::OpTypeNotListed);
        QCOMPARE(both.explain("a", "Gemm")[0].verdict, RuleVerdict::Applies);
        QCOMPARE(QString::fromStdString(both.explain("a", "Gemm")[0].text),
                 QStringLiteral("rule 0: applies: module_path \"a\" matches \"a\" and op_types lists Gemm"));
        // explain and firstMatch agree.
        for (const char* path : {"head/a", "layer1/conv", "x/conv", "other"})
            for (const char* op : {"Conv", "Gemm"}) {
                std::optional<size_t> applies;
                for (const auto& x : set.explain(path, op))
                    if (x.verdict == RuleVerdict::Applies)
                        applies = x.rule;
                QCOMPARE(applies, set.firstMatch(path, op));
            }
    }

    void parserErrors_data()
    {
        QTest::addColumn<QString>("json");
        QTest::addColumn<QString>("expected");
        const auto row = [](const char* name, const std::string& json, const char* expected) {
            QTest::newRow(name) << QString::fromStdString(json) << QString::fromUtf8(expected);
        };
        // The file.
        row("not json", "{\"version\": 1, ",
            "test.json: invalid JSON: parse error at line 1, column 16: syntax error while parsing object key - "
            "unexpected end of input");
        row("trailing garbage", R"({"version": 1, "rules": []} x)",
            "test.json: invalid JSON: parse error at line 1, column 29");
        row("two documents", R"({"version": 1, "rules": []}{})", "test.json: invalid JSON");
        row("top not object", R"([{"version": 1}])",
            "test.json: expected a JSON object {\"version\": 1, \"rules\": [...]}, got array");
        row("version missing", R"({"rules": []})", "test.json: missing \"version\"; add \"version\": 1");
        row("version 2", R"({"version": 2, "rules": []})",
            "test.json: unsupported version 2; this Quantscope reads \"version\": 1");
        row("version string", R"({"version": "1", "rules": []})", "test.json: unsupported version \"1\"");
        row("version float", R"({"version": 1.5, "rules": []})", "test.json: unsupported version 1.5");
        row("rules missing", R"({"version": 1})", "test.json: missing \"rules\"");
        row("rules not list", R"({"version": 1, "rules": {}})",
            "test.json: \"rules\" must be a list of rule objects, got object");
        row("unknown top key", R"({"version": 1, "rules": [], "rule": []})",
            "test.json: unknown key \"rule\" at the top level");
        row("duplicate top key", R"({"version": 1, "version": 1, "rules": []})",
            "test.json: duplicate key \"version\" in the top-level object");
        row("duplicate field", oneRule(R"("weight_qtype": "int8", "weight_qtype": "int4")"),
            "test.json: duplicate key \"weight_qtype\" in rule 1");
        row("too deep",
            R"({"version": 1, "rules": [{"op_types": )" + std::string(40, '[') + std::string(40, ']') + "}]}",
            "test.json: JSON nested deeper than 32 levels");
        row("rule not object", R"({"version": 1, "rules": [{}, 3]})", "test.json: rule 1: expected an object");
        row("unknown field", oneRule(R"("modul_path": "x")"),
            "test.json: rule 1, field \"modul_path\": unknown field; did you mean \"module_path\"? fields are "
            "module_path, op_types,");
        row("unknown field far", oneRule(R"("comment": "x")"),
            "rule 1, field \"comment\": unknown field; fields are module_path");
        // Each field's wrong JSON type.
        row("module_path type", oneRule(R"("module_path": 3)"),
            "rule 1, field \"module_path\": expected a string, got number 3");
        row("op_types type", oneRule(R"("op_types": "Conv")"),
            "rule 1, field \"op_types\": expected a list of op type names such as [\"Conv\", \"MatMul\"], got string "
            "\"Conv\"");
        row("op_types element", oneRule(R"("op_types": ["Conv", 1])"),
            "rule 1, field \"op_types\": element 1: expected a string, got number 1");
        row("op_types empty name", oneRule(R"("op_types": [""])"),
            "rule 1, field \"op_types\": an op type is an empty string");
        row("weight_qtype type", oneRule(R"("weight_qtype": 8)"),
            "rule 1, field \"weight_qtype\": expected a string, got number 8");
        row("act_qtype type", oneRule(R"("act_qtype": true)"),
            "rule 1, field \"act_qtype\": expected a string, got boolean true");
        row("weight_calibration type", oneRule(R"("weight_calibration": null)"),
            "rule 1, field \"weight_calibration\": expected a string, got null");
        row("act_calibration type", oneRule(R"("act_calibration": ["absmax"])"),
            "rule 1, field \"act_calibration\": expected a string, got array [\"absmax\"]");
        row("granularity type", oneRule(R"("granularity": 0)"),
            "rule 1, field \"granularity\": expected a string, got number 0");
        row("tile_size type", oneRule(R"("tile_size": "128")"),
            "rule 1, field \"tile_size\": expected a number (a tile length such as 128, or 1/n such as 0.25) or null, "
            "got string \"128\"");
        row("act_static_scale type", oneRule(R"("act_static_scale": 1)"),
            "rule 1, field \"act_static_scale\": expected true or false, got number 1");
        row("act_batch_axes type", oneRule(R"("act_batch_axes": 0)"),
            "rule 1, field \"act_batch_axes\": expected a list of axes such as [0], got number 0");
        row("act_batch_axes element", oneRule(R"("act_batch_axes": [0.5])"),
            "rule 1, field \"act_batch_axes\": element 0: expected an integer axis, got number 0.5");
        row("act_batch_axes huge", oneRule(R"("act_batch_axes": [0, 99999999999])"),
            "rule 1, field \"act_batch_axes\": element 1: axis 99999999999 is out of range");
        row("narrow_range type", oneRule(R"("narrow_range": "yes")"),
            "rule 1, field \"narrow_range\": expected true or false, got string \"yes\"");
        row("symmetric type", oneRule(R"("symmetric": 0)"),
            "rule 1, field \"symmetric\": expected true or false, got number 0");
        row("scale_restriction type", oneRule(R"("scale_restriction": {})"),
            "rule 1, field \"scale_restriction\": expected a string, got object {}");
        row("rounding type", oneRule(R"("rounding": false)"),
            "rule 1, field \"rounding\": expected a string, got boolean false");
        row("rounding_seed type", oneRule(R"("rounding": "stochastic", "rounding_seed": 1.5)"),
            "rule 1, field \"rounding_seed\": expected a non-negative integer, got number 1.5");
        row("rounding_seed negative", oneRule(R"("rounding": "stochastic", "rounding_seed": -1)"),
            "rule 1, field \"rounding_seed\": expected a non-negative integer, got -1");
        // Unknown values, with the allowed ones from the engine's tables.
        row("unknown qtype", oneRule(R"("weight_qtype": "int9")"),
            "rule 1, field \"weight_qtype\": unknown qtype \"int9\"; expected one of int1, int2,");
        row("unknown act qtype", oneRule(R"("act_qtype": "fp16")"),
            "rule 1, field \"act_qtype\": unknown qtype \"fp16\"");
        row("unknown method", oneRule(R"("weight_calibration": "maxabs")"),
            "rule 1, field \"weight_calibration\": calibration method 'maxabs': unknown method 'maxabs'");
        row("bad method args", oneRule(R"("act_calibration": "rms")"),
            "rule 1, field \"act_calibration\": calibration method 'rms': rms takes 1 argument");
        row("unknown granularity", oneRule(R"("granularity": "per_row")"),
            "rule 1, field \"granularity\": unknown value \"per_row\"; expected one of per_tensor, per_channel");
        row("unknown restriction", oneRule(R"("scale_restriction": "po2")"),
            "rule 1, field \"scale_restriction\": unknown value \"po2\"; expected one of float, pow2, fp16");
        row("unknown rounding", oneRule(R"("rounding": "floor")"),
            "rule 1, field \"rounding\": unknown value \"floor\"; expected one of nearest, stochastic");
        // Values and combinations the fields cannot check alone.
        row("tile zero", oneRule(R"("tile_size": 0)"), "rule 1, field \"tile_size\": must be greater than 0");
        row("tile negative", oneRule(R"("tile_size": -64)"), "rule 1, field \"tile_size\": must be greater than 0");
        row("tile fraction above 1", oneRule(R"("tile_size": 1.5)"),
            "rule 1, field \"tile_size\": 1.500000 must be a whole tile length");
        row("tile not 1/n", oneRule(R"("tile_size": 0.3)"),
            "rule 1, field \"tile_size\": 0.300000 below 1 must be 1/n");
        row("batch axis twice", oneRule(R"("act_batch_axes": [0, 1, 0])"),
            "rule 1, field \"act_batch_axes\": axis 0 is listed twice");
        row("seed without stochastic", oneRule(R"("rounding_seed": 7)"),
            "rule 1, field \"rounding_seed\": only stochastic rounding uses a seed");
        row("absmax made asymmetric", oneRule(R"("weight_qtype": "int8", "symmetric": false)"),
            "rule 1, field \"symmetric\": for weight_calibration, calibration method 'absmax' is symmetric and cannot "
            "be made asymmetric");
        row("minmax made symmetric", oneRule(R"("act_qtype": "uint8", "act_calibration": "minmax", "symmetric": true)"),
            "rule 1, field \"symmetric\": for act_calibration, calibration method 'minmax' is asymmetric and cannot be "
            "made symmetric");
        row("minmax on fp8", oneRule(R"("weight_qtype": "fp8_e4m3", "weight_calibration": "minmax")"),
            "rule 1, field \"weight_calibration\": calibration method 'minmax' is asymmetric, but weight_qtype "
            "fp8_e4m3 has no zero point");
        row("two-sided percentile on nf4",
            oneRule(R"("act_qtype": "nf4", "act_calibration": "percentile,99", "symmetric": false)"),
            "rule 1, field \"act_calibration\": calibration method 'percentile,99' is asymmetric, but act_qtype nf4 "
            "has no zero point");
        row("symmetric without act method", oneRule(R"("act_qtype": "int8", "symmetric": true)"),
            "rule 1, field \"symmetric\": act_calibration is not set, so the mode picks it");
        row("unknown algorithm", oneRule(R"("weight_qtype": "int4", "algorithm": "brecq")"),
            "rule 1, field \"algorithm\": unknown algorithm 'brecq'; expected rtn, gptq[,damp[,act_order]], "
            "awq[,grid[,clip]] or adaround[,iters[,lambda]]");
        row("adaround iterations", oneRule(R"("weight_qtype": "int4", "algorithm": "adaround,0")"),
            "rule 1, field \"algorithm\": algorithm 'adaround,0': iters is the number of Adam steps");
        row("adaround lambda", oneRule(R"("weight_qtype": "int4", "algorithm": "adaround,100,-1")"),
            "rule 1, field \"algorithm\": algorithm 'adaround,100,-1': lambda weighs the rounding regulariser");
        row("adaround options", oneRule(R"("weight_qtype": "int4", "algorithm": "adaround,100,0.1,3")"),
            "rule 1, field \"algorithm\": algorithm 'adaround,100,0.1,3': adaround takes at most two options");
        row("adaround on fp8", oneRule(R"("weight_qtype": "fp8_e4m3", "algorithm": "adaround")"),
            "rule 1, field \"algorithm\": adaround rounds onto an integer grid; weight_qtype fp8_e4m3 is not an "
            "integer");
        row("adaround stochastic",
            oneRule(R"("weight_qtype": "int4", "algorithm": "adaround", "rounding": "stochastic")"),
            "rule 1, field \"algorithm\": adaround learns each weight's rounding itself");
        row("awq grid", oneRule(R"("weight_qtype": "int4", "algorithm": "awq,0")"),
            "rule 1, field \"algorithm\": algorithm 'awq,0': the grid is the number of exponents tried");
        row("awq options", oneRule(R"("weight_qtype": "int4", "algorithm": "awq,20,1,1")"),
            "rule 1, field \"algorithm\": algorithm 'awq,20,1,1': awq takes at most two options");
        row("awq clip", oneRule(R"("weight_qtype": "int4", "algorithm": "awq,20,2")"),
            "rule 1, field \"algorithm\": algorithm 'awq,20,2': clip is 1 (search a clipping ratio per weight "
            "group, the default) or 0 (no clipping)");
        row("awq clip with mse",
            oneRule(R"("weight_qtype": "int4", "algorithm": "awq,10", "weight_calibration": "mse")"),
            "rule 1, field \"algorithm\": awq's clipping search shrinks the range absmax and minmax take from the "
            "weight, and weight_calibration mse chooses its own range; use absmax or minmax, or turn clipping off "
            "(awq,10,0)");
        row("awq on nf4", oneRule(R"("weight_qtype": "nf4", "algorithm": "awq")"),
            "rule 1, field \"algorithm\": awq rounds onto an integer grid; weight_qtype nf4 is not an integer");
        row("bias_correction without weights", oneRule(R"("act_qtype": "int8", "bias_correction": true)"),
            "rule 1, field \"bias_correction\": bias_correction corrects the output of quantized weights, but "
            "weight_qtype is not set");
        row("bias_correction not a boolean", oneRule(R"("weight_qtype": "int8", "bias_correction": 1)"),
            "rule 1, field \"bias_correction\": ");
        row("equalize not a boolean", oneRule(R"("weight_qtype": "int8", "equalize": "yes")"),
            "rule 1, field \"equalize\": ");
        row("smooth_alpha above 1", oneRule(R"("smooth_alpha": 1.5)"), "rule 1, field \"smooth_alpha\": ");
        row("high_bias_absorption without equalize", oneRule(R"("high_bias_absorption": true)"),
            "rule 1, field \"high_bias_absorption\": high_bias_absorption moves biases between the layers");
        row("smooth_alpha not a number", oneRule(R"("smooth_alpha": "0.5")"), "rule 1, field \"smooth_alpha\": ");
        row("awq stochastic", oneRule(R"("weight_qtype": "int4", "algorithm": "awq", "rounding": "stochastic")"),
            "rule 1, field \"algorithm\": awq rounds to nearest");
        row("gptq dampening", oneRule(R"("weight_qtype": "int4", "algorithm": "gptq,0")"),
            "rule 1, field \"algorithm\": algorithm 'gptq,0': the dampening is a fraction of mean diag(H) in (0, 1]");
        row("gptq act order", oneRule(R"("weight_qtype": "int4", "algorithm": "gptq,0.01,2")"),
            "rule 1, field \"algorithm\": algorithm 'gptq,0.01,2': act_order is 1");
        row("gptq on fp8", oneRule(R"("weight_qtype": "fp8_e4m3", "algorithm": "gptq")"),
            "rule 1, field \"algorithm\": gptq rounds onto an integer grid; weight_qtype fp8_e4m3 is not an integer");
        row("gptq without weights", oneRule(R"("act_qtype": "int8", "algorithm": "gptq")"),
            "rule 1, field \"algorithm\": gptq rounds the weights, but weight_qtype is not set");
        row("gptq stochastic", oneRule(R"("weight_qtype": "int4", "algorithm": "gptq", "rounding": "stochastic")"),
            "rule 1, field \"algorithm\": gptq rounds to nearest");
    }

    void parserErrors()
    {
        QFETCH(QString, json);
        QFETCH(QString, expected);
        const QString message = loadError(json.toStdString());
        QVERIFY2(message.startsWith(expected) ||
                     (expected.startsWith("rule") && message.startsWith("test.json: " + expected)),
                 qPrintable("got: " + message));
    }

    void acceptedCombinations()
    {
        // The two-sided variants and explicit methods that agree with `symmetric` load.
        QCOMPARE(rules(R"([{"weight_qtype": "int8", "weight_calibration": "mse", "symmetric": false},
                           {"act_qtype": "uint8", "act_calibration": "minmax", "symmetric": false},
                           {"weight_qtype": "int4", "weight_calibration": "fixed,-2,1"},
                           {"weight_qtype": "fp8_e4m3", "weight_calibration": "fixed,-3,3"},
                           {"act_qtype": "fp8_e5m2"},
                           {"weight_qtype": null, "act_qtype": null, "act_calibration": null, "symmetric": null,
                            "tile_size": null},
                           {"tile_size": 0.25}, {"tile_size": 128}, {"tile_size": 1}])")
                     .size(),
                 size_t(9));
    }

    void everyAllowedValueLoads()
    {
        // The values the docs and the GUI offer are the ones the parser accepts.
        for (const auto& field : ruleFields())
            for (const auto& value : field.allowedValues()) {
                if (field.name.find("calibration") != std::string_view::npos || field.name == "algorithm")
                    continue; // method syntaxes ("absmax[,s]", "gptq[,damp[,act_order]]") are templates, checked below
                std::string body = "\"";
                body.append(field.name).append("\": \"").append(value).append("\"");
                const std::string json = oneRule(body);
                QVERIFY2(loadError(json) == "<no error>",
                         qPrintable(QString::fromStdString(json) + ": " + loadError(json)));
            }
        for (const auto& k : allCalibrationKinds()) {
            QString method = QString::fromUtf8(k.syntax.data(), qsizetype(k.syntax.size()));
            method.replace("[,s]", "").replace(",s", ",2").replace(",min,max", ",-1,1").replace(",p", ",99.9");
            const std::string json =
                oneRule("\"weight_qtype\": \"int8\", \"weight_calibration\": \"" + method.toStdString() + "\"");
            QVERIFY2(loadError(json) == "<no error>", qPrintable(loadError(json)));
        }
        for (const auto& a : allWeightAlgorithms()) {
            const std::string options = a.kind == WeightAlgorithmKind::Awq        ? ",10"
                                        : a.kind == WeightAlgorithmKind::Adaround ? ",500,0.1"
                                                                                  : ",0.1,0";
            for (const std::string& text : {std::string(a.name), std::string(a.name) + options}) {
                if (a.kind == WeightAlgorithmKind::Rtn && text != a.name)
                    continue;
                const std::string json = oneRule("\"weight_qtype\": \"int4\", \"algorithm\": \"" + text + "\"");
                QVERIFY2(loadError(json) == "<no error>", qPrintable(loadError(json)));
                QCOMPARE(WeightAlgorithm::parse(text).toString(), WeightAlgorithm::parse(text).toString());
                QCOMPARE(WeightAlgorithm::parse(WeightAlgorithm::parse(text).toString()), WeightAlgorithm::parse(text));
            }
        }
    }

    void regexErrorsNamePosition_data()
    {
        QTest::addColumn<QString>("pattern");
        QTest::addColumn<int>("offset");
        QTest::addColumn<QString>("message");
        const auto row = [](const char* pattern, int offset, const char* message) {
            QTest::newRow(pattern) << QString::fromUtf8(pattern) << offset << QString::fromUtf8(message);
        };
        const char* const lookaround = "RE2 has no lookaround; match the text itself, or put a rule for the paths to "
                                       "leave out before this one, without qtypes so they stay float (the first "
                                       "matching rule wins)";
        const std::string backReference = "RE2 matches in linear time and cannot compare with an earlier group; write "
                                          "the group's pattern again instead, e.g. (a|b)(a|b) for (a|b)\\1";
        // Constructs Python's re has and RE2 has not: each is named with what to write instead.
        row("(?!.*head).*", 0, (std::string("lookahead '(?!' at position 1 is not supported; ") + lookaround).c_str());
        row("conv(?=1)", 4, (std::string("lookahead '(?=' at position 5 is not supported; ") + lookaround).c_str());
        row("x(?<=a)b", 1, (std::string("lookbehind '(?<=' at position 2 is not supported; ") + lookaround).c_str());
        row("(a)\\1", 3, ("back-reference '\\1' at position 4 is not supported; " + backReference).c_str());
        row("(?P<l>a)(?P=l)", 8,
            ("named back-reference '(?P=' at position 9 is not supported; " + backReference).c_str());
        row("(?<l>a)", 0, "group syntax '(?<' at position 1 is not supported; write (?P<name>...) for a named group");
        row("a*+", 1,
            "possessive quantifier '*+' at position 2 is not supported; write '*' (RE2 does not backtrack, so it needs "
            "no possessive form)");
        row("(?>ab)", 0,
            "atomic group '(?>' at position 1 is not supported; write (?:...) (RE2 does not backtrack, so it needs no "
            "atomic form)");
        row("conv\\Z", 4, "'\\Z' at position 5 is not supported; write '\\z' (end of text) or '$'");
        row("(?x)a b", 2,
            "flag 'x' at position 3 is not supported; RE2 knows the flags i, m, s and U (write (?i) for "
            "case-insensitive)");
        // Plain syntax errors.
        row("layer(1", 5, "missing ')' for the '(' at position 6");
        row("(a(b)", 0, "missing ')' for the '(' at position 1");
        row("a)b", 1, "unmatched ')' at position 2; escape it as '\\)' to match it literally");
        row("conv.*[0-9", 6, "missing ']' for the '[' at position 7; write '\\[' to match it literally");
        row("*conv", 0, "nothing to repeat before '*' at position 1; escape it as '\\*' to match it literally");
        row("a|+b", 2, "nothing to repeat before '+' at position 3; escape it as '\\+' to match it literally");
        row("a**", 1, "'**' at position 2 repeats a repetition; write one quantifier, or group first: (?:a*)+");
        row("layer{2,1}", 5, "repetition '{2,1}' at position 6 has its minimum above its maximum");
        row("x{1001}", 1,
            "repetition '{1001}' at position 2 counts above 1000, RE2's limit; use a smaller count, or '*' or '+'");
        row("{3}", 0, "nothing to repeat before '{3}' at position 1; escape it as '\\{' to match it literally");
        row("conv\\", 4, "trailing '\\' at position 5; write '\\\\' to match a backslash");
        row("a\\x{41", 1, "missing '}' for the '\\x{' at position 2");
        // Positions count characters, not bytes.
        row("é(", 2, "missing ')' for the '(' at position 2"); // offsets count bytes
        // Errors only RE2 finds are placed by the text RE2 names.
        row("[z-a]", 1,
            "character class 'z-a' at position 2 is invalid; write a range low-high (a-z, not z-a), a POSIX class such "
            "as [:alpha:] or a Unicode class such as \\pL");
        row("a\\x4g", 1,
            "escape '\\x4g' at position 2 is not one RE2 knows; escape only punctuation (\\. \\/ \\( ...), or use \\d "
            "\\w \\s \\pL \\x{41}");
        row("(?:a{20}){60}", 9,
            "repetition '{60}' at position 10 is too large: counts, multiplied through nested repetitions, may be at "
            "most 1000");
    }

    void regexErrorsNamePosition()
    {
        QFETCH(QString, pattern);
        QFETCH(int, offset);
        QFETCH(QString, message);
        const std::string p = pattern.toStdString();
        QVERIFY(!re2::RE2(p, re2::RE2::Quiet).ok()); // every row is a pattern RE2 refuses
        const auto error = findRegexSyntaxError(p);
        QVERIFY(error);
        QCOMPARE(int(error->offset), offset);
        QCOMPARE(QString::fromStdString(error->message), message);
        // The rule error carries the same text after the rule, field and pattern.
        const std::string json = oneRule("\"module_path\": " + nlohmann::json(p).dump());
        QCOMPARE(loadError(json),
                 "test.json: rule 1, field \"module_path\": invalid regex \"" + pattern + "\": " + message);
    }

    void regexScannerNeverRefusesWhatRe2Accepts()
    {
        // Random short patterns over the characters that matter to the grammar.
        // The scanner runs first, so it must never refuse a pattern RE2 accepts;
        // every pattern RE2 refuses is refused, nearly always with a position.
        const std::string alphabet = "ab()[]{}|*+?^$\\-.:,0129dxpPQEkZ=!<>#iw";
        std::mt19937 rng(20240611);
        int wronglyRejected = 0, missed = 0, rejected = 0, unplaced = 0;
        QString examples;
        for (int i = 0; i < 40000; ++i) {
            std::string p(1 + rng() % 10, ' ');
            for (char& c : p)
                c = alphabet[rng() % alphabet.size()];
            re2::RE2::Options options;
            options.set_log_errors(false);
            options.set_never_capture(true);
            const bool valid = re2::RE2(p, options).ok();
            const auto error = findRegexSyntaxError(p);
            rejected += !valid;
            if (valid && error && wronglyRejected++ < 5)
                examples += QString::fromStdString(" rejected:" + p + " (" + error->message + ")");
            if (!valid && !error && missed++ < 5)
                examples += QString::fromStdString(" missed:" + p);
            if (!valid && error && error->message.find("position") == std::string::npos && unplaced++ < 5)
                examples += QString::fromStdString(" unplaced:" + p);
        }
        QVERIFY(rejected > 10000); // the sample exercises the errors
        QVERIFY2(wronglyRejected == 0 && missed == 0 && unplaced <= rejected / 1000, qPrintable(examples));
    }

    void catastrophicPatternsMatchInLinearTime()
    {
        // With a backtracking engine these take seconds to hours; RE2 answers at once.
        const std::string thirtyAs(30, 'a');
        const ModulePathPattern nested("(a+)+$");
        QVERIFY(!nested.matches(thirtyAs + "b"));
        QVERIFY(nested.matches(thirtyAs));
        const ModulePathPattern alternatives("(a|aa)*c");
        QVERIFY(!alternatives.matches(std::string(5000, 'a')));
        QVERIFY(alternatives.matches(std::string(5000, 'a') + "c"));
        // In a rule set too: the pattern is matched for every layer.
        const RuleSet set = rules(R"([{"module_path": "(a+)+$", "weight_qtype": "int8"}, {"weight_qtype": "int4"}])");
        const std::vector<RuleTarget> layers(20, RuleTarget{thirtyAs + "b", "Conv"});
        const RuleResolution r = set.resolve(layers);
        QCOMPARE(r.matchCount, (std::vector<size_t>{0, 20}));
    }

    void longModulePathsMatchWithoutRecursion()
    {
        // std::regex recursed once per character and overflowed the stack on such
        // a path; RE2 does not recurse. Loaders refuse paths this long
        // (longModulePathsAreRefusedWhereTheyAreMade), so this is the matcher's own margin.
        const std::string path(50000, 'a');
        QVERIFY(ModulePathPattern("a*").matches(path));
        QVERIFY(ModulePathPattern(".*").matches(path));
        QVERIFY(ModulePathPattern("(a|b)*").matches(path));
        QVERIFY(!ModulePathPattern("(a|b)*c").matches(path));
        QVERIFY(ModulePathPattern("(?:a{1,10}){1,100}.*").matches(path));
        const RuleSet set = rules(R"([{"module_path": "a*b", "weight_qtype": "int8"}])");
        QCOMPARE(set.firstMatch(path, "Conv"), std::nullopt);
        // explain() quotes the start of the path, not all of it.
        const std::string text = set.explain(path, "Conv")[0].text;
        QVERIFY2(text.size() < 200, text.c_str());
    }

    void longModulePathsAreRefusedWhereTheyAreMade()
    {
        const std::string longest(kMaxModulePathLength, 'x');
        QCOMPARE(uniqueModulePaths({longest, "a"}), (std::vector<std::string>{longest, "a"}));
        const std::string name = "model." + std::string(50000, 'x') + ".weight";
        const QString message = errorOf([&] { uniqueModulePaths({"a", checkpointModulePath(name)}); });
        QCOMPARE(message, QString::fromStdString("module path \"model/" + std::string(54, 'x') +
                                                 "...\" is 50006 bytes long; module paths may have at most 4096 "
                                                 "(shorten the tensor, node or layer name it comes from)"));
    }

    void longPatternsAreRefusedWithAShortMessage()
    {
        // A 400 KB pattern: refused, and the message quotes 60 characters of it.
        const std::string huge(400 * 1024, 'a');
        const QString message = loadError(oneRule("\"module_path\": \"" + huge + "\""));
        QVERIFY2(message.size() < 300, qPrintable(message.left(400)));
        QVERIFY2(message.startsWith("test.json: rule 1, field \"module_path\": invalid regex \"...aaaa"),
                 qPrintable(message));
        QVERIFY2(message.endsWith("...\" (409600 bytes): the pattern is 409600 bytes long, more than the 4096 a "
                                  "module_path may have; split it into several rules"),
                 qPrintable(message));
        // The longest accepted pattern.
        QVERIFY(ModulePathPattern(std::string(kMaxPatternLength, 'a')).matches(std::string(kMaxPatternLength, 'a')));
        // A mistake deep in a long pattern is quoted around its position.
        const std::string deep = std::string(3000, 'a') + "(?=b)" + std::string(900, 'c');
        QCOMPARE(errorOf([&] { ModulePathPattern{deep}; }),
                 QString::fromStdString("invalid regex \"..." + std::string(30, 'a') + "(?=b)" + std::string(25, 'c') +
                                        "...\" (3905 bytes): lookahead '(?=' at position 3001 is not supported; "
                                        "RE2 has no lookaround; match the text itself, or put a rule for the paths "
                                        "to leave out before this one, without qtypes so they stay float (the first "
                                        "matching rule wins)"));
    }

    void patternsOverTheMemoryBudgetAreRefused()
    {
        std::string big;
        for (int i = 0; i < 20; ++i)
            big += "\\pL{1000}";
        QVERIFY(big.size() < kMaxPatternLength);
        QCOMPARE(loadError(oneRule("\"module_path\": " + nlohmann::json(big).dump())),
                 QString::fromStdString(
                     "test.json: rule 1, field \"module_path\": invalid regex \"" + big.substr(0, 60) +
                     "...\" (180 bytes): the compiled pattern needs more than 1 MiB, the limit of one rule; use "
                     "smaller {m,n} counts, fewer alternatives or several rules"));
    }

    void escapedPathsMatchExactlyThemselves()
    {
        for (const std::string path :
             {"layer1/0/conv1", "a.b+c*d?(e)[f]{2}|g^h$i\\j", "model/h.0/attn.c_proj", "é/ü"}) {
            const std::string pattern = escapeModulePath(path);
            const ModulePathPattern compiled(pattern);
            QVERIFY2(compiled.matches(path), pattern.c_str());
            QVERIFY2(!compiled.matches(path + "x"), pattern.c_str());
            std::string changed = path;
            changed[0] = 'x';
            QVERIFY2(!compiled.matches(changed), pattern.c_str());
        }
        QCOMPARE(escapeModulePath("layer1/0/conv.weight"), std::string("layer1/0/conv\\.weight"));
        // What the GUI writes to keep several layers float.
        std::string alternatives = escapeModulePath("a.b");
        alternatives.append("|").append(escapeModulePath("c(d)"));
        const ModulePathPattern either("(" + alternatives + ")");
        QVERIFY(either.matches("a.b") && either.matches("c(d)") && !either.matches("axb"));
    }

    void largeRuleFilesLoadInOnePass()
    {
        // The scale of issue 24's 16 MB file of 193k rules, cut to 20k rules so
        // the test runs in about a second: each rule has its own pattern.
        const size_t count = 20000;
        // (Plain literals: moc misreads raw strings that end in the middle of a JSON string.)
        std::string text = "{\"version\": 1, \"rules\": [";
        for (size_t i = 0; i < count; ++i)
            text += std::string(i ? "," : "") + "{\"module_path\": \"l" + std::to_string(i) +
                    "/(a|m)/.*\", \"op_types\": [\"Gemm\"], \"weight_qtype\": \"int8\"}";
        text += "]}";
        const RuleSet set = RuleSet::fromJson(text, "big.json");
        QCOMPARE(set.size(), count);
        QCOMPARE(set.firstMatch("l19999/m/q_proj", "Gemm"), std::optional<size_t>(19999));
        QCOMPARE(set.firstMatch("l7/a/k", "Gemm"), std::optional<size_t>(7));
        QCOMPARE(set.firstMatch("l7/a/k", "Conv"), std::nullopt);
        // A bad rule deep in a big file is still named by its index.
        text.replace(text.rfind("int8"), 4, "int3x");
        QVERIFY(loadError(text).startsWith("test.json: rule 19999, field \"weight_qtype\": unknown qtype \"int3x\""));
    }

    void ruleFileLimitsAreRefusedClearly()
    {
        // More rules than kMaxRules: refused while reading, before the rest is parsed.
        std::string many = R"({"version": 1, "rules": [{})";
        for (size_t i = 0; i < RuleSet::kMaxRules; ++i)
            many += ",{}";
        many += "]}";
        const std::string limit = std::to_string(RuleSet::kMaxRules);
        QCOMPARE(loadError(many), QString::fromStdString("test.json: more than " + limit +
                                                         " rules; a rule file may have at most " + limit));
        // An object with more keys than any rule has (nlohmann's ordered objects
        // would make a huge one quadratic).
        std::string keys;
        for (int i = 0; i < 65; ++i)
            keys += (i ? ", " : "") + std::string("\"k") + std::to_string(i) + "\": 0";
        const QString fields = QString::number(ruleFields().size()); // the schema's count
        QCOMPARE(loadError(oneRule(keys)),
                 "test.json: an object with more than 64 keys in rule 1; a rule has at most " + fields + " fields");
        QCOMPARE(loadError(oneRule("\"x\": {" + keys + "}")),
                 "test.json: an object with more than 64 keys in an object at depth 4; a rule has at most " + fields +
                     " fields");
        // A long act_batch_axes list is checked for repeats in linear time.
        std::string axes = "0";
        for (int i = 1; i < 200000; ++i)
            axes.append(",").append(std::to_string(i));
        QCOMPARE(loadError(oneRule("\"act_batch_axes\": [" + axes + ",7]")),
                 QStringLiteral("test.json: rule 1, field \"act_batch_axes\": axis 7 is listed twice"));
    }

    void roundTripPreservesEveryFieldAndOmitsDefaults()
    {
        const std::string text = R"({"version": 1, "rules": [
            {"module_path": "layer[0-9]+/conv.*", "op_types": ["Conv", "Gemm"], "weight_qtype": "int4",
             "act_qtype": "uint8", "weight_calibration": "percentile,99.9", "act_calibration": "minmax,0.9",
             "granularity": "per_tensor", "tile_size": 0.125, "act_static_scale": true, "act_batch_axes": [0, 2],
             "narrow_range": true, "symmetric": false, "scale_restriction": "pow2", "rounding": "stochastic",
             "rounding_seed": 18446744073709551615, "bias_correction": true, "equalize": true,
             "high_bias_absorption": true, "smooth_alpha": 0.5},
            {"tile_size": 64, "weight_qtype": "fp8", "act_calibration": "absmax", "act_batch_axes": []},
            {"module_path": ".*", "op_types": [], "weight_qtype": null, "weight_calibration": "absmax",
             "granularity": "per_channel", "act_batch_axes": [0], "narrow_range": false, "rounding": "nearest",
             "rounding_seed": 0, "scale_restriction": "float", "act_static_scale": false, "algorithm": "rtn"},
            {"weight_qtype": "int4", "algorithm": "gptq,0.050,0"},
            {"weight_qtype": "int4", "algorithm": "gptq,0.01,1"},
            {"weight_qtype": "int4", "algorithm": "awq,20"},
            {"weight_qtype": "int4", "algorithm": "awq,8"},
            {"weight_qtype": "int4", "algorithm": "adaround,1000,0.010"},
            {"weight_qtype": "int4", "algorithm": "adaround,500"},
            {"weight_qtype": "int4", "algorithm": "adaround,1000,0.25"},
            {"weight_qtype": "int4", "algorithm": "awq,20,0", "weight_calibration": "mse"}]})";
        const RuleSet set = RuleSet::fromJson(text);
        const QuantizationRule& r = set.rules()[0];
        QCOMPARE(r.modulePath.text(), std::string("layer[0-9]+/conv.*"));
        QCOMPARE(r.opTypes, (std::vector<std::string>{"Conv", "Gemm"}));
        QCOMPARE(r.weightQType, std::optional(QType::Int4));
        QCOMPARE(r.actQType, std::optional(QType::UInt8));
        QCOMPARE(r.weightCalibration.kind, CalibrationKind::Percentile);
        QCOMPARE(r.actCalibration->toString(), std::string("minmax,0.9"));
        QCOMPARE(r.granularity, Granularity::PerTensor);
        QCOMPARE(r.tileSize, std::optional(0.125));
        QVERIFY(r.actStaticScale && r.narrowRange);
        QCOMPARE(r.actBatchAxes, (std::vector<int>{0, 2}));
        QCOMPARE(r.symmetric, std::optional(false));
        QCOMPARE(r.scaleRestriction, ScaleRestriction::Pow2);
        QCOMPARE(r.rounding, Rounding::Stochastic);
        QCOMPARE(r.roundingSeed, uint64_t(18446744073709551615u));
        QVERIFY(r.biasCorrection);
        QVERIFY(r.equalize);
        QVERIFY(!set.rules()[1].equalize);
        QCOMPARE(r.smoothAlpha, 0.5);
        QCOMPARE(set.rules()[1].smoothAlpha, 0.0);

        const std::string saved = set.toJson();
        QCOMPARE(RuleSet::fromJson(saved), set);
        QCOMPARE(RuleSet::fromJson(saved).toJson(), saved);
        const auto json = nlohmann::json::parse(saved);
        // Nothing at its default: every field written but `algorithm`, whose gptq refuses stochastic rounding.
        QCOMPARE(json["rules"][0].size(), ruleFields().size() - 1);
        QCOMPARE(json["rules"][3].dump(), std::string(R"({"algorithm":"gptq,0.05,0","weight_qtype":"int4"})"));
        QCOMPARE(json["rules"][4].dump(), std::string(R"({"algorithm":"gptq","weight_qtype":"int4"})"));
        QCOMPARE(json["rules"][5].dump(), std::string(R"({"algorithm":"awq","weight_qtype":"int4"})"));
        QCOMPARE(json["rules"][7].dump(), std::string(R"({"algorithm":"adaround","weight_qtype":"int4"})"));
        QCOMPARE(json["rules"][8].dump(), std::string(R"({"algorithm":"adaround,500","weight_qtype":"int4"})"));
        QCOMPARE(json["rules"][9].dump(), std::string(R"({"algorithm":"adaround,1000,0.25","weight_qtype":"int4"})"));
        QCOMPARE(set.rules()[9].algorithm.adaroundLambda, 0.25);
        QCOMPARE(json["rules"][6].dump(), std::string(R"({"algorithm":"awq,8","weight_qtype":"int4"})"));
        QCOMPARE(set.rules()[6].algorithm.kind, WeightAlgorithmKind::Awq);
        QCOMPARE(set.rules()[6].algorithm.awqGrid, 8);
        QVERIFY(set.rules()[6].algorithm.awqClip);
        QCOMPARE(json["rules"][10]["algorithm"].get<std::string>(), std::string("awq,20,0"));
        QVERIFY(!set.rules()[10].algorithm.awqClip);
        QCOMPARE(set.rules()[3].algorithm.kind, WeightAlgorithmKind::Gptq);
        QCOMPARE(set.rules()[3].algorithm.dampening, 0.05);
        QVERIFY(!set.rules()[3].algorithm.actOrder);
        QCOMPARE(json["rules"][1].dump(),
                 std::string(
                     R"({"act_batch_axes":[],"act_calibration":"absmax","tile_size":64,"weight_qtype":"fp8_e4m3"})"));
        QVERIFY(json["rules"][1]["tile_size"].is_number_integer());
        QCOMPARE(json["rules"][2].dump(), std::string("{}")); // every field at its default
        // Fields are written in schema order.
        const auto ordered = nlohmann::ordered_json::parse(saved);
        std::vector<std::string> keys;
        for (const auto& [key, value] : ordered["rules"][0].items())
            keys.push_back(key);
        std::vector<std::string> schemaOrder; // every field but `algorithm`, which rule 0 leaves at its default
        for (const auto& field : ruleFields())
            if (field.name != "algorithm")
                schemaOrder.emplace_back(field.name);
        QCOMPARE(keys, schemaOrder);
    }

    void fileLoadSaveAndErrorsNameTheFile()
    {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const std::filesystem::path file = dir.filePath("recipe.json").toStdString();
        const RuleSet set = rules(R"([{"module_path": "a/.*", "weight_qtype": "int8"}, {"act_qtype": "int8"}])");
        set.save(file);
        QCOMPARE(RuleSet::load(file), set);
        QVERIFY(!std::filesystem::exists(file.string() + ".tmp"));

        const std::string missing = dir.filePath("missing.json").toStdString();
        QCOMPARE(errorOf([&] { RuleSet::load(missing); }), QString::fromStdString(missing + ": no such rule file"));
        QCOMPARE(errorOf([&] { RuleSet::load(dir.path().toStdString()); }),
                 QString::fromStdString(dir.path().toStdString() + ": not a regular file"));
        std::ofstream(dir.filePath("bad.json").toStdString())
            << R"({"version": 1, "rules": [{"weight_qtype": "int3x"}]})";
        QVERIFY(errorOf([&] {
                    RuleSet::load(dir.filePath("bad.json").toStdString());
                }).startsWith(dir.filePath("bad.json") + ": rule 0, field \"weight_qtype\": unknown qtype \"int3x\""));
        QVERIFY(errorOf([&] {
                    set.save(dir.filePath("no/such/folder/r.json").toStdString());
                }).contains("cannot create a temporary file in its folder"));
    }

    void rulesBuiltInCodeAreValidated()
    {
        QuantizationRule r;
        r.weightQType = QType::Fp4E2M1;
        r.weightCalibration = CalibrationMethod::parse("minmax");
        QVERIFY(errorOf([&] {
                    RuleSet({QuantizationRule{}, r});
                }).startsWith("rule 1, field \"weight_calibration\": calibration method 'minmax' is asymmetric"));
        QCOMPARE(errorOf([] { ModulePathPattern("a[b"); }),
                 QStringLiteral("invalid regex \"a[b\": missing ']' for the '[' at position 2; write '\\[' to match it "
                                "literally"));
        QVERIFY(ModulePathPattern().matches("any/path"));
        // The mode fills in an unset activation method.
        QCOMPARE(QuantizationRule{}.actMethod(CalibrationMethod::parse("minmax")).kind, CalibrationKind::MinMax);
    }

    void rulesDocIsInSyncWithTheSchema()
    {
        const std::string rendered = renderRulesReference();
        if (qEnvironmentVariableIsSet("QUANTSCOPE_WRITE_RULES_DOC")) {
            std::ofstream(kDocPath, std::ios::binary) << rendered;
            qInfo("wrote %s", kDocPath.c_str());
        }
        std::ifstream in(kDocPath, std::ios::binary);
        QVERIFY2(in,
                 qPrintable(QString::fromStdString(kDocPath + " is missing; run with QUANTSCOPE_WRITE_RULES_DOC=1")));
        std::ostringstream committed;
        committed << in.rdbuf();
        QVERIFY2(committed.str() == rendered, "docs/rules.md differs from renderRulesReference(); regenerate it with "
                                              "QUANTSCOPE_WRITE_RULES_DOC=1 tst_rules");
        // The reference covers every field, qtype and method.
        for (const auto& f : ruleFields())
            QVERIFY(rendered.find("| `" + std::string(f.name) + "` |") != std::string::npos);
        for (const auto& q : allQTypes())
            QVERIFY(rendered.find("| `" + std::string(q.name) + "` |") != std::string::npos);
        for (const auto& k : allCalibrationKinds())
            QVERIFY(rendered.find("| `" + std::string(k.syntax) + "` |") != std::string::npos);
    }
};

QTEST_APPLESS_MAIN(TestRules)
#include "tst_rules.moc"
