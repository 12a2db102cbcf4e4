"""Tray icons: the SVG sources in resources/icons rendered crisp at every size a panel asks for.

A QIcon built from one raster would be scaled (and blurred) by the panel; rendering the
SVG into a pixmap per size keeps edges sharp at 16, 22, 24, 32, 48 and 64 px (and their
HiDPI doubles). Which variant (drawn for a light or a dark panel) is picked from the
palette's window colour, the best hint Qt gives about the panel behind the tray.
Must not decide which state to show: that is stoker.core.tray_view.tray_state.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QGuiApplication, QIcon, QPainter, QPalette, QPixmap
from PySide6.QtSvg import QSvgRenderer

from stoker.core.tray_view import TRAY_STATES

ICON_DIR = Path(__file__).resolve().parents[2] / "resources" / "icons"
SIZES = (16, 22, 24, 32, 48, 64)


def icon_path(state: str, panel: str) -> Path:
    if state not in TRAY_STATES or panel not in ("light", "dark"):
        raise ValueError(f"no icon for state {state!r} on a {panel!r} panel")
    return ICON_DIR / f"{state}-{panel}.svg"


def panel_is_dark(palette: QPalette | None = None) -> bool:
    if palette is None:
        app = QGuiApplication.instance()
        palette = app.palette() if app is not None else QPalette()
    return palette.color(QPalette.ColorRole.Window).lightness() < 128


def render_pixmap(state: str, panel: str, size: int) -> QPixmap:
    renderer = QSvgRenderer(str(icon_path(state, panel)))
    if not renderer.isValid():
        raise RuntimeError(f"icon {icon_path(state, panel)} is not a valid SVG; reinstall Stoker")
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


@lru_cache(maxsize=None)
def _state_icon(state: str, panel: str) -> QIcon:
    icon = QIcon()
    for size in SIZES + tuple(s * 2 for s in SIZES if s * 2 not in SIZES):
        icon.addPixmap(render_pixmap(state, panel, size))
    return icon
