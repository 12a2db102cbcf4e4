"""Stoker's side of the gateway process: spawn it, feed it, answer it, and keep it up.

The endpoint's sockets are bound here, in Stoker's process, and handed to the child
(stoker/gateway/child.py), so the port is held for Stoker's whole life: when the child dies
it is spawned again on the same sockets and clients only see a short stall, never a moved
endpoint. This side mirrors into the child what the gateway reads (every snapshot, the
catalog when it changes, the keyring's API key, READY routes) and carries out what it asks
(loads, cancels, commands, rescans). `RemoteRoutes` is the supervisor's route table: it
sends every open and close to the child, learns the requests in flight from it, and asks it
before an engine is taken away, so "never kill work in flight" holds across the two
processes. Must not decide anything about requests, names or memory.
"""

from __future__ import annotations

import itertools
import logging
import os
import socket
import subprocess
import sys
import threading
import time
import typing
from collections.abc import Callable, Hashable
from functools import partial

from stoker.base.line_throttle import LineThrottle
from stoker.base.secrets import KeyUnreadable, on_api_key_change
from stoker.errors import UserError
from stoker.fleet import commands as cmd
from stoker.fleet.commands import Route
from stoker.fleet.snapshot import AppSnapshot
from stoker.fleet.supervisor import Supervisor
from stoker.gateway.link import (
    PROTOCOL_VERSION,
    VERSION_MISMATCH_EXIT,
    CatalogChanged,
    ChildToParent,
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
    OpenRoute,
    Outbox,
    Rescanned,
    RescanWanted,
    RouteClosed,
    RouteOpened,
    Shutdown,
    SnapshotChanged,
    UsageChanged,
    from_child,
    read_frame,
)
from stoker.gateway.rules import GatewayKey, key_after_read
from stoker.gateway.server import GatewayConfig, GatewayError
from stoker.library.catalog import ModelCatalog
from stoker.library.model_ids import Catalog

log = logging.getLogger(__name__)

GATEWAY_CHILD_FLAG = "--stoker-gateway-process"  # the frozen bundle's entry runs the child on it
START_TIMEOUT_S = 15.0
RESPAWN_DELAYS_S = (0.2, 1.0, 2.0, 5.0)
STABLE_AFTER_S = 60.0  # a child up this long starts the respawn delays afresh


def gateway_child_argv() -> list[str]:
    """How to start the gateway process: this Python on the module, or the frozen bundle's
    own executable with the flag its entry point looks for (a bundle has no Python)."""
    if getattr(sys, "frozen", False):
        return [sys.executable, GATEWAY_CHILD_FLAG]
    return [sys.executable, "-m", "stoker.gateway.child"]


