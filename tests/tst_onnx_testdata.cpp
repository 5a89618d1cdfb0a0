// Conformance: every model.onnx of Debian's libonnx-testdata (node,
// pytorch-converted, pytorch-operator, simple) loads or is refused with an
// Error naming the file; nothing crashes. Prints the counts by suite and the
// reasons for refusals and warnings.
#include <QtTest>

#include <filesystem>
#include <map>
#include <regex>

#include "io/onnx_loader.h"

using namespace qs;

namespace {

const char* const kRoot = "/usr/share/libonnx-testdata/data";
const char* const kSuites[] = {"node", "pytorch-converted", "pytorch-operator", "simple"};

// A message with the file, quoted names and numbers blanked, so equal reasons group.
std::string reasonOf(std::string message, const std::string& file)
{
    if (message.starts_with(file + ": "))
        message = message.substr(file.size() + 2);
    static const std::regex quoted("'[^']*'");
    static const std::regex number("[0-9]+");
    message = std::regex_replace(message, quoted, "'…'");
    message = std::regex_replace(message, number, "N");
    return message.substr(0, 140);
}

} // namespace

class TestOnnxTestdata : public QObject {
    Q_OBJECT
private slots:
    void everyModelLoadsOrIsRefusedClearly()
    {
        if (!std::filesystem::is_directory(kRoot))
            QSKIP("libonnx-testdata is not installed (packaging/install-deps.sh installs it)");
        size_t total = 0, loaded = 0, withWarnings = 0;
        std::map<std::string, size_t> refusals, warnings;
        for (const char* suite : kSuites) {
            size_t suiteTotal = 0, suiteLoaded = 0;
            std::vector<std::filesystem::path> files;
            for (const auto& entry :
                 std::filesystem::recursive_directory_iterator(std::filesystem::path(kRoot) / suite))
                if (entry.path().filename() == "model.onnx")
                    files.push_back(entry.path());
            std::sort(files.begin(), files.end());
            for (const std::filesystem::path& file : files) {
                ++suiteTotal;
                try {
                    const Model m = loadOnnx(file);
                    ++suiteLoaded;
                    QVERIFY(!m.nodes.empty());
                    if (!m.warnings.empty())
                        ++withWarnings;
                    for (const std::string& w : m.warnings)
                        ++warnings[reasonOf(w, file.string())];
                } catch (const Error& e) {
                    const std::string message = e.what();
                    QVERIFY2(message.starts_with(file.string() + ": ") && message.size() > file.string().size() + 10,
                             message.c_str());
                    ++refusals[reasonOf(message, file.string())];
                }
            }
            qInfo("%-18s %4zu models: %4zu loaded, %4zu refused", suite, suiteTotal, suiteLoaded,
                  suiteTotal - suiteLoaded);
            total += suiteTotal;
            loaded += suiteLoaded;
        }
        qInfo("all                %4zu models: %4zu loaded (%zu with warnings), %4zu refused", total, loaded,
              withWarnings, total - loaded);
        for (const auto& [reason, count] : refusals)
            qInfo("  refused %4zu: %s", count, reason.c_str());
        for (const auto& [reason, count] : warnings)
            qInfo("  warning %4zu: %s", count, reason.c_str());
        QVERIFY(total > 1000);
        // Refusals are for things the engine cannot hold (string, complex,
        // float8 tensors...), a small minority of the suite.
        QVERIFY2(loaded * 10 > total * 9, "more than a tenth of the ONNX test models were refused");
    }
};

QTEST_APPLESS_MAIN(TestOnnxTestdata)
#include "tst_onnx_testdata.moc"
