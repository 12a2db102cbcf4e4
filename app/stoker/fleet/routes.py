"""The table of READY engines the gateway may use, with requests in flight, under one lock.

It is the one place that can say "nothing is in flight on this model" atomically with
handing out a lease, which is what makes "work in flight is never killed" true: the
supervisor only stops an engine for room or idleness after `close_if_idle` succeeded.
In one process the supervisor and the gateway share one table; with the gateway in its
own process (stoker/gateway/process.py) the gateway's copy holds the leases and reports
usage through `on_usage`, and the supervisor's copy (`RemoteRoutes`, not a `Routes`: it
takes no leases) asks it before closing. `RouteTable` is what the supervisor needs of
either. Must not start, stop or plan anything.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

from stoker.fleet.commands import Route

UsageListener = Callable[[str, int, float | None, bool], None]  # key, in flight, last used, released


class RouteTable(Protocol):
    """The supervisor's side of the table: what it opens, closes and reads; never a lease.

    Nothing here may wait on the caller's thread except `wait_closed`, which the supervisor
    calls only from the thread that stops an engine.
    """

    changed: threading.Event  # a request ended or a close was answered: decide anew

    def open(self, route: Route, now: float) -> None: ...

    def close(self, key: str) -> None:
        """Take no new leases on it (in flight ones go on)."""

    def forget(self, key: str) -> None: ...

    def close_if_idle(self, key: str) -> bool:
        """True: closed now with nothing in flight, so the engine may stop. False: busy, or the
        answer is still to come (then `changed` is set when it does, and asking again gets it)."""

    def wait_closed(self, key: str, timeout: float) -> bool:
        """Block until a `close` of `key` holds where the leases are taken (False: timed out)."""

    def settle(self) -> None:
        """Once per supervisor pass: undo idle closes the supervisor did not act on."""

    def usage(self, key: str) -> tuple[int, float | None]: ...

    def route(self, key: str) -> Route | None: ...


class Routes:
    """READY engines the gateway may use, with in-flight counts, under one lock.

    The gateway calls `acquire`/`release` from its own thread; the supervisor `open`s a
    route when an engine becomes READY and `close`s it before stopping the engine.
    `close_if_idle` is the only way an engine is taken away for room or idleness: it
    succeeds only with nothing in flight, atomically with respect to `acquire`.
    """

    def __init__(self, clock: Callable[[], float] = time.time,
                 on_usage: UsageListener | None = None) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self._on_usage = on_usage
        self._routes: dict[str, Route] = {}
        self._in_flight: dict[str, int] = {}
        self._last_used: dict[str, float] = {}
        self.changed = threading.Event()  # a request ended: admission may decide anew

    def acquire(self, key: str) -> Route | None:
        with self._lock:
            route = self._routes.get(key)
            if route is not None:
                self._in_flight[key] = n = self._in_flight.get(key, 0) + 1
                last = self._last_used.get(key)
        if route is not None and self._on_usage is not None:
            self._on_usage(key, n, last, False)
        return route

    def release(self, route: Route) -> None:
        with self._lock:
            n = max(0, self._in_flight.get(route.key, 0) - 1)
            self._in_flight[route.key] = n
            self._last_used[route.key] = last = self._clock()
        self.changed.set()
        if self._on_usage is not None:
            self._on_usage(route.key, n, last, True)

    def open(self, route: Route, now: float) -> None:
        with self._lock:
            self._routes[route.key] = route
            self._last_used.setdefault(route.key, now)
            self._last_used[route.key] = max(self._last_used[route.key], now)

    def close(self, key: str) -> None:
        with self._lock:
            self._routes.pop(key, None)

    def close_if_idle(self, key: str) -> bool:
        with self._lock:
            if self._in_flight.get(key, 0) > 0:
                return False
            self._routes.pop(key, None)
            return True

    def wait_closed(self, key: str, timeout: float) -> bool:
        return True  # one table: a close holds the moment it returns

    def settle(self) -> None:
        pass  # close_if_idle answers at once: nothing is left to undo

    def usage(self, key: str) -> tuple[int, float | None]:
        """(requests in flight, when the last one ended or the engine became READY)."""
        with self._lock:
            return self._in_flight.get(key, 0), self._last_used.get(key)

    def forget(self, key: str) -> None:
        with self._lock:
            self._routes.pop(key, None)
            self._last_used.pop(key, None)

    def route(self, key: str) -> Route | None:
        with self._lock:
            return self._routes.get(key)
