"""Desktop notifications through the tray icon, as stoker.desktop.notifications decides them.

This module only shows what the pure decision returns (and remembers its history); the
click on a message opens the status window (wired in TrayController). Nothing is shown
for a snapshot the bridge dropped as stale, because only `snapshot_ready` feeds it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QObject, Slot
from PySide6.QtWidgets import QSystemTrayIcon

from stoker.desktop.bridge import SnapshotBridge
from stoker.desktop.notifications import Note, NoteHistory, NotifyPolicy, decide_notifications
from stoker.fleet.snapshot import AppSnapshot

_LEVEL_ICONS = {
    "info": QSystemTrayIcon.MessageIcon.Information,
    "warning": QSystemTrayIcon.MessageIcon.Warning,
    "critical": QSystemTrayIcon.MessageIcon.Critical,
}


_DEFAULT_POLICY = NotifyPolicy()  # frozen: one shared default is safe


class Notifier(QObject):
    def __init__(self, bridge: SnapshotBridge, tray: QSystemTrayIcon,
                 policy: NotifyPolicy = _DEFAULT_POLICY,
                 clock: Callable[[], float] = time.time, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._tray = tray
        self._policy = policy
        self._clock = clock
        self._prev: AppSnapshot | None = None
        self.history = NoteHistory()
        self.shown: list[Note] = []  # everything shown this session, oldest first
        bridge.snapshot_ready.connect(self.on_snapshot)

    @Slot(object)
    def on_snapshot(self, snap: AppSnapshot) -> None:
        notes, self.history = decide_notifications(self._prev, snap, self.history,
                                                   self._clock(), self._policy)
        self._prev = snap
        for note in notes:
            self.shown.append(note)
            if self._tray.isVisible() and QSystemTrayIcon.supportsMessages():
                self._tray.showMessage(note.title, note.body, _LEVEL_ICONS[note.level], 8000)
