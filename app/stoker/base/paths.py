"""Where Stoker keeps things: config, data (engines, models, ledgers), cache and logs.

platformdirs decides per OS (app name `stoker`); `STOKER_HOME` puts all four under one
folder, for tests and portable installs. Nothing else in the code builds these paths.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path

import platformdirs

APP_NAME = "stoker"


@dataclass(frozen=True)
class Paths:
    config: Path
    data: Path
    cache: Path
    logs: Path

    @property
    def engines(self) -> Path:
        return self.data / "engines"

    @property
    def models(self) -> Path:
        return self.data / "models"

    @property
    def run(self) -> Path:
        """Pid files and the control socket of the running instance."""
        return self.data / "run"

    def ensure(self) -> Paths:
        for p in (self.config, self.data, self.cache):
            p.mkdir(parents=True, exist_ok=True)
        private_folder(self.logs)
        return self


def private_folder(path: Path) -> Path:
    """`path` made (with its parents) and kept 0700: logs say which models a user runs and
    what the engines printed, which is no other local user's business. A folder an older
    Stoker made 0755 is tightened."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    if os.name == "posix" and (path.stat().st_mode & 0o077):
        os.chmod(path, 0o700)
    return path


def stoker_paths() -> Paths:
    home = os.environ.get("STOKER_HOME")
    if home:
        root = Path(home).expanduser().resolve()
        return Paths(root / "config", root / "data", root / "cache", root / "logs")
    return Paths(
        Path(platformdirs.user_config_dir(APP_NAME, appauthor=False)),
        Path(platformdirs.user_data_dir(APP_NAME, appauthor=False)),
        Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False)),
        Path(platformdirs.user_log_dir(APP_NAME, appauthor=False)),
    )


_WHY = {errno.EROFS: "the file system is read-only", errno.ENOSPC: "the disk is full",
        errno.EDQUOT: "the disk quota is used up", errno.EACCES: "permission is denied",
        errno.EPERM: "permission is denied"}


def storage_sentence(exc: OSError, doing: str = "write") -> str:
    """One sentence for an OSError on Stoker's folders: what, where, what to do."""
    where = exc.filename or exc.filename2
    paths = stoker_paths()
    folder = None
    if where:
        for name, root in (("config", paths.config), ("data", paths.data), ("cache", paths.cache),
                           ("log", paths.logs)):
            try:
                Path(where).resolve().relative_to(root.resolve())
            except (ValueError, OSError):
                continue
            folder = f"its {name} folder {root}"
            break
    target = folder or (str(where) if where else "one of its folders")
    why = _WHY.get(exc.errno or 0, exc.strerror or str(exc))
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        advice = "free some space there"
    else:
        advice = "make it writable, or point STOKER_HOME at a folder you can write"
    if folder and where:
        target += f" ({Path(where).name})"
    return f"Stoker could not {doing} {target}: {why}; {advice}."
