"""The gateway's door: a connection cap and a request-head timeout around aiohttp's server.

aiohttp's server has neither: 1,100 connections that each sent half a request held every
descriptor of the gateway process (soft limit 1,024), so /health timed out and every
accept() failed and was logged. `ConnectionGuard` wraps each connection's protocol: a
connection that has not sent a whole request head (the blank line after the headers)
within HEADER_TIMEOUT_S is dropped, and past the cap a new connection takes the slot of the
oldest one still sending its head (rules.admission decides). What a request may do once
its head is in is the server's business, not this module's. `raise_open_file_limit` lifts
the process's soft limit to its hard one. Must not log per connection (a flood would flood
the log): drops are counted and told at most once a minute.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections import OrderedDict
from collections.abc import Callable

from aiohttp import web

from stoker.gateway.rules import (
    HEADER_TIMEOUT_S,
    Admission,
    admission,
    connection_cap,
    open_files_soft_limit,
)

if sys.platform != "win32":
    import resource

log = logging.getLogger(__name__)

DROP_REPORT_S = 60.0
_HEAD_END = b"\r\n\r\n"


def raise_open_file_limit() -> int | None:
    """Lift the open-file soft limit to the hard limit; the soft limit now (None: no such
    limit here, as on Windows)."""
    if sys.platform == "win32":
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = open_files_soft_limit(soft, hard, resource.RLIM_INFINITY)
    if target is not None:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:
            log.warning("the open-file limit stays at %d (%s)", soft, exc)
    return None if soft == resource.RLIM_INFINITY else soft


class ConnectionGuard:
    """Counts the open connections; hands out guarded protocols (`factory`)."""

    def __init__(self, cap: int, *, head_timeout_s: float = HEADER_TIMEOUT_S,
                 clock: Callable[[], float] | None = None) -> None:
        self.cap = cap
        self.head_timeout_s = head_timeout_s
        self._open: set[_Guarded] = set()
        self._waiting: OrderedDict[_Guarded, None] = OrderedDict()  # oldest first
        self._dropped = 0
        self._refused = 0
        self._reported_at: float | None = None
        self._clock = clock

    @classmethod
    def for_this_process(cls) -> ConnectionGuard:
        return cls(connection_cap(raise_open_file_limit()))

    def factory(self, inner: Callable[[], asyncio.Protocol]) -> Callable[[], asyncio.Protocol]:
        return lambda: _Guarded(self, inner())

    @property
    def open_count(self) -> int:
        return len(self._open)

    def _admit(self, conn: _Guarded) -> bool:
        verdict = admission(len(self._open), self.cap, len(self._waiting))
        if verdict is Admission.REFUSE:
            self._refused += 1
            self._report()
            return False
        if verdict is Admission.EVICT_OLDEST_WAITING:
            oldest = next(iter(self._waiting))
            self._dropped += 1
            oldest.drop()
        self._open.add(conn)
        self._waiting[conn] = None
        return True

    def _head_done(self, conn: _Guarded) -> None:
        self._waiting.pop(conn, None)

    def _late(self, conn: _Guarded) -> None:
        self._dropped += 1
        conn.drop()
        self._report()

    def _gone(self, conn: _Guarded) -> None:
        self._open.discard(conn)
        self._waiting.pop(conn, None)

    def _report(self) -> None:
        now = self._clock() if self._clock else asyncio.get_running_loop().time()
        if self._reported_at is not None and now - self._reported_at < DROP_REPORT_S:
            return
        self._reported_at = now
        if self._dropped or self._refused:
            log.warning("the endpoint dropped %d connections that sent no whole request within %g s "
                        "or were the oldest such past %d open, and refused %d with every slot busy",
                        self._dropped, self.head_timeout_s, self.cap, self._refused)
            self._dropped = self._refused = 0


class _Guarded(asyncio.Protocol):
    """One connection: aiohttp's protocol inside, watched until its first request head is in."""

    def __init__(self, guard: ConnectionGuard, inner: asyncio.Protocol) -> None:
        self._guard = guard
        self._inner = inner
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._tail = b""
        self._admitted = False

    def connection_made(self, transport) -> None:
        self._transport = transport
        if not self._guard._admit(self):
            transport.abort()
            return
        self._admitted = True
        self._timer = asyncio.get_running_loop().call_later(self._guard.head_timeout_s,
                                                            self._guard._late, self)
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if not self._admitted:
            return
        if self._timer is not None:
            seen = self._tail + data
            if _HEAD_END in seen:
                self._timer.cancel()
                self._timer = None
                self._guard._head_done(self)
            else:
                self._tail = seen[-3:]
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received() if self._admitted else None

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._admitted:
            return
        self._guard._gone(self)
        self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()

    def drop(self) -> None:
        """Close at once (no lingering): the descriptor is what is short."""
        self._guard._gone(self)
        if self._transport is not None:
            self._transport.abort()


class GuardedSite(web.SockSite):
    """aiohttp's SockSite, serving through a ConnectionGuard."""

    def __init__(self, runner: web.BaseRunner, sock, guard: ConnectionGuard, **kwargs) -> None:
        super().__init__(runner, sock, **kwargs)
        self._guard = guard

    async def start(self) -> None:
        await web.BaseSite.start(self)  # registers the site with its runner
        server = self._runner.server
        assert server is not None
        self._server = await asyncio.get_running_loop().create_server(
            self._guard.factory(server), sock=self._sock, backlog=self._backlog)
