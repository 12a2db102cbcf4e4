"""The tray's "Connect an app…": the dialog lists every app `stoker connect` knows and runs the
same functions, so it says the same sentences (no Stoker running; a backup given back)."""

from __future__ import annotations

import json

from stoker.desktop.app import StokerApp
from stoker.integration.app_configs import App, ModelFacts, Target
from stoker.integration.app_connect import connect
from tests.ui.fakes import FakeServices


def test_connect_an_app_lists_the_apps_and_says_when_no_stoker_runs(qtbot, fake_supervisor, tmp_path,
                                                                    stoker_home):
    stoker = StokerApp(fake_supervisor, FakeServices(tmp_path))
    stoker.tray.rebuild_menu()
    stoker.tray.find_action("action-connect").trigger()
    dialog = stoker.connect_dialog
    assert dialog.isVisible() and dialog.apps.count() == len(App)
    titles = [dialog.apps.item(i).text() for i in range(dialog.apps.count())]
    assert titles[:3] == ["Claude Code", "Codex", "OpenCode"] and "The llm CLI" in titles
    dialog.run_connect()  # nothing answers on this STOKER_HOME's control channel
    qtbot.waitUntil(lambda: dialog.pending == 0, timeout=10000)
    assert dialog.outcome.text().startswith("no Stoker instance is running")
    dialog.close()


def test_undo_in_the_dialog_gives_the_file_back(qtbot, tmp_path, monkeypatch, stoker_home):
    from stoker.desktop.connect_dialog import ConnectDialog

    home = tmp_path / "home"
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text('{"theme": "dark"}')
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    m = ModelFacts("m", 4096)
    connect(App.CLAUDE_CODE, Target("http://127.0.0.1:7857", None, m, (m,)))
    assert "ANTHROPIC_BASE_URL" in settings.read_text()
    dialog = ConnectDialog()
    dialog.apps.setCurrentRow(list(App).index(App.CLAUDE_CODE))
    dialog.run_undo()
    qtbot.waitUntil(lambda: dialog.pending == 0, timeout=10000)
    assert dialog.outcome.text() == f"restored {settings} from its backup"
    assert json.loads(settings.read_text()) == {"theme": "dark"}
