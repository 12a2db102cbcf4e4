"""The status window: the current plan explained, the incident history, a live log tail.

It renders snapshots (plan decisions, incidents) as they arrive and polls the engine log
on a timer, reading it off the GUI thread. It never changes engine state.
"""

from __future__ import annotations

import time

from PySide6.QtCore import Qt, QTimer, Slot
from PySide6.QtGui import QFont, QFontDatabase
from PySide6.QtWidgets import (
    QAbstractItemView,
    QLabel,
    QPlainTextEdit,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from stoker.desktop.bridge import SnapshotBridge
from stoker.desktop.tray_view import menu_view, plan_line
from stoker.desktop.workers import run_in_background
from stoker.fleet.snapshot import AppSnapshot


def log_file_of(snap: AppSnapshot | None) -> str | None:
    """Where this engine logs: the snapshot's `log_file` extra, else its --log-file flag."""
    if snap is None:
        return None
    extra = dict(snap.extra)
    if extra.get("log_file"):
        return extra["log_file"]
    argv = list(snap.argv)
    if "--log-file" in argv[:-1]:
        return argv[argv.index("--log-file") + 1]
    return None


def _table(headers: list[str]) -> QTableWidget:
    table = QTableWidget(0, len(headers))
    table.setHorizontalHeaderLabels(headers)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.verticalHeader().setVisible(False)
    table.horizontalHeader().setStretchLastSection(True)
    table.setWordWrap(True)
    return table


def _fill(table: QTableWidget, rows: list[tuple[str, ...]]) -> None:
    table.setRowCount(len(rows))
    for r, row in enumerate(rows):
        for c, text in enumerate(row):
            item = QTableWidgetItem(text)
            item.setToolTip(text)
            table.setItem(r, c, item)
    table.resizeColumnsToContents()
    table.resizeRowsToContents()


class StatusWindow(QWidget):
    LOG_POLL_MS = 1000

    def __init__(self, bridge: SnapshotBridge, services, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("status-window")
        self.setWindowTitle("Stoker status")
        self.resize(900, 560)
        self._services = services
        self._log_busy = False
        self.log_path: str | None = None
        mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)

        self.headline = QLabel()
        self.headline.setObjectName("status-headline")
        bold = QFont(self.headline.font())
        bold.setBold(True)
        bold.setPointSizeF(bold.pointSizeF() * 1.15)
        self.headline.setFont(bold)
        self.details = QLabel()
        self.details.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.details.setWordWrap(True)

        self.tabs = QTabWidget()
        plan_tab = QWidget()
        plan_layout = QVBoxLayout(plan_tab)
        self.plan_summary = QLabel()
        self.plan_summary.setWordWrap(True)
        self.decisions = _table(["Decision", "Why"])
        self.decisions.setObjectName("decisions-table")
        self.argv = QPlainTextEdit()
        self.argv.setReadOnly(True)
        self.argv.setFont(mono)
        self.argv.setMaximumHeight(70)
        plan_layout.addWidget(self.plan_summary)
        plan_layout.addWidget(self.decisions, 1)
        plan_layout.addWidget(QLabel("Command line"))
        plan_layout.addWidget(self.argv)
        self.tabs.addTab(plan_tab, "Plan")

        self.incidents = _table(["Time", "Kind", "What happened", "Advice", "What Stoker did"])
        self.incidents.setObjectName("incidents-table")
        self.tabs.addTab(self.incidents, "Incidents")

        self.log_view = QPlainTextEdit()
        self.log_view.setObjectName("log-tail")
        self.log_view.setReadOnly(True)
        self.log_view.setFont(mono)
        self.log_view.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.log_view.setMaximumBlockCount(2000)
        self.tabs.addTab(self.log_view, "Engine log")

        layout = QVBoxLayout(self)
        layout.addWidget(self.headline)
        layout.addWidget(self.details)
        layout.addWidget(self.tabs, 1)

        self._snap: AppSnapshot | None = None
        bridge.snapshot_ready.connect(self.on_snapshot)
        self.on_snapshot(bridge.latest())
        self._timer = QTimer(self)
        self._timer.setInterval(self.LOG_POLL_MS)
        self._timer.timeout.connect(self.refresh_log)

    def showEvent(self, event) -> None:
        self._timer.start()
        self.refresh_log()
        super().showEvent(event)

    def hideEvent(self, event) -> None:
        self._timer.stop()
        super().hideEvent(event)

    @Slot(object)
    def on_snapshot(self, snap: AppSnapshot | None) -> None:
        self._snap = snap
        view = menu_view(snap)
        self.headline.setText(view.headline)
        if snap is None:
            self.details.setText("Waiting for the supervisor…")
            return
        facts = []
        if snap.endpoint:
            facts.append(f"endpoint {snap.endpoint}")
        if snap.pid is not None:
            facts.append(f"engine pid {snap.pid}")
        uptime = snap.uptime(time.time())
        if uptime is not None:
            facts.append(f"up {int(uptime) // 60} min {int(uptime) % 60} s")
        facts.append(f"restarts {snap.restarts}")
        if snap.engine_build:
            facts.append(f"build {snap.engine_build}")
        lines = [" · ".join(facts)]
        lines += [f"⚠ {b.message} {b.advice}" for b in snap.blockers]
        if view.drafter:
            lines.append(view.drafter)
        if snap.last_error:
            lines.append(f"Last error: {snap.last_error}")
        self.details.setText("\n".join(lines))
        self.plan_summary.setText(snap.plan_summary or plan_line(snap) or "No plan yet.")
        _fill(self.decisions, [(w, y) for w, y in snap.plan_decisions])
        self.argv.setPlainText(" ".join(snap.argv))
        rows: list[tuple[str, ...]] = [(time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(i.at)), i.kind, i.summary,
                 i.advice, i.action) for i in sorted(snap.incidents, key=lambda i: i.at,
                                                     reverse=True)]
        _fill(self.incidents, rows)

    @Slot()
    def refresh_log(self) -> None:
        if self._log_busy:
            return  # the previous read is still running: never pile reads up
        self._log_busy = True
        wanted = log_file_of(self._snap)
        run_in_background(lambda: self._services.log_tail(wanted), self._show_log)

    def _show_log(self, result, error) -> None:
        self._log_busy = False
        if error is not None:
            self.log_view.setPlainText(f"The engine log could not be read: {error}")
            return
        path, lines = result
        text = "\n".join(lines) if path else "No engine log yet; start a model to see one."
        if path != self.log_path or text != self.log_view.toPlainText():
            bar = self.log_view.verticalScrollBar()
            at_end = bar.value() >= bar.maximum() - 2
            self.log_path = path
            self.log_view.setPlainText(text)
            if at_end:
                bar.setValue(bar.maximum())
