#pragma once
// Help ▸ User Guide, Keyboard Shortcuts and About. The guide is
// docs/user-guide.md, bundled into the binary as a Qt resource at build time
// (":/docs/user-guide.md", its screenshots beside it), rendered from Markdown.
// The shortcuts are read from the window's actions, so the list is the one the
// app has, never a hand-kept copy. About names the engine's libraries with the
// versions read from their version macros at compile time
// (session/library_versions.h) and Qt's at run time.

#include <QDialog>
#include <QString>

class QTextBrowser;
class QWidget;

namespace qs {

// The bundled guide's resource path.
inline constexpr const char* kUserGuideResource = ":/docs/user-guide.md";

class UserGuideDialog : public QDialog {
    Q_OBJECT
public:
    explicit UserGuideDialog(QWidget* parent = nullptr);
    QTextBrowser* browser() const { return browser_; }

private:
    QTextBrowser* browser_;
};

// Every action of `window` with a shortcut, as an HTML table: the action's
// text (menu mnemonics removed) and its shortcuts as the platform writes them,
// sorted by text.
QString shortcutsHtml(const QWidget* window);

// The About box's HTML: the app's version, Qt's (run and built), the engine's libraries.
QString aboutHtml();

} // namespace qs
