"""Stoker's data files (icons), shipped inside the package and read through importlib.resources.

Nothing may find these by a path relative to a source checkout: a wheel, a pipx venv and a
PyInstaller bundle each put them somewhere else, and importlib.resources knows where.
Must not decide which icon to show (stoker.desktop.tray_view) or render anything (stoker.desktop.icons).
"""

from __future__ import annotations

from importlib.resources import files
from importlib.resources.abc import Traversable

# The sizes of the application icon shipped as PNG (freedesktop hicolor theme folders).
APP_ICON_SIZES = (16, 22, 24, 32, 48, 64, 128, 256, 512)
APP_ICON_NAME = "stoker"  # Icon= in the .desktop file, file stem in the icon theme


def resource(relative: str) -> Traversable:
    """A file under stoker/resources, e.g. "icons/ready-dark.svg"."""
    return files(__name__).joinpath(*relative.split("/"))


def read_resource(relative: str) -> bytes:
    """The bytes of a packaged file; raises FileNotFoundError naming it when it is missing."""
    try:
        return resource(relative).read_bytes()
    except (FileNotFoundError, IsADirectoryError):
        raise FileNotFoundError(f"the packaged file stoker/resources/{relative} is missing; "
                                "reinstall Stoker") from None


APP_ICON_SVG = "icons/stoker.svg"


def app_icon_png(size: int) -> str:
    if size not in APP_ICON_SIZES:
        raise ValueError(f"no {size}px application icon; shipped sizes: {APP_ICON_SIZES}")
    return f"icons/hicolor/{size}x{size}/{APP_ICON_NAME}.png"
