"""The gateway process: Stoker's endpoint served from a process of its own.

Stoker's own process holds the Qt UI thread, the supervisor and the planner; in Python they
share one interpreter lock with anything else in that process, and `stoker bench gateway`
measured a busy UI thread adding 8.5 ms (p50) and 228 ms (p99) to each streamed chunk. Here
the gateway (stoker/gateway/server.py, unchanged in what it decides) runs alone, fed over the link
(stoker/gateway/link.py) with mirrors of what it reads in Stoker's process: the latest
snapshot, the catalog, the API key and the table of READY engines, all of them in the first
message (Hello), so it never answers a request before it knows the key. The warm path (resolve a
name, lease a route, forward, stream) touches only this process. Loads, rescans and
commands go to Stoker's supervisor over the link.

It holds the leases: the requests in flight are counted here, reported back as usage, and
Stoker's supervisor asks (`CloseIfIdle`) before it stops an engine for room or idleness.
It exits when the link closes, so it can never outlive Stoker. Must not plan, launch or read
settings, the keyring or the disk (except the Responses API's kept turns, which are its own:
stoker/gateway/responses_state.py).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sys
import threading
import time
import typing
from collections.abc import Callable, Hashable
from typing import BinaryIO

from stoker.fleet import commands as cmd
from stoker.fleet.routes import Routes
from stoker.fleet.snapshot import AppSnapshot
from stoker.fleet.status_report import running_status
from stoker.gateway.link import (
    PROTOCOL_VERSION,
    VERSION_MISMATCH_EXIT,
    CatalogChanged,
    CloseIfIdle,
    CommandWanted,
    EnsureAnswered,
    EnsureWanted,
    Hello,
    IdleAnswer,
    KeyChanged,
    LibraryProgress,
    LibraryWanted,
    LinkClosed,
    LinkVersionError,
    Listening,
    Outbox,
    ParentToChild,
    Rescanned,
    RescanWanted,
    RouteClosed,
    RouteOpened,
    Shutdown,
    SnapshotChanged,
    UsageChanged,
    from_parent,
    read_frame,
)
from stoker.gateway.responses_state import ResponseStore, default_folder
from stoker.gateway.rules import GatewayKey
from stoker.gateway.server import Gateway, GatewayConfig, GatewayError
from stoker.library.model_ids import Catalog

log = logging.getLogger("stoker.gateway")

RESCAN_WAIT_S = 30.0


class SupervisorMirror:
    """What the gateway asks of the supervisor, answered in this process: `snapshot()`,
    `subscribe()` and `routes` from the mirrors, `submit()` sent over the link."""

    def __init__(self, outbox: Outbox, hello: Hello) -> None:
        self._outbox = outbox
        self._snapshot = hello.snapshot
        self.tray_shown: bool | None = hello.tray_shown
        self.key: GatewayKey = hello.api_key
        self._subscribers: list[Callable[[AppSnapshot], None]] = []
        self._answers: dict[Hashable, Callable[[cmd.EnsureResult], None]] = {}
        self._lock = threading.Lock()
        self.routes = Routes(on_usage=self._usage)
        self._library: dict[int, Callable[[LibraryProgress], None]] = {}
        self._library_asked = 0

    def snapshot(self) -> AppSnapshot:
        return self._snapshot

    def subscribe(self, callback: Callable[[AppSnapshot], None]) -> Callable[[], None]:
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)

        return unsubscribe

    def submit(self, command: cmd.Command) -> None:
        """What the gateway may ask of the supervisor: a load, giving up a wait for one,
        stopping an engine that cannot cancel a request whose client left, and a request's
        keep_alive / unload / num_ctx (link.CHILD_COMMANDS). Anything else is not sent."""
        match command:
            case cmd.EnsureModel():
                with self._lock:
                    self._answers[command.ticket] = command.answer
                self._outbox.put(EnsureWanted(command.ticket, command.model_path))
            case cmd.CancelEnsure():
                with self._lock:
                    self._answers.pop(command.ticket, None)
                self._outbox.put(CommandWanted(command))
            case cmd.CancelRender() | cmd.KeepAlive() | cmd.UnloadModel() | cmd.WidenContext():
                self._outbox.put(CommandWanted(command))
            case _:
                log.warning("the gateway does not send %s to Stoker", type(command).__name__)

    def library(self, op: str, name: str, on_progress: Callable[[LibraryProgress], None]) -> int:
        """Ask Stoker's process to pull or delete (Ollama's routes); `on_progress` is called on
        the link's reader thread with each LibraryProgress until the one with done True."""
        with self._lock:
            self._library_asked += 1
            asked = self._library_asked
            self._library[asked] = on_progress
        self._outbox.put(LibraryWanted(asked, op, name))
        return asked

    def library_progress(self, message: LibraryProgress) -> None:
        with self._lock:
            callback = self._library.pop(message.asked, None) if message.done else self._library.get(message.asked)
        if callback is not None:
            callback(message)

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
        slot, message = ("usage", key, released), UsageChanged(key, in_flight, last_used, released)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not on the gateway's loop: nothing waits on this thread
            self._outbox.put_latest(slot, message)
            return
        # A lease is taken and given back in the middle of a request, on the gateway's loop.
        # Waking the outbox's thread there handed it the interpreter lock while the loop sent
        # the request to the engine or the answer to the client, and the loop then waited for
        # it back (strace: up to 3.7 ms after the answer's send; about 1 ms per generating
        # request at the median in `stoker bench gateway`). Queued for the loop's next turn,
        # the wake comes after that send; the supervisor learns the count a moment later.
        loop.call_soon(self._outbox.put_latest, slot, message)


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
    if sys.platform == "win32" and hello.socket_shares:  # shares are made on Windows only
        return [socket.fromshare(data) for data in hello.socket_shares]
    return [socket.socket(fileno=fd) for fd in hello.socket_fds]


