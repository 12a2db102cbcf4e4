"""The settings dialog's sections, one group box each: the engine build and its quarantine,
the endpoint, the RPC worker, models and memory, the application.

It exists so the dialog (stoker.desktop.settings) keeps only what spans sections: loading
the settings into the fields, checking the typed ones, saving. Each section builds its
fields (their objectNames are what the UI tests find) and holds what only it shows: the
builds on offer, the endpoint's and the worker's sentences, the folder list, the keyring's
answer. A section never loads or saves settings, never calls the services and never works
off the GUI thread; the one command it sends is the engine section's LiftQuarantine.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence

from PySide6.QtCore import Qt, Slot
from PySide6.QtGui import QStandardItemModel
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
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
)

from stoker.base.rpc_address import DEFAULT_PORT as DEFAULT_RPC_PORT
from stoker.base.store import DEFAULT_GATEWAY_PORT
from stoker.desktop.services import LOG_LEVELS
from stoker.engines.builds import EngineBuild
from stoker.engines.kind import keyless_engines_note
from stoker.engines.rpc import NO_AUTH_WARNING, is_loopback
from stoker.fleet.commands import Command, LiftQuarantine

AUTO_ENGINE = "Automatic: the best build that runs here"


def note(text: str, lines: int) -> QLabel:
    """A wrapped explanation under a field; a wrapped label in a form row gets one line's
    height unless told how many it needs."""
    label = QLabel(text)
    label.setWordWrap(True)
    label.setMinimumHeight(label.fontMetrics().lineSpacing() * lines + 4)
    return label


def _port_box(object_name: str, value: int) -> QSpinBox:
    """A TCP port field: 1 to 65535, written without a thousands separator."""
    port = QSpinBox()
    port.setObjectName(object_name)
    port.setRange(1, 65535)
    port.setGroupSeparatorShown(False)
    port.setValue(value)
    return port


class EngineSection(QGroupBox):
    """Which engine build runs models, and the builds put aside (quarantined) with a way to
    lift that, which is a command to the supervisor (it owns the ledger)."""

    def __init__(self, submit: Callable[[Command], None]) -> None:
        super().__init__("Engine")
        self._submit = submit
        form = QFormLayout(self)
        self.engine = QComboBox()
        self.engine.setObjectName("engine-choice")
        self.engine.addItem(AUTO_ENGINE, None)
        form.addRow("Build", self.engine)
        self.engine_note = QLabel("Looking for engine builds…")
        self.engine_note.setWordWrap(True)
        form.addRow("", self.engine_note)
        self.quarantine = QListWidget()
        self.quarantine.setObjectName("quarantine-list")
        self.quarantine.setMaximumHeight(80)
        self.lift = QPushButton("Lift quarantine")
        self.lift.setObjectName("lift-quarantine")
        self.lift.clicked.connect(self._lift_selected)
        row = QHBoxLayout()
        row.addWidget(self.quarantine, 1)
        row.addWidget(self.lift, 0, Qt.AlignmentFlag.AlignTop)
        form.addRow("Put aside", row)

    def list_builds(self, builds: Sequence[EngineBuild]) -> None:
        """Offer the discovered builds after Automatic; one that is not ok says why in its tooltip."""
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

    def select(self, path: str | None) -> None:
        """Choose the configured build (None: Automatic)."""
        index = self.engine.findData(path) if path else 0
        if index < 0 and path:  # configured but not discovered (moved?): keep it visible
            self.engine.addItem(f"{path} (not found)", path)
            index = self.engine.count() - 1
        self.engine.setCurrentIndex(max(0, index))

    def show_quarantine(self, quarantined: Iterable[tuple[str, str]]) -> None:
        """The builds put aside, each with why; Lift is offered only when there is one."""
        self.quarantine.clear()
        for build, why in quarantined:
            item = QListWidgetItem(f"{build}: {why}")
            item.setData(Qt.ItemDataRole.UserRole, build)
            self.quarantine.addItem(item)
        self.lift.setEnabled(self.quarantine.count() > 0)

    def _lift_selected(self) -> None:
        items = self.quarantine.selectedItems() or [self.quarantine.item(0)]
        for item in items:
            if item is not None:
                self._submit(LiftQuarantine(item.data(Qt.ItemDataRole.UserRole)))


class EndpointSection(QGroupBox):
    """The endpoint chat clients use: the port (and the URL it makes, against the one the
    running gateway listens on), other web pages allowed, Ollama's port."""

    def __init__(self) -> None:
        super().__init__("Endpoint")
        self._listening: str | None = None  # the running gateway's client URL
        form = QFormLayout(self)
        self.port = _port_box("gateway-port", DEFAULT_GATEWAY_PORT)
        self.port.valueChanged.connect(self.describe)
        form.addRow("Port", self.port)
        self.endpoint_note = note("", 3)
        self.endpoint_note.setObjectName("gateway-note")
        form.addRow("", self.endpoint_note)
        self.cors = QPlainTextEdit()
        self.cors.setObjectName("cors-origins")
        self.cors.setPlaceholderText("https://chat.example  (one per line; loopback pages are "
                                     "always allowed)")
        self.cors.setMaximumHeight(self.cors.fontMetrics().lineSpacing() * 4 + 12)
        self.cors.setTabChangesFocus(True)
        form.addRow("Other web pages allowed", self.cors)
        form.addRow("", note("Web pages on this machine (loopback) may always call "
                             "the endpoint; others only when listed here, one origin "
                             "a line. Read when Stoker starts.", 3))
        self.ollama_port = QCheckBox("Also answer on Ollama's port (127.0.0.1:11434)")
        self.ollama_port.setObjectName("ollama-port")
        form.addRow("", self.ollama_port)
        form.addRow("", note("For apps that only look for Ollama there. Read when Stoker "
                             "starts; not taken while Ollama itself or another program "
                             "holds the port (the tray then says so).", 3))

    def set_listening(self, url: str | None) -> None:
        """The running gateway's client URL (None: not running), and the sentence again."""
        self._listening = url
        self.describe()

    @Slot()
    def describe(self, *_args) -> None:
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


