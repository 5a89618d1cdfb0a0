// The desktop integration files validate, the icon PNGs match their sizes, the
// Debian package holds both programs with their dependencies, and it installs
// with apt on a clean Debian 12 root (debootstrap) where the programs run.

#include <QDir>
#include <QFileInfo>
#include <QImage>
#include <QProcess>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include <unistd.h>

namespace {

const QString kSource = QStringLiteral(QUANTSCOPE_SOURCE_DIR);
const QString kBuild = QStringLiteral(QUANTSCOPE_BUILD_DIR);
const QString kDesktopDir = kSource + QStringLiteral("/resources/desktop");

struct Result {
    int exitCode = -1;
    QString output; // stdout and stderr together
};

Result run(const QString& program, const QStringList& arguments, int timeoutMs = 120000,
           const QString& workingDirectory = {})
{
    QProcess p;
    p.setProcessChannelMode(QProcess::MergedChannels);
    if (!workingDirectory.isEmpty())
        p.setWorkingDirectory(workingDirectory);
    p.start(program, arguments);
    if (!p.waitForFinished(timeoutMs)) {
        p.kill();
        p.waitForFinished();
        return {-1, program + QStringLiteral(" timed out")};
    }
    return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, QString::fromLocal8Bit(p.readAll())};
}

// Builds the .deb once per test run (cpack over the finished build).
QString debianPackage()
{
    static QString path;
    if (!path.isEmpty())
        return path;
    const Result r = run(QStringLiteral("cpack"), {QStringLiteral("--config"), kBuild + QStringLiteral("/CPackConfig.cmake")},
                         600000, kBuild);
    if (r.exitCode != 0)
        return {};
    const QStringList debs = QDir(kBuild).entryList({QStringLiteral("quantscope_*.deb")}, QDir::Files, QDir::Time);
    if (!debs.isEmpty())
        path = kBuild + QLatin1Char('/') + debs.first();
    return path;
}

QString debField(const QString& deb, const QString& field)
{
    return run(QStringLiteral("dpkg-deb"), {QStringLiteral("-f"), deb, field}).output.trimmed();
}

} // namespace

class TestPackaging : public QObject {
    Q_OBJECT

private slots:
    void desktopEntryValidates()
    {
        const Result r = run(QStringLiteral("desktop-file-validate"),
                             {kDesktopDir + QStringLiteral("/io.github.quantscope.Quantscope.desktop")});
        QVERIFY2(r.exitCode == 0 && r.output.trimmed().isEmpty(), qPrintable(r.output));
    }

    void metainfoValidates()
    {
        const Result r = run(QStringLiteral("appstreamcli"),
                             {QStringLiteral("validate"), QStringLiteral("--no-net"), QStringLiteral("--pedantic"),
                              kDesktopDir + QStringLiteral("/io.github.quantscope.Quantscope.metainfo.xml")});
        QVERIFY2(r.exitCode == 0, qPrintable(r.output));
    }

    void iconPngsHaveTheirSizes()
    {
        for (int size : {16, 22, 24, 32, 48, 64, 128, 256, 512}) {
            const QString file = kBuild + QStringLiteral("/packaging/icons/%1x%1/apps/quantscope.png").arg(size);
            QImage image(file);
            QVERIFY2(!image.isNull(), qPrintable(file));
            QCOMPARE(image.size(), QSize(size, size));
            // Drawn, not blank: the tile's centre is opaque, the corners (rounded) transparent.
            QCOMPARE(qAlpha(image.pixel(size / 2, size / 2)), 255);
            QCOMPARE(qAlpha(image.pixel(0, 0)), 0);
        }
    }

