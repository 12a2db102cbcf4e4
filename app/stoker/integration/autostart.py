"""Start Stoker at login on Linux, macOS and Windows: the writers, thin on purpose.

Linux: an XDG autostart entry ($XDG_CONFIG_HOME/autostart/stoker.desktop). macOS: a
per-user LaunchAgent (~/Library/LaunchAgents/<APP_ID>.plist) that launchd loads at the
next login, with `launchctl enable|disable` so a previous disable does not outlive a new
choice. Windows: the HKCU Run value, through winreg. What goes into each is decided in
stoker.integration.login_items; this module only writes (atomically) or removes it and answers
with one sentence, also when it could not. The settings dialog decides when.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from stoker.integration.login_items import (
    APP_ID,
    DESKTOP_FILE_NAME,
    RUN_VALUE_NAME,
    Outcome,
    desktop_entry,
    launch_agent_file_name,
    launch_agent_plist,
    launch_command,
    launchctl_argv,
    run_key_value,
)

RUN_KEY = r"Software\Microsoft\Windows\CurrentVersion\Run"


def tray_command() -> tuple[str, ...]:
    """What a login item or launcher entry runs: the bundle, else this install's scripts."""
    frozen = bool(getattr(sys, "frozen", False))
    scripts = Path(sys.executable).parent  # a venv's bin/ (Scripts\\ on Windows)
    suffix = ".exe" if os.name == "nt" else ""

    def script(name: str) -> str | None:
        candidate = scripts / (name + suffix)
        return str(candidate) if candidate.is_file() else shutil.which(name)

    return launch_command(frozen, sys.executable, None if frozen else script("stoker-tray"),
                          None if frozen else script("stoker"))


def autostart_file() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "autostart" / DESKTOP_FILE_NAME


def launch_agent_file() -> Path:
    return Path.home() / "Library" / "LaunchAgents" / launch_agent_file_name()


def _write_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def set_autostart(enabled: bool, command: list[str] | tuple[str, ...] | None = None,
                  system: str | None = None) -> Outcome:
    """Create or remove the login item; the outcome's sentence says what happened."""
    system = system or sys.platform
    command = tuple(command) if command else tray_command()
    try:
        if system.startswith("linux") or system.startswith("freebsd"):
            return _set_xdg(enabled, command)
        if system == "darwin":
            return _set_launch_agent(enabled, command)
        if system == "win32":
            return _set_run_key(enabled, command)
    except OSError as exc:
        what = "set up" if enabled else "remove"
        return Outcome(False, f"Could not {what} starting at login ({exc.strerror or exc}); "
                              "nothing was changed.")
    return Outcome(False, f"Starting at login is not available on {system}; start Stoker by hand.")


def _set_xdg(enabled: bool, command: tuple[str, ...]) -> Outcome:
    path = autostart_file()
    if not enabled:
        path.unlink(missing_ok=True)
        return Outcome(True, "Stoker will not start at login.")
    _write_atomically(path, desktop_entry(command, autostart=True).encode("utf-8"))
    return Outcome(True, f"Stoker will start at login ({path}).")


def _launchctl(action: str) -> bool:
    """Ask launchd; False when launchctl is missing or refuses (the plist still decides)."""
    try:
        return subprocess.run(list(launchctl_argv(action, os.getuid())), capture_output=True,
                              timeout=15).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _set_launch_agent(enabled: bool, command: tuple[str, ...]) -> Outcome:
    path = launch_agent_file()
    if not enabled:
        _launchctl("disable")
        path.unlink(missing_ok=True)
        return Outcome(True, "Stoker will not start at login.")
    _write_atomically(path, launch_agent_plist(command))
    _launchctl("enable")
    return Outcome(True, f"Stoker will start at login ({path}, label {APP_ID}).")


def _set_run_key(enabled: bool, command: tuple[str, ...]) -> Outcome:
    # winreg (and its type stubs) exist only on Windows; the tests put a stand-in in sys.modules
    winreg: Any = importlib.import_module("winreg")

    with winreg.CreateKeyEx(winreg.HKEY_CURRENT_USER, RUN_KEY, 0, winreg.KEY_SET_VALUE) as key:
        if not enabled:
            with contextlib.suppress(FileNotFoundError):
                winreg.DeleteValue(key, RUN_VALUE_NAME)
            return Outcome(True, "Stoker will not start at login.")
        winreg.SetValueEx(key, RUN_VALUE_NAME, 0, winreg.REG_SZ, run_key_value(command))
    return Outcome(True, f"Stoker will start at login (HKCU\\{RUN_KEY}\\{RUN_VALUE_NAME}).")
