#include "gui/help_dialogs.h"

#include <QAction>
#include <QDialogButtonBox>
#include <QKeySequence>
#include <QRegularExpression>
#include <QTextBrowser>
#include <QUrl>
#include <QVBoxLayout>
#include <QWidget>

#include <algorithm>
#include <map>

#include "session/library_versions.h"

namespace qs {

UserGuideDialog::UserGuideDialog(QWidget* parent) : QDialog(parent)
{
    setWindowTitle(tr("Quantscope User Guide"));
    browser_ = new QTextBrowser(this);
    browser_->setOpenExternalLinks(true);
    // Relative links and images (screenshots/…) resolve beside the guide in the resources.
    browser_->setSource(QUrl(QStringLiteral("qrc") + QLatin1String(kUserGuideResource)),
                        QTextDocument::MarkdownResource);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(browser_);
    layout->addWidget(buttons);
    resize(900, 700);
}

QString shortcutsHtml(const QWidget* window)
{
    // Text → shortcuts; an action present twice (a menu and a toolbar share one) is listed once.
    std::map<QString, QStringList> rows;
    for (const QAction* action : window->findChildren<QAction*>()) {
        if (action->shortcuts().isEmpty())
            continue;
        QString text = action->text();
        text.remove(QRegularExpression(QStringLiteral("&(?!&)"))).replace(QStringLiteral("&&"), QStringLiteral("&"));
        text.remove(QStringLiteral("…"));
        QStringList& keys = rows[text.trimmed()];
        for (const QKeySequence& k : action->shortcuts()) {
            const QString key = k.toString(QKeySequence::NativeText);
            if (!keys.contains(key))
                keys << key;
        }
    }
    QString html = QStringLiteral("<table cellpadding='3'>");
    for (const auto& [text, keys] : rows)
        html += QStringLiteral("<tr><td>%1</td><td><b>%2</b></td></tr>")
                    .arg(text.toHtmlEscaped(), keys.join(QStringLiteral(", ")).toHtmlEscaped());
    return html + QStringLiteral("</table>");
}

QString aboutHtml()
{
    QString libraries;
    for (const LibraryVersion& l : engineLibraryVersions()) {
        QString version = QString::fromStdString(l.compiled);
        if (!l.running.empty() && l.running != l.compiled)
            version += QObject::tr(" (running %1)").arg(QString::fromStdString(l.running));
        libraries += QStringLiteral("<tr><td>%1</td><td>%2</td></tr>")
                         .arg(QString::fromStdString(l.name).toHtmlEscaped(), version.toHtmlEscaped());
    }
    return QObject::tr("<h3>Quantscope %1</h3><p>A quantization explorer for neural-network models: regex rules, "
                       "live per-layer errors, calibration, evaluation and export.</p>"
                       "<p>Qt %2 (built with %3)</p><p><b>Engine libraries</b></p><table cellpadding='2'>%4</table>")
        .arg(QStringLiteral(QUANTSCOPE_VERSION), QString::fromLatin1(qVersion()), QStringLiteral(QT_VERSION_STR),
             libraries);
}

} // namespace qs
