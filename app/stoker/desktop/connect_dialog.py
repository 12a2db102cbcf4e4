"""The tray's "Connect an app…": the apps `stoker connect` knows, and Connect / Undo for each.

It runs the very functions `stoker connect APP` runs (stoker/integration/app_connect.py:
`connect_and_test`, `undo`) on a worker thread, and shows the same lines: which file was
written, the backup, the environment lines, and the test request's one-line result. Must
not decide or write anything itself.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from stoker.desktop.icons import app_icon
from stoker.desktop.workers import run_in_background
from stoker.integration.app_configs import TITLES, App
from stoker.integration.app_connect import ConnectError, connect_and_test, undo


class ConnectDialog(QDialog):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("connect-dialog")
        self.setWindowTitle("Connect an app to Stoker")
        self.setWindowIcon(app_icon())
        self.apps = QListWidget()
        self.apps.setObjectName("connect-apps")
        for app in App:
            item = QListWidgetItem(TITLES[app][0].upper() + TITLES[app][1:])
            item.setData(Qt.ItemDataRole.UserRole, app.value)
            self.apps.addItem(item)
        self.apps.setCurrentRow(0)
        self.outcome = QLabel("Choose an app, then Connect: Stoker writes that app's own settings "
                             "(after a backup) and sends it one test request.")
        self.outcome.setObjectName("connect-result")
        self.outcome.setWordWrap(True)
        self.outcome.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.outcome.setMinimumWidth(520)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.connect_button = QPushButton("Connect")
        self.connect_button.setObjectName("connect-run")
        self.undo_button = QPushButton("Undo")
        self.undo_button.setObjectName("connect-undo")
        buttons.addButton(self.connect_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.addButton(self.undo_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.rejected.connect(self.reject)
        self.connect_button.clicked.connect(self.run_connect)
        self.undo_button.clicked.connect(self.run_undo)
        layout = QVBoxLayout(self)
        layout.addWidget(self.apps)
        layout.addWidget(self.outcome)
        layout.addWidget(buttons)
        self.pending = 0

    def chosen(self) -> App:
        return App(self.apps.currentItem().data(Qt.ItemDataRole.UserRole))

    def _busy(self, text: str) -> None:
        self.pending += 1
        self.connect_button.setEnabled(False)
        self.undo_button.setEnabled(False)
        self.outcome.setText(text)

    def run_connect(self) -> None:
        app = self.chosen()
        self._busy(f"Connecting {TITLES[app]}… (the first request may load the model)")
        run_in_background(lambda: connect_and_test(app), self._connected)

    def run_undo(self) -> None:
        app = self.chosen()
        self._busy(f"Giving {TITLES[app]} its settings back…")
        run_in_background(lambda: undo(app), self._undone)

    def _done(self, text: str) -> None:
        self.pending -= 1
        self.connect_button.setEnabled(True)
        self.undo_button.setEnabled(True)
        self.outcome.setText(text)

    def _connected(self, outcome, error) -> None:
        if error is not None:
            self._done(str(error) if isinstance(error, (ConnectError, OSError)) else f"Connect failed: {error}")
            return
        self._done("\n".join(outcome.lines + tuple(f"⚠ {p}" for p in outcome.problems)))

    def _undone(self, lines, error) -> None:
        if error is not None:
            self._done(str(error))
            return
        self._done("\n".join(lines) or "Nothing to give back.")
