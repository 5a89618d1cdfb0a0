// Rules: matching and precedence, resolution counts, explanations, the JSON
// schema and every parser error, regex error positions, round trips, and
// docs/rules.md kept in sync with the schema.
#include <QtTest>

#include <fstream>
#include <random>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
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
                if (field.name.find("calibration") != std::string_view::npos)
                    continue; // method syntaxes ("absmax[,s]") are templates, checked below
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
    }

    void regexErrorsNamePosition_data()
    {
        QTest::addColumn<QString>("pattern");
        QTest::addColumn<int>("offset");
        QTest::addColumn<QString>("message");
        const auto row = [](const char* pattern, int offset, const char* message) {
            QTest::newRow(pattern) << QString::fromUtf8(pattern) << offset << QString::fromUtf8(message);
        };
        row("layer(1", 5, "missing ')' for the '(' at position 6");
        row("(a(b)", 0, "missing ')' for the '(' at position 1");
        row("a)b", 1, "unmatched ')' at position 2; escape it as '\\)' to match it literally");
        row("conv.*[0-9", 6, "missing ']' for the '[' at position 7");
        row("*conv", 0, "nothing to repeat before '*' at position 1; escape it as '\\*' to match it literally");
        row("a|+b", 2, "nothing to repeat before '+' at position 3; escape it as '\\+' to match it literally");
        row("(?b)", 0, "'(?' at position 1 must be followed by ':', '=' or '!' ((?:...), (?=...), (?!...))");
        row("^*", 1, "'*' at position 2 repeats an anchor or assertion, which cannot be repeated");
        row("layer{2,1}", 5, "repetition '{2,1}' at position 6 has its minimum above its maximum");
        row("layer{2", 5, "missing '}' for the '{' at position 6");
        row("x{a}", 2,
            "unexpected 'a' at position 3 in the repetition starting at position 2; write {m}, {m,} or {m,n}, or '\\{' "
            "for a literal brace");
        row("{3}", 0, "nothing to repeat before '{3}' at position 1; escape it as '\\{' to match it literally");
        row("conv\\", 4, "trailing '\\' at position 5; write '\\\\' to match a backslash");
        row("a\\x4g", 1, "'\\x' at position 2 needs two hex digits");
        row("\\u12", 0, "'\\u' at position 1 needs four hex digits");
        row("(a)\\2", 3, "back-reference '\\2' at position 4 refers to group 2, but only 1 group open before it");
        row("(a\\1)", 2, "back-reference '\\1' at position 3 refers to group 1, which is still open there");
        row("[z-a]", 1, "range 'z-a' at position 2 is inverted: its start comes after its end");
        row("[\\d-z]", 1,
            "the range at position 4 starts with a character class at position 2; put '-' first or last to match it "
            "literally");
        row("[[:digits:]]", 1,
            "unknown character class '[:digits:]' at position 2; use one of alnum, alpha, blank, cntrl, digit, graph, "
            "lower, print, punct, space, upper, xdigit");
    }

    void regexErrorsNamePosition()
    {
        QFETCH(QString, pattern);
        QFETCH(int, offset);
        QFETCH(QString, message);
        const std::string p = pattern.toStdString();
        bool stdRegexRejects = false;
        try {
            std::regex r(p);
        } catch (const std::regex_error&) {
            stdRegexRejects = true;
        }
        QVERIFY(stdRegexRejects); // every row is a pattern std::regex refuses
        const auto error = findRegexSyntaxError(p);
        QVERIFY(error);
        QCOMPARE(int(error->offset), offset);
        QCOMPARE(QString::fromStdString(error->message), message);
        // The rule error carries the same text after the rule, field and pattern.
        const std::string json = oneRule("\"module_path\": " + nlohmann::json(p).dump());
        QCOMPARE(loadError(json),
                 "test.json: rule 1, field \"module_path\": invalid regex \"" + pattern + "\": " + message);
    }

    void regexScannerAgreesWithStdRegex()
    {
        // Random short patterns over the characters that matter to the grammar:
        // the scanner must never reject what std::regex accepts (it runs first),
        // and should find every error std::regex finds (else no position is given).
        const std::string alphabet = "ab()[]{}|*+?^$\\-.:,0129dxuc=!w";
        std::mt19937 rng(20240611);
        int wronglyRejected = 0, unexplained = 0, rejected = 0;
        QString examples;
        for (int i = 0; i < 40000; ++i) {
            std::string p(1 + rng() % 10, ' ');
            for (char& c : p)
                c = alphabet[rng() % alphabet.size()];
            bool valid = true;
            try {
                std::regex r(p);
            } catch (const std::regex_error&) {
                valid = false;
            }
            const bool flagged = findRegexSyntaxError(p).has_value();
            rejected += !valid;
            if (valid && flagged && wronglyRejected++ < 5)
                examples += QString::fromStdString(" rejected:" + p);
            if (!valid && !flagged && unexplained++ < 5)
                examples += QString::fromStdString(" unexplained:" + p);
        }
        QVERIFY(rejected > 10000); // the sample exercises the errors
        QVERIFY2(wronglyRejected == 0 && unexplained == 0, qPrintable(examples));
    }

    void regexTheScannerCannotPlaceStillFails()
    {
        // std::regex refuses this collating element; the scanner has no position
        // for it, and the rule error still names the field and the pattern.
        QVERIFY(!findRegexSyntaxError("[[.-.]]"));
        const QString message = loadError(oneRule(R"("module_path": "[[.-.]]")"));
        QVERIFY2(message.startsWith("test.json: rule 1, field \"module_path\": invalid regex \"[[.-.]]\": "),
                 qPrintable(message));
        // Nesting deep enough to strain std::regex's recursive compiler is refused up front.
        const std::string deep = std::string(kMaxRegexNesting + 1, '(') + std::string(kMaxRegexNesting + 1, ')');
        QVERIFY(findRegexSyntaxError(deep));
        QVERIFY(!findRegexSyntaxError(std::string(kMaxRegexNesting, '(') + std::string(kMaxRegexNesting, ')')));
        QVERIFY(loadError(oneRule("\"module_path\": \"" + deep + "\"")).contains("groups nested deeper than"));
    }

    void roundTripPreservesEveryFieldAndOmitsDefaults()
    {
        const std::string text = R"({"version": 1, "rules": [
            {"module_path": "layer[0-9]+/conv.*", "op_types": ["Conv", "Gemm"], "weight_qtype": "int4",
             "act_qtype": "uint8", "weight_calibration": "percentile,99.9", "act_calibration": "minmax,0.9",
             "granularity": "per_tensor", "tile_size": 0.125, "act_static_scale": true, "act_batch_axes": [0, 2],
             "narrow_range": true, "symmetric": false, "scale_restriction": "pow2", "rounding": "stochastic",
             "rounding_seed": 18446744073709551615},
            {"tile_size": 64, "weight_qtype": "fp8", "act_calibration": "absmax", "act_batch_axes": []},
            {"module_path": ".*", "op_types": [], "weight_qtype": null, "weight_calibration": "absmax",
             "granularity": "per_channel", "act_batch_axes": [0], "narrow_range": false, "rounding": "nearest",
             "rounding_seed": 0, "scale_restriction": "float", "act_static_scale": false}]})";
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

        const std::string saved = set.toJson();
        QCOMPARE(RuleSet::fromJson(saved), set);
        QCOMPARE(RuleSet::fromJson(saved).toJson(), saved);
        const auto json = nlohmann::json::parse(saved);
        QCOMPARE(json["rules"][0].size(), ruleFields().size()); // nothing at its default: every field written
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
        for (size_t i = 0; i < keys.size(); ++i)
            QCOMPARE(keys[i], std::string(ruleFields()[i].name));
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
        QVERIFY(
            errorOf([&] { set.save(dir.filePath("no/such/folder/r.json").toStdString()); }).contains("cannot create a temporary file in its folder"));
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
                 QStringLiteral("invalid regex \"a[b\": missing ']' for the '[' at position 2"));
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
