"""The pipe between Stoker and its gateway process: the messages, their framing, an outbox.

The gateway runs in a child process so that nothing Stoker's own process does (a busy UI
thread holding the GIL, a plan being computed) can delay a streamed chunk. The two sides
talk over the child's stdin (Stoker → gateway) and stdout (gateway → Stoker): each frame is
a 4-byte big-endian length and a pickle of one of the frozen messages below. Both ends are
this program, spawned by it on pipes only the two of them hold, so pickle carries values
that are already frozen dataclasses (snapshots, the catalog, routes) without a schema of
their own. Each direction has one union of messages (`ParentToChild`, `ChildToParent`),
matched exhaustively by its reader; `Hello` carries `PROTOCOL_VERSION`, the API key and the
catalog, and the child answers no request before it. A sender never blocks on the pipe:
`Outbox` writes from its own thread, and messages that only matter at their latest (a
snapshot, a model's usage) replace the unsent one before them. Must not decide anything: it only carries.
"""

from __future__ import annotations

import logging
import pickle
import struct
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import IO, TypeGuard, get_args

from stoker.fleet import commands as cmd
from stoker.fleet.commands import EnsureResult, Route
from stoker.fleet.snapshot import AppSnapshot
from stoker.gateway.rules import GatewayKey
from stoker.library.model_ids import Catalog

log = logging.getLogger(__name__)

_LENGTH = struct.Struct(">I")
MAX_FRAME = 256 * 1024 * 1024


class LinkClosed(Exception):
    """The other side has gone (end of file or a broken pipe)."""


class LinkVersionError(Exception):
    """A frame names a message this side does not have: the two sides are not one version."""


# The version of the messages below. Stoker spawns its gateway from its own install, so the
# two can only differ after a half-finished upgrade; then the child says so and exits.
PROTOCOL_VERSION = 2
VERSION_MISMATCH_EXIT = 3  # the child's exit status when Hello's version is not its own


# ---------------------------------------------------------------------- Stoker → gateway


@dataclass(frozen=True)
class OpenRoute:
    route: Route
    at: float  # when it became READY or was last used, for the child's idle accounting


@dataclass(frozen=True)
class Hello:
    """The first message: everything the gateway needs before it may answer anything, the
    API key and the catalog included, so no request is ever served before the key is known."""

    version: int
    port: int
    cors_origins: tuple[str, ...]
    parent_pid: int
    api_key: GatewayKey  # the keyring's API key (or that it could not be read); never logged, never in argv
    catalog: Catalog
    snapshot: AppSnapshot
    tray_shown: bool | None
    routes: tuple[OpenRoute, ...] = ()
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
    """Take no more leases on this engine. `asked`: answer `IdleAnswer(asked, key, True)` once
    closed, so the engine is stopped only after the gateway can no longer lease it."""

    key: str
    forget: bool = False  # also drop when it was last used (the model left the residents)
    asked: int | None = None


@dataclass(frozen=True)
class CloseIfIdle:
    """Close the route only with nothing in flight (atomic with leases, in the child)."""

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


@dataclass(frozen=True)
class LibraryProgress:
    """How a LibraryWanted goes: a progress line (done False), then its end (done True)."""

    asked: int
    status: str  # Ollama's progress words: "pulling manifest", "pulling NAME", "success" …
    completed: int | None = None
    total: int | None = None
    done: bool = False
    error: str | None = None  # one sentence when it could not be done


ParentToChild = (Hello | SnapshotChanged | CatalogChanged | KeyChanged | RouteOpened | RouteClosed
                 | CloseIfIdle | EnsureAnswered | Rescanned | LibraryProgress | Shutdown)


# ---------------------------------------------------------------------- gateway → Stoker


@dataclass(frozen=True)
class Listening:
    port: int


@dataclass(frozen=True)
class EnsureWanted:
    ticket: Hashable
    model_path: str | None


