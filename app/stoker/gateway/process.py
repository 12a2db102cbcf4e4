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
from collections.abc import Callable, Hashable
from functools import partial
from typing import TYPE_CHECKING

from stoker.base.line_throttle import LineThrottle
from stoker.base.secrets import KeyUnreadable, on_api_key_change
from stoker.fleet import commands as cmd
from stoker.fleet.snapshot import AppSnapshot
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
from stoker.gateway.rules import GatewayKey, key_after_read
from stoker.gateway.server import GatewayConfig, GatewayError
from stoker.library.model_ids import Catalog

if TYPE_CHECKING:  # annotations only: the instance builds both and hands them over
    from stoker.fleet.supervisor import Supervisor
    from stoker.library.catalog import ModelCatalog

log = logging.getLogger(__name__)

GATEWAY_CHILD_FLAG = "--stoker-gateway-process"  # the frozen bundle's entry runs the child on it
START_TIMEOUT_S = 15.0
IDLE_ANSWER_TIMEOUT_S = 5.0  # no answer: treat the model as busy, ask again on the next pass
CLOSE_ACK_TIMEOUT_S = 1.0  # a stuck gateway process delays an engine's stop by no more than this
RESPAWN_DELAYS_S = (0.2, 1.0, 2.0, 5.0)
STABLE_AFTER_S = 60.0  # a child up this long starts the respawn delays afresh


def gateway_child_argv() -> list[str]:
    """How to start the gateway process: this Python on the module, or the frozen bundle's
    own executable with the flag its entry point looks for (a bundle has no Python)."""
    if getattr(sys, "frozen", False):
        return [sys.executable, GATEWAY_CHILD_FLAG]
    return [sys.executable, "-m", "stoker.gateway.child"]


