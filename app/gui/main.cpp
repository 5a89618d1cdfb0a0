// quantscope MODEL [--rules R.json] [--calib DATA] [--eval DATA]: the desktop
// app, opened on a model (or a session), with rules and data given up front.
#include <QApplication>
#include <QCommandLineParser>
#include <QFileInfo>
#include <QIcon>
#include <QTimer>

#include "core/allocator.h"
#include "gui/main_window.h"

int main(int argc, char** argv)
{
    qs::keepFreedMemoryForReuse();
    QApplication app(argc, argv);
    QApplication::setApplicationName(QStringLiteral("Quantscope"));
    QApplication::setOrganizationName(QStringLiteral("Quantscope"));
    QApplication::setOrganizationDomain(QStringLiteral("quantscope.github.io"));
    QApplication::setApplicationVersion(QStringLiteral(QUANTSCOPE_VERSION));
    QApplication::setDesktopFileName(QStringLiteral("io.github.quantscope.Quantscope"));
    QApplication::setWindowIcon(QIcon(QStringLiteral(":/icons/quantscope.svg")));

    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral("Quantization explorer for neural-network models"));
    parser.addHelpOption();
    parser.addVersionOption();
    parser.addPositionalArgument(QStringLiteral("model"), QStringLiteral("Model or session (.qssession) to open"),
                                 QStringLiteral("[MODEL]"));
    const QCommandLineOption rules(QStringLiteral("rules"), QStringLiteral("Rule file to apply"),
                                   QStringLiteral("R.json"));
    const QCommandLineOption calib(QStringLiteral("calib"), QStringLiteral("Calibration data; calibrates at once"),
                                   QStringLiteral("DATA"));
    const QCommandLineOption eval(QStringLiteral("eval"), QStringLiteral("Evaluation data; evaluates at once"),
                                  QStringLiteral("DATA"));
    parser.addOptions({rules, calib, eval});
    parser.process(app);

    qs::MainWindow window;
    window.show();
    if (parser.isSet(rules))
        window.openRules(parser.value(rules));
    const QStringList positional = parser.positionalArguments();
    if (!positional.isEmpty())
        window.openPath(positional.first());
    if (parser.isSet(calib))
        window.setCalibrationFile(parser.value(calib));
    if (parser.isSet(eval))
        window.setEvaluationFile(parser.value(eval));
    if (parser.isSet(calib) || parser.isSet(eval))
        window.runWhenReady(parser.isSet(calib), parser.isSet(eval));
    return app.exec();
}
