"""What the gateway's parts need of each other and of Stoker, as Protocols.

The gateway is built in two processes (in Stoker's own for tests and benches, in the gateway
process with mirrors of the supervisor and the catalog), and its route modules (Ollama's API)
work through the Gateway that owns them. Naming what each side needs here keeps those
modules from importing the server (and it from importing them back). Decides nothing.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Protocol

from aiohttp import ClientSession, web

from stoker.fleet import commands as cmd
from stoker.fleet.commands import Route
from stoker.fleet.routes import Routes
from stoker.fleet.snapshot import AppSnapshot
from stoker.gateway.link import LibraryProgress
from stoker.library.model_ids import Catalog, CatalogEntry


class SupervisorSide(Protocol):
    """What the gateway asks of the supervisor: the in-process Supervisor, or the gateway
    process's SupervisorMirror (stoker/gateway/child.py), which imports this module."""

    routes: Routes

    def snapshot(self) -> AppSnapshot: ...

    def subscribe(self, callback: Callable[[AppSnapshot], None]) -> Callable[[], None]: ...

    def submit(self, command: cmd.Command) -> None: ...


class CatalogSide(Protocol):
    """What the gateway asks of the model catalog: the one Stoker keeps, or its mirror."""

    @property
    def current(self) -> Catalog: ...

    def refresh(self) -> Catalog: ...


class LibrarySide(Protocol):
    """Pulls and deletes asked over Ollama's routes, done where the disk may be touched: the
    gateway process's mirror hands them to Stoker's process (stoker/fleet/library_ops.py)."""

    def library(self, op: str, name: str, on_progress: Callable[[LibraryProgress], None]) -> int: ...


class RequestLeaser(Protocol):
    """The part of the gateway's EngineForwarder a route module leases through."""

    async def lease(self, request: web.Request, path: str, key: str | None, *,
                    load: bool = True) -> tuple[Route | None, web.StreamResponse | None]: ...


class GatewayCore(Protocol):
    """What a route module (stoker/gateway/ollama.py) uses of the Gateway that owns it."""

    _sup: SupervisorSide
    _catalog: CatalogSide
    _session: ClientSession | None  # None while the gateway is not serving
    _library: LibrarySide | None  # None for a gateway served inside Stoker's own process

    async def _resolve(self, name: str | None) -> CatalogEntry | None: ...

    @property
    def forwarder(self) -> RequestLeaser: ...

    def _cors_headers(self, request: web.Request, headers: MutableMapping[str, str]) -> None: ...