class RemoteRoutes:
    """The supervisor's route table when the leases are held by the gateway process.

    It satisfies `RouteTable` and never waits on the supervisor's thread: an open or a close
    is sent and returns; `close_if_idle` sends the question and says False until the answer
    (an `IdleAnswer` on the link's reader thread) is in, then sets `changed` and calls
    `wake` so the supervisor decides again and finds it. An idle close the supervisor does
    not act on within a whole pass (it changed its mind) is undone by `settle`. The stop of
    an engine waits for the close's confirmation on the stopping thread (`wait_closed`), so
    no lease can be taken on an engine that is being stopped.
    """

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self._routes: dict[str, Route] = {}
        self._in_flight: dict[str, int] = {}
        self._last_used: dict[str, float] = {}
        self.changed = threading.Event()
        self.wake: Callable[[], None] = lambda: None  # the supervisor's: decide anew now
        self._outbox: Outbox | None = None
        self._asked = itertools.count(1)
        self._asking_idle: dict[str, int] = {}  # key → the CloseIfIdle still unanswered
        self._idle_closed: dict[str, int] = {}  # key → the pass its idle close was answered in
        self._closing: dict[str, tuple[int, threading.Event]] = {}  # key → its last RouteClosed
        self._passes = 0

    def attach(self, outbox: Outbox, hello: Callable[[tuple[OpenRoute, ...]], Hello]) -> None:
        """A new gateway process: its Hello (made by `hello` from the routes open now) is put
        first, and every open or close after it follows it on the same outbox."""
        with self._lock:
            self._release_waits()
            outbox.put(hello(tuple(OpenRoute(route, self._last_used.get(key) or self._clock())
                                   for key, route in self._routes.items() if key not in self._idle_closed)))
            self._outbox = outbox

    def detach(self) -> None:
        """The gateway process has gone: nothing is in flight through it any more."""
        with self._lock:
            self._outbox = None
            self._in_flight = {k: 0 for k in self._in_flight}
            self._release_waits()
        self.changed.set()
        self.wake()

    def _release_waits(self) -> None:
        """Under the lock: questions to a gateway process that is gone are void; its routes
        went with it, so every close holds."""
        self._asking_idle.clear()
        for _, done in self._closing.values():
            done.set()
        self._closing.clear()

    def open(self, route: Route, now: float) -> None:
        with self._lock:
            self._routes[route.key] = route
            self._idle_closed.pop(route.key, None)
            self._last_used[route.key] = max(self._last_used.get(route.key, now), now)
            outbox = self._outbox
        if outbox is not None:
            outbox.put(RouteOpened(route, now))

    def close(self, key: str) -> None:
        with self._lock:
            was_open = self._routes.pop(key, None) is not None and key not in self._idle_closed
            self._idle_closed.pop(key, None)
            outbox = self._outbox
            if not was_open or outbox is None:
                return
            asked = next(self._asked)
            self._closing[key] = (asked, threading.Event())
        outbox.put(RouteClosed(key, asked=asked))

    def wait_closed(self, key: str, timeout: float) -> bool:
        with self._lock:
            waiting = self._closing.get(key)
        return True if waiting is None else waiting[1].wait(timeout)

    def forget(self, key: str) -> None:
        with self._lock:
            self._routes.pop(key, None)
            self._idle_closed.pop(key, None)
            self._last_used.pop(key, None)
            outbox = self._outbox
        if outbox is not None:
            outbox.put(RouteClosed(key, forget=True))

    def close_if_idle(self, key: str) -> bool:
        with self._lock:
            if key in self._idle_closed:  # answered: closed in the gateway with nothing in flight
                del self._idle_closed[key]
                self._routes.pop(key, None)
                return True
            if key in self._asking_idle:
                return False
            outbox = self._outbox
            if outbox is None:  # no gateway process: nothing can be in flight
                self._routes.pop(key, None)
                return True
            asked = self._asking_idle[key] = next(self._asked)
        outbox.put(CloseIfIdle(asked, key))
        return False

    def settle(self) -> None:
        with self._lock:
            self._passes += 1
            stale = [k for k, at in self._idle_closed.items() if self._passes - at >= 2]
            reopen = []
            for key in stale:
                del self._idle_closed[key]
                route = self._routes.get(key)
                if route is not None:
                    reopen.append(route)
            outbox = self._outbox
        for route in reopen:
            log.info("%s stays: it is open to requests again", route.key)
            if outbox is not None:
                outbox.put(RouteOpened(route, self._clock()))

    def usage(self, key: str) -> tuple[int, float | None]:
        with self._lock:
            return self._in_flight.get(key, 0), self._last_used.get(key)

    def route(self, key: str) -> Route | None:
        with self._lock:
            return None if key in self._idle_closed else self._routes.get(key)

    # on the link's reader thread

    def idle_answered(self, message: IdleAnswer) -> None:
        with self._lock:
            closing = self._closing.get(message.key)
            if closing is not None and closing[0] == message.asked:
                del self._closing[message.key]
                closing[1].set()  # a stop waiting for it goes ahead
            elif self._asking_idle.get(message.key) != message.asked:
                return  # a question made void (a new gateway process, or the route reopened)
            else:
                del self._asking_idle[message.key]
                if message.closed:  # (a route already closed by `close` is answered idle here too)
                    self._idle_closed[message.key] = self._passes
        self.changed.set()
        self.wake()

    def usage_changed(self, message: UsageChanged) -> None:
        with self._lock:
            self._in_flight[message.key] = message.in_flight
            if message.last_used is not None:
                self._last_used[message.key] = message.last_used
        if message.released:
            self.changed.set()