class WorkerSection(QGroupBox):
    """This machine as an RPC worker for other machines' Stoker, and what sharing it means."""

    def __init__(self) -> None:
        super().__init__("RPC worker")
        form = QFormLayout(self)
        self.worker_enabled = QCheckBox("Share this machine as an RPC worker")
        self.worker_enabled.setObjectName("worker-enabled")
        form.addRow("", self.worker_enabled)
        self.worker_host = QLineEdit("127.0.0.1")
        self.worker_host.setObjectName("worker-host")
        form.addRow("Address", self.worker_host)
        self.worker_port = _port_box("worker-port", DEFAULT_RPC_PORT)
        form.addRow("Port", self.worker_port)
        self.worker_cache = QCheckBox("Keep received tensors in a local file cache")
        self.worker_cache.setObjectName("worker-cache")
        form.addRow("", self.worker_cache)
        self.worker_allow_remote = QCheckBox("Let other machines reach it (no authentication, "
                                             "no encryption)")
        self.worker_allow_remote.setObjectName("worker-allow-remote")
        form.addRow("", self.worker_allow_remote)
        self.worker_note = note("", 4)
        self.worker_note.setObjectName("worker-note")
        form.addRow("", self.worker_note)

    def describe(self) -> None:
        """A non-loopback address gets the warning that RPC has no authentication."""
        host = self.worker_host.text().strip()
        if host and not is_loopback(host):
            text = NO_AUTH_WARNING
        else:
            text = ("Other machines' Stoker use it with --rpc (or Settings' rpc_workers) through an "
                    "SSH tunnel to this port; the tray shows its state. Applies when you save.")
        self.worker_note.setText(text)


