"""Stoker's one endpoint: an aiohttp server on a fixed loopback port, in front of every engine.

A chat client keeps one URL (`http://127.0.0.1:7857/v1`) across restarts, crashes, model
switches and loads on demand. Each request names a model id (or alias); the gateway takes a
lease on that model's READY engine from the supervisor's `routes` (no round trip through the
supervisor thread on the warm path), or asks the supervisor to make it resident
(`EnsureModel`) and holds the request, sending nothing, until it is READY. The request is
then forwarded to the engine's private port with the engine's per-launch key, and the answer
streamed back unbuffered (no compression, no Content-Length, `X-Accel-Buffering: no`, no
read timeout); when the client goes away the upstream connection is closed at once. The
lease and the forward are stoker/gateway/forwarder.py; the rules (paths, Host/Origin
checks, the API key, error shapes) are stoker/gateway/rules.py.

It runs in the gateway process (stoker/gateway/child.py: mirrors of the supervisor's
snapshot, routes and catalog fed over a pipe), on its own asyncio loop in its own thread,
so nothing in Stoker's own process (the Qt thread, the planner) shares its interpreter. The
sockets are bound by Stoker (`bind_sockets`, 127.0.0.1 and ::1 only) and handed over: a
taken port is `GatewayError` with one sentence; it never picks another port. It decides
nothing about memory or lifecycles: the supervisor does.
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import ClientSession, ClientTimeout, TCPConnector, web

from stoker.fleet.snapshot import AppSnapshot, EngineState
from stoker.gateway.forwarder import EngineForwarder
from stoker.gateway.guard import ConnectionGuard, GuardedSite
from stoker.gateway.images import serve_image_request
from stoker.gateway.listing import model_entry
from stoker.gateway.metrics import GatewayMetrics
from stoker.gateway.ollama import OllamaApi, keep_alive_refusal, submit_keep_alive
from stoker.gateway.ollama_rules import OLLAMA_PREFIX
from stoker.gateway.responses_state import ResponseStore, serve_responses
from stoker.gateway.rules import (
    ANY_MODEL,
    KEY_UNREADABLE_MESSAGE,
    NO_KEY,
    OPEN_PATHS,
    PASS_THROUGH,
    GatewayKey,
    KeyVerdict,
    error_body,
    fetch_site_allowed,
    host_allowed,
    key_verdict,
    may_load_model,
    origin_allowed,
    requested_model,
    unknown_model_message,
    wrong_kind_message,
)
from stoker.gateway.seams import CatalogSide, LibrarySide, SupervisorSide
from stoker.library.model_ids import CatalogEntry, ModelKind

log = logging.getLogger(__name__)

MAX_BODY = 64 * 1024 * 1024  # images in chat requests are base64: allow generous bodies
EVENT_KEEPALIVE_S = 15.0
# An idle upstream connection is dropped after this long, well before llama-server's own
# keep-alive timeout (cpp-httplib closes idle connections after 5 s): reusing one the engine
# has just closed answered a client 502 "engine stopped" (seen in `stoker bench gateway`).
UPSTREAM_KEEPALIVE_S = 2.0
RESCAN_MIN_S = 2.0


class GatewayError(Exception):
    """The gateway could not start; the message is one sentence saying what to do."""


@dataclass(frozen=True)
class GatewayConfig:
    port: int
    cors_origins: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ("127.0.0.1", "::1")


def bind_sockets(port: int, hosts: tuple[str, ...]) -> list[socket.socket]:
    """Listening sockets on each loopback address, or GatewayError naming the taken port.
    ::1 is skipped (with a log line) where the machine has no IPv6 loopback."""
    out: list[socket.socket] = []
    for host in hosts:
        if out:
            port = out[0].getsockname()[1]  # port 0 (tests): every address on the same port
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        try:
            s = socket.socket(family, socket.SOCK_STREAM)
        except OSError:
            log.info("no %s socket here; the gateway listens without %s", family.name, host)
            continue
        try:
            if sys.platform == "win32":
                s.setsockopt(socket.SOL_SOCKET, socket.SO_EXCLUSIVEADDRUSE, 1)
            else:  # lets a restart bind while old connections linger in TIME_WAIT, never a live port
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            s.bind((host, port))
            s.listen(512)
            s.setblocking(False)
        except OSError as exc:
            s.close()
            if exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT) and family == socket.AF_INET6:
                log.info("no IPv6 loopback here; the gateway listens on 127.0.0.1 only")
                continue
            for done in out:
                done.close()
            if exc.errno in (errno.EADDRINUSE, errno.EACCES, getattr(errno, "WSAEADDRINUSE", -1)):
                raise GatewayError(
                    f"port {port} on {host} is already in use by another program, so Stoker's endpoint "
                    f"cannot start there; stop that program, or choose another port with --port or in "
                    f"Settings.") from None
            raise GatewayError(f"the endpoint could not listen on {host}:{port} ({exc.strerror or exc}); "
                               f"choose another port with --port or in Settings.") from None
        out.append(s)
    if not out:
        raise GatewayError(f"no loopback address could be used for port {port}.")
    return out


class Gateway:
    """`start()` binds (GatewayError when it cannot) and serves from its own thread."""

    def __init__(self, supervisor: SupervisorSide, catalog: CatalogSide, config: GatewayConfig, *,
                 status: Callable[[], dict], api_key: Callable[[], GatewayKey] | None = None,
                 sockets: list[socket.socket] | None = None, responses: ResponseStore | None = None,
                 library: LibrarySide | None = None) -> None:
        self._sup = supervisor
        self._library = library  # Ollama's pull/delete, done by Stoker's process (the child's mirror)
        self._catalog = catalog
        self._config = config
        self._status = status
        self._read_key = api_key or (lambda: NO_KEY)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stopped: asyncio.Event | None = None
        self._sockets: list[socket.socket] = list(sockets or ())
        self._session: ClientSession | None = None
        self._last_rescan = float("-inf")
        self._event_queues: set[asyncio.Queue] = set()
        self._unsubscribe: Callable[[], None] | None = None
        self.port = config.port
        self._ollama = OllamaApi(self)  # Ollama's /api/* routes (stoker/gateway/ollama.py)
        # --- metrics and Responses state (stoker/gateway/metrics.py, responses_state.py)
        self.metrics = GatewayMetrics()
        self._responses = responses if responses is not None else ResponseStore(None)
        # The lease and the forward of each request to its engine (stoker/gateway/forwarder.py).
        self.forwarder = EngineForwarder(self)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> Gateway:
        if not self._sockets:
            self._sockets = bind_sockets(self._config.port, self._config.hosts)
        self.port = self._sockets[0].getsockname()[1]
        self._thread = threading.Thread(target=self._serve, name="stoker-gateway", daemon=True)
        self._thread.start()
        if not self._ready.wait(15):
            raise GatewayError("the endpoint did not start within 15 s; see stoker.log.")
        self._unsubscribe = self._sup.subscribe(self._on_snapshot)
        return self

    def stop(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
        if self._loop is not None and self._stopped is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
        if self._thread is not None:
            self._thread.join(10)

    def _serve(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._main())
        except Exception:
            log.exception("the gateway stopped")
        finally:
            loop.close()

    async def _main(self) -> None:
        self._stopped = asyncio.Event()
        app = web.Application(client_max_size=MAX_BODY, handler_args={"tcp_keepalive": True})
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app, handle_signals=False, access_log=None, handler_cancellation=True,
                               shutdown_timeout=1.0)
        await runner.setup()
        self._session = ClientSession(
            connector=TCPConnector(limit=0, force_close=False, enable_cleanup_closed=True,
                                   keepalive_timeout=UPSTREAM_KEEPALIVE_S),
            timeout=ClientTimeout(total=None, sock_connect=10, sock_read=None),
            auto_decompress=False, skip_auto_headers=("User-Agent",))
        guard = ConnectionGuard.for_this_process()  # a cap and a request-head timeout (issue 21)
        for s in self._sockets:
            await GuardedSite(runner, s, guard).start()
        self._ready.set()
        try:
            await self._stopped.wait()
        finally:
            for q in list(self._event_queues):
                q.put_nowait(None)
            await self._session.close()
            await runner.cleanup()

    # ------------------------------------------------------------------ snapshots → events

    def _on_snapshot(self, snap: AppSnapshot) -> None:
        """On the supervisor thread: hand the snapshot to every events stream."""
        self.metrics.on_snapshot(snap)
        loop = self._loop
        if loop is None or not self._event_queues:
            return
        loop.call_soon_threadsafe(self._fan_out, snap.seq)

    def _fan_out(self, seq: int) -> None:
        for q in list(self._event_queues):
            if q.qsize() < 64:
                q.put_nowait(seq)

    # ------------------------------------------------------------------ requests

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        origin = request.headers.get("Origin")
        if not host_allowed(request.headers.get("Host")):
            return self._error(path, 403, "The Host header names no loopback address; Stoker answers "
                               "only requests for localhost (this guards against DNS rebinding).")
        cors = origin_allowed(origin, self._config.cors_origins)
        if not cors:
            return self._error(path, 403, f"Requests from the web page at {origin} are not allowed; add "
                               "that origin in Stoker's Settings to allow it.")
        if not fetch_site_allowed(request.headers.get("Sec-Fetch-Site"), origin, self._config.cors_origins):
            return self._error(path, 403, "Requests from another web site are not allowed unless they come "
                               "from an origin added in Stoker's Settings (a page cannot make Stoker "
                               "load models).")
        if request.method == "OPTIONS":
            return self._preflight(request)
        resp = await self._route(request, path)
        if "stoker_counted" not in request and path not in OPEN_PATHS and path != "/metrics" \
                and not path.startswith("/stoker/"):  # answered by the gateway itself: count it here
            self.metrics.refused(None, path, resp.status)
        return resp

    async def _route(self, request: web.Request, path: str) -> web.StreamResponse:
        if path in OPEN_PATHS:
            return self._json(request, {"status": "ok"})
        verdict = key_verdict(self._read_key(), request.headers.get("Authorization"),
                              request.headers.get("x-api-key"))
        if verdict is KeyVerdict.UNREADABLE:
            return self._error(path, 503, KEY_UNREADABLE_MESSAGE, request=request)
        if verdict is KeyVerdict.MISSING:
            return self._error(path, 401, "A valid API key is required: send it as "
                               "`Authorization: Bearer <key>` or `x-api-key: <key>` (set it in Stoker's "
                               "Settings).", request=request)
        if path in ("/v1/models", "/models") and request.method == "GET":
            return self._json(request, self._models_list())
        if path == "/stoker/v1/status" and request.method == "GET":
            loop = asyncio.get_running_loop()
            return self._json(request, await loop.run_in_executor(None, self._status))
        if path == "/stoker/v1/events" and request.method == "GET":
            return await self._events(request)
        # ---- Ollama's API (stoker/gateway/ollama.py): after the key, Host and Origin checks
        if path.startswith(OLLAMA_PREFIX):
            return await self._ollama.serve(request, path)
        # ---- end of Ollama's API
        if path == "/metrics" and request.method == "GET" and not request.query_string:
            # Stoker's own metrics; `/metrics?model=ID` still reaches that engine's own.
            text = self.metrics.text(self._catalog.current, lambda key: self._sup.routes.usage(key)[0])
            return web.Response(text=text, content_type="text/plain", charset="utf-8",
                                headers={"X-Prometheus-Format": "0.0.4"})
        if path not in PASS_THROUGH and path not in ANY_MODEL:
            return self._error(path, 404, f"{request.method} {path} is not an endpoint Stoker serves; "
                               "see `GET /v1/models` and the README's endpoint list.", request=request)
        if path in PASS_THROUGH and request.method != "POST":
            return self._error(path, 405, f"{path} answers POST only.", request=request)
        loads = may_load_model(request.method, path)
        body = await request.read()
        name = requested_model(body, request.headers.get("Content-Type"), request.query_string if loads else "")
        entry = await self._resolve(name)
        if entry is None and name:
            catalog = self._catalog.current
            return self._error(path, 404, unknown_model_message(name, catalog.closest(name)),
                               code="model_not_found", param="model", request=request)
        if entry is not None and path in PASS_THROUGH and PASS_THROUGH[path] is not entry.kind:
            able = tuple(e.id for e in self._catalog.current.serving(PASS_THROUGH[path]))
            return self._error(path, 400, wrong_kind_message(entry.id, entry.kind, path, able),
                               param="model", request=request)
        if PASS_THROUGH.get(path) is ModelKind.IMAGE:  # it chooses its own model when none is named
            return await serve_image_request(self, request, path, body, entry)
        key = entry.path if entry is not None else self._default_model(PASS_THROUGH.get(path))
        if key is None and path in PASS_THROUGH and self._sup.snapshot().model_path:
            able = tuple(e.id for e in self._catalog.current.serving(PASS_THROUGH[path]))
            return self._error(path, 400, "This request names no model, and no model that is loaded or was "
                               f"last used can answer {path}; name one in `model`"
                               + (f": {', '.join(able[:5])}." if able else " (none is installed)."),
                               param="model", request=request)
        # ---- a request's keep_alive / ttl (stoker/gateway/ollama.py): refused before, applied after
        refusal = keep_alive_refusal(body) if entry is not None else None
        if refusal is not None:
            return self._error(path, 400, refusal, param="keep_alive", request=request)
        if path == "/v1/responses" and request.method == "POST":
            response = await serve_responses(self, request, path, body, key, self._responses)
        else:
            response = await self.forwarder.forward(request, path, body, key, load=loads)
        if entry is not None:
            submit_keep_alive(self._sup, entry.path, body)
        # ---- end of keep_alive / ttl
        return response

    async def _resolve(self, name: str | None) -> CatalogEntry | None:
        if not name:
            return None
        entry = self._catalog.current.resolve(name)
        now = time.monotonic()
        if entry is None and now - self._last_rescan >= RESCAN_MIN_S:
            # A model added since the last scan: look once more before a 404 (at most every
            # RESCAN_MIN_S, so a client repeating a wrong name cannot keep the disk busy).
            self._last_rescan = now
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, self._catalog.refresh)
            entry = self._catalog.current.resolve(name)
        return entry

    def _default_model(self, kind: ModelKind | None) -> str | None:
        """A request naming no model goes to the loaded one (the most recently used when
        several are), else the last used one; of the kind the path serves, when it names one
        (a chat without a model never lands on a loaded image or embedding engine)."""
        snap = self._sup.snapshot()
        catalog = self._catalog.current

        def serves(path: str | None) -> bool:
            entry = catalog.by_path(path) if path else None
            return kind is None or entry is None or entry.kind is kind

        ready = [e for e in snap.engines if e.state is EngineState.READY and e.model_path and serves(e.model_path)]
        if ready:
            return max(ready, key=lambda e: e.last_used_at or 0.0).model_path
        return snap.model_path if serves(snap.model_path) else None

    # ------------------------------------------------------------------ to an engine (forwarder.py)

    # ------------------------------------------------------------------ Stoker's own endpoints

    def _models_list(self) -> dict:
        views = {e.model_path: e for e in self._sup.snapshot().engines}
        planned = self._ollama.planned_contexts(views)
        return {"object": "list", "data": [model_entry(entry, views.get(entry.path), planned.get(entry.path))
                                           for entry in self._catalog.current.entries]}

    async def _events(self, request: web.Request) -> web.StreamResponse:
        """Server-sent events: the status object each time the supervisor publishes."""
        loop = asyncio.get_running_loop()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                           "X-Accel-Buffering": "no"})
        self._cors_headers(request, resp.headers)
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        q: asyncio.Queue = asyncio.Queue()
        self._event_queues.add(q)
        last = -1
        try:
            q.put_nowait(self._sup.snapshot().seq)
            while True:
                try:
                    seq = await asyncio.wait_for(q.get(), EVENT_KEEPALIVE_S)
                except TimeoutError:
                    await resp.write(b": keep-alive\n\n")
                    continue
                if seq is None:
                    break
                if seq <= last:
                    continue
                status = await loop.run_in_executor(None, self._status)
                last = status.get("seq", seq)
                await resp.write(b"event: status\ndata: " + json.dumps(status).encode() + b"\n\n")
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self._event_queues.discard(q)
        return resp

    # ------------------------------------------------------------------ helpers

    def _cors_headers(self, request: web.Request, headers) -> None:
        origin = request.headers.get("Origin")
        if origin:
            headers["Access-Control-Allow-Origin"] = origin
            headers["Vary"] = "Origin"

    def _preflight(self, request: web.Request) -> web.Response:
        headers = {"Access-Control-Allow-Methods": "GET, POST, OPTIONS",
                   "Access-Control-Allow-Headers": request.headers.get(
                       "Access-Control-Request-Headers", "authorization, content-type, x-api-key"),
                   "Access-Control-Max-Age": "600"}
        self._cors_headers(request, headers)
        return web.Response(status=204, headers=headers)

    def _json(self, request: web.Request, obj: dict, status: int = 200) -> web.Response:
        headers: dict = {}
        self._cors_headers(request, headers)
        return web.json_response(obj, status=status, headers=headers)

    def _error(self, path: str, status: int, message: str, *, code: str | None = None,
               param: str | None = None, request: web.Request | None = None) -> web.Response:
        headers: dict = {}
        if request is not None:
            self._cors_headers(request, headers)
        return web.json_response(error_body(path, status, message, code=code, param=param),
                                 status=status, headers=headers)
