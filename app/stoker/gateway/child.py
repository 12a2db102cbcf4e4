"""The gateway process: Stoker's endpoint served from a process of its own.

Stoker's own process holds the Qt UI thread, the supervisor and the planner; in Python they
share one interpreter lock with anything else in that process, and `stoker bench gateway`
measured a busy UI thread adding 8.5 ms (p50) and 228 ms (p99) to each streamed chunk. Here
the gateway (stoker/gateway/server.py, unchanged in what it decides) runs alone, fed over the link
(stoker/gateway/link.py) with mirrors of what it reads in Stoker's process: the latest
snapshot, the catalog, the API key and the table of READY engines. The warm path (resolve a
name, lease a route, forward, stream) touches only this process. Loads, rescans and
commands go to Stoker's supervisor over the link.

It holds the leases: the requests in flight are counted here, reported back as usage, and
Stoker's supervisor asks (`CloseIfIdle`) before it stops an engine for room or idleness.
It exits when the link closes, so it can never outlive Stoker. Must not plan, launch or read
settings, the keyring or the disk.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Hashable

from stoker.fleet import commands as cmd
from stoker.fleet.snapshot import AppSnapshot, EngineState
from stoker.fleet.status_report import running_status
from stoker.gateway.link import (
    CatalogChanged,
    CloseIfIdle,
    CommandWanted,
    EnsureAnswered,
    EnsureWanted,
    Hello,
    IdleAnswer,
    KeyChanged,
    LinkClosed,
    Listening,
    Outbox,
    Rescanned,
    RescanWanted,
    RouteClosed,
    RouteOpened,
    Shutdown,
    SnapshotChanged,
    UsageChanged,
    read_frame,
)
from stoker.gateway.routes import Routes
from stoker.gateway.rules import NO_KEY, GatewayKey
from stoker.gateway.server import Gateway, GatewayConfig, GatewayError
from stoker.library.model_ids import Catalog

log = logging.getLogger("stoker.gateway")

RESCAN_WAIT_S = 30.0


class SupervisorMirror:
    """What the gateway asks of the supervisor, answered in this process: `snapshot()`,
    `subscribe()` and `routes` from the mirrors, `submit()` sent over the link."""

    def __init__(self, outbox: Outbox) -> None:
        self._outbox = outbox
        self._snapshot = AppSnapshot(seq=0, state=EngineState.STOPPED)
        self.tray_shown: bool | None = None
        self.key = NO_KEY  # until Stoker sends it (the start-up window is the link's business)
        self._subscribers: list[Callable[[AppSnapshot], None]] = []
        self._answers: dict[Hashable, Callable[[cmd.EnsureResult], None]] = {}
        self._lock = threading.Lock()
        self.routes = Routes(on_usage=self._usage)

    def snapshot(self) -> AppSnapshot:
        return self._snapshot

    def subscribe(self, callback: Callable[[AppSnapshot], None]) -> Callable[[], None]:
        self._subscribers.append(callback)
        return lambda: callback in self._subscribers and self._subscribers.remove(callback)

    def submit(self, command: cmd.Command) -> None:
        if isinstance(command, cmd.EnsureModel):
            with self._lock:
                self._answers[command.ticket] = command.answer
            self._outbox.put(EnsureWanted(command.ticket, command.model_path))
            return
        if isinstance(command, cmd.CancelEnsure):
            with self._lock:
                self._answers.pop(command.ticket, None)
        self._outbox.put(CommandWanted(command))

    # on the link's reader thread

    def snapshot_changed(self, message: SnapshotChanged) -> None:
        self._snapshot, self.tray_shown = message.snapshot, message.tray_shown
        for callback in list(self._subscribers):
            callback(message.snapshot)

    def ensure_answered(self, message: EnsureAnswered) -> None:
        with self._lock:
            answer = self._answers.pop(message.ticket, None)
        if answer is not None:
            answer(message.result)

    def _usage(self, key: str, in_flight: int, last_used: float | None, released: bool) -> None:
        # Only the newest count per model matters; `released` must survive being replaced.
        self._outbox.put_latest(("usage", key, released), UsageChanged(key, in_flight, last_used, released))


class CatalogMirror:
    """The catalog as Stoker's process last sent it; `refresh()` asks it to rescan."""

    def __init__(self, outbox: Outbox) -> None:
        self._outbox = outbox
        self._catalog = Catalog()
        self._asked = 0
        self._cond = threading.Condition()
        self._answered: dict[int, Catalog] = {}

    @property
    def current(self) -> Catalog:
        return self._catalog

    def changed(self, catalog: Catalog) -> None:
        self._catalog = catalog

    def refresh(self) -> Catalog:
        """Blocks (the gateway calls it from an executor thread) until the rescan is done."""
        with self._cond:
            self._asked += 1
            asked = self._asked
        self._outbox.put(RescanWanted(asked))
        deadline = time.monotonic() + RESCAN_WAIT_S
        with self._cond:
            while asked not in self._answered and time.monotonic() < deadline:
                self._cond.wait(deadline - time.monotonic())
            catalog = self._answered.pop(asked, None)
        if catalog is not None:
            self._catalog = catalog
        return self._catalog

    def rescanned(self, message: Rescanned) -> None:
        with self._cond:
            self._answered[message.asked] = message.catalog
            self._cond.notify_all()


