#include "gui/theme.h"

#include <QApplication>
#include <QImage>
#include <QPainter>
#include <QPixmap>
#include <QSettings>

#include <algorithm>
#include <cmath>

namespace qs {

namespace {

const QString kThemeKey = QStringLiteral("view/theme");

// A pixel's lightness 0…1 (Rec. 709 luma of its colour).
double lightness(QRgb p)
{
    return (0.2126 * qRed(p) + 0.7152 * qGreen(p) + 0.0722 * qBlue(p)) / 255.0;
}

} // namespace

std::optional<ThemeChoice> parseThemeChoice(const QString& name)
{
    if (name == QStringLiteral("system"))
        return ThemeChoice::System;
    if (name == QStringLiteral("light"))
        return ThemeChoice::Light;
    if (name == QStringLiteral("dark"))
        return ThemeChoice::Dark;
    return std::nullopt;
}

QString themeChoiceName(ThemeChoice choice)
{
    switch (choice) {
    case ThemeChoice::Light:
        return QStringLiteral("light");
    case ThemeChoice::Dark:
        return QStringLiteral("dark");
    case ThemeChoice::System:
        break;
    }
    return QStringLiteral("system");
}

ThemeChoice loadThemeChoice()
{
    return parseThemeChoice(QSettings().value(kThemeKey).toString()).value_or(ThemeChoice::System);
}

void saveThemeChoice(ThemeChoice choice)
{
    QSettings().setValue(kThemeKey, themeChoiceName(choice));
}

bool isDarkPalette(const QPalette& palette)
{
    return palette.color(QPalette::Window).lightnessF() < palette.color(QPalette::WindowText).lightnessF();
}

QPalette lightPalette()
{
    QPalette p(QColor(239, 239, 239));
    p.setColor(QPalette::Window, QColor(239, 239, 239));
    p.setColor(QPalette::WindowText, QColor(20, 20, 20));
    p.setColor(QPalette::Base, Qt::white);
    p.setColor(QPalette::AlternateBase, QColor(245, 245, 245));
    p.setColor(QPalette::Text, QColor(20, 20, 20));
    p.setColor(QPalette::Button, QColor(239, 239, 239));
    p.setColor(QPalette::ButtonText, QColor(20, 20, 20));
    p.setColor(QPalette::ToolTipBase, QColor(255, 255, 220));
    p.setColor(QPalette::ToolTipText, Qt::black);
    p.setColor(QPalette::PlaceholderText, QColor(120, 120, 120));
    p.setColor(QPalette::Highlight, QColor(48, 140, 198));
    p.setColor(QPalette::HighlightedText, Qt::white);
    p.setColor(QPalette::Link, QColor(21, 101, 192));
    p.setColor(QPalette::Disabled, QPalette::WindowText, QColor(150, 150, 150));
    p.setColor(QPalette::Disabled, QPalette::Text, QColor(150, 150, 150));
    p.setColor(QPalette::Disabled, QPalette::ButtonText, QColor(150, 150, 150));
    return p;
}

QPalette darkPalette()
{
    QPalette p(QColor(53, 53, 53));
    p.setColor(QPalette::Window, QColor(45, 45, 48));
    p.setColor(QPalette::WindowText, QColor(230, 230, 230));
    p.setColor(QPalette::Base, QColor(30, 30, 32));
    p.setColor(QPalette::AlternateBase, QColor(52, 52, 56));
    p.setColor(QPalette::Text, QColor(230, 230, 230));
    p.setColor(QPalette::Button, QColor(58, 58, 62));
    p.setColor(QPalette::ButtonText, QColor(230, 230, 230));
    p.setColor(QPalette::BrightText, QColor(255, 90, 90));
    p.setColor(QPalette::ToolTipBase, QColor(60, 60, 64));
    p.setColor(QPalette::ToolTipText, QColor(230, 230, 230));
    p.setColor(QPalette::PlaceholderText, QColor(140, 140, 140));
    p.setColor(QPalette::Light, QColor(80, 80, 84));
    p.setColor(QPalette::Midlight, QColor(66, 66, 70));
    p.setColor(QPalette::Mid, QColor(40, 40, 42));
    p.setColor(QPalette::Dark, QColor(25, 25, 27));
    p.setColor(QPalette::Shadow, Qt::black);
    p.setColor(QPalette::Highlight, QColor(42, 130, 218));
    p.setColor(QPalette::HighlightedText, Qt::white);
    p.setColor(QPalette::Link, QColor(100, 170, 255));
    p.setColor(QPalette::LinkVisited, QColor(170, 140, 255));
    p.setColor(QPalette::Disabled, QPalette::WindowText, QColor(120, 120, 120));
    p.setColor(QPalette::Disabled, QPalette::Text, QColor(120, 120, 120));
    p.setColor(QPalette::Disabled, QPalette::ButtonText, QColor(120, 120, 120));
    p.setColor(QPalette::Disabled, QPalette::Base, QColor(40, 40, 42));
    return p;
}

void applyTheme(ThemeChoice choice)
{
    switch (choice) {
    case ThemeChoice::Light:
        QApplication::setPalette(lightPalette());
        return;
    case ThemeChoice::Dark:
        QApplication::setPalette(darkPalette());
        return;
    case ThemeChoice::System:
        break;
    }
    // Nothing set: Qt fills every role from the platform theme, and again when the desktop's changes. (Only
    // undone when a light or dark palette was set: at start-up the app's palette is left alone.)
    if (QApplication::palette().resolveMask() != 0)
        QApplication::setPalette(QPalette());
}

double iconContrast(const QIcon& icon, const QColor& background, int size)
{
    const QImage image = icon.pixmap(size, size).toImage().convertToFormat(QImage::Format_ARGB32);
    const double back = lightness(background.rgb());
    double weighted = 0, alpha = 0;
    for (int y = 0; y < image.height(); ++y) {
        const auto* line = reinterpret_cast<const QRgb*>(image.constScanLine(y));
        for (int x = 0; x < image.width(); ++x) {
            const double a = qAlpha(line[x]) / 255.0;
            weighted += a * std::fabs(lightness(line[x]) - back);
            alpha += a;
        }
    }
    return alpha > 0 ? weighted / alpha : 0.0;
}

QIcon iconAtEverySize(const QIcon& icon)
{
    constexpr int kLargest = 64;
    if (icon.isNull() || icon.pixmap(kLargest, kLargest).width() >= kLargest)
        return icon;
    QIcon out;
    for (const int size : {16, 22, 24, 32, 48, kLargest})
        for (const QIcon::Mode mode : {QIcon::Normal, QIcon::Disabled}) {
            QPixmap pixmap = icon.pixmap(QSize(size, size), 1.0, mode);
            if (pixmap.width() < size)
                pixmap = pixmap.scaled(size, size, Qt::KeepAspectRatio, Qt::SmoothTransformation);
            out.addPixmap(pixmap, mode);
        }
    return out;
}

QIcon legibleIcon(const QIcon& icon, const QPalette& palette)
{
    if (icon.isNull())
        return icon;
    const QColor window = palette.color(QPalette::Window);
    const QImage sample = icon.pixmap(32, 32).toImage().convertToFormat(QImage::Format_ARGB32);
    // Monochrome: every visible pixel nearly grey (a glyph of an icon theme, not a coloured picture).
    double saturation = 0, alpha = 0;
    for (int y = 0; y < sample.height(); ++y)
        for (int x = 0; x < sample.width(); ++x) {
            const QColor c = QColor::fromRgba(sample.pixel(x, y));
            saturation += c.alphaF() * c.hsvSaturationF();
            alpha += c.alphaF();
        }
    const bool monochrome = alpha > 0 && saturation / alpha < 0.15;
    if (iconContrast(icon, window) >= (monochrome ? 0.35 : 0.2))
        return icon;
    const bool dark = isDarkPalette(palette);
    // A glyph takes the text colour; a coloured picture keeps its hues, lightened (or darkened) until it stands out.
    auto redraw = [&](QPixmap pixmap, QIcon::Mode mode) {
        if (monochrome) {
            QPainter painter(&pixmap);
            painter.setCompositionMode(QPainter::CompositionMode_SourceIn);
            painter.fillRect(
                pixmap.rect(),
                palette.color(mode == QIcon::Disabled ? QPalette::Disabled : QPalette::Active, QPalette::WindowText));
            painter.end();
            return pixmap;
        }
        QImage image = pixmap.toImage().convertToFormat(QImage::Format_ARGB32);
        for (int y = 0; y < image.height(); ++y) {
            auto* line = reinterpret_cast<QRgb*>(image.scanLine(y));
            for (int x = 0; x < image.width(); ++x) {
                if (qAlpha(line[x]) == 0)
                    continue;
                QColor c = QColor::fromRgba(line[x]);
                float h, s, l, a;
                c.getHslF(&h, &s, &l, &a);
                l = dark ? std::max(l, 0.66f) : std::min(l, 0.36f);
                c.setHslF(h, s, l, a);
                line[x] = c.rgba();
            }
        }
        return QPixmap::fromImage(image);
    };
    QIcon out;
    for (const int size : {16, 22, 24, 32, 48, 64}) {
        out.addPixmap(redraw(icon.pixmap(size, size), QIcon::Normal), QIcon::Normal);
        out.addPixmap(redraw(icon.pixmap(QSize(size, size), 1.0, QIcon::Disabled), QIcon::Disabled), QIcon::Disabled);
    }
    return out;
}

} // namespace qs
