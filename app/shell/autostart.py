"""Start Stoker at login: an XDG autostart entry on Linux; other systems are told, not faked.

Writing the entry is all this does; the settings dialog decides when. On macOS and
Windows the mechanism (a LaunchAgent / a Run registry key) is not written yet, and the
returned sentence says so rather than pretending the setting took effect.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

ENTRY_NAME = "stoker.desktop"


def autostart_file() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "autostart" / ENTRY_NAME


def desktop_entry(command: list[str]) -> str:
    return ("[Desktop Entry]\nType=Application\nName=Stoker\n"
            "Comment=Local language models in the tray\n"
            f"Exec={shlex.join(command)}\nX-GNOME-Autostart-enabled=true\nTerminal=false\n")


def set_autostart(enabled: bool, command: list[str] | None = None) -> str:
    """Create or remove the login entry; returns one sentence saying what happened."""
    if not sys.platform.startswith("linux"):
        return "Starting at login is not supported on this system yet; start Stoker by hand."
    path = autostart_file()
    if not enabled:
        path.unlink(missing_ok=True)
        return "Stoker will not start at login."
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    if command is None:
        stoker = shutil.which("stoker")
        command = [stoker] if stoker else [sys.executable, "-m", "stoker"]
    tmp.write_text(desktop_entry(command), encoding="utf-8")
    os.replace(tmp, path)
    return f"Stoker will start at login ({path})."
