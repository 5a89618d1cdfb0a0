#pragma once
// The app's colour theme: the desktop's (the platform theme's palette, followed
// as it changes), or light or dark whatever the desktop says. Qt 6.4 (Debian 12)
// has no QStyleHints::colorScheme, so "is it dark" is read from the palette: a
// window colour darker than its text. Charts take their colours from the
// palette (widgets/charts/chart_frame.h) and follow it; icons that are drawn in
// one dark or light colour (an icon theme's glyphs) are redrawn in the palette's
// text colour when they would not stand out from the window, and coloured ones
// too dark (or light) for it are lightened (or darkened), keeping their hue.

#include <optional>

#include <QIcon>
#include <QPalette>
#include <QString>

class QWidget;

namespace qs {

enum class ThemeChoice { System, Light, Dark };

// "system", "light", "dark"; none for another name.
std::optional<ThemeChoice> parseThemeChoice(const QString& name);
QString themeChoiceName(ThemeChoice choice);
// QSettings "view/theme" (System when absent or unknown).
ThemeChoice loadThemeChoice();
void saveThemeChoice(ThemeChoice choice);

// Whether `palette` is a dark one (its window colour darker than its window text).
bool isDarkPalette(const QPalette& palette);
QPalette lightPalette();
QPalette darkPalette();

// Sets the application palette: the platform's for System (an app palette with
// nothing set, which Qt resolves against the platform theme as it changes),
// else the light or dark one.
void applyTheme(ThemeChoice choice);

// `icon` as it stays visible on `palette`'s window colour: unchanged when it
// already contrasts; else a monochrome icon is redrawn in the palette's
// window-text colour (its alpha kept) and a coloured one keeps its hues, made
// lighter on a dark palette (darker on a light one).
QIcon legibleIcon(const QIcon& icon, const QPalette& palette);
// `icon` with an image at every common size up to 64 px, so that it fills its
// place on a 2x screen: Fusion's fallback icons (used where the desktop has no
// icon theme) stop at 32 px, which a 24 px toolbar at 2x would draw at half its
// size. Missing sizes are scaled up smoothly from the largest image; an icon that
// already has 64 px (an icon theme's SVG) is returned as it is.
QIcon iconAtEverySize(const QIcon& icon);
// The contrast of `icon` drawn at `size` px against `background`: the
// alpha-weighted mean |lightness difference| of its pixels, 0…1.
double iconContrast(const QIcon& icon, const QColor& background, int size = 32);

} // namespace qs
