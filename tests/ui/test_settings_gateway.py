"""The settings that reach the gateway and residency, as a user types them: the endpoint's
port, other allowed web pages (CORS), the memory budget for models, the default idle
timeout, and per model its aliases and own idle timeout. Each is checked as typed and
saved through the real stores; tests/shell/test_settings_reach.py shows each one changing
what the gateway, the preparer and the catalog do."""

from __future__ import annotations

from PySide6.QtWidgets import QDialogButtonBox

from stoker.base.overrides import ModelOverrides
from stoker.base.paths import stoker_paths
from stoker.base.store import OverridesStore, SettingsStore
from stoker.desktop.app import StokerApp
from stoker.desktop.services import Services
from stoker.fleet.commands import ApplyOverrides
from stoker.fleet.snapshot import AppSnapshot, EngineState, EngineView
from tests.ui.fakes import FakeServices, entries


class StoreServices(FakeServices):
    """The fake, but settings and overrides go through the real stores in STOKER_HOME."""

    def load_settings(self):
        return Services().load_settings()

    def save_settings(self, values):
        self.saved.append(dict(values))
        Services().save_settings(values)

    def load_overrides(self, model_path):
        return Services().load_overrides(model_path)

    def save_overrides(self, model_path, overrides):
        Services().save_overrides(model_path, overrides)


def test_endpoint_memory_and_idle_settings_are_checked_as_typed_and_saved(
        qtbot, fake_supervisor, tmp_path, stoker_home, screenshots):
    fake_supervisor.publish(AppSnapshot(seq=1, state=EngineState.STOPPED,
                                        gateway_url="http://127.0.0.1:7857"))
    stoker = StokerApp(fake_supervisor, StoreServices(tmp_path))
    dialog = stoker.open_settings()
    qtbot.waitUntil(lambda: dialog.pending == 0, timeout=10_000)
    save = dialog.buttons.button(QDialogButtonBox.StandardButton.Save)
    assert dialog.port.value() == 7857 and dialog.model_memory.text() == ""
    assert "http://127.0.0.1:7857/v1 (listening now)" in dialog.endpoint_note.text()

    dialog.port.setValue(8123)
    assert "applies the next time Stoker starts" in dialog.endpoint_note.text()
    assert "http://127.0.0.1:8123/v1" in dialog.endpoint_note.text()
    dialog.model_memory.setText("12,5 GB")
    assert "number of GiB" in dialog.error.text() and not save.isEnabled()
    dialog.model_memory.setText("0")
    assert "Memory for models must be more than 0" in dialog.error.text() and not save.isEnabled()
    dialog.model_memory.setText("12,5")
    assert dialog.error.text() == "" and save.isEnabled()
    dialog.cors.setPlainText("https://chat.example\nchat.example/app")
    assert "'chat.example/app' is not a browser origin" in dialog.error.text()
    assert not save.isEnabled()
    dialog.cors.setPlainText("https://Chat.Example/\n\nhttp://192.168.1.20:3000")
    assert dialog.error.text() == "" and save.isEnabled()
    dialog.idle.setValue(15)
    assert dialog.conversation_disk.value() == 4.0  # the default disk for kept conversations
    dialog.conversation_disk.setValue(2.5)
    assert not dialog.ollama_port.isChecked()  # off by default
    dialog.ollama_port.setChecked(True)
    dialog.adjustSize()
    qtbot.wait(100)
    assert dialog.grab().save(str(screenshots / "settings-endpoint.png"))
    save.click()
    qtbot.waitUntil(lambda: dialog.saved, timeout=10_000)

    stored = SettingsStore(stoker_paths().config).load()
    assert stored.gateway_port == 8123 and stored.model_memory_gib == 12.5
    assert stored.cors_origins == ("https://chat.example", "http://192.168.1.20:3000")
    assert stored.idle_unload_minutes == 15 and stored.ollama_port is True
    assert stored.conversation_disk_gib == 2.5

    # Reopened, the dialog shows what is stored; emptied, the budget is the machine's again.
    dialog = stoker.open_settings()
    qtbot.waitUntil(lambda: dialog.pending == 0, timeout=10_000)
    assert (dialog.port.value(), dialog.model_memory.text(), dialog.idle.value()) == (8123, "12.5", 15)
    assert dialog.ollama_port.isChecked()
    assert dialog.cors.toPlainText().splitlines() == ["https://chat.example", "http://192.168.1.20:3000"]
    dialog.model_memory.setText("")
    dialog.cors.setPlainText("")
    dialog.buttons.button(QDialogButtonBox.StandardButton.Save).click()
    qtbot.waitUntil(lambda: dialog.saved, timeout=10_000)
    stored = SettingsStore(stoker_paths().config).load()
    assert stored.model_memory_gib is None and stored.cors_origins == ()


