"""Where published snapshots go: the latest one, and the subscribers that hear of each.

The supervisor thread is the only publisher; anyone may subscribe or wait. Subscribers are
called ON THE PUBLISHING THREAD for every snapshot: they must not block. A subscriber that
raises is logged and kept. It decides nothing and assembles nothing (the supervisor and
stoker/fleet/snapshot_assembly.py do): values in, calls out.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from stoker.fleet.snapshot import AppSnapshot

log = logging.getLogger(__name__)

Subscriber = Callable[[AppSnapshot], None]


class SnapshotHub:
    def __init__(self, first: AppSnapshot) -> None:
        self._subscribers: list[Subscriber] = []
        self._lock = threading.Lock()
        self._current = first  # replaced atomically

    @property
    def current(self) -> AppSnapshot:
        return self._current

    def publish(self, snap: AppSnapshot) -> None:
        with self._lock:
            self._current = snap
            subscribers = list(self._subscribers)
        for callback in subscribers:
            self._deliver(callback, snap)

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call `callback(snapshot)` for every new snapshot; the latest is delivered at once
        (when anything was published yet). Returns a function that unsubscribes."""
        with self._lock:
            self._subscribers.append(callback)
            current = self._current
        if current.seq:
            self._deliver(callback, current)

        def unsubscribe() -> None:
            with self._lock:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)

        return unsubscribe

    def wait_for(self, predicate: Callable[[AppSnapshot], bool], timeout: float) -> AppSnapshot | None:
        """Block until a snapshot satisfies `predicate` (checked on every publish), or time out."""
        hit = threading.Event()
        found: list[AppSnapshot] = []

        def check(snap: AppSnapshot) -> None:
            if not hit.is_set() and predicate(snap):
                found.append(snap)
                hit.set()

        unsubscribe = self.subscribe(check)
        try:
            check(self._current)
            hit.wait(timeout)
        finally:
            unsubscribe()
        return found[0] if found else None

    @staticmethod
    def _deliver(callback: Subscriber, snap: AppSnapshot) -> None:
        try:
            callback(snap)
        except Exception:
            log.exception("a snapshot subscriber failed")
