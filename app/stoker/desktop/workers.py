"""Run slow calls (planning, probing, keyring, reading logs) off the GUI thread.

The UI never blocks: `run_in_background(fn, on_done)` runs `fn` on Qt's global thread pool
and calls `on_done(result, error)` back on the GUI thread through a queued connection.
Exactly one of result/error is meaningful; an exception is handed over, never swallowed.

One dispatcher QObject, made on the GUI thread and never deleted, carries every result. A
QObject per call (as before) was freed either inside its own queued slot (Qt is still in that
object's event dispatch when the slot returns) or, when the GUI thread had already delivered,
on the pool thread that dropped the task's last reference: a QObject destroyed off its own
thread. Either crashed the process now and then, more often under load (a segfault in the UI
tests while pytest-qt processed events).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QRunnable, Qt, QThreadPool, Signal, Slot

Done = Callable[[Any, BaseException | None], None]


class _Dispatcher(QObject):
    """Lives on the GUI thread for the whole process; hands each result to its `on_done`."""

    finished = Signal(int, object, object)  # ticket, result, error

    def __init__(self) -> None:
        super().__init__()
        self._waiting: dict[int, Done] = {}
        self._tickets = itertools.count(1)
        self._lock = threading.Lock()
        self.finished.connect(self._deliver, Qt.ConnectionType.QueuedConnection)

    def expect(self, on_done: Done) -> int:
        with self._lock:
            ticket = next(self._tickets)
            self._waiting[ticket] = on_done
        return ticket

    @Slot(int, object, object)
    def _deliver(self, ticket: int, result, error) -> None:
        with self._lock:
            on_done = self._waiting.pop(ticket, None)
        if on_done is not None:
            on_done(result, error)


_dispatcher: _Dispatcher | None = None  # made on the first call, on the GUI thread


class _Task(QRunnable):
    def __init__(self, fn: Callable[[], Any], dispatcher: _Dispatcher, ticket: int) -> None:
        super().__init__()
        self._fn = fn
        self._dispatcher = dispatcher
        self._ticket = ticket

    def run(self) -> None:
        try:
            result = self._fn()
        except BaseException as exc:
            self._dispatcher.finished.emit(self._ticket, None, exc)
        else:
            self._dispatcher.finished.emit(self._ticket, result, None)


def run_in_background(fn: Callable[[], Any], on_done: Done) -> None:
    """Must be called on the GUI thread; `on_done` runs there later."""
    global _dispatcher
    if _dispatcher is None:
        _dispatcher = _Dispatcher()
    QThreadPool.globalInstance().start(_Task(fn, _dispatcher, _dispatcher.expect(on_done)))
