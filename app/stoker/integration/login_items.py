"""The exact contents Stoker writes to start at login and to appear in a launcher, per OS:
a freedesktop .desktop entry (Linux launcher and XDG autostart), a LaunchAgent plist
(macOS), the HKCU Run value (Windows), and which command they start.

Pure: values in, text/bytes out, the same on every OS so every OS's tests check every
format. Writing them (files, launchctl, the registry) is stoker.integration.autostart and
stoker.integration.desktop_entry; they must not build these contents themselves.
"""

from __future__ import annotations

import plistlib
import re
from dataclasses import dataclass

APP_NAME = "Stoker"
# Reverse-DNS name: the LaunchAgent label, the macOS bundle identifier, the Run value's name.
APP_ID = "io.github.stoker.Stoker"
RUN_VALUE_NAME = APP_NAME
DESKTOP_FILE_NAME = "stoker.desktop"  # applications/ and autostart/ alike
COMMENT = "Local language models in the tray"


@dataclass(frozen=True)
class Outcome:
    """What a login-item or launcher writer did: done, and one sentence either way."""
    done: bool
    sentence: str


def launch_command(frozen: bool, executable: str, tray_script: str | None,
                   cli_script: str | None) -> tuple[str, ...]:
    """What a launcher or login item runs to start the tray.

    A bundle's executable starts the tray by itself; from a venv/pipx install the
    `stoker-tray` gui script is best (no console window on Windows), then `stoker`, then
    the interpreter running the package (a source checkout).
    """
    if frozen:
        return (executable,)
    if tray_script:
        return (tray_script,)
    if cli_script:
        return (cli_script, "tray")
    return (executable, "-m", "stoker", "tray")


# -------------------------------------------------------------------- freedesktop

_EXEC_RESERVED = set(' \t\n"\'\\><~|&;$*?#()`')


def _exec_arg(arg: str) -> str:
    """Quote one Exec= argument as the Desktop Entry spec asks: inside double quotes, `"`,
    `` ` ``, `$` and `\\` are backslash-escaped; `%` is doubled everywhere (field codes)."""
    arg = arg.replace("%", "%%")
    if arg and not (set(arg) & _EXEC_RESERVED) and "=" not in arg:
        return arg
    escaped = re.sub(r'(["`$\\])', r"\\\1", arg)
    # The .desktop file's own string escaping turns each backslash into two.
    return '"' + escaped.replace("\\", "\\\\") + '"'


def exec_line(command: tuple[str, ...] | list[str]) -> str:
    return " ".join(_exec_arg(a) for a in command)


def desktop_entry(command: tuple[str, ...] | list[str], *, icon: str = "stoker",
                  autostart: bool = False) -> str:
    """A freedesktop Desktop Entry: the launcher's (autostart False) or the login one."""
    lines = ["[Desktop Entry]", "Type=Application", f"Name={APP_NAME}",
             "GenericName=Local model server", f"Comment={COMMENT}",
             f"Exec={exec_line(command)}", f"Icon={icon}", "Terminal=false",
             "Categories=Utility;", "StartupNotify=false",
             "Keywords=llama;llm;gguf;model;"]
    if autostart:
        lines += ["X-GNOME-Autostart-enabled=true", "NoDisplay=true"]
    return "\n".join(lines) + "\n"


# -------------------------------------------------------------------- macOS

def launch_agent_plist(command: tuple[str, ...] | list[str], label: str = APP_ID) -> bytes:
    """~/Library/LaunchAgents/<label>.plist: run the tray once at login, never respawn it
    (a user who quits Stoker meant it), only in the graphical session."""
    return plistlib.dumps({
        "Label": label,
        "ProgramArguments": list(command),
        "RunAtLoad": True,
        "KeepAlive": False,
        "LimitLoadToSessionType": "Aqua",
        "ProcessType": "Interactive",
    }, fmt=plistlib.FMT_XML, sort_keys=True)


def launch_agent_file_name(label: str = APP_ID) -> str:
    return f"{label}.plist"


def launchctl_argv(action: str, uid: int, label: str = APP_ID) -> tuple[str, ...]:
    """`launchctl enable|disable gui/<uid>/<label>`: whether launchd may load the agent at
    the next login. (bootstrap would start a second Stoker at once because of RunAtLoad,
    and bootout would kill the running one, so neither is used from the settings.)"""
    if action not in ("enable", "disable"):
        raise ValueError(f"launchctl action must be enable or disable, not {action!r}")
    return ("launchctl", action, f"gui/{uid}/{label}")


# -------------------------------------------------------------------- Windows

def _windows_arg(arg: str) -> str:
    """Quote one argument the way CommandLineToArgvW reads it back (as subprocess does)."""
    if arg and not any(c in arg for c in ' \t"'):
        return arg
    out, backslashes = ['"'], 0
    for c in arg:
        if c == "\\":
            backslashes += 1
        elif c == '"':
            out.append("\\" * (backslashes * 2 + 1) + '"')
            backslashes = 0
        else:
            out.append("\\" * backslashes + c)
            backslashes = 0
    out.append("\\" * (backslashes * 2) + '"')
    return "".join(out)


def run_key_value(command: tuple[str, ...] | list[str]) -> str:
    """The HKCU\\Software\\Microsoft\\Windows\\CurrentVersion\\Run value: the executable is
    always quoted (an unquoted path with spaces is run as its first word), then the args."""
    exe, *args = command
    return " ".join(['"' + exe.replace('"', "") + '"', *(_windows_arg(a) for a in args)])


# -------------------------------------------------------------------- Linux launcher files

def launcher_icon_files(sizes: tuple[int, ...], name: str = "stoker") -> tuple[tuple[str, str], ...]:
    """(packaged resource, destination under $XDG_DATA_HOME) for each hicolor icon."""
    pngs = tuple((f"icons/hicolor/{s}x{s}/{name}.png", f"icons/hicolor/{s}x{s}/apps/{name}.png")
                 for s in sizes)
    return pngs + ((f"icons/{name}.svg", f"icons/hicolor/scalable/apps/{name}.svg"),)
