// Every example rule file in resources/rules/ quantizes the demo model through
// `quantscope-cli quantize`, and the top-1 accuracy it reports is the one
// docs/demo.md states for it ("Accuracy per example rule file"); w8a8 stays
// within one point of float.

#include <QDir>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <map>

#include "test_support.h"

namespace {

const QString kSource = QStringLiteral(QUANTSCOPE_SOURCE_DIR);
const QString kDemo = kSource + QStringLiteral("/resources/demo/digits");
constexpr int kEvalSamples = 450;

struct Stated {
    QString mode;
    int correct = 0; // quantized top-1 images out of kEvalSamples
};

// The table of docs/demo.md: rule file -> mode and quantized top-1.
std::map<QString, Stated> statedAccuracies()
{
    const QString doc = QString::fromStdString(qs::test::readFile((kSource + QStringLiteral("/docs/demo.md")).toStdString()));
    const QRegularExpression row(QStringLiteral(R"(^\| `([a-z0-9_]+\.json)` \| (\w+) \|.*\| [0-9.]+% \((\d+)/450\) \|)"),
                                 QRegularExpression::MultilineOption);
    std::map<QString, Stated> stated;
    for (auto it = row.globalMatch(doc); it.hasNext();) {
        const auto m = it.next();
        stated[m.captured(1)] = {m.captured(2), m.captured(3).toInt()};
    }
    return stated;
}

} // namespace

class TestExampleRules : public QObject {
    Q_OBJECT

private slots:
    void everyRuleFileIsDocumented()
    {
        const auto stated = statedAccuracies();
        const QStringList files =
            QDir(kSource + QStringLiteral("/resources/rules")).entryList({QStringLiteral("*.json")}, QDir::Files);
        QVERIFY(files.size() >= 6);
        for (const QString& file : files)
            QVERIFY2(stated.count(file), qPrintable(file + QStringLiteral(" has no row in docs/demo.md")));
        QCOMPARE(stated.size(), size_t(files.size()));
    }

    void reportedAccuracyIsWhatDocsState_data()
    {
        QTest::addColumn<QString>("file");
        QTest::addColumn<QString>("mode");
        QTest::addColumn<int>("correct");
        for (const auto& [file, s] : statedAccuracies())
            QTest::newRow(qPrintable(file)) << file << s.mode << s.correct;
    }

    void reportedAccuracyIsWhatDocsState()
    {
        QFETCH(QString, file);
        QFETCH(QString, mode);
        QFETCH(int, correct);
        QTemporaryDir dir;
        const QString report = dir.filePath(QStringLiteral("report.json"));
        const qs::test::CliRun cli = qs::test::runCli(
            {QStringLiteral("quantize"), kDemo + QStringLiteral("/digits_cnn.onnx"), QStringLiteral("--rules"),
             kSource + QStringLiteral("/resources/rules/") + file, QStringLiteral("--mode"), mode,
             QStringLiteral("--calib"), kDemo + QStringLiteral("/digits_calib.npz"), QStringLiteral("--eval"),
             kDemo + QStringLiteral("/digits_eval.npz"), QStringLiteral("--report"), report},
            300000);
        QVERIFY2(cli.exitCode == 0, cli.err.constData());

        const QJsonObject r =
            QJsonDocument::fromJson(QByteArray::fromStdString(qs::test::readFile(report.toStdString()))).object();
        const QJsonObject accuracy = r.value(QStringLiteral("accuracy")).toObject();
        QCOMPARE(accuracy.value(QStringLiteral("samples")).toInt(), kEvalSamples);
        const double floatTop1 = accuracy.value(QStringLiteral("float_top1")).toDouble();
        const double quantizedTop1 = accuracy.value(QStringLiteral("quantized_top1")).toDouble();
        QCOMPARE(int(std::lround(floatTop1 * kEvalSamples)), 444); // docs/demo.md: float 98.67%
        const int measured = int(std::lround(quantizedTop1 * kEvalSamples));
        qInfo("%s: float %.2f%%, quantized %.2f%% (%d/450; docs state %d)", qPrintable(file), 100 * floatTop1,
              100 * quantizedTop1, measured, correct);
        QVERIFY2(std::abs(measured - correct) <= 1,
                 qPrintable(QStringLiteral("%1 images right, docs/demo.md states %2").arg(measured).arg(correct)));
        if (file.startsWith(QLatin1String("w8a8")))
            QVERIFY(floatTop1 - quantizedTop1 <= 0.01);

        // Every layer the file's rules reach is quantized: none stays float by a problem.
        for (const QJsonValue& layer : r.value(QStringLiteral("layers")).toArray())
            QVERIFY2(layer.toObject().value(QStringLiteral("problem")).isNull(),
                     qPrintable(layer.toObject().value(QStringLiteral("problem")).toString()));
    }
};

QTEST_GUILESS_MAIN(TestExampleRules)
#include "tst_example_rules.moc"