class GatewayProcess:
    """`start()` spawns the child on the bound sockets; `wait_ready()` until it listens."""

    def __init__(self, supervisor: Supervisor, catalog: ModelCatalog, routes: RemoteRoutes,
                 config: GatewayConfig, *,
                 sockets: list[socket.socket], tray_shown: Callable[[], bool | None],
                 api_key: Callable[[], str | None]) -> None:
        self._sup = supervisor
        self._catalog = catalog
        self._routes = routes
        self._config = config
        self._sockets = sockets
        self._tray_shown = tray_shown
        self._read_key = api_key
        self.port: int = sockets[0].getsockname()[1]
        self._proc: subprocess.Popen | None = None
        self._outbox: Outbox | None = None
        self._listening = threading.Event()
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._key: GatewayKey | None = None  # None until the first read at start()
        self._outstanding: set[Hashable] = set()  # ensure tickets the supervisor has not answered
        self._spawned_at = 0.0
        self._respawns = 0
        self._cleanups: list[Callable[[], None]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """The gateway process now serving, None while it is being started again."""
        with self._lock:
            return self._proc.pid if self._proc is not None and self._outbox is not None else None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> GatewayProcess:
        # The key is read here and when it is saved (Settings, in this process), never on a
        # timer: each read of a locked desktop keyring pops an unlock prompt.
        self._key = self._read_key_now()
        self._spawn()
        self._cleanups.append(self._sup.subscribe(self._on_snapshot))
        self._cleanups.append(self._catalog.on_change(self._on_catalog))
        self._cleanups.append(on_api_key_change(self.refresh_key))
        return self

    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> None:
        if not self._listening.wait(timeout):
            raise GatewayError(f"the endpoint did not start within {timeout:g} s; see stoker.log.")

    def stop(self) -> None:
        self._stopping.set()
        for cleanup in self._cleanups:
            cleanup()
        with self._lock:
            proc, outbox = self._proc, self._outbox
        if outbox is not None:
            outbox.put(Shutdown())
            outbox.close()
        if proc is not None:
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        for s in self._sockets:
            s.close()

    def refresh_key(self) -> None:
        """Read the API key again now (it was just saved): it applies to the next request."""
        key = self._read_key_now()
        with self._lock:
            changed, self._key = key != self._key, key
            outbox = self._outbox
        if changed and outbox is not None:
            outbox.put_latest("key", KeyChanged(key.value, key.unreadable))

    def _read_key_now(self) -> GatewayKey:
        """The key after one keyring read: a failed read keeps the last key known."""
        try:
            value, failed = self._read_key(), False
        except KeyUnreadable as exc:
            log.warning("%s", exc)
            value, failed = None, True
        except Exception as exc:  # a backend's own bug: still never read as "no key"
            log.warning("the API key could not be read from the keyring: %r", exc)
            value, failed = None, True
        return key_after_read(self._key, value, failed)

    def _spawn(self) -> None:
        fds = [s.fileno() for s in self._sockets]
        kwargs: dict = {}
        if sys.platform == "win32":
            kwargs["creationflags"] = subprocess.CREATE_NEW_PROCESS_GROUP | subprocess.CREATE_NO_WINDOW
        else:
            # Its own session: Ctrl-C reaches Stoker, which then stops its endpoint in order.
            kwargs.update(pass_fds=fds, start_new_session=True)
        try:
            proc = subprocess.Popen(gateway_child_argv(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, close_fds=True, **kwargs)
        except OSError as exc:
            raise GatewayError(f"the endpoint's process could not start ({exc.strerror or exc}); "
                               "see stoker.log.") from None
        if proc.stdin is None:  # never with stdin=PIPE; typeshed types the pipes optional
            raise GatewayError("the endpoint's process has no input pipe; see stoker.log.")
        outbox = Outbox(proc.stdin, "stoker-gateway-in")
        shares: tuple[bytes, ...] = ()
        if sys.platform == "win32":
            shares = tuple(s.share(proc.pid) for s in self._sockets)

        def hello(routes: tuple[OpenRoute, ...]) -> Hello:
            return Hello(PROTOCOL_VERSION, self.port, self._config.cors_origins, os.getpid(),
                         api_key=self._key or GatewayKey(None, unreadable=True),
                         catalog=self._catalog.current, snapshot=self._sup.snapshot(),
                         tray_shown=self._tray_shown(), routes=routes, socket_shares=shares,
                         socket_fds=() if shares else tuple(fds))

        with self._lock:
            # Under the lock that the key, snapshot and catalog senders take: what Hello holds
            # is the newest, or a message that changes it follows Hello on this outbox.
            self._routes.attach(outbox, hello)
            self._proc, self._outbox = proc, outbox
            self._spawned_at = time.monotonic()
        threading.Thread(target=self._read, args=(proc, outbox), name="stoker-gateway-link",
                         daemon=True).start()
        threading.Thread(target=self._log_stderr, args=(proc,), name="stoker-gateway-log",
                         daemon=True).start()

    def _child_gone(self, proc: subprocess.Popen, outbox: Outbox) -> None:
        outbox.close()
        with self._lock:
            if self._proc is not proc:
                return
            self._outbox = None
            tickets, self._outstanding = self._outstanding, set()
        self._routes.detach()
        for ticket in tickets:  # nobody waits on those loads any more
            self._sup.submit(cmd.CancelEnsure(ticket))
        if self._stopping.is_set():
            return
        code = proc.wait()
        up_for = time.monotonic() - self._spawned_at
        if code == VERSION_MISMATCH_EXIT:
            log.error("the endpoint's process is not the same version as Stoker (see the line before); "
                      "it is not started again: reinstall Stoker and start it again")
            return
        if up_for >= STABLE_AFTER_S:
            self._respawns = 0
        delay = RESPAWN_DELAYS_S[min(self._respawns, len(RESPAWN_DELAYS_S) - 1)]
        self._respawns += 1
        log.warning("the endpoint's process ended (exit %s) after %.1f s; it starts again in %g s on the "
                    "same port", code, up_for, delay)
        if self._stopping.wait(delay):
            return
        try:
            self._spawn()
        except GatewayError as exc:
            log.error("%s", exc)

    # ------------------------------------------------------------------ what the child asks

    def _read(self, proc: subprocess.Popen, outbox: Outbox) -> None:
        try:
            while True:
                try:
                    if proc.stdout is None:  # never with stdout=PIPE
                        break
                    message = read_frame(proc.stdout)
                except LinkClosed:
                    break
                except LinkVersionError as exc:
                    log.warning("refused a message from the gateway process: %s", exc)
                    continue
                self._dispatch(message, outbox)
        finally:
            self._child_gone(proc, outbox)

    def _dispatch(self, message: object, outbox: Outbox) -> None:
        if not from_child(message):
            log.warning("refused a message from the gateway process: %s is not one it may send",
                        type(message).__name__)
            return
        self._act_on(message, outbox)

    def _act_on(self, message: ChildToParent, outbox: Outbox) -> None:
        match message:
            case UsageChanged():
                self._routes.usage_changed(message)
            case EnsureWanted(ticket=ticket, model_path=model_path):
                with self._lock:
                    self._outstanding.add(ticket)
                self._sup.submit(cmd.EnsureModel(model_path=model_path, ticket=ticket,
                                                 answer=partial(self._answer, outbox, ticket)))
            case IdleAnswer():
                self._routes.idle_answered(message)
            case CommandWanted(command=command):
                self._command(command)
            case RescanWanted(asked=asked):
                threading.Thread(target=self._rescan, args=(outbox, asked), name="stoker-gateway-rescan",
                                 daemon=True).start()
            case LibraryWanted():
                threading.Thread(target=self._library, args=(outbox, message), name="stoker-gateway-library",
                                 daemon=True).start()
            case Listening():
                self._listening.set()
            case _:
                typing.assert_never(message)

    def _command(self, command: object) -> None:
        """Only the commands on the allowlist (link.CHILD_COMMANDS) reach the supervisor."""
        match command:
            case cmd.CancelEnsure(ticket=ticket):
                with self._lock:
                    self._outstanding.discard(ticket)
                self._sup.submit(command)
            case cmd.CancelRender() | cmd.KeepAlive() | cmd.UnloadModel() | cmd.WidenContext():
                self._sup.submit(command)
            case _:
                log.warning("refused a command from the gateway process: %s is not one it may ask for",
                            type(command).__name__)

    def _answer(self, outbox: Outbox, ticket: Hashable, result: cmd.EnsureResult) -> None:
        """On the supervisor thread: the load the gateway waited for is READY or cannot be."""
        with self._lock:
            self._outstanding.discard(ticket)
        outbox.put(EnsureAnswered(ticket, result))

    def _library(self, outbox: Outbox, message: LibraryWanted) -> None:
        """Ollama's pull or delete, with its progress sent back; the catalog is rescanned
        before the end is, so the model is (or is no longer) listed when the client hears it."""
        # lazy, for start-up time: only a pull over the API needs the hub client it brings in
        from stoker.fleet import library_ops as api_ops

        def report(status: str, completed: int | None, total: int | None) -> None:
            outbox.put_latest(("library", message.asked),
                              LibraryProgress(message.asked, status, completed, total))

        try:
            if message.op == "pull":
                said = api_ops.pull_model(message.name, report)
            elif message.op == "delete":
                said = api_ops.delete_model(message.name)
            else:
                raise UserError(f"'{message.op}' is not a library operation.")
        except UserError as exc:
            outbox.put(LibraryProgress(message.asked, "failed", done=True, error=str(exc)))
            return
        except Exception as exc:
            log.warning("the gateway's %s of %s failed", message.op, message.name, exc_info=True)
            outbox.put(LibraryProgress(message.asked, "failed", done=True,
                                       error=f"the {message.op} failed ({exc}); see stoker.log."))
            return
        try:
            outbox.put(CatalogChanged(self._catalog.refresh()))  # in order: before the end below
        except Exception:
            log.warning("the model rescan failed", exc_info=True)
        outbox.put(LibraryProgress(message.asked, said, done=True))

    def _rescan(self, outbox: Outbox, asked: int) -> None:
        try:
            catalog = self._catalog.refresh()
        except Exception:
            log.warning("the model rescan failed", exc_info=True)
            catalog = self._catalog.current
        outbox.put(Rescanned(asked, catalog))

    # ------------------------------------------------------------------ what Stoker tells it

    def _on_snapshot(self, snap: AppSnapshot) -> None:
        """On the supervisor thread: only queued (the outbox thread pickles and writes it)."""
        with self._lock:
            outbox = self._outbox
        if outbox is not None:
            outbox.put_latest("snapshot", SnapshotChanged(snap, self._tray_shown()))

    def _on_catalog(self, catalog: Catalog) -> None:
        with self._lock:
            outbox = self._outbox
        if outbox is not None:
            outbox.put_latest("catalog", CatalogChanged(catalog))

    def _log_stderr(self, proc: subprocess.Popen) -> None:
        throttle = LineThrottle()  # a flood of one line must not rotate stoker.log's history away
        for raw in proc.stderr or ():  # None only without stderr=PIPE
            line = raw.decode("utf-8", "replace").rstrip()
            if line:
                for kept in throttle.offer(line, time.monotonic()):
                    log.info("gateway: %s", kept)
        for kept in throttle.flush(float("inf")):
            log.info("gateway: %s", kept)
