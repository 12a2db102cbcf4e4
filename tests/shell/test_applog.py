"""Stoker's own log goes to <logs>/stoker.log at the level chosen in Settings."""

import logging

from stoker.base.applog import configure_logging
from stoker.base.paths import stoker_paths
from stoker.base.store import SettingsStore


def test_level_from_settings_and_one_set_of_handlers(stoker_home):
    SettingsStore(stoker_paths().config).update(log_level="debug")
    logger = configure_logging()
    try:
        assert logger.level == logging.DEBUG
        logging.getLogger("stoker.shell.example").debug("a decision and its reason")
        for h in logger.handlers:
            h.flush()
        assert "a decision and its reason" in (stoker_paths().logs / "stoker.log").read_text()
        n = len(logger.handlers)
        assert configure_logging("error").level == logging.ERROR and len(logger.handlers) == n
    finally:
        for h in list(logger.handlers):
            if getattr(h, "_stoker_handler", False):
                logger.removeHandler(h)
                h.close()
        logger.setLevel(logging.NOTSET)


def test_the_log_folder_is_made_private_and_an_open_one_is_tightened(stoker_home):
    logs = stoker_paths().logs
    logs.mkdir(parents=True)
    logs.chmod(0o755)  # what an older Stoker left
    stoker_paths().ensure()
    assert logs.stat().st_mode & 0o777 == 0o700