class RemoteRoutes(Routes):
    """The supervisor's route table when the leases are held by the gateway process."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        super().__init__(clock)
        self._outbox: Outbox | None = None
        self._asked = itertools.count(1)
        self._answers: dict[int, list] = {}  # asked → [Event, closed]

    def attach(self, outbox: Outbox) -> None:
        """A new gateway process: send it every open route."""
        with self._lock:
            self._outbox = outbox
            for route in self._routes.values():
                outbox.put(RouteOpened(route, self._last_used.get(route.key) or self._clock()))

    def detach(self) -> None:
        """The gateway process has gone: nothing is in flight through it any more."""
        with self._lock:
            self._outbox = None
            self._in_flight = {k: 0 for k in self._in_flight}
            waiting = list(self._answers.values())
        for slot in waiting:
            slot[1] = True
            slot[0].set()
        self.changed.set()

    def acquire(self, key: str):
        raise RuntimeError("leases are taken in the gateway process")

    def release(self, route) -> None:
        raise RuntimeError("leases are taken in the gateway process")

    def open(self, route, now: float) -> None:
        super().open(route, now)
        self._send(RouteOpened(route, now))

    def close(self, key: str) -> None:
        """Closed here and, before this returns, in the gateway process: the supervisor stops
        the engine next, and a request leased after that would meet a dying engine (a 502)
        where it should have been held for the next load."""
        super().close(key)
        if self._ask(lambda asked: RouteClosed(key, asked=asked), CLOSE_ACK_TIMEOUT_S) is None:
            log.warning("the gateway process did not confirm that %s is closed", key)

    def forget(self, key: str) -> None:
        super().forget(key)
        self._send(RouteClosed(key, forget=True))

    def close_if_idle(self, key: str) -> bool:
        closed = self._ask(lambda asked: CloseIfIdle(asked, key), IDLE_ANSWER_TIMEOUT_S)
        if closed is None:
            log.warning("the gateway process did not say whether %s is idle; it stays for now", key)
            return False
        if closed:
            super().close(key)
        return closed

    def _ask(self, message: Callable[[int], object], timeout: float) -> bool | None:
        """Send the gateway process a question and wait for its answer (None: none came).
        With no gateway process there is nothing in flight: the answer is yes."""
        with self._lock:
            outbox = self._outbox
            if outbox is None:
                return True
            asked = next(self._asked)
            slot = self._answers[asked] = [threading.Event(), False]
        outbox.put(message(asked))
        answered = slot[0].wait(timeout)
        with self._lock:
            self._answers.pop(asked, None)
        return slot[1] if answered else None

    # on the link's reader thread

    def idle_answered(self, message: IdleAnswer) -> None:
        with self._lock:
            slot = self._answers.get(message.asked)
        if slot is not None:
            slot[1] = message.closed
            slot[0].set()

    def usage_changed(self, message: UsageChanged) -> None:
        with self._lock:
            self._in_flight[message.key] = message.in_flight
            if message.last_used is not None:
                self._last_used[message.key] = message.last_used
        if message.released:
            self.changed.set()

    def _send(self, message: object) -> None:
        outbox = self._outbox
        if outbox is not None:
            outbox.put(message)


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
        if sys.platform == "win32":
            hello = Hello(self.port, self._config.cors_origins, os.getpid(),
                          socket_shares=tuple(s.share(proc.pid) for s in self._sockets))
        else:
            hello = Hello(self.port, self._config.cors_origins, os.getpid(), socket_fds=tuple(fds))
        outbox = Outbox(proc.stdin, "stoker-gateway-in")
        outbox.put(hello)
        outbox.put(CatalogChanged(self._catalog.current))
        with self._lock:
            key = self._key or GatewayKey(None, unreadable=True)
            outbox.put_latest("key", KeyChanged(key.value, key.unreadable))
            self._proc, self._outbox = proc, outbox
            self._spawned_at = time.monotonic()
        outbox.put_latest("snapshot", SnapshotChanged(self._sup.snapshot(), self._tray_shown()))
        self._routes.attach(outbox)
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
                    message = read_frame(proc.stdout)
                except LinkClosed:
                    break
                self._dispatch(message, outbox)
        finally:
            self._child_gone(proc, outbox)

    def _dispatch(self, message: object, outbox: Outbox) -> None:
        if isinstance(message, UsageChanged):
            self._routes.usage_changed(message)
        elif isinstance(message, EnsureWanted):
            with self._lock:
                self._outstanding.add(message.ticket)
            self._sup.submit(cmd.EnsureModel(model_path=message.model_path, ticket=message.ticket,
                                             answer=partial(self._answer, outbox, message.ticket)))
        elif isinstance(message, IdleAnswer):
            self._routes.idle_answered(message)
        elif isinstance(message, CommandWanted):
            if not isinstance(message.command, cmd.Command) or isinstance(message.command, cmd.EnsureModel):
                log.warning("the gateway process sent %r, which is not a command", message.command)
                return
            if isinstance(message.command, cmd.CancelEnsure):
                with self._lock:
                    self._outstanding.discard(message.command.ticket)
            self._sup.submit(message.command)
        elif isinstance(message, RescanWanted):
            threading.Thread(target=self._rescan, args=(outbox, message.asked), name="stoker-gateway-rescan",
                             daemon=True).start()
        elif isinstance(message, Listening):
            self._listening.set()
        else:
            log.warning("the gateway process sent a message Stoker does not know: %s", type(message).__name__)

    def _answer(self, outbox: Outbox, ticket: Hashable, result: cmd.EnsureResult) -> None:
        """On the supervisor thread: the load the gateway waited for is READY or cannot be."""
        with self._lock:
            self._outstanding.discard(ticket)
        outbox.put(EnsureAnswered(ticket, result))

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
        outbox = self._outbox
        if outbox is not None:
            outbox.put_latest("snapshot", SnapshotChanged(snap, self._tray_shown()))

    def _on_catalog(self, catalog: Catalog) -> None:
        outbox = self._outbox
        if outbox is not None:
            outbox.put_latest("catalog", CatalogChanged(catalog))

    def _log_stderr(self, proc: subprocess.Popen) -> None:
        throttle = LineThrottle()  # a flood of one line must not rotate stoker.log's history away
        for raw in proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip()
            if line:
                for kept in throttle.offer(line, time.monotonic()):
                    log.info("gateway: %s", kept)
        for kept in throttle.flush(float("inf")):
            log.info("gateway: %s", kept)