def test_aliases_and_idle_override_are_validated_and_saved_without_a_restart(
        qtbot, fake_supervisor, tmp_path, stoker_home):
    model = tmp_path / "smol.gguf"
    model.write_bytes(b"GGUF")
    path = str(model.resolve())
    OverridesStore(stoker_paths().config).set(path, ModelOverrides(ctx=1024))
    # The model runs beside another one (not focused): a restart would cut its requests.
    fake_supervisor.publish(AppSnapshot(
        seq=1, state=EngineState.READY, model_path="/m/other.gguf",
        engines=(EngineView("other:q4_1", "/m/other.gguf", EngineState.READY),
                 EngineView("smol", path, EngineState.READY))))
    other = str(tmp_path / "other.Q4_1.gguf")
    stoker = StokerApp(fake_supervisor, StoreServices(tmp_path, entries(path, other)))
    qtbot.waitUntil(lambda: getattr(stoker.bridge.latest(), "seq", 0) == 1, timeout=2000)
    dialog = stoker.open_model_settings(path)
    qtbot.waitUntil(lambda: not dialog.loading and dialog._catalog is not None, timeout=10_000)
    assert dialog.model_is_running()
    asked = []
    dialog.confirm_restart = lambda: asked.append(True) or True

    dialog.inputs["idle_minutes"].setText("ten")
    assert "whole number" in dialog.errors.text() and not dialog.apply_button.isEnabled()
    dialog.inputs["idle_minutes"].setText("99999")
    assert "idle_minutes" in dialog.errors.text() and not dialog.apply_button.isEnabled()
    dialog.inputs["idle_minutes"].setText("2")
    dialog.inputs["aliases"].setText("GPT-4o-mini, chat  chat " + "x" * 201)
    assert "1 to 200 characters" in dialog.errors.text() and not dialog.apply_button.isEnabled()
    dialog.inputs["aliases"].setText("gpt-4o-mini other:Q4_1")  # the other model's id
    assert "already the name of other:q4_1" in dialog.errors.text()
    assert not dialog.apply_button.isEnabled()
    dialog.inputs["aliases"].setText("GPT-4o-mini, chat  chat")
    assert dialog.errors.text() == "" and dialog.apply_button.isEnabled()
    dialog.apply_button.click()
    qtbot.waitUntil(lambda: dialog.applied is not None, timeout=10_000)

    stored = OverridesStore(stoker_paths().config).get(path)
    assert stored.aliases == ("gpt-4o-mini", "chat") and stored.idle_minutes == 2
    assert stored.ctx == 1024  # the other overrides are kept
    # Aliases and the idle timeout alone never restart the engine, so nothing was asked.
    assert asked == [] and fake_supervisor.commands[-1] == ApplyOverrides(path, stored, restart=False)

    dialog = stoker.open_model_settings(path)
    qtbot.waitUntil(lambda: not dialog.loading, timeout=10_000)
    assert dialog.inputs["aliases"].text() == "gpt-4o-mini, chat"
    assert dialog.inputs["idle_minutes"].text() == "2"
    dialog.confirm_restart = lambda: asked.append(True) or True
    dialog.inputs["ctx"].setText("2048")  # this one changes the engine's argv: it asks
    dialog.apply_button.click()
    qtbot.waitUntil(lambda: dialog.applied is not None, timeout=10_000)
    assert asked == [True] and fake_supervisor.commands[-1].restart is True