class ModelsSection(QGroupBox):
    """Where models are found (folders, the Ollama service's store), getting one, and the
    memory they share: the reserve, the budget, the default idle timeout."""

    def __init__(self) -> None:
        super().__init__("Models and memory")
        form = QFormLayout(self)
        self.folders = QListWidget()
        self.folders.setObjectName("model-folders")
        self.folders.setMaximumHeight(80)
        add = QPushButton("Add…")
        add.clicked.connect(self._add_folder)
        remove = QPushButton("Remove")
        # A bound method, not a lambda over self: PySide frees a lambda's closure while it
        # tears the dialog down at exit, which crashes the interpreter.
        remove.clicked.connect(self._remove_folders)
        buttons = QVBoxLayout()
        buttons.addWidget(add)
        buttons.addWidget(remove)
        buttons.addStretch()
        row = QHBoxLayout()
        row.addWidget(self.folders, 1)
        row.addLayout(buttons)
        form.addRow("Model folders", row)
        # Another account owns the service's store, and any local user can make that service
        # pull anything: listed only when the user says so.
        self.ollama_service = QCheckBox("Also list the Linux Ollama service's models "
                                        "(/usr/share/ollama; another account's folder)")
        self.ollama_service.setObjectName("ollama-service-store")
        self.ollama_service.setVisible(sys.platform.startswith("linux"))
        form.addRow("", self.ollama_service)
        self.get_model = QPushButton("Get a model…")
        self.get_model.setObjectName("get-model")
        form.addRow("Hugging Face", self.get_model)
        self._add_memory_rows(form)

    def _add_memory_rows(self, form: QFormLayout) -> None:
        self.reserve = QDoubleSpinBox()
        self.reserve.setObjectName("memory-reserve")
        self.reserve.setRange(0.0, 1024.0)
        self.reserve.setSingleStep(0.5)
        self.reserve.setDecimals(1)
        self.reserve.setSuffix(" GiB")
        form.addRow("Keep free for the system", self.reserve)
        self.model_memory = QLineEdit()
        self.model_memory.setObjectName("model-memory")
        self.model_memory.setPlaceholderText("empty: the machine's")
        self.model_memory.setClearButtonEnabled(True)
        row = QHBoxLayout()
        row.addWidget(self.model_memory, 1)
        row.addWidget(QLabel("GiB"))
        form.addRow("Memory for models", row)
        form.addRow("", note("All loaded models together stay within it; one that does "
                             "not fit waits for idle ones to unload. Applies to the next "
                             "model loaded.", 3))
        self.idle = QSpinBox()
        self.idle.setObjectName("idle-unload")
        self.idle.setRange(0, 7 * 24 * 60)
        self.idle.setSuffix(" min")
        self.idle.setSpecialValueText("Never")
        form.addRow("Stop a model's engine after", self.idle)
        form.addRow("", note("without requests, freeing its memory; the next request "
                             "loads it again. The default: a model's own setting beats "
                             "it, pinned models stay. Applies from a model's next load.", 4))
        self.conversation_disk = QDoubleSpinBox()
        self.conversation_disk.setObjectName("conversation-disk")
        self.conversation_disk.setRange(0.0, 4096.0)
        self.conversation_disk.setSingleStep(1.0)
        self.conversation_disk.setDecimals(1)
        self.conversation_disk.setSuffix(" GiB")
        self.conversation_disk.setSpecialValueText("Keep none")
        form.addRow("Keep conversations on disk", self.conversation_disk)
        form.addRow("", note("A model's conversations are saved when it unloads and read back "
                             "when it loads, so the next turn does not read the whole chat again. "
                             "The oldest go first; the disk always keeps 5 GiB free.", 3))

    def folder_list(self) -> list[str]:
        return [self.folders.item(i).text() for i in range(self.folders.count())]

    @Slot()
    def _remove_folders(self) -> None:
        for item in self.folders.selectedItems():
            self.folders.takeItem(self.folders.row(item))

    def _add_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self.window(), "Add a model folder")
        if folder and not self.folders.findItems(folder, Qt.MatchFlag.MatchExactly):
            self.folders.addItem(folder)


class AppSection(QGroupBox):
    """The application: start at login, the applications-menu entry (Linux), the API key
    (only ever to the keyring, and what the keyring said), the log level."""

    def __init__(self) -> None:
        super().__init__("Application")
        form = QFormLayout(self)
        self.login = QCheckBox("Start Stoker when I log in")
        self.login.setObjectName("start-at-login")
        form.addRow("", self.login)
        self.launcher = QCheckBox("Show Stoker in the applications menu")
        self.launcher.setObjectName("desktop-entry")
        if not sys.platform.startswith(("linux", "freebsd")):
            self.launcher.setEnabled(False)
            self.launcher.setToolTip("A Linux desktop feature: on macOS use Stoker.app, "
                                     "on Windows pin Stoker.exe to Start.")
        form.addRow("", self.launcher)
        self.api_key = QLineEdit()
        self.api_key.setObjectName("api-key")
        self.api_key.setEchoMode(QLineEdit.EchoMode.Password)
        self.api_key.setPlaceholderText("checking the keyring…")
        self.clear_key = QCheckBox("Remove the stored key")
        row = QHBoxLayout()
        row.addWidget(self.api_key, 1)
        row.addWidget(self.clear_key)
        form.addRow("API key", row)
        # The keyring's advice (what to install when there is none) needs three lines.
        self.keyring_note = note("", 3)
        self.keyring_note.setObjectName("keyring-note")
        form.addRow("", self.keyring_note)
        self.engine_key_note = note(keyless_engines_note(), 3)
        self.engine_key_note.setObjectName("engine-key-note")
        form.addRow("", self.engine_key_note)
        self.log_level = QComboBox()
        self.log_level.setObjectName("log-level")
        self.log_level.addItems(list(LOG_LEVELS))
        form.addRow("Log level", self.log_level)

    def show_keyring(self, available: bool, sentence: str, has_key: bool) -> None:
        """The key can be typed only with a keyring, and removed only when one is stored."""
        self.keyring_note.setText(sentence)
        self.api_key.setEnabled(available)
        self.clear_key.setEnabled(available and has_key)
        self.api_key.setPlaceholderText("a key is stored; type to replace it" if has_key
                                        else "no key: any local client may call")
