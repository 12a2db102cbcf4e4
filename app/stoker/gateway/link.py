"""The pipe between Stoker and its gateway process: the messages, their framing, an outbox.

The gateway runs in a child process so that nothing Stoker's own process does (a busy UI
thread holding the GIL, a plan being computed) can delay a streamed chunk. The two sides
talk over the child's stdin (Stoker → gateway) and stdout (gateway → Stoker): each frame is
a 4-byte big-endian length and a pickle of one of the frozen messages below. Both ends are
this program, spawned by it on pipes only the two of them hold, so pickle carries values
that are already frozen dataclasses (snapshots, the catalog, routes) without a schema of
their own. A sender never blocks on the pipe: `Outbox` writes from its own thread, and
messages that only matter at their latest (a snapshot, a model's usage) replace the
unsent one before them. Must not decide anything: it only carries.
"""

from __future__ import annotations

import logging
import pickle
import struct
import threading
from collections.abc import Hashable
from dataclasses import dataclass
from typing import BinaryIO

from stoker.fleet.commands import EnsureResult, Route
from stoker.fleet.snapshot import AppSnapshot
from stoker.library.model_ids import Catalog

log = logging.getLogger(__name__)

_LENGTH = struct.Struct(">I")
MAX_FRAME = 256 * 1024 * 1024


class LinkClosed(Exception):
    """The other side has gone (end of file or a broken pipe)."""


# ---------------------------------------------------------------------- Stoker → gateway


@dataclass(frozen=True)
class Hello:
    """The first message: what the gateway needs before it can answer anything."""

    port: int
    cors_origins: tuple[str, ...]
    parent_pid: int
    socket_shares: tuple[bytes, ...] = ()  # Windows: socket.share() of each listening socket
    socket_fds: tuple[int, ...] = ()  # elsewhere: the inherited descriptors


@dataclass(frozen=True)
class SnapshotChanged:
    snapshot: AppSnapshot
    tray_shown: bool | None


@dataclass(frozen=True)
class CatalogChanged:
    catalog: Catalog


@dataclass(frozen=True)
class KeyChanged:
    key: str | None  # the keyring's API key; never logged, never in argv
    unreadable: bool = False  # the keyring could not be read and no key is known: answer 503


@dataclass(frozen=True)
class RouteOpened:
    route: Route
    at: float


@dataclass(frozen=True)
class RouteClosed:
    key: str
    forget: bool = False  # also drop when it was last used (the model left the residents)
    asked: int | None = None  # answer IdleAnswer(asked, True) once closed: the engine stops next


@dataclass(frozen=True)
class CloseIfIdle:
    asked: int
    key: str


@dataclass(frozen=True)
class EnsureAnswered:
    ticket: Hashable
    result: EnsureResult


@dataclass(frozen=True)
class Rescanned:
    asked: int
    catalog: Catalog


@dataclass(frozen=True)
class Shutdown:
    pass


# ---------------------------------------------------------------------- gateway → Stoker


@dataclass(frozen=True)
class Listening:
    port: int


@dataclass(frozen=True)
class EnsureWanted:
    ticket: Hashable
    model_path: str | None


@dataclass(frozen=True)
class CommandWanted:
    command: object  # a frozen, picklable command from stoker/fleet/commands.py (no callables)


@dataclass(frozen=True)
class UsageChanged:
    key: str
    in_flight: int
    last_used: float | None
    released: bool


@dataclass(frozen=True)
class IdleAnswer:
    asked: int
    closed: bool


@dataclass(frozen=True)
class RescanWanted:
    asked: int


# ---------------------------------------------------------------------- framing


def write_frame(stream: BinaryIO, message: object) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    try:
        stream.write(_LENGTH.pack(len(data)) + data)
        stream.flush()
    except (BrokenPipeError, ValueError, OSError) as exc:
        raise LinkClosed(str(exc)) from None


def _read_exact(stream: BinaryIO, n: int) -> bytes:
    parts: list[bytes] = []
    while n:
        try:
            chunk = stream.read(n)
        except (ValueError, OSError) as exc:
            raise LinkClosed(str(exc)) from None
        if not chunk:
            raise LinkClosed("end of file")
        parts.append(chunk)
        n -= len(chunk)
    return b"".join(parts)


def read_frame(stream: BinaryIO) -> object:
    (n,) = _LENGTH.unpack(_read_exact(stream, _LENGTH.size))
    if n > MAX_FRAME:
        raise LinkClosed(f"a frame of {n} bytes is not from Stoker")
    return pickle.loads(_read_exact(stream, n))


class Outbox:
    """Messages written in order by one thread, so that no sender waits on the pipe.

    `put` queues a message; `put_latest(slot, message)` keeps only the newest message of a
    slot (a snapshot, one model's usage) and sends it after the ordered ones queued before.
    When the pipe breaks, `on_closed` is called once and later messages are dropped.
    """

    def __init__(self, stream: BinaryIO, name: str, on_closed=None) -> None:
        self._stream = stream
        self._cond = threading.Condition()
        self._ordered: list[object] = []
        self._latest: dict[Hashable, object] = {}
        self._closed = False
        self._on_closed = on_closed
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def put(self, message: object) -> None:
        with self._cond:
            if not self._closed:
                self._ordered.append(message)
                self._cond.notify()

    def put_latest(self, slot: Hashable, message: object) -> None:
        with self._cond:
            if not self._closed:
                self._latest.pop(slot, None)  # re-inserted last: slots keep their send order
                self._latest[slot] = message
                self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not (self._ordered or self._latest or self._closed):
                    self._cond.wait()
                if self._closed and not (self._ordered or self._latest):
                    return
                batch = self._ordered + list(self._latest.values())
                self._ordered, self._latest = [], {}
            try:
                for message in batch:
                    write_frame(self._stream, message)
            except LinkClosed as exc:
                log.debug("the gateway link closed: %s", exc)
                with self._cond:
                    self._closed = True
                    self._ordered, self._latest = [], {}
                if self._on_closed is not None:
                    self._on_closed()
                return