    void packageHoldsBothProgramsAndTheirDependencies()
    {
        const QString deb = debianPackage();
        QVERIFY2(!deb.isEmpty(), "cpack did not produce a .deb");
        QCOMPARE(debField(deb, QStringLiteral("Package")), QStringLiteral("quantscope"));
        QCOMPARE(debField(deb, QStringLiteral("Architecture")), QStringLiteral("amd64"));
        const QString depends = debField(deb, QStringLiteral("Depends"));
        for (const char* library : {"libtbb12", "libonnx1", "libprotobuf32", "libhdf5-103-1", "libgvc6", "qt6-qpa-plugins"})
            QVERIFY2(depends.contains(QLatin1String(library)), qPrintable(depends));
        const QString contents = run(QStringLiteral("dpkg-deb"), {QStringLiteral("-c"), deb}).output;
        QStringList expected{
            QStringLiteral("./usr/bin/quantscope-cli"),
            QStringLiteral("./usr/share/applications/io.github.quantscope.Quantscope.desktop"),
            QStringLiteral("./usr/share/metainfo/io.github.quantscope.Quantscope.metainfo.xml"),
            QStringLiteral("./usr/share/icons/hicolor/scalable/apps/quantscope.svg"),
            QStringLiteral("./usr/share/icons/hicolor/48x48/apps/quantscope.png"),
            QStringLiteral("./usr/share/quantscope/demo/digits_cnn.onnx"),
            QStringLiteral("./usr/share/quantscope/rules/w8a8_per_channel.json"),
        };
        if (QFileInfo::exists(kBuild + QStringLiteral("/app/quantscope"))) {
            expected << QStringLiteral("./usr/bin/quantscope");
            QVERIFY2(depends.contains(QLatin1String("libqt6widgets6")), qPrintable(depends));
        }
        for (const QString& file : expected)
            QVERIFY2(contents.contains(file), qPrintable(file + QStringLiteral(" missing from the package")));
    }

    // A minimal Debian 12 root from debootstrap, the package installed into it
    // with apt (which resolves its dependencies from Debian), and the programs
    // run there: what a user of a clean machine gets.
    void installsOnCleanDebian()
    {
        if (geteuid() != 0)
            QSKIP("needs root for debootstrap and chroot");
        if (QStandardPaths::findExecutable(QStringLiteral("debootstrap")).isEmpty())
            QSKIP("debootstrap is not installed (packaging/install-deps.sh installs it)");
        const QString deb = debianPackage();
        QVERIFY2(!deb.isEmpty(), "cpack did not produce a .deb");

        QTemporaryDir dir(kBuild + QStringLiteral("/clean-root-XXXXXX"));
        QVERIFY(dir.isValid());
        const QString root = dir.path();
        Result r = run(QStringLiteral("debootstrap"),
                       {QStringLiteral("--variant=minbase"), QStringLiteral("bookworm"), root,
                        QStringLiteral("http://deb.debian.org/debian")},
                       900000);
        QVERIFY2(r.exitCode == 0, qPrintable(r.output.right(2000)));
        QVERIFY(QFile::copy(deb, root + QStringLiteral("/tmp/quantscope.deb")));

        const auto inRoot = [&](const QString& command, int timeoutMs = 600000) {
            return run(QStringLiteral("chroot"),
                       {root, QStringLiteral("/usr/bin/env"), QStringLiteral("-i"),
                        QStringLiteral("PATH=/usr/sbin:/usr/bin:/sbin:/bin"), QStringLiteral("HOME=/root"),
                        QStringLiteral("DEBIAN_FRONTEND=noninteractive"), QStringLiteral("QT_QPA_PLATFORM=offscreen"),
                        QStringLiteral("sh"), QStringLiteral("-c"), command},
                       timeoutMs);
        };
        r = inRoot(QStringLiteral("apt-get update -q && apt-get install -y -q --no-install-recommends /tmp/quantscope.deb"));
        QVERIFY2(r.exitCode == 0, qPrintable(r.output.right(3000)));

        r = inRoot(QStringLiteral("quantscope-cli --version"));
        QVERIFY2(r.exitCode == 0, qPrintable(r.output));
        QVERIFY2(r.output.startsWith(QStringLiteral("quantscope-cli ")), qPrintable(r.output));

        r = inRoot(QStringLiteral("quantscope-cli inspect /usr/share/quantscope/demo/digits_cnn.onnx "
                                  "--rules /usr/share/quantscope/rules/w8a8_per_channel.json"));
        QVERIFY2(r.exitCode == 0, qPrintable(r.output));
        QVERIFY2(r.output.contains(QStringLiteral("5 of 5 layers matched")), qPrintable(r.output));

        if (QFileInfo::exists(kBuild + QStringLiteral("/app/quantscope"))) {
            r = inRoot(QStringLiteral("quantscope --version"));
            QVERIFY2(r.exitCode == 0 && r.output.contains(QStringLiteral("0.")), qPrintable(r.output));
        }
        // Nothing of the root may outlive the test: unmount-free chroot use, so removal is a plain delete.
        QVERIFY(dir.remove());
    }
};

QTEST_GUILESS_MAIN(TestPackaging)
#include "tst_packaging.moc"
