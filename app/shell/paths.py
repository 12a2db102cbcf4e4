"""Where Stoker keeps things: config, data (engines, models, ledgers), cache and logs.

platformdirs decides per OS (app name `stoker`); `STOKER_HOME` puts all four under one
folder, for tests and portable installs. Nothing else in the code builds these paths.
"""

from __future__ import annotations

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

    def ensure(self) -> "Paths":
        for p in (self.config, self.data, self.cache, self.logs):
            p.mkdir(parents=True, exist_ok=True)
        return self


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
