"""Linux desktop integration: put Stoker in the launcher (a freedesktop .desktop file and the
hicolor icons in the user's XDG data folder) and take exactly that back out.

`install_launcher` writes $XDG_DATA_HOME/applications/stoker.desktop and the icons
(PNG per hicolor size plus the scalable SVG, copied from the package), refreshes the
desktop and icon caches when their tools exist, and keeps a record (<data>/desktop-install.json)
of every file and folder it created. `uninstall_launcher` removes what the record lists and
nothing else (a cache file the tools had already made is refreshed, not deleted).
The contents come from stoker.integration.login_items; the icons from stoker.resources.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from stoker.base.paths import stoker_paths
from stoker.integration.autostart import tray_command
from stoker.integration.login_items import DESKTOP_FILE_NAME, desktop_entry, launcher_icon_files
from stoker.resources import APP_ICON_NAME, APP_ICON_SIZES, read_resource

RECORD_NAME = "desktop-install.json"
RECORD_SCHEMA = 1
# Cache files the refresh tools write beside our files: (folder under data home, file, tool argv).
_CACHES = (("applications", "mimeinfo.cache", ("update-desktop-database", "-q")),
           ("icons/hicolor", "icon-theme.cache", ("gtk-update-icon-cache", "-q", "-t", "-f")))


class DesktopError(Exception):
    """One sentence: what could not be written or removed, and what to do."""


@dataclass(frozen=True)
class DesktopResult:
    files: tuple[str, ...]  # written (install) or removed (uninstall)
    refreshed: tuple[str, ...]  # cache tools that ran
    sentence: str


def data_home() -> Path:
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")


def record_file() -> Path:
    return stoker_paths().data / RECORD_NAME


def read_record() -> dict | None:
    try:
        record = json.loads(record_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("schema") == RECORD_SCHEMA else None


def is_installed() -> bool:
    """Whether Stoker's own launcher entry is in place (what the Settings checkbox shows)."""
    record = read_record()
    return record is not None and any(Path(f).name == DESKTOP_FILE_NAME and Path(f).is_file()
                                      for f in record.get("files", []))


def _refresh(root: Path, created: list[str] | None, skip: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """Run the cache tools that exist; a cache file they create for the first time is ours
    (added to `created`). Caches in `skip` were ours and are gone: not made again."""
    ran = []
    for folder, cache_name, argv in _CACHES:
        tool = shutil.which(argv[0])
        target = root / folder
        cache = target / cache_name
        if tool is None or not target.is_dir() or str(cache) in skip:
            continue
        existed = cache.exists()
        try:
            subprocess.run([tool, *argv[1:], str(target)], capture_output=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            continue
        ran.append(argv[0])
        if created is not None and not existed and cache.exists():
            created.append(str(cache))
    return tuple(ran)


def _write(path: Path, data: bytes, files: list[str], dirs: list[str]) -> None:
    missing = []
    for parent in path.parents:
        if parent.exists():
            break
        missing.append(parent)
    for d in reversed(missing):
        d.mkdir()
        dirs.append(str(d))
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    files.append(str(path))


def install_launcher(command: tuple[str, ...] | None = None) -> DesktopResult:
    """Write the launcher entry and icons; a second install replaces the first cleanly."""
    if not sys.platform.startswith(("linux", "freebsd")):
        raise DesktopError("desktop entries are a Linux (freedesktop) feature; on macOS drag "
                           "Stoker.app to Applications, on Windows pin Stoker.exe to Start.")
    if read_record() is not None:
        uninstall_launcher()
    root = data_home()
    files: list[str] = []
    dirs: list[str] = []
    try:
        entry = desktop_entry(command or tray_command(), icon=APP_ICON_NAME)
        _write(root / "applications" / DESKTOP_FILE_NAME, entry.encode("utf-8"), files, dirs)
        for resource, dest in launcher_icon_files(APP_ICON_SIZES, APP_ICON_NAME):
            _write(root / dest, read_resource(resource), files, dirs)
        caches: list[str] = []
        refreshed = _refresh(root, caches)
        _save_record(files + caches, dirs)
    except OSError as exc:
        _remove(files, dirs)
        raise DesktopError(f"could not write Stoker's launcher files under {root} "
                           f"({exc.strerror or exc}); nothing was left behind.") from None
    return DesktopResult(tuple(files + caches), refreshed,
                         f"Stoker is in the desktop's launcher ({root / 'applications' / DESKTOP_FILE_NAME}).")


def _save_record(files: list[str], dirs: list[str]) -> None:
    path = record_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps({"schema": RECORD_SCHEMA, "data_home": str(data_home()),
                               "files": files, "dirs": dirs}, indent=2), encoding="utf-8")
    os.replace(tmp, path)


def _remove(files: list[str], dirs: list[str]) -> list[str]:
    removed = []
    for f in files:
        try:
            Path(f).unlink()
            removed.append(f)
        except FileNotFoundError:
            pass
    for d in sorted(dirs, key=len, reverse=True):  # deepest first; only when now empty
        with contextlib.suppress(OSError):
            Path(d).rmdir()
    return removed


def uninstall_launcher() -> DesktopResult:
    """Remove exactly the files and folders the last install recorded."""
    record = read_record()
    if record is None:
        return DesktopResult((), (), "Stoker's launcher entry was not installed by Stoker; nothing to remove.")
    try:
        removed = _remove([str(f) for f in record.get("files", [])], [str(d) for d in record.get("dirs", [])])
    except OSError as exc:
        raise DesktopError(f"could not remove Stoker's launcher files ({exc.strerror or exc}); "
                           "remove them by hand or run `stoker desktop uninstall` again.") from None
    refreshed = _refresh(Path(record.get("data_home") or data_home()), None,
                         skip=frozenset(str(f) for f in record.get("files", [])))
    record_file().unlink(missing_ok=True)
    return DesktopResult(tuple(removed), refreshed, "Stoker is no longer in the desktop's launcher.")
