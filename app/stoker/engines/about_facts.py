"""Gathers what the About box and `stoker --version` show: the installed distribution's
version (importlib.metadata), the engine builds `stoker setup` installed (their manifests)
and Stoker's folders. Reads files only: it never runs an engine, so `--version` stays fast.
The wording is stoker.engines.about's.
"""

from __future__ import annotations

import platform
import sys
from importlib import metadata

from stoker.base.paths import stoker_paths
from stoker.engines.about import AboutInfo, InstalledEngine
from stoker.engines.find import read_manifest

DISTRIBUTION = "stoker"


def installed_version() -> str | None:
    """The version pip (or the bundle's copied metadata) recorded; None from a bare source tree."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None


def is_frozen() -> bool:
    return bool(getattr(sys, "frozen", False))


def installed_engines() -> tuple[InstalledEngine, ...]:
    root = stoker_paths().engines / "llama-server"
    found = []
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        if folder.name.startswith(".") or not folder.is_dir():
            continue
        manifest = read_manifest(folder)
        if manifest is None:
            continue
        version = manifest.get("version")
        found.append(InstalledEngine(folder.name, version if isinstance(version, str) else None,
                                     str(folder)))
    return tuple(found)


def about_info(qt_version: str | None = None) -> AboutInfo:
    paths = stoker_paths()
    return AboutInfo(
        version=installed_version(), frozen=is_frozen(), python=platform.python_version(),
        qt=qt_version, engines=installed_engines(),
        folders=(("config", str(paths.config)), ("data", str(paths.data)),
                 ("cache", str(paths.cache)), ("logs", str(paths.logs))))