# The only commands the gateway may ask of the supervisor besides a load (EnsureWanted):
# giving up a wait, stopping an engine that cannot cancel a request its client left, and a
# request's own lifetime for its model (keep_alive / ttl: a new idle time, or an unload after
# the answer; num_ctx above the plan: plan again with it). Anything else arriving from the
# child is refused and logged by Stoker's side.
ChildCommand = cmd.CancelEnsure | cmd.CancelRender | cmd.KeepAlive | cmd.UnloadModel | cmd.WidenContext
CHILD_COMMANDS: tuple[type, ...] = (cmd.CancelEnsure, cmd.CancelRender, cmd.KeepAlive, cmd.UnloadModel,
                                    cmd.WidenContext)


@dataclass(frozen=True)
class CommandWanted:
    command: ChildCommand


@dataclass(frozen=True)
class UsageChanged:
    key: str
    in_flight: int
    last_used: float | None
    released: bool


@dataclass(frozen=True)
class IdleAnswer:
    """The answer to RouteClosed(asked=…) (always closed) or CloseIfIdle (closed or busy)."""

    asked: int
    key: str
    closed: bool


@dataclass(frozen=True)
class RescanWanted:
    asked: int


@dataclass(frozen=True)
class LibraryWanted:
    """Ollama's /api/pull and /api/delete: done in Stoker's process (stoker/fleet/library_ops.py),
    which touches the disk; answered with LibraryProgress."""

    asked: int
    op: str  # "pull" (name: hf.co/OWNER/REPO[:QUANT]) or "delete" (name: the model's path)
    name: str


ChildToParent = (Listening | EnsureWanted | CommandWanted | UsageChanged | IdleAnswer | RescanWanted
                 | LibraryWanted)

_PARENT_MESSAGES: tuple[type, ...] = get_args(ParentToChild)
_CHILD_MESSAGES: tuple[type, ...] = get_args(ChildToParent)


def from_parent(message: object) -> TypeGuard[ParentToChild]:
    """Whether the child may act on this: a member of Stoker's union, nothing else."""
    return isinstance(message, _PARENT_MESSAGES)


def from_child(message: object) -> TypeGuard[ChildToParent]:
    """Whether Stoker may act on this: a member of the gateway's union, nothing else."""
    return isinstance(message, _CHILD_MESSAGES)


# ---------------------------------------------------------------------- framing


def write_frame(stream: IO[bytes], message: ParentToChild | ChildToParent) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    try:
        stream.write(_LENGTH.pack(len(data)) + data)
        stream.flush()
    except (BrokenPipeError, ValueError, OSError) as exc:
        raise LinkClosed(str(exc)) from None


def _read_exact(stream: IO[bytes], n: int) -> bytes:
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


def read_frame(stream: IO[bytes]) -> object:
    """One message as it came (the reader matches it against its side's union: anything
    else is refused there). A frame that does not unpickle is LinkVersionError."""
    (n,) = _LENGTH.unpack(_read_exact(stream, _LENGTH.size))
    if n > MAX_FRAME:
        raise LinkClosed(f"a frame of {n} bytes is not from Stoker")
    data = _read_exact(stream, n)
    try:
        return pickle.loads(data)
    except (pickle.UnpicklingError, AttributeError, ImportError, TypeError, EOFError) as exc:
        raise LinkVersionError(f"a message could not be read ({exc})") from None


class Outbox:
    """Messages written in order by one thread, so that no sender waits on the pipe.

    `put` queues a message; `put_latest(slot, message)` keeps only the newest message of a
    slot (a snapshot, one model's usage) and sends it after the ordered ones queued before.
    When the pipe breaks, `on_closed` is called once and later messages are dropped.
    """

    def __init__(self, stream: IO[bytes], name: str, on_closed: Callable[[], None] | None = None) -> None:
        self._stream = stream
        self._cond = threading.Condition()
        self._ordered: list[ParentToChild | ChildToParent] = []
        self._latest: dict[Hashable, ParentToChild | ChildToParent] = {}
        self._closed = False
        self._on_closed = on_closed
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def put(self, message: ParentToChild | ChildToParent) -> None:
        with self._cond:
            if not self._closed:
                self._ordered.append(message)
                self._cond.notify()

    def put_latest(self, slot: Hashable, message: ParentToChild | ChildToParent) -> None:
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
