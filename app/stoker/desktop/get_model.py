"""The "Get a model…" dialog: paste a Hugging Face repository, see each quantisation's size
and the planner's verdict for this machine, pick one, watch it download, then run it.

The listing, the verdicts (each planned from the file's remote header) and the download
are `Services.hub_lookup` / `Services.hub_download` (stoker/planning/pull.py), run off the GUI
thread; the download's progress comes back through a queued signal, and every progress
line is also handed to `on_progress` (the tray shows it). Running the model is a
StartModel command to the supervisor. Nothing here reads files or talks to the network.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Qt, Signal, Slot
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from stoker.desktop.workers import run_in_background
from stoker.fleet.commands import Command, StartModel
from stoker.planning.quant_choice import Fit, QuantPick

if TYPE_CHECKING:  # the type only: importing the pull module would bring the hub client into the UI
    from stoker.planning.pull import JudgedRepo

_FIT_COLOURS = {Fit.RUNS: "#1e7d32", Fit.RUNS_SHORT: "#1e7d32", Fit.RUNS_SLOWLY: "#b26a00",
                Fit.DOES_NOT_FIT: "#c5221f", Fit.UNKNOWN: "#5f6368"}


def _size(n: int | None) -> str:
    if n is None:
        return "?"
    return f"{n / (1 << 30):.2f} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.0f} MiB"


# Open dialogs, kept alive until they are closed with nothing left running: a download
# outlives the settings window that opened it, and its result must find a live widget.
_kept: set[GetModelDialog] = set()


class _ProgressRelay(QObject):
    """Carries progress from the download thread to the GUI thread (a queued signal)."""

    progressed = Signal(str, object, object)


class GetModelDialog(QDialog):
    def __init__(self, services, submit: Callable[[Command], None],
                 on_progress: Callable[[str], None] | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("get-model-dialog")
        self.setWindowTitle("Get a model")
        self.setMinimumWidth(760)
        self._services = services
        self._submit = submit
        self._on_progress = on_progress
        self._judged: JudgedRepo | None = None
        self._pick: QuantPick | str | None = None
        self.downloaded: str | None = None
        self.pending = 0  # background calls still out (tests wait for 0)

        self.repo = QLineEdit()
        self.repo.setObjectName("repo-input")
        self.repo.setPlaceholderText("hf.co/ORG/REPO, ORG/REPO or a huggingface.co address")
        self.repo.returnPressed.connect(self.look_up)
        self.look = QPushButton("Look up")
        self.look.setObjectName("look-up")
        self.look.clicked.connect(self.look_up)
        row = QHBoxLayout()
        row.addWidget(self.repo, 1)
        row.addWidget(self.look)

        self.table = QTableWidget(0, 3)
        self.table.setObjectName("quant-table")
        self.table.setHorizontalHeaderLabels(["Quantisation", "Size", "On this machine"])
        self.table.verticalHeader().setVisible(False)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        self.table.itemSelectionChanged.connect(self._selection_changed)

        self.note = QLabel("Paste a repository to see which of its files run well here.")
        self.note.setObjectName("get-model-note")
        self.note.setWordWrap(True)
        self.progress = QProgressBar()
        self.progress.setObjectName("download-progress")
        self.progress.setVisible(False)
        self.error = QLabel("")
        self.error.setObjectName("get-model-error")
        self.error.setWordWrap(True)
        self.error.setStyleSheet("color: #c5221f")

        self.download = QPushButton("Download")
        self.download.setObjectName("download")
        self.download.setEnabled(False)
        self.download.clicked.connect(self.start_download)
        self.run = QPushButton("Run it")
        self.run.setObjectName("run-downloaded")
        self.run.setEnabled(False)
        self.run.clicked.connect(self.run_downloaded)
        close = QPushButton("Close")
        close.clicked.connect(self.reject)
        buttons = QHBoxLayout()
        buttons.addStretch()
        for b in (self.download, self.run, close):
            buttons.addWidget(b)

        layout = QVBoxLayout(self)
        layout.addLayout(row)
        layout.addWidget(self.table, 1)
        for w in (self.note, self.progress, self.error):
            layout.addWidget(w)
        layout.addLayout(buttons)

        self._relay = _ProgressRelay()
        self._relay.progressed.connect(self._progressed, Qt.ConnectionType.QueuedConnection)
        self.finished.connect(self._release)
        _kept.add(self)

    def _release(self, *_) -> None:
        if self.pending == 0 and not self.isVisible():
            _kept.discard(self)

    # -- looking a repository up ------------------------------------------------------------
    @Slot()
    def look_up(self) -> None:
        text = self.repo.text().strip()
        if not text:
            self.error.setText("Paste a repository first, e.g. hf.co/unsloth/gemma-3-270m-it-GGUF.")
            return
        self.error.setText("")
        self.table.setRowCount(0)
        self.download.setEnabled(False)
        self.look.setEnabled(False)
        self.note.setText(f"Reading {text} and planning each file for this machine…")
        self.pending += 1
        run_in_background(lambda: self._services.hub_lookup(text), self._looked_up)

    def _looked_up(self, result, error) -> None:
        self.pending -= 1
        self._release()
        self.look.setEnabled(True)
        if error is not None:
            self.note.setText("")
            self.error.setText(str(error) or type(error).__name__)
            return
        judged, pick = result
        self._judged, self._pick = judged, pick
        rows = judged.judged
        self.table.setRowCount(len(rows))
        for i, (option, verdict) in enumerate(rows):
            parts = f" ({len(option.files)} parts)" if len(option.files) > 1 else ""
            self.table.setItem(i, 0, QTableWidgetItem(option.label + parts))
            self.table.setItem(i, 1, QTableWidgetItem(_size(option.size_bytes)))
            item = QTableWidgetItem(verdict.text + ("" if verdict.source == "header" else " (estimate)"))
            item.setForeground(self._colour(verdict.fit))
            item.setToolTip(verdict.text)
            self.table.setItem(i, 2, item)
        listing = judged.listing
        if isinstance(pick, str):
            self.note.setText(f"{listing.repo}: {pick}")
            return
        pick_row = next(i for i, (o, _) in enumerate(rows) if o is pick.option)
        self.table.selectRow(pick_row)
        extra = f" With its vision projector {pick.option.mmproj.name}." if pick.option.mmproj else ""
        self.note.setText(f"{listing.repo}: suggested {pick.reason}.{extra}")

    @staticmethod
    def _colour(fit: Fit):
        from PySide6.QtGui import QColor

        return QColor(_FIT_COLOURS[fit])

    def _selected_option(self):
        if self._judged is None:
            return None
        rows = self.table.selectionModel().selectedRows()
        return self._judged.judged[rows[0].row()][0] if rows else None

    def _selection_changed(self) -> None:
        self.download.setEnabled(self._selected_option() is not None and not self.progress.isVisible())

    # -- downloading --------------------------------------------------------------------------
    @Slot()
    def start_download(self) -> None:
        option = self._selected_option()
        if option is None:
            return
        self.download.setEnabled(False)
        self.look.setEnabled(False)
        self.error.setText("")
        self.progress.setVisible(True)
        self.progress.setRange(0, 1000)
        self.progress.setValue(0)
        relay = self._relay
        self.pending += 1
        run_in_background(lambda: self._services.hub_download(
            self._judged, option, lambda name, done, total: relay.progressed.emit(name, done, total)),
            self._downloaded)

    @Slot(str, object, object)
    def _progressed(self, name: str, done, total) -> None:
        if total:
            self.progress.setValue(int(done * 1000 / total))
        line = f"Downloading {name}: {_size(done)} of {_size(total)}"
        self.progress.setFormat(f"{name}: {_size(done)} of {_size(total)}")
        if self._on_progress:
            self._on_progress(line)

    def _downloaded(self, result, error) -> None:
        self.pending -= 1
        self._release()
        self.look.setEnabled(True)
        if error is not None:
            self.progress.setVisible(False)
            self.error.setText(str(error) or type(error).__name__)
            self._selection_changed()
            return
        self.downloaded = str(result)
        self.progress.setValue(1000)
        self.note.setText(f"Downloaded to {result}. It is in the Hugging Face cache, where other tools find it too.")
        if self._on_progress:
            self._on_progress(f"Downloaded {result}")
        self.run.setEnabled(True)

    @Slot()
    def run_downloaded(self) -> None:
        if self.downloaded:
            self._submit(StartModel(self.downloaded))
            self.accept()
