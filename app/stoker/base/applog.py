"""Stoker's own log: a rotating `stoker.log` in the log folder at the level from Settings.

Engine output has its own files (stoker/engines/process.py); this is for what Stoker decided and
why (a build passed over, a hook that failed). Warnings and errors also reach stderr, so a
terminal user sees them; nothing here configures anything but the `app` logger tree.
"""

from __future__ import annotations

import logging
import logging.handlers
import sys

from stoker.base.paths import private_folder, stoker_paths
from stoker.base.store import SettingsStore

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
          "error": logging.ERROR}
_MARK = "_stoker_handler"


def configure_logging(level_name: str | None = None) -> logging.Logger:
    """Attach the file and stderr handlers once; later calls only change the level."""

    paths = stoker_paths()
    if level_name is None:
        try:
            level_name = SettingsStore(paths.config).load().log_level
        except (OSError, ValueError):
            level_name = "info"
    logger = logging.getLogger("stoker")
    logger.setLevel(LEVELS.get(level_name, logging.INFO))
    if not any(getattr(h, _MARK, False) for h in logger.handlers):
        try:
            private_folder(paths.logs)
            file_handler = logging.handlers.RotatingFileHandler(
                paths.logs / "stoker.log", maxBytes=2 * 1024 * 1024, backupCount=2, encoding="utf-8")
            file_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
            setattr(file_handler, _MARK, True)
            logger.addHandler(file_handler)
        except OSError:
            pass  # an unwritable log folder must not stop the app; stderr still gets warnings
        console = logging.StreamHandler(sys.stderr)
        console.setLevel(logging.WARNING)
        console.setFormatter(logging.Formatter("stoker: %(message)s"))
        setattr(console, _MARK, True)
        logger.addHandler(console)
    return logger