def read_hello(inbox: BinaryIO) -> Hello | int:
    """The first message, or the exit status when it is not a Hello of this version (one
    sentence in the log: the child cannot serve what it cannot read)."""
    try:
        first = read_frame(inbox)
    except LinkClosed:
        return 0
    except LinkVersionError as exc:
        log.error("Stoker's first message to its gateway could not be read (%s): the two are not "
                  "the same version; reinstall Stoker and start it again.", exc)
        return VERSION_MISMATCH_EXIT
    match first:
        case Hello(version=version) if version == PROTOCOL_VERSION:
            return first
        case Hello(version=version):
            log.error("Stoker speaks gateway protocol %s and this gateway speaks %s: they are not the "
                      "same version; reinstall Stoker and start it again.", version, PROTOCOL_VERSION)
            return VERSION_MISMATCH_EXIT
        case _:
            log.error("the gateway's first message was %s, not Hello", type(first).__name__)
            return 2


def serve(inbox: BinaryIO, outstream: BinaryIO) -> int:
    """Read Hello, serve, follow the link until it closes or says Shutdown.

    Nothing listens for requests before Hello is read (connections wait in the sockets'
    backlog), and Hello holds the key and the catalog: no request is answered without them.
    """
    hello = read_hello(inbox)
    if isinstance(hello, int):
        return hello
    outbox = Outbox(outstream, "stoker-gateway-out")
    sup = SupervisorMirror(outbox, hello)
    catalog = CatalogMirror(outbox)
    catalog.changed(hello.catalog)
    for opened in hello.routes:
        sup.routes.open(opened.route, opened.at)
    gateway = Gateway(sup, catalog, GatewayConfig(hello.port, cors_origins=hello.cors_origins),
                      status=lambda: running_status(sup.snapshot(), time.time(), instance_pid=hello.parent_pid,
                                                    tray_shown=sup.tray_shown, gateway_pid=os.getpid()),
                      api_key=lambda: sup.key, sockets=_listening_sockets(hello), library=sup,
                      responses=ResponseStore(default_folder()))
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
            except LinkVersionError as exc:
                log.warning("the gateway refused a message from Stoker: %s", exc)
                continue
            if not from_parent(message):
                log.warning("the gateway refused a message it does not know: %s", type(message).__name__)
                continue
            if isinstance(message, Shutdown):
                break
            dispatch(message, sup, catalog, outbox)
    finally:
        gateway.stop()
        outbox.close()
    return 0


def dispatch(message: ParentToChild, sup: SupervisorMirror, catalog: CatalogMirror, outbox: Outbox) -> None:
    match message:
        case SnapshotChanged():
            sup.snapshot_changed(message)
        case RouteOpened(route=route, at=at):
            sup.routes.open(route, at)
        case RouteClosed(key=key, forget=forget, asked=asked):
            (sup.routes.forget if forget else sup.routes.close)(key)
            if asked is not None:
                outbox.put(IdleAnswer(asked, key, True))
        case CloseIfIdle(asked=asked, key=key):
            outbox.put(IdleAnswer(asked, key, sup.routes.close_if_idle(key)))
        case EnsureAnswered():
            sup.ensure_answered(message)
        case CatalogChanged(catalog=new):
            catalog.changed(new)
        case Rescanned():
            catalog.rescanned(message)
        case KeyChanged(key=key, unreadable=unreadable):
            sup.key = GatewayKey(key, unreadable)
        case LibraryProgress():
            sup.library_progress(message)
        case Hello():
            log.warning("the gateway ignored a second Hello")
        case Shutdown():
            pass  # the loop in `serve` ends on it
        case _:
            typing.assert_never(message)
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
