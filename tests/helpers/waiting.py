"""Waiting for something a test can observe, with a bound: the only way a test waits.

A test never sleeps for "long enough": it waits for an event (a file size, a state in a
snapshot, a line a process printed) and fails with a sentence when the bound passes. The
poll interval here only paces the checks; it decides nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

POLL_S = 0.05


def wait_until(cond: Callable[[], object], timeout: float = 60, poll: float = POLL_S) -> bool:
    """Check `cond` every `poll` seconds; True as soon as it holds, False after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        if cond():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll)  # paces the poll


class LineWatch:
    """Reads a text stream (a child's stdout or stderr) on a thread, keeping every line, so
    a test can wait for the line that proves something happened (`wait_for`) and still see
    all of it afterwards (`text`). `closed` is set when the stream ends."""

    def __init__(self, stream: Iterable[str]) -> None:
        self.lines: list[str] = []
        self.closed = threading.Event()
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: Iterable[str]) -> None:
        try:
            for line in stream:
                with self._changed:
                    self.lines.append(line)
                    self._changed.notify_all()
        except (OSError, ValueError):  # the stream was closed under the reader
            pass
        finally:
            with self._changed:
                self.closed.set()
                self._changed.notify_all()

    def wait_for(self, needle: str, timeout: float = 60) -> str | None:
        """The first line holding `needle`, waiting for it up to `timeout` seconds; None if the
        stream ended or the time passed without it."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for line in self.lines:
                    if needle in line:
                        return line
                left = deadline - time.monotonic()
                if self.closed.is_set() or left <= 0:
                    return None
                self._changed.wait(left)

    def wait_closed(self, timeout: float = 60) -> bool:
        """True once the stream has ended (the writer closed it or exited) and every line is read."""
        return self.closed.wait(timeout)

    def text(self) -> str:
        with self._changed:
            return "".join(self.lines)
