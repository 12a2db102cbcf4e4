"""The About box: Stoker's version, the engine builds it installed, and its folders.

The lines are worded by stoker.engines.about and gathered off the GUI thread (they read
engine manifests); the box shows "Looking…" until they arrive. Text is selectable so a
user can paste it into a bug report. Must not find versions or folders itself.
"""

from __future__ import annotations

from PySide6 import __version__ as PYSIDE_VERSION
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from stoker.desktop.icons import app_icon
from stoker.desktop.workers import run_in_background


class AboutDialog(QDialog):
    def __init__(self, services, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("about-dialog")
        self.setWindowTitle("About Stoker")
        self.setWindowIcon(app_icon())
        picture = QLabel()
        picture.setPixmap(app_icon().pixmap(64, 64))
        picture.setAlignment(Qt.AlignmentFlag.AlignTop)
        self.text = QLabel("Looking up the version and engine builds…")
        self.text.setObjectName("about-text")
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.text.setWordWrap(True)
        self.text.setMinimumWidth(460)
        row = QHBoxLayout()
        row.addWidget(picture, 0)
        row.addWidget(self.text, 1)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(row)
        layout.addWidget(buttons)
        self.pending = 1
        run_in_background(lambda: services.about(PYSIDE_VERSION), self._got_lines)

    def _got_lines(self, lines, error) -> None:
        self.pending -= 1
        self.text.setText(f"Could not read Stoker's details: {error}" if error is not None
                          else "\n".join(lines))
