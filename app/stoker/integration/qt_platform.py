"""Can Qt start a window-system connection here? Asked in a child process, before QApplication.

When Qt's platform plugin cannot load (on a fresh desktop with a pip-installed PySide6 the
usual cause is a missing libxcb-cursor0), QApplication ends the process with qFatal: the
user sees Qt's message and an abort, and the tray never gets to say "running headless".
So the tray first lets a child process try, with QT_DEBUG_PLUGINS=1 so the loader's own
error names the library, and turns a failure into one sentence naming the missing library
and the Debian/Ubuntu package that provides it. This module never imports Qt itself (shell
rule): the child does, and the plugin's path is found without importing PySide6.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from stoker.engines.process import helper_python

CHECK_TIMEOUT_S = 20.0
CHILD_CODE = ("import sys\n"
              "from PySide6.QtWidgets import QApplication\n"
              "app = QApplication(sys.argv[:1])\n"
              "print('qt-ok', app.platformName(), flush=True)\n")

# What the dynamic loader says about a library it could not use, inside Qt's plugin debug output
# ("Cannot load library …libqxcb.so: (libxcb-cursor.so.0: cannot open shared object file: …)").
_LOADER_RE = re.compile(r"(lib[\w.+-]+?\.so(?:\.\d+)*): (?:cannot open shared object file|"
                        r"file too short|wrong ELF class|invalid ELF header|undefined symbol)")
_LDD_RE = re.compile(r"^\s*(\S+)\s*=>\s*not found", re.MULTILINE)
# Libraries that come with PySide6's own wheel: their absence means a broken install.
_QT_OWN = re.compile(r"^libQt6|^libpyside6|^libshiboken6")


def debian_package(library: str) -> str:
    """The Debian/Ubuntu package of a shared library by the distributions' naming rule:
    libxcb-cursor.so.0 -> libxcb-cursor0, libxkbcommon-x11.so.0 -> libxkbcommon-x11-0."""
    m = re.match(r"^(lib[\w+.-]+?)\.so\.(\d+)", library)
    if not m:
        return library.split(".so")[0]
    name, major = m.group(1), m.group(2)
    return f"{name}-{major}" if name[-1].isdigit() else f"{name}{major}"


def xcb_plugin_path(env: Mapping[str, str] | None = None) -> Path | None:
    """The libqxcb.so Qt would load: QT_QPA_PLATFORM_PLUGIN_PATH, else PySide6's own."""
    env = os.environ if env is None else env
    override = env.get("QT_QPA_PLATFORM_PLUGIN_PATH")
    if override:
        candidate = Path(override) / "libqxcb.so"
        return candidate if candidate.is_file() else None
    spec = importlib.util.find_spec("PySide6")
    for loc in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(loc) / "Qt" / "plugins" / "platforms" / "libqxcb.so"
        if candidate.is_file():
            return candidate
    return None


def missing_libraries(text: str) -> tuple[str, ...]:
    """Library names the loader or ldd said it could not use, in order, once each."""
    found = _LOADER_RE.findall(text) + _LDD_RE.findall(text)
    return tuple(dict.fromkeys(found))


def _ldd(path: Path, env: dict) -> str:
    if shutil.which("ldd") is None:
        return ""
    try:
        proc = subprocess.run(["ldd", str(path)], capture_output=True, text=True, errors="replace",
                              timeout=10, env=env, stdin=subprocess.DEVNULL, start_new_session=True)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout + proc.stderr


def problem_sentence(libraries: tuple[str, ...], platform: str, detail: str) -> str:
    """One sentence: what cannot load, why, and what to install."""
    if libraries:
        system = [lib for lib in libraries if not _QT_OWN.match(lib)]
        if system:
            packages = ", ".join(dict.fromkeys(debian_package(lib) for lib in system))
            return (f"Qt cannot load its {platform} platform plugin because "
                    f"{', '.join(system)} {'is' if len(system) == 1 else 'are'} missing; install "
                    f"{packages} (Debian/Ubuntu: sudo apt install {packages.replace(', ', ' ')}) "
                    f"to get the tray. Running headless.")
        return (f"Qt cannot load its {platform} platform plugin because its own "
                f"{', '.join(libraries)} cannot be found; reinstall PySide6 "
                f"(pip install --force-reinstall PySide6) to get the tray. Running headless.")
    return (f"Qt cannot start its {platform} platform plugin ({detail}); check the display "
            f"settings or QT_QPA_PLATFORM to get the tray. Running headless.")


def qt_start_problem(env: dict | None = None, timeout_s: float = CHECK_TIMEOUT_S) -> str | None:
    """None when a child process could create a QApplication here, else the sentence."""
    python = helper_python()
    if python is None:  # a frozen bundle: it carries the xcb plugin and its libraries (stoker.spec)
        return None
    env = dict(os.environ if env is None else env)
    child_env = {**env, "QT_DEBUG_PLUGINS": "1"}
    platform = (env.get("QT_QPA_PLATFORM") or ("xcb" if sys.platform.startswith("linux") else "")).split(":")[0]
    try:
        proc = subprocess.run([python, "-c", CHILD_CODE], capture_output=True, text=True,
                              errors="replace", timeout=timeout_s, env=child_env,
                              stdin=subprocess.DEVNULL, start_new_session=True)
    except subprocess.TimeoutExpired:
        return None  # a slow desktop is not a broken one: let the real start try
    except OSError as exc:
        return problem_sentence((), platform or "default", f"the check could not run: {exc}")
    if proc.returncode == 0 and "qt-ok" in proc.stdout:
        return None
    output = proc.stderr + proc.stdout
    libraries = missing_libraries(output)
    if not libraries and platform == "xcb":
        plugin = xcb_plugin_path(env)
        if plugin is not None:
            libraries = missing_libraries(_ldd(plugin, env))
    last = next((x.strip() for x in reversed(output.splitlines())
                 if x.strip() and not x.startswith(("QFactoryLoader", "Found metadata", "Got keys",
                                                    "checking directory", "looking at"))), "")
    detail = last[:160] or f"exit status {proc.returncode}"
    return problem_sentence(libraries, platform or "default", detail)
