"""The tray's About entry and the Settings checkboxes for the launcher entry and start at login."""

from __future__ import annotations

from stoker.desktop.app import StokerApp
from stoker.integration.login_items import Outcome
from tests.ui.fakes import FakeServices


def test_about_entry_shows_version_engine_and_folders(qtbot, fake_supervisor, tmp_path, stoker_home):
    stoker = StokerApp(fake_supervisor, FakeServices(tmp_path))
    stoker.tray.rebuild_menu()
    stoker.tray.find_action("action-about").trigger()
    dialog = stoker.about_dialog
    qtbot.waitUntil(lambda: dialog.pending == 0, timeout=5000)
    text = dialog.text.text()
    assert "Stoker 0.0-test" in text and "Qt 6." in text and "Engine: none installed" in text
    assert not dialog.windowIcon().isNull()
    dialog.close()


def test_about_lines_from_the_real_services_name_the_folders(qtbot, stoker_home):
    from stoker.desktop.about_box import AboutDialog
    from stoker.desktop.services import Services

    dialog = AboutDialog(Services())
    qtbot.waitUntil(lambda: dialog.pending == 0, timeout=5000)
    text = dialog.text.text()
    assert f"Config: {stoker_home / 'config'}" in text and f"Logs: {stoker_home / 'logs'}" in text
    assert text.startswith("Stoker ")


def test_settings_installs_the_launcher_entry_and_reports_a_failed_login_item(qtbot, fake_supervisor,
                                                                              tmp_path):
    services = FakeServices(tmp_path)
    stoker = StokerApp(fake_supervisor, services)
    dialog = stoker.open_settings()
    qtbot.waitUntil(lambda: dialog.pending == 0, timeout=5000)
    assert dialog.launcher.isEnabled() and not dialog.launcher.isChecked()
    dialog.launcher.setChecked(True)
    dialog.login.setChecked(True)
    services.autostart_outcome = Outcome(False, "Could not set up starting at login (Permission denied); "
                                                "nothing was changed.")
    dialog.save()
    qtbot.waitUntil(lambda: dialog.saved, timeout=5000)
    assert services.launcher is True and services.autostart_calls == [True]
    # The failure is said in the dialog, which stays open so the user sees it.
    assert "Could not set up starting at login" in dialog.error.text() and dialog.isVisible()
    services.autostart_outcome = Outcome(True, "Stoker will start at login.")
    dialog.save()
    qtbot.waitUntil(lambda: not dialog.isVisible(), timeout=5000)
    assert services.autostart_calls == [True, True]
