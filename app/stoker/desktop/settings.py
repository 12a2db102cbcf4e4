"""The settings dialog: engine build, quarantine, the endpoint (port, extra browser
origins), model folders, memory (reserve, the budget models share), the default idle
timeout, start at login, the applications-menu entry (Linux), API key, log level, and
sharing this machine as an RPC worker (address, port, cache; a non-loopback address needs
an explicit consent, since RPC has no authentication). Saving a changed worker setting
starts, moves or stops the worker at once (ShareWorker / StopWorker to the supervisor).

Typed fields (the memory budget, the origins) are checked as typed by the store's own
check (stoker.base.store.check_setting), so Save is only offered for values it will take.

Everything that may be slow (discovering builds, the keyring, writing files) runs off the
GUI thread; the dialog fills itself in as answers arrive. Lifting a quarantine is a
command to the supervisor (it owns the ledger). The API key only ever goes to the keyring;
when there is none the dialog says so and what to install.

Each group box is a section of stoker.desktop.settings_sections (its fields and what only
it shows); the dialog keeps what spans them: loading, checking the typed fields, saving.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Slot
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QVBoxLayout,
    QWidget,
)

from stoker.base.rpc_address import DEFAULT_PORT as DEFAULT_RPC_PORT
from stoker.base.store import DEFAULT_GATEWAY_PORT, check_setting
from stoker.desktop.bridge import SnapshotBridge
from stoker.desktop.get_model import GetModelDialog
from stoker.desktop.settings_sections import (
    AppSection,
    EndpointSection,
    EngineSection,
    ModelsSection,
    WorkerSection,
)
from stoker.desktop.tray_view import client_base_url
from stoker.desktop.workers import run_in_background
from stoker.engines.rpc import is_loopback
from stoker.fleet.commands import Command, ShareWorker, StopWorker
from stoker.fleet.snapshot import AppSnapshot


class SettingsDialog(QDialog):
    def __init__(self, services, bridge: SnapshotBridge, submit: Callable[[Command], None],
                 parent: QWidget | None = None, on_progress: Callable[[str], None] | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("settings-dialog")
        self._on_progress = on_progress  # the tray's activity line, for downloads
        self.setWindowTitle("Stoker settings")
        self.setMinimumWidth(1000)
        self._services = services
        self._submit = submit
        self._settings: dict = {}
        self._keyring_ok = False
        self._engines_listed = False  # choose the current build only once the list is in
        self._launcher_was: bool | None = None  # None until the file check answers
        self.saved = False
        self._saving: dict = {}  # the values being written (the worker applies once they are)

        self.engine_box = EngineSection(submit)
        self.endpoint_box = EndpointSection()
        self.worker_box = WorkerSection()
        self.models_box = ModelsSection()
        self.app_box = AppSection()
        self._name_fields()
        self.get_model.clicked.connect(self.open_get_model)
        for edited in (self.cors.textChanged, self.worker_enabled.toggled, self.worker_host.textChanged,
                       self.worker_allow_remote.toggled, self.model_memory.textChanged):
            edited.connect(self._check_typed)
        self._lay_out()

        bridge.snapshot_ready.connect(self.on_snapshot)
        self.on_snapshot(bridge.latest())
        self.pending = 4  # background loads still out (tests wait for 0)
        run_in_background(services.load_settings, self._got_settings)
        run_in_background(services.launcher_installed, self._got_launcher)
        run_in_background(services.engines, self._got_engines)
        run_in_background(lambda: (services.keyring_status(), services.has_api_key()),
                          self._got_keyring)

    def _name_fields(self) -> None:
        """The sections' fields under the dialog's own names: loading, checking and saving
        span sections, and callers (the UI tests among them) reach the fields this way."""
        e, n, w, m, a = self.engine_box, self.endpoint_box, self.worker_box, self.models_box, self.app_box
        self.engine, self.engine_note, self.quarantine, self.lift = e.engine, e.engine_note, e.quarantine, e.lift
        self.port, self.endpoint_note, self.cors, self.ollama_port = n.port, n.endpoint_note, n.cors, n.ollama_port
        self.worker_enabled, self.worker_host, self.worker_port = w.worker_enabled, w.worker_host, w.worker_port
        self.worker_cache, self.worker_allow_remote = w.worker_cache, w.worker_allow_remote
        self.worker_note = w.worker_note
        self.folders, self.ollama_service, self.get_model = m.folders, m.ollama_service, m.get_model
        self.reserve, self.model_memory, self.idle = m.reserve, m.model_memory, m.idle
        self.conversation_disk = m.conversation_disk
        self.login, self.launcher, self.api_key, self.clear_key = a.login, a.launcher, a.api_key, a.clear_key
        self.keyring_note, self.engine_key_note, self.log_level = a.keyring_note, a.engine_key_note, a.log_level

    def _lay_out(self) -> None:
        """Two columns of sections, then the error line and Save/Cancel."""
        self.error = QLabel("")
        self.error.setObjectName("settings-error")
        self.error.setWordWrap(True)
        self.error.setStyleSheet("color: #c5221f")
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save
                                        | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self.save)
        self.buttons.rejected.connect(self.reject)

        left, right = QVBoxLayout(), QVBoxLayout()
        for w in (self.engine_box, self.endpoint_box, self.worker_box):
            left.addWidget(w)
        for box in (self.models_box, self.app_box):
            right.addWidget(box)
        left.addStretch()
        right.addStretch()
        columns = QHBoxLayout()
        columns.addLayout(left, 1)
        columns.addLayout(right, 1)
        layout = QVBoxLayout(self)
        layout.addLayout(columns)
        layout.addWidget(self.error)
        layout.addWidget(self.buttons)

    # -- loading ----------------------------------------------------------------------
    def _got_settings(self, values, error) -> None:
        self.pending -= 1
        if error is not None:
            self.error.setText(f"Settings could not be read: {error}")
            return
        self._settings = dict(values)
        for folder in values.get("model_folders") or []:
            self.folders.addItem(str(folder))
        self.reserve.setValue(float(values.get("memory_reserve_gib") or 0.0))
        self.port.setValue(int(values.get("gateway_port") or DEFAULT_GATEWAY_PORT))
        budget = values.get("model_memory_gib")
        self.model_memory.setText("" if budget is None else f"{budget:g}")
        self.cors.setPlainText("\n".join(values.get("cors_origins") or ()))
        self.idle.setValue(int(values.get("idle_unload_minutes") or 0))
        disk = values.get("conversation_disk_gib")
        self.conversation_disk.setValue(float(4.0 if disk is None else disk))
        self.login.setChecked(bool(values.get("start_at_login")))
        level = values.get("log_level") or "info"
        self.log_level.setCurrentIndex(max(0, self.log_level.findText(level)))
        self.worker_enabled.setChecked(bool(values.get("worker_enabled")))
        self.ollama_port.setChecked(bool(values.get("ollama_port")))
        self.worker_host.setText(str(values.get("worker_host") or "127.0.0.1"))
        self.worker_port.setValue(int(values.get("worker_port") or DEFAULT_RPC_PORT))
        self.worker_cache.setChecked(bool(values.get("worker_cache")))
        self.worker_allow_remote.setChecked(bool(values.get("worker_allow_remote")))
        self.ollama_service.setChecked(bool(values.get("read_ollama_service_store")))
        self._check_typed()
        if self._engines_listed:
            self.engine_box.select(values.get("engine"))

    def _got_launcher(self, installed, error) -> None:
        self.pending -= 1
        if error is None:
            self._launcher_was = bool(installed)
            self.launcher.setChecked(self._launcher_was)

    def _got_engines(self, builds, error) -> None:
        self.pending -= 1
        self._engines_listed = True
        if error is not None:
            self.engine_note.setText(f"Engine builds could not be listed: {error}")
            self.engine_box.select(self._settings.get("engine"))
            return
        self.engine_box.list_builds(builds)
        self.engine_box.select(self._settings.get("engine"))

    def _got_keyring(self, result, error) -> None:
        self.pending -= 1
        if error is not None:
            result = ((False, f"The keyring could not be checked: {error}"), False)
        (available, sentence), has_key = result
        self._keyring_ok = available
        self.app_box.show_keyring(available, sentence, has_key)

    @Slot(object)
    def on_snapshot(self, snap: AppSnapshot | None) -> None:
        self.endpoint_box.set_listening(client_base_url(snap.gateway_url) if snap else None)
        self.engine_box.show_quarantine(snap.quarantined if snap else ())

    def typed_values(self) -> tuple[dict, tuple[str, ...]]:
        """The typed fields as the store will keep them, and a sentence for each it would refuse."""
        out: dict = {}
        problems: list[str] = []
        text = self.model_memory.text().strip().replace(",", ".")
        budget = None
        if text:
            try:
                budget = float(text.removesuffix("GiB").strip())
            except ValueError:
                problems.append(f"Memory for models must be a number of GiB such as 12 or 7.5 "
                                f"(or empty for the machine's), not '{self.model_memory.text()}'.")
        if not problems:
            value, why = check_setting("model_memory_gib", budget)
            if why:  # the store decides; the sentence names the field as the dialog does
                problems.append("Memory for models must be more than 0 and at most 65,536 GiB, "
                                "or empty for the machine's.")
            out["model_memory_gib"] = value
        origins = [line.strip() for line in self.cors.toPlainText().splitlines() if line.strip()]
        value, why = check_setting("cors_origins", origins)
        if why:
            problems.append(why)
        elif isinstance(value, list | tuple):  # check_setting gives the checked list
            out["cors_origins"] = list(value)
        host, why = check_setting("worker_host", self.worker_host.text())
        if why:
            problems.append("The RPC worker's address must be an address such as 127.0.0.1 or "
                            "192.168.1.20.")
        else:
            out["worker_host"] = host
            if (self.worker_enabled.isChecked() and not is_loopback(str(host))
                    and not self.worker_allow_remote.isChecked()):
                problems.append(f"Sharing the RPC worker on {host} lets other machines reach it: tick "
                                "\u201cLet other machines reach it\u201d to accept that, or use 127.0.0.1.")
        return out, tuple(problems)

    @Slot()
    def _check_typed(self) -> None:
        self.worker_box.describe()
        _values, problems = self.typed_values()
        self.error.setText("\n".join(problems))
        self.buttons.button(QDialogButtonBox.StandardButton.Save).setEnabled(not problems)

    # -- actions ------------------------------------------------------------------------
    def open_get_model(self):

        # Its own window, not a child: a download goes on when Settings is closed.
        dialog = GetModelDialog(self._services, self._submit, on_progress=self._on_progress)
        dialog.show()
        self.get_model_dialog = dialog
        return dialog

    def values(self) -> dict:
        typed, _problems = self.typed_values()
        return {
            "engine": self.engine.currentData(),
            "model_folders": self.models_box.folder_list(),
            "memory_reserve_gib": self.reserve.value(),
            "idle_unload_minutes": self.idle.value(),
            "conversation_disk_gib": self.conversation_disk.value(),
            "gateway_port": self.port.value(),
            **typed,
            "start_at_login": self.login.isChecked(),
            "log_level": self.log_level.currentText(),
            "worker_enabled": self.worker_enabled.isChecked(),
            "ollama_port": self.ollama_port.isChecked(),
            "worker_port": self.worker_port.value(),
            "worker_cache": self.worker_cache.isChecked(),
            "worker_allow_remote": self.worker_allow_remote.isChecked(),
            "read_ollama_service_store": self.ollama_service.isChecked(),
        }

    @Slot()
    def save(self) -> None:
        _typed, problems = self.typed_values()
        if problems:
            self.error.setText("\n".join(problems))
            return
        values = self.values()
        login_changed = values["start_at_login"] != bool(self._settings.get("start_at_login"))
        key = self.api_key.text()
        clear = self.clear_key.isChecked()
        services = self._services
        launcher = self.launcher.isChecked()
        launcher_changed = self._launcher_was is not None and launcher != self._launcher_was

        def work():
            services.save_settings(values)
            notes = []  # Outcome per OS integration touched; a failed one keeps the dialog open
            if login_changed:
                notes.append(services.apply_autostart(values["start_at_login"]))
            if launcher_changed:
                notes.append(services.apply_launcher(launcher))
            if self._keyring_ok and (key or clear):
                services.set_api_key(None if clear else key)
            return notes

        self.buttons.setEnabled(False)
        self._saving = values
        run_in_background(work, self._saved)

    _WORKER_DEFAULTS = {"worker_enabled": False, "worker_host": "127.0.0.1", "worker_port": DEFAULT_RPC_PORT,
                        "worker_cache": False, "worker_allow_remote": False}

    def _apply_worker(self, values: dict) -> None:
        """A changed worker setting applies now: share with the new values, or stop sharing."""
        before = {k: self._settings.get(k, d) for k, d in self._WORKER_DEFAULTS.items()}
        after = {k: values.get(k, before[k]) for k in self._WORKER_DEFAULTS}
        if after == before:
            return
        if after["worker_enabled"]:
            self._submit(ShareWorker(after["worker_host"], after["worker_port"], after["worker_cache"],
                                     allow_remote=after["worker_allow_remote"]))
        elif before["worker_enabled"]:
            self._submit(StopWorker())
        self._settings.update(after)

    def _saved(self, result, error) -> None:
        self.buttons.setEnabled(True)
        if error is not None:
            self.error.setText(f"Not saved: {error}")
            return
        self.saved = True
        self._apply_worker(self._saving)
        failed = [o.sentence for o in result if not o.done]
        if failed:  # the settings are saved; say what the system would not take
            self.error.setText(" ".join(failed))
            return
        self.accept()
