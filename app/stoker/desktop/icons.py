"""Tray icons: the SVG sources in stoker/resources/icons rendered crisp at every size a panel asks for.

A QIcon built from one raster would be scaled (and blurred) by the panel; rendering the
SVG into a pixmap per size keeps edges sharp at 16, 22, 24, 32, 48 and 64 px (and their
HiDPI doubles). Which variant (drawn for a light or a dark panel) is picked from the
palette's window colour, the best hint Qt gives about the panel behind the tray.
The SVGs are read as bytes through stoker.resources (importlib.resources), never by a
path beside the source, so a wheel or a frozen bundle finds them too.
Must not decide which state to show: that is stoker.desktop.tray_view.tray_state.
"""

from __future__ import annotations

from functools import cache

from PySide6.QtCore import QByteArray, QRectF, Qt
from PySide6.QtGui import QGuiApplication, QIcon, QPainter, QPalette, QPixmap
from PySide6.QtSvg import QSvgRenderer

from stoker.desktop.tray_view import TRAY_STATES
from stoker.resources import APP_ICON_SIZES, app_icon_png, read_resource

SIZES = (16, 22, 24, 32, 48, 64)


def icon_resource(state: str, panel: str) -> str:
    """The packaged SVG for a state on a panel ("icons/ready-dark.svg")."""
    if state not in TRAY_STATES or panel not in ("light", "dark"):
        raise ValueError(f"no icon for state {state!r} on a {panel!r} panel")
    return f"icons/{state}-{panel}.svg"


def panel_is_dark(palette: QPalette | None = None) -> bool:
    if palette is None:
        app = QGuiApplication.instance()
        palette = app.palette() if isinstance(app, QGuiApplication) else QPalette()
    return palette.color(QPalette.ColorRole.Window).lightness() < 128


def render_pixmap(state: str, panel: str, size: int) -> QPixmap:
    name = icon_resource(state, panel)
    renderer = QSvgRenderer(QByteArray(read_resource(name)))
    if not renderer.isValid():
        raise RuntimeError(f"icon stoker/resources/{name} is not a valid SVG; reinstall Stoker")
    pix = QPixmap(size, size)
    pix.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pix)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter, QRectF(0, 0, size, size))
    painter.end()
    return pix


def state_icon(state: str, panel: str | None = None) -> QIcon:
    """The icon for a tray state; `panel` None: chosen from the application palette."""
    return _state_icon(state, panel or ("dark" if panel_is_dark() else "light"))


@cache
def _state_icon(state: str, panel: str) -> QIcon:
    icon = QIcon()
    for size in SIZES + tuple(s * 2 for s in SIZES if s * 2 not in SIZES):
        icon.addPixmap(render_pixmap(state, panel, size))
    return icon


@cache
def app_icon() -> QIcon:
    """Stoker's own icon (windows, About): the PNG sizes shipped for the desktop launcher."""
    icon = QIcon()
    for size in APP_ICON_SIZES:
        pix = QPixmap()
        if not pix.loadFromData(read_resource(app_icon_png(size)), "PNG"):
            raise RuntimeError(f"stoker/resources/{app_icon_png(size)} is not a valid PNG; reinstall Stoker")
        icon.addPixmap(pix)
    return icon
