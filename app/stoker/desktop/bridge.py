"""The one door through which supervisor snapshots enter the Qt world.

The supervisor calls subscribers on its own thread; Qt widgets may only be touched on the
GUI thread. `push` may be called from any thread and re-emits through a queued signal, so
the slot runs on the thread that owns the bridge. There a snapshot whose `seq` is not
newer than the last one shown is dropped, so a late delivery never paints stale state.
Must not block the supervisor (push only queues) and must not interpret snapshots.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt, Signal, Slot

from stoker.fleet.snapshot import AppSnapshot


class SnapshotBridge(QObject):
    snapshot_ready = Signal(object)  # AppSnapshot, strictly increasing seq, GUI thread
    _arrived = Signal(object)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._latest: AppSnapshot | None = None
        self.dropped = 0  # snapshots that came after a newer one (kept for tests/status)
        self._arrived.connect(self._deliver, Qt.ConnectionType.QueuedConnection)

    def push(self, snap: AppSnapshot) -> None:
        """Thread-safe: hand a snapshot over; it is delivered later on the GUI thread."""
        self._arrived.emit(snap)

    def latest(self) -> AppSnapshot | None:
        return self._latest

    @Slot(object)
    def _deliver(self, snap: AppSnapshot) -> None:
        if self._latest is not None and snap.seq <= self._latest.seq:
            self.dropped += 1
            return
        self._latest = snap
        self.snapshot_ready.emit(snap)
