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
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from PySide6.QtCore import Qt, Slot
from PySide6.QtGui import QStandardItemModel
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from stoker.base.rpc_address import DEFAULT_PORT as DEFAULT_RPC_PORT
from stoker.base.store import DEFAULT_GATEWAY_PORT, check_setting
from stoker.desktop.bridge import SnapshotBridge
from stoker.desktop.get_model import GetModelDialog
from stoker.desktop.services import LOG_LEVELS
from stoker.desktop.tray_view import client_base_url
from stoker.desktop.workers import run_in_background
from stoker.engines.kind import keyless_engines_note
from stoker.engines.rpc import NO_AUTH_WARNING, is_loopback
from stoker.fleet.commands import Command, LiftQuarantine, ShareWorker, StopWorker
from stoker.fleet.snapshot import AppSnapshot

AUTO_ENGINE = "Automatic: the best build that runs here"


def _note(text: str, lines: int) -> QLabel:
    """A wrapped explanation under a field; a wrapped label in a form row gets one line's
    height unless told how many it needs."""
    label = QLabel(text)
    label.setWordWrap(True)
    label.setMinimumHeight(label.fontMetrics().lineSpacing() * lines + 4)
    return label


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
        self._listening: str | None = None  # the running gateway's client URL
        self.saved = False
        self._saving: dict = {}  # the values being written (the worker applies once they are)

        # Engine build and quarantine
        engine_box = QGroupBox("Engine")
        engine_form = QFormLayout(engine_box)
        self.engine = QComboBox()
        self.engine.setObjectName("engine-choice")
        self.engine.addItem(AUTO_ENGINE, None)
        engine_form.addRow("Build", self.engine)
        self.engine_note = QLabel("Looking for engine builds…")
        self.engine_note.setWordWrap(True)
        engine_form.addRow("", self.engine_note)
        self.quarantine = QListWidget()
        self.quarantine.setObjectName("quarantine-list")
        self.quarantine.setMaximumHeight(80)
        self.lift = QPushButton("Lift quarantine")
        self.lift.setObjectName("lift-quarantine")
        self.lift.clicked.connect(self._lift_selected)
        q_row = QHBoxLayout()
        q_row.addWidget(self.quarantine, 1)
        q_row.addWidget(self.lift, 0, Qt.AlignmentFlag.AlignTop)
        engine_form.addRow("Put aside", q_row)

        # The endpoint chat clients use
        endpoint_box = QGroupBox("Endpoint")
        endpoint_form = QFormLayout(endpoint_box)
        self.port = QSpinBox()
        self.port.setObjectName("gateway-port")
        self.port.setRange(1, 65535)
        self.port.setGroupSeparatorShown(False)
        self.port.setValue(DEFAULT_GATEWAY_PORT)
        self.port.valueChanged.connect(self._describe_endpoint)
        endpoint_form.addRow("Port", self.port)
        self.endpoint_note = _note("", 3)
        self.endpoint_note.setObjectName("gateway-note")
        endpoint_form.addRow("", self.endpoint_note)
        self.cors = QPlainTextEdit()
        self.cors.setObjectName("cors-origins")
        self.cors.setPlaceholderText("https://chat.example  (one per line; loopback pages are "
                                     "always allowed)")
        self.cors.setMaximumHeight(self.cors.fontMetrics().lineSpacing() * 4 + 12)
        self.cors.setTabChangesFocus(True)
        self.cors.textChanged.connect(self._check_typed)
        endpoint_form.addRow("Other web pages allowed", self.cors)
        endpoint_form.addRow("", _note("Web pages on this machine (loopback) may always call "
                                       "the endpoint; others only when listed here, one origin "
                                       "a line. Read when Stoker starts.", 3))
        self.ollama_port = QCheckBox("Also answer on Ollama's port (127.0.0.1:11434)")
        self.ollama_port.setObjectName("ollama-port")
        endpoint_form.addRow("", self.ollama_port)
        endpoint_form.addRow("", _note("For apps that only look for Ollama there. Read when Stoker "
                                       "starts; not taken while Ollama itself or another program "
                                       "holds the port (the tray then says so).", 3))

        # This machine as an RPC worker for other machines' Stoker
        worker_box = QGroupBox("RPC worker")
        worker_form = QFormLayout(worker_box)
        self.worker_enabled = QCheckBox("Share this machine as an RPC worker")
        self.worker_enabled.setObjectName("worker-enabled")
        self.worker_enabled.toggled.connect(self._check_typed)
        worker_form.addRow("", self.worker_enabled)
        self.worker_host = QLineEdit("127.0.0.1")
        self.worker_host.setObjectName("worker-host")
        self.worker_host.textChanged.connect(self._check_typed)
        worker_form.addRow("Address", self.worker_host)
        self.worker_port = QSpinBox()
        self.worker_port.setObjectName("worker-port")
        self.worker_port.setRange(1, 65535)
        self.worker_port.setGroupSeparatorShown(False)
        self.worker_port.setValue(DEFAULT_RPC_PORT)
        worker_form.addRow("Port", self.worker_port)
        self.worker_cache = QCheckBox("Keep received tensors in a local file cache")
        self.worker_cache.setObjectName("worker-cache")
        worker_form.addRow("", self.worker_cache)
        self.worker_allow_remote = QCheckBox("Let other machines reach it (no authentication, "
                                             "no encryption)")
        self.worker_allow_remote.setObjectName("worker-allow-remote")
        self.worker_allow_remote.toggled.connect(self._check_typed)
        worker_form.addRow("", self.worker_allow_remote)
        self.worker_note = _note("", 4)
        self.worker_note.setObjectName("worker-note")
        worker_form.addRow("", self.worker_note)

        # Models and memory
        models_box = QGroupBox("Models and memory")
        models_form = QFormLayout(models_box)
        self.folders = QListWidget()
        self.folders.setObjectName("model-folders")
        self.folders.setMaximumHeight(80)
        add = QPushButton("Add…")
        add.clicked.connect(self._add_folder)
        remove = QPushButton("Remove")
        # A bound method, not a lambda over self: PySide frees a lambda's closure while it
        # tears the dialog down at exit, which crashes the interpreter.
        remove.clicked.connect(self._remove_folders)
        f_buttons = QVBoxLayout()
        f_buttons.addWidget(add)
        f_buttons.addWidget(remove)
        f_buttons.addStretch()
        f_row = QHBoxLayout()
        f_row.addWidget(self.folders, 1)
        f_row.addLayout(f_buttons)
        models_form.addRow("Model folders", f_row)
        # Another account owns the service's store, and any local user can make that service
        # pull anything: listed only when the user says so.
        self.ollama_service = QCheckBox("Also list the Linux Ollama service's models "
                                        "(/usr/share/ollama; another account's folder)")
        self.ollama_service.setObjectName("ollama-service-store")
        self.ollama_service.setVisible(sys.platform.startswith("linux"))
        models_form.addRow("", self.ollama_service)
        self.get_model = QPushButton("Get a model…")
        self.get_model.setObjectName("get-model")
        self.get_model.clicked.connect(self.open_get_model)
        models_form.addRow("Hugging Face", self.get_model)
        self.reserve = QDoubleSpinBox()
        self.reserve.setObjectName("memory-reserve")
        self.reserve.setRange(0.0, 1024.0)
        self.reserve.setSingleStep(0.5)
        self.reserve.setDecimals(1)
        self.reserve.setSuffix(" GiB")
        models_form.addRow("Keep free for the system", self.reserve)
        self.model_memory = QLineEdit()
        self.model_memory.setObjectName("model-memory")
        self.model_memory.setPlaceholderText("empty: the machine's")
        self.model_memory.setClearButtonEnabled(True)
        self.model_memory.textChanged.connect(self._check_typed)
        m_row = QHBoxLayout()
        m_row.addWidget(self.model_memory, 1)
        m_row.addWidget(QLabel("GiB"))
        models_form.addRow("Memory for models", m_row)
        models_form.addRow("", _note("All loaded models together stay within it; one that does "
                                     "not fit waits for idle ones to unload. Applies to the next "
                                     "model loaded.", 3))
        self.idle = QSpinBox()
        self.idle.setObjectName("idle-unload")
        self.idle.setRange(0, 7 * 24 * 60)
        self.idle.setSuffix(" min")
        self.idle.setSpecialValueText("Never")
        models_form.addRow("Stop a model's engine after", self.idle)
        models_form.addRow("", _note("without requests, freeing its memory; the next request "
                                     "loads it again. The default: a model's own setting beats "
                                     "it, pinned models stay. Applies from a model's next load.", 4))

        # App
        app_box = QGroupBox("Application")
        app_form = QFormLayout(app_box)
        self.login = QCheckBox("Start Stoker when I log in")
        self.login.setObjectName("start-at-login")
        app_form.addRow("", self.login)
        self.launcher = QCheckBox("Show Stoker in the applications menu")
        self.launcher.setObjectName("desktop-entry")
        self._launcher_was: bool | None = None  # None until the file check answers
        if not sys.platform.startswith(("linux", "freebsd")):
            self.launcher.setEnabled(False)
            self.launcher.setToolTip("A Linux desktop feature: on macOS use Stoker.app, "
                                     "on Windows pin Stoker.exe to Start.")
        app_form.addRow("", self.launcher)
        self.api_key = QLineEdit()
        self.api_key.setObjectName("api-key")
        self.api_key.setEchoMode(QLineEdit.EchoMode.Password)
        self.api_key.setPlaceholderText("checking the keyring…")
        self.clear_key = QCheckBox("Remove the stored key")
        k_row = QHBoxLayout()
        k_row.addWidget(self.api_key, 1)
        k_row.addWidget(self.clear_key)
        app_form.addRow("API key", k_row)
        self.keyring_note = QLabel("")
        self.keyring_note.setObjectName("keyring-note")
        self.keyring_note.setWordWrap(True)
        # A wrapped label in a form row gets one line's height; the advice needs three.
        self.keyring_note.setMinimumHeight(self.keyring_note.fontMetrics().lineSpacing() * 3 + 4)
        app_form.addRow("", self.keyring_note)
        self.engine_key_note = QLabel(keyless_engines_note())
        self.engine_key_note.setObjectName("engine-key-note")
        self.engine_key_note.setWordWrap(True)
        self.engine_key_note.setMinimumHeight(self.engine_key_note.fontMetrics().lineSpacing() * 3 + 4)
        app_form.addRow("", self.engine_key_note)
        self.log_level = QComboBox()
        self.log_level.setObjectName("log-level")
        self.log_level.addItems(list(LOG_LEVELS))
        app_form.addRow("Log level", self.log_level)

        self.error = QLabel("")
        self.error.setObjectName("settings-error")
        self.error.setWordWrap(True)
        self.error.setStyleSheet("color: #c5221f")
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save
                                        | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self.save)
        self.buttons.rejected.connect(self.reject)

        left, right = QVBoxLayout(), QVBoxLayout()
        for w in (engine_box, endpoint_box, worker_box):
            left.addWidget(w)
        for w in (models_box, app_box):
            right.addWidget(w)
        left.addStretch()
        right.addStretch()
        columns = QHBoxLayout()
        columns.addLayout(left, 1)
        columns.addLayout(right, 1)
        layout = QVBoxLayout(self)
        layout.addLayout(columns)
        layout.addWidget(self.error)
        layout.addWidget(self.buttons)

        bridge.snapshot_ready.connect(self.on_snapshot)
        self.on_snapshot(bridge.latest())
        self.pending = 4  # background loads still out (tests wait for 0)
        run_in_background(services.load_settings, self._got_settings)
        run_in_background(services.launcher_installed, self._got_launcher)
        run_in_background(services.engines, self._got_engines)
        run_in_background(lambda: (services.keyring_status(), services.has_api_key()),
                          self._got_keyring)

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
            self._select_engine(values.get("engine"))

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
            self._select_engine(self._settings.get("engine"))
            return
        for b in builds:
            status = "" if b.status == "ok" else f" ({b.status})"
            self.engine.addItem(f"{b.id} · {b.backend or 'unknown backend'} · {b.source}{status}",
                                b.binary)
            model = self.engine.model()  # a QComboBox's own model is a QStandardItemModel
            item = model.item(self.engine.count() - 1) if isinstance(model, QStandardItemModel) else None
            if b.status != "ok" and item is not None:
                item.setToolTip(b.status_reason or "")
        self.engine_note.setText(f"{len(builds)} build(s) found." if builds else
                                 "No engine build found; run `stoker setup`.")
        self._select_engine(self._settings.get("engine"))

    def _select_engine(self, path) -> None:
        index = self.engine.findData(path) if path else 0
        if index < 0 and path:  # configured but not discovered (moved?): keep it visible
            self.engine.addItem(f"{path} (not found)", path)
            index = self.engine.count() - 1
        self.engine.setCurrentIndex(max(0, index))

    def _got_keyring(self, result, error) -> None:
        self.pending -= 1
        if error is not None:
            result = ((False, f"The keyring could not be checked: {error}"), False)
        (available, sentence), has_key = result
        self._keyring_ok = available
        self.keyring_note.setText(sentence)
        self.api_key.setEnabled(available)
        self.clear_key.setEnabled(available and has_key)
        self.api_key.setPlaceholderText("a key is stored; type to replace it" if has_key
                                        else "no key: any local client may call")

    @Slot(object)
    def on_snapshot(self, snap: AppSnapshot | None) -> None:
        self._listening = client_base_url(snap.gateway_url) if snap else None
        self._describe_endpoint()
        self.quarantine.clear()
        for build, why in snap.quarantined if snap else ():
            item = QListWidgetItem(f"{build}: {why}")
            item.setData(Qt.ItemDataRole.UserRole, build)
            self.quarantine.addItem(item)
        self.lift.setEnabled(self.quarantine.count() > 0)

    @Slot()
    def _describe_endpoint(self, *_args) -> None:
        url = f"http://127.0.0.1:{self.port.value()}/v1"
        listening = self._listening
        if listening == url:
            text = f"Chat clients use {url} (listening now)."
        elif listening:
            text = (f"Chat clients use {listening} now; {url} applies the next time Stoker "
                    "starts.")
        else:
            text = f"Chat clients use {url}. A new port applies the next time Stoker starts."
        self.endpoint_note.setText(text)

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

    def _describe_worker(self) -> None:
        host = self.worker_host.text().strip()
        if host and not is_loopback(host):
            text = NO_AUTH_WARNING
        else:
            text = ("Other machines' Stoker use it with --rpc (or Settings' rpc_workers) through an "
                    "SSH tunnel to this port; the tray shows its state. Applies when you save.")
        self.worker_note.setText(text)

    @Slot()
    def _check_typed(self) -> None:
        self._describe_worker()
        _values, problems = self.typed_values()
        self.error.setText("\n".join(problems))
        self.buttons.button(QDialogButtonBox.StandardButton.Save).setEnabled(not problems)

    # -- actions ------------------------------------------------------------------------
    @Slot()
    def _remove_folders(self) -> None:
        for item in self.folders.selectedItems():
            self.folders.takeItem(self.folders.row(item))

    def open_get_model(self):

        # Its own window, not a child: a download goes on when Settings is closed.
        dialog = GetModelDialog(self._services, self._submit, on_progress=self._on_progress)
        dialog.show()
        self.get_model_dialog = dialog
        return dialog

    def _add_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Add a model folder")
        if folder and not self.folders.findItems(folder, Qt.MatchFlag.MatchExactly):
            self.folders.addItem(folder)

    def _lift_selected(self) -> None:
        items = self.quarantine.selectedItems() or [self.quarantine.item(0)]
        for item in items:
            if item is not None:
                self._submit(LiftQuarantine(item.data(Qt.ItemDataRole.UserRole)))

    def values(self) -> dict:
        typed, _problems = self.typed_values()
        return {
            "engine": self.engine.currentData(),
            "model_folders": [self.folders.item(i).text() for i in range(self.folders.count())],
            "memory_reserve_gib": self.reserve.value(),
            "idle_unload_minutes": self.idle.value(),
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
