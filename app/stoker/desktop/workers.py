"""Run slow calls (planning, probing, keyring, reading logs) off the GUI thread.

The UI never blocks: `run_in_background(fn, on_done)` runs `fn` on Qt's global thread pool
and calls `on_done(result, error)` back on the GUI thread through a queued connection.
Exactly one of result/error is meaningful; an exception is handed over, never swallowed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QRunnable, Qt, QThreadPool, Signal, Slot

_alive: set[_Courier] = set()  # couriers waiting for their result, kept from the GC


class _Courier(QObject):
    finished = Signal(object, object)

    def __init__(self, on_done: Callable[[Any, BaseException | None], None]) -> None:
        super().__init__()
        self._on_done = on_done
        self.finished.connect(self._deliver, Qt.ConnectionType.QueuedConnection)

    @Slot(object, object)
    def _deliver(self, result, error) -> None:
        _alive.discard(self)
        self._on_done(result, error)


class _Task(QRunnable):
    def __init__(self, fn: Callable[[], Any], courier: _Courier) -> None:
        super().__init__()
        self._fn = fn
        self._courier = courier

    def run(self) -> None:
        try:
            result = self._fn()
        except BaseException as exc:
            self._courier.finished.emit(None, exc)
        else:
            self._courier.finished.emit(result, None)


def run_in_background(fn: Callable[[], Any],
                      on_done: Callable[[Any, BaseException | None], None]) -> None:
    """Must be called on the GUI thread; `on_done` runs there later."""
    courier = _Courier(on_done)
    _alive.add(courier)
    QThreadPool.globalInstance().start(_Task(fn, courier))
