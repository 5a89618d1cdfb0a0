#pragma once
// What the GUI tests share: the bundled demo's files, data settings for them, a wait that
// keeps the event loop running, and a run of quantscope-cli.

#include <QElapsedTimer>
#include <QProcess>
#include <QStringList>
#include <QString>
#include <QtTest>

#include <functional>

#include "session/session_file.h"

namespace gui_test {

inline const QString kRoot = QStringLiteral(QUANTSCOPE_TEST_DATA "/../..");
inline const QString kModel = kRoot + QStringLiteral("/resources/demo/digits/digits_cnn.onnx");
inline const QString kCalib = kRoot + QStringLiteral("/resources/demo/digits/digits_calib.npz");
inline const QString kEval = kRoot + QStringLiteral("/resources/demo/digits/digits_eval.npz");
inline const QString kW8A8 = kRoot + QStringLiteral("/resources/rules/w8a8_per_channel.json");
inline const QString kScreenshots = kRoot + QStringLiteral("/docs/screenshots");

// The demo's data files in batches of 64.
inline qs::DataConfig fileData(const QString& path)
{
    qs::DataConfig c;
    c.path = path.toStdString();
    c.batchSize = 64;
    return c;
}

// Runs the event loop until `done` or `timeoutMs`; whether `done` holds.
inline bool waitFor(const std::function<bool()>& done, int timeoutMs)
{
    QElapsedTimer t;
    t.start();
    while (!done() && t.elapsed() < timeoutMs)
        QTest::qWait(10);
    return done();
}

// Runs quantscope-cli; its standard output, or an empty array with a warning naming the
// arguments and the CLI's error.
inline QByteArray runCli(const QStringList& args)
{
    QProcess p;
    p.start(QStringLiteral(QUANTSCOPE_CLI), args);
    if (!p.waitForFinished(300000) || p.exitStatus() != QProcess::NormalExit || p.exitCode() != 0) {
        qWarning("quantscope-cli %s: %s", qPrintable(args.join(' ')), p.readAllStandardError().constData());
        return {};
    }
    return p.readAllStandardOutput();
}

} // namespace gui_test
