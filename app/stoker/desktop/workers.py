"""Run slow calls (planning, probing, keyring, reading logs) off the GUI thread.

The UI never blocks: `run_in_background(fn, on_done)` runs `fn` on a small thread pool
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
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from PySide6.QtCore import QObject, Qt, Signal, Slot

Done = Callable[[Any, BaseException | None], None]


class _Dispatcher(QObject):
    """Lives on the GUI thread for the whole process; hands each result to its `on_done`."""

    # Only the ticket crosses threads in the signal; the result waits in `_results`. Python
    # objects sent through a queued `object` signal from a pool thread were over-released: a
    # burst of calls ended in "Fatal Python error: bool_dealloc" at exit (PySide6 6.x).
    finished = Signal(int)

    def __init__(self) -> None:
        super().__init__()
        self._waiting: dict[int, Done] = {}
        self._results: dict[int, tuple[Any, BaseException | None]] = {}
        self._tickets = itertools.count(1)
        self._lock = threading.Lock()
        self.finished.connect(self._deliver, Qt.ConnectionType.QueuedConnection)

    def expect(self, on_done: Done) -> int:
        with self._lock:
            ticket = next(self._tickets)
            self._waiting[ticket] = on_done
        return ticket

    def done(self, ticket: int, result: Any, error: BaseException | None) -> None:
        """On the pool thread: keep the result, then wake the GUI thread for it."""
        with self._lock:
            self._results[ticket] = (result, error)
        self.finished.emit(ticket)

    @Slot(int)
    def _deliver(self, ticket: int) -> None:
        with self._lock:
            on_done = self._waiting.pop(ticket, None)
            result, error = self._results.pop(ticket, (None, None))
        if on_done is not None:
            on_done(result, error)


_dispatcher: _Dispatcher | None = None  # made on the first call, on the GUI thread


def _run(fn: Callable[[], Any], dispatcher: _Dispatcher, ticket: int) -> None:
    try:
        result = fn()
    except BaseException as exc:
        dispatcher.done(ticket, None, exc)
    else:
        dispatcher.done(ticket, result, None)


# Python's own pool, not QThreadPool with a QRunnable subclass per call: a burst of those
# ended the interpreter with "Fatal Python error: bool_dealloc" (a refcount error in the
# binding) even when nothing but an int crossed threads.
_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="stoker-ui-work")


def run_in_background(fn: Callable[[], Any], on_done: Done) -> None:
    """Must be called on the GUI thread; `on_done` runs there later."""
    global _dispatcher
    if _dispatcher is None:
        _dispatcher = _Dispatcher()
    _pool.submit(_run, fn, _dispatcher, _dispatcher.expect(on_done))
