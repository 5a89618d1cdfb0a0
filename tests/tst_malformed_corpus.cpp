// The malformed-file corpus: every file of tests/data/malformed/manifest.json
// (made by make_malformed.py) and of the hostile archive manifests under
// tests/data/archives/hostile/ goes through its own loader and through the
// loadModel() dispatch; both must refuse it with a qs::Error that names the
// file and contains the manifest's phrases (the field, tensor or offset at
// fault). Then it goes through every other loader too, which may accept or
// refuse it but only with a qs::Error naming the file. Any other exception
// fails; a crash fails the whole suite. Nothing may be left behind in the
// corpus folders.

#include "core/error.h"
#include "io/checkpoint_model.h"
#include "io/model_loader.h"
#include "io/npy.h"
#include "io/npz.h"
#include "io/onnx_loader.h"
#include "io/safetensors.h"
#include "rules/ruleset.h"
#include "test_support.h"
#include <QtTest>
#include <functional>
#include <map>

using namespace qs;
using namespace qs::test;

namespace {

const QString kData = QStringLiteral(QUANTSCOPE_TEST_DATA);

// The entry point of each loader, reading everything the file holds.
const std::map<QString, std::function<void(const std::string&)>>& loaders()
{
    static const std::map<QString, std::function<void(const std::string&)>> table{
        {"onnx", [](const std::string& p) { (void)loadOnnx(p); }},
        {"safetensors",
         [](const std::string& p) {
             const SafetensorsFile file = SafetensorsFile::open(p);
             for (const SafetensorsEntry& entry : file.entries())
                 (void)file.tensor(entry);
         }},
        {"npy", [](const std::string& p) { (void)readNpy(p); }},
        {"npz",
         [](const std::string& p) {
             const NpzFile file = NpzFile::open(p);
             for (const NpzArray& array : file.arrays())
                 (void)file.read(array);
         }},
        {"hdf5", [](const std::string& p) { (void)loadCheckpointModel(p); }},
        {"rules", [](const std::string& p) { (void)RuleSet::load(p); }},
    };
    return table;
}

QStringList filesUnder(const QString& folder)
{
    QStringList files;
    QDirIterator it(folder, QDir::Files | QDir::Hidden | QDir::NoDotAndDotDot, QDirIterator::Subdirectories);
    while (it.hasNext())
        files << it.next();
    files.sort();
    return files;
}

struct Corpus {
    QString folder;
    QString loader; // empty: each entry names its own
};

const Corpus kCorpora[] = {
    {kData + "/malformed", {}},
    {kData + "/archives/hostile/safetensors", "safetensors"},
    {kData + "/archives/hostile/npz", "npz"},
};

} // namespace

class TestMalformedCorpus : public QObject {
    Q_OBJECT

private slots:
    void initTestCase()
    {
        for (const Corpus& corpus : kCorpora)
            before_ << filesUnder(corpus.folder);
    }

    void corpusCoversEveryFormat()
    {
        QFile file(kData + "/malformed/manifest.json");
        QVERIFY(file.open(QIODevice::ReadOnly));
        const QJsonArray manifest = QJsonDocument::fromJson(file.readAll()).array();
        QVERIFY(manifest.size() >= 40);
        std::map<QString, int> perLoader;
        QSet<QString> names;
        for (const QJsonValue& item : manifest) {
            ++perLoader[item["loader"].toString()];
            QVERIFY2(!names.contains(item["file"].toString()), qPrintable(item["file"].toString()));
            names.insert(item["file"].toString());
            QVERIFY2(loaders().count(item["loader"].toString()), qPrintable(item["loader"].toString()));
            QVERIFY(!item["expect"].toArray().isEmpty());
        }
        for (const auto& loader : loaders())
            QVERIFY2(perLoader[loader.first] >= 4, qPrintable(loader.first));
        // The hostile archive corpora each hold at least 30 cases.
        for (const QString format : {"safetensors", "npz"}) {
            QFile hostile(kData + "/archives/hostile/" + format + "/manifest.json");
            QVERIFY(hostile.open(QIODevice::ReadOnly));
            QVERIFY2(QJsonDocument::fromJson(hostile.readAll()).array().size() >= 30, qPrintable(format));
        }
    }

    void refusedByItsLoaderNamingFileAndField_data()
    {
        QTest::addColumn<QString>("path");
        QTest::addColumn<QString>("loader");
        QTest::addColumn<QStringList>("expected");
        for (const Corpus& corpus : kCorpora) {
            QFile file(corpus.folder + "/manifest.json");
            QVERIFY(file.open(QIODevice::ReadOnly));
            for (const QJsonValue& item : QJsonDocument::fromJson(file.readAll()).array()) {
                QStringList expected;
                for (const QJsonValue& phrase : item["expect"].toArray())
                    expected << phrase.toString();
                const QString path = corpus.folder + "/" + item["file"].toString();
                const QString loader = corpus.loader.isEmpty() ? item["loader"].toString() : corpus.loader;
                QTest::newRow(qPrintable(QFileInfo(corpus.folder).fileName() + "/" + item["file"].toString()))
                    << path << loader << expected;
            }
        }
    }

    void refusedByItsLoaderNamingFileAndField()
    {
        QFETCH(QString, path);
        QFETCH(QString, loader);
        QFETCH(QStringList, expected);
        const std::string file = path.toStdString();
        QVERIFY2(QFileInfo::exists(path), qPrintable(path));

        const QString message = errorOf([&] { loaders().at(loader)(file); });
        QVERIFY2(!message.isEmpty(), qPrintable(path + " was accepted by the " + loader + " loader"));
        QVERIFY2(message.contains(path), qPrintable(message));
        for (const QString& phrase : expected)
            QVERIFY2(message.contains(phrase), qPrintable(message + "\n  lacks: " + phrase));

        if (loader != "rules") {
            // The dispatch a user goes through picks the same loader and says the same.
            const QString dispatched = errorOf([&] { (void)loadModel(file); });
            QVERIFY2(!dispatched.isEmpty(), qPrintable(path + " was accepted by loadModel"));
            QVERIFY2(dispatched.contains(path), qPrintable(dispatched));
        }

        // Every other loader: accept or refuse, but only with an Error naming the file.
        for (const auto& other : loaders()) { // no structured binding: clang 14 cannot capture one
            if (other.first == loader)
                continue;
            const QString e = errorOf([&] { other.second(file); });
            QVERIFY2(e.isEmpty() || e.contains(path), qPrintable(other.first + ": " + e));
        }
    }

    void nothingIsLeftBehind()
    {
        QStringList after;
        for (const Corpus& corpus : kCorpora)
            after << filesUnder(corpus.folder);
        QCOMPARE(after, before_);
    }

private:
    QStringList before_;
};

QTEST_APPLESS_MAIN(TestMalformedCorpus)
#include "tst_malformed_corpus.moc"
