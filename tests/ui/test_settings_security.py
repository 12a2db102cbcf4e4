"""Settings' security choices (issue 21): the Linux Ollama service's store is listed only
when ticked, and the dialog says which engines have no key of their own."""

from __future__ import annotations

import sys

import pytest
from PySide6.QtWidgets import QDialogButtonBox

from stoker.base.paths import stoker_paths
from stoker.base.store import SettingsStore
from stoker.desktop.app import StokerApp
from stoker.library.stores import roots_here
from tests.ui.test_settings_gateway import StoreServices

SERVICE_STORE = "/usr/share/ollama/.ollama/models"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the Ollama service's store is Linux's")
def test_the_ollama_service_store_is_off_until_ticked_and_the_scan_follows(qtbot, fake_supervisor, tmp_path,
                                                                           stoker_home):
    stoker = StokerApp(fake_supervisor, StoreServices(tmp_path))
    dialog = stoker.open_settings()
    qtbot.waitUntil(lambda: dialog.pending == 0, timeout=10_000)
    assert dialog.ollama_service.isVisible() and not dialog.ollama_service.isChecked()
    assert SERVICE_STORE not in {r.path for r in roots_here()}
    dialog.ollama_service.setChecked(True)
    dialog.buttons.button(QDialogButtonBox.StandardButton.Save).click()
    qtbot.waitUntil(lambda: dialog.saved, timeout=10_000)
    assert SettingsStore(stoker_paths().config).load().read_ollama_service_store is True
    assert SERVICE_STORE in {r.path for r in roots_here()}

    dialog = stoker.open_settings()
    qtbot.waitUntil(lambda: dialog.pending == 0, timeout=10_000)
    assert dialog.ollama_service.isChecked()
    dialog.ollama_service.setChecked(False)
    dialog.buttons.button(QDialogButtonBox.StandardButton.Save).click()
    qtbot.waitUntil(lambda: dialog.saved, timeout=10_000)
    assert SERVICE_STORE not in {r.path for r in roots_here()}


def test_beside_the_key_field_the_engines_without_a_key_are_named(qtbot, fake_supervisor, tmp_path, stoker_home):
    stoker = StokerApp(fake_supervisor, StoreServices(tmp_path))
    dialog = stoker.open_settings()
    qtbot.waitUntil(lambda: dialog.pending == 0, timeout=10_000)
    note = dialog.engine_key_note
    assert note.isVisible() and "sd-server" in note.text() and "ds4-server" in note.text()
    assert dialog.findChild(type(note), "engine-key-note") is note