def _listening_sockets(hello: Hello) -> list[socket.socket]:
    if hello.socket_shares:
        return [socket.fromshare(data) for data in hello.socket_shares]
    return [socket.socket(fileno=fd) for fd in hello.socket_fds]


def serve(inbox, outstream) -> int:
    """Read Hello, serve, follow the link until it closes or says Shutdown."""
    try:
        hello = read_frame(inbox)
    except LinkClosed:
        return 0
    if not isinstance(hello, Hello):
        log.error("the gateway's first message was %s, not Hello", type(hello).__name__)
        return 2
    outbox = Outbox(outstream, "stoker-gateway-out")
    sup = SupervisorMirror(outbox)
    catalog = CatalogMirror(outbox)
    gateway = Gateway(sup, catalog, GatewayConfig(hello.port, cors_origins=hello.cors_origins),
                      status=lambda: running_status(sup.snapshot(), time.time(), instance_pid=hello.parent_pid,
                                                    tray_shown=sup.tray_shown, gateway_pid=os.getpid()),
                      api_key=lambda: sup.key, sockets=_listening_sockets(hello))
    try:
        gateway.start()
    except GatewayError as exc:
        log.error("%s", exc)
        return 2
    outbox.put(Listening(gateway.port))
    try:
        while True:
            try:
                message = read_frame(inbox)
            except LinkClosed:
                break  # Stoker has gone: so does its endpoint
            if isinstance(message, Shutdown):
                break
            _dispatch(message, sup, catalog, outbox)
    finally:
        gateway.stop()
        outbox.close()
    return 0


def _dispatch(message: object, sup: SupervisorMirror, catalog: CatalogMirror, outbox: Outbox) -> None:
    if isinstance(message, SnapshotChanged):
        sup.snapshot_changed(message)
    elif isinstance(message, RouteOpened):
        sup.routes.open(message.route, message.at)
    elif isinstance(message, RouteClosed):
        (sup.routes.forget if message.forget else sup.routes.close)(message.key)
        if message.asked is not None:
            outbox.put(IdleAnswer(message.asked, True))
    elif isinstance(message, CloseIfIdle):
        outbox.put(IdleAnswer(message.asked, sup.routes.close_if_idle(message.key)))
    elif isinstance(message, EnsureAnswered):
        sup.ensure_answered(message)
    elif isinstance(message, CatalogChanged):
        catalog.changed(message.catalog)
    elif isinstance(message, Rescanned):
        catalog.rescanned(message)
    elif isinstance(message, KeyChanged):
        sup.key = GatewayKey(message.key, message.unreadable)
    else:
        log.warning("the gateway ignored a message it does not know: %s", type(message).__name__)


def main() -> int:
    # The protocol owns stdout: anything else printed goes to stderr, which Stoker logs.
    outstream = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    inbox = os.fdopen(os.dup(sys.stdin.fileno()), "rb")
    if hasattr(signal, "SIGINT"):
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Stoker decides when its endpoint stops
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    return serve(inbox, outstream)


if __name__ == "__main__":
    sys.exit(main())
