"""Render the application icon (app/resources/icons/stoker.svg) to the PNG sizes the
freedesktop hicolor theme, macOS (.icns) and Windows (.ico) want. The PNGs are committed,
so installing Stoker needs no renderer; run this again after changing the SVG:

    QT_QPA_PLATFORM=offscreen .venv/bin/python packaging/render-icons.py
"""

from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtCore import QByteArray, QRectF, Qt
from PySide6.QtGui import QGuiApplication, QImage, QPainter
from PySide6.QtSvg import QSvgRenderer

from stoker.resources import APP_ICON_SIZES, APP_ICON_SVG, app_icon_png, read_resource

ROOT = Path(__file__).resolve().parents[1] / "app" / "stoker" / "resources"


def main() -> int:
    app = QGuiApplication.instance() or QGuiApplication(sys.argv[:1])  # noqa: F841 (fonts, plugins)
    renderer = QSvgRenderer(QByteArray(read_resource(APP_ICON_SVG)))
    if not renderer.isValid():
        print(f"{APP_ICON_SVG} is not a valid SVG", file=sys.stderr)
        return 1
    for size in APP_ICON_SIZES:
        image = QImage(size, size, QImage.Format.Format_ARGB32)
        image.fill(Qt.GlobalColor.transparent)
        painter = QPainter(image)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        renderer.render(painter, QRectF(0, 0, size, size))
        painter.end()
        out = ROOT / app_icon_png(size)
        out.parent.mkdir(parents=True, exist_ok=True)
        if not image.save(str(out), "PNG"):
            print(f"could not write {out}", file=sys.stderr)
            return 1
        print(out.relative_to(ROOT.parents[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
