"""One request's way to an engine and back: the lease, the forward, and a crash under it.

The gateway (stoker/gateway/server.py) decides what a request is: its Host, Origin and
key, its route, the model it names. This part takes it from there. It leases the model's
READY engine, or asks the supervisor to load it and holds the request (sending nothing,
at most MAX_WAITING_REQUESTS at once) until it can; forwards it with the engine's key and
without the client's hop-by-hop headers; streams the answer back unbuffered; and, when the
engine dies under the request, answers the 502 or ends the stream with its API's error
event, naming the incident the supervisor records. Kept apart so the gateway's handler
stays the checks and the routing, and the upstream side is read in one place.

It must not choose a model, nor decide anything about memory or lifecycles (the
supervisor does), and it answers errors only through the gateway's own helper, so each
one has the shape and the CORS headers of every other.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import time
from collections.abc import MutableMapping
from typing import Protocol

from aiohttp import ClientSession, web

from stoker.fleet import commands as cmd
from stoker.fleet.commands import Route
from stoker.fleet.residency import MAX_WAITING_REQUESTS, RETRY_AFTER_S
from stoker.gateway.images import cancel_if_engine_cannot
from stoker.gateway.metrics import GatewayMetrics
from stoker.gateway.rules import ANTHROPIC_PATHS, error_body
from stoker.gateway.seams import SupervisorSide
from stoker.gateway.upstream import UPSTREAM_ERRORS, send_to_engine

log = logging.getLogger(__name__)

HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
                        "trailers", "transfer-encoding", "upgrade", "host", "content-length",
                        "authorization", "x-api-key", "accept-encoding"})
RESPONSE_DROP = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length",
                           "content-encoding", "server", "date", "access-control-allow-origin",
                           "access-control-allow-credentials", "access-control-allow-headers",
                           "access-control-allow-methods"})
CRASH_WAIT_S = 2.0  # how long a failed upstream waits for the supervisor to name the incident


class ForwarderHost(Protocol):
    """What the forwarder uses of the Gateway that owns it."""

    _sup: SupervisorSide
    _session: ClientSession | None  # opened on the gateway's loop; None until it serves
    metrics: GatewayMetrics

    def _error(self, path: str, status: int, message: str, *, code: str | None = None,
               param: str | None = None, request: web.Request | None = None) -> web.Response: ...

    def _cors_headers(self, request: web.Request, headers: MutableMapping[str, str]) -> None: ...


class EngineForwarder:
    """Leases an engine for a request and forwards it (on the gateway's loop only)."""

    def __init__(self, gw: ForwarderHost) -> None:
        self._gw = gw
        self._sup = gw._sup
        self.metrics = gw.metrics
        # The gateway's helpers, so an error from here is shaped as every other it answers.
        self._error = gw._error
        self._cors_headers = gw._cors_headers
        self._tickets = itertools.count(1)
        self._waiting = 0  # requests held for a load (gateway thread only)

    @property
    def _session(self) -> ClientSession | None:
        return self._gw._session  # the gateway opens and closes it with its loop

    async def lease(self, request: web.Request, path: str, key: str | None, *,
                     load: bool = True) -> tuple[Route | None, web.StreamResponse | None]:
        """A route to a READY engine for `key`, loading it on demand (`load`); or an error response."""
        routes = self._sup.routes
        for _ in range(5):
            route = routes.acquire(key) if key else None
            if route is not None:
                return route, None
            if not load:
                return None, self._error(path, 503, f"{request.method} {path} is answered only by a model "
                                         "that is already loaded, and none is; load one with a request "
                                         "to an inference route or `stoker load`.", request=request)
            if self._waiting >= MAX_WAITING_REQUESTS:
                resp = self._error(path, 503, f"{self._waiting} requests are already waiting for models "
                                   f"to load; try again in {RETRY_AFTER_S} s.", request=request)
                resp.headers["Retry-After"] = str(RETRY_AFTER_S)
                return None, resp
            result = await self._ensure(key)
            if result.error is not None:
                return None, self._error(path, 503, result.error, request=request)
            if key is None and result.route is not None:
                key = result.route.key
        return None, self._error(path, 503, "the model was unloaded again while this request waited; "
                                 "try again.", request=request)

    async def _ensure(self, key: str | None):
        loop = asyncio.get_running_loop()
        future: asyncio.Future = loop.create_future()
        ticket = ("gateway", next(self._tickets))

        def settle(result: cmd.EnsureResult) -> None:
            if not future.done():
                future.set_result(result)

        def answer(result: cmd.EnsureResult) -> None:  # on the supervisor thread
            loop.call_soon_threadsafe(settle, result)

        self._waiting += 1
        self.metrics.waiting(key, 1)
        try:
            self._sup.submit(cmd.EnsureModel(model_path=key, ticket=ticket, answer=answer))
            return await future
        except asyncio.CancelledError:
            # The client left while its model loaded: the load is cancelled if nobody else waits.
            self._sup.submit(cmd.CancelEnsure(ticket))
            raise
        finally:
            self._waiting -= 1
            self.metrics.waiting(key, -1)

    async def forward(self, request: web.Request, path: str, body: bytes,
                       key: str | None, tap=None, *, load: bool = True) -> web.StreamResponse:
        # `tap` (chunk(bytes), finish(status)) sees the answer too: the Responses state keeps it.
        request["stoker_counted"] = True
        taps = (self.metrics.start(key, path),) + ((tap,) if tap is not None else ())
        status = 502
        try:
            response = await self._forward_to_engine(request, path, body, key, taps, load=load)
            status = response.status
            return response
        except (ConnectionResetError, asyncio.CancelledError):
            # The client left: before the answer ended (499), or after its end event, when it
            # closed before the gateway ended the chunked body (then it was answered).
            status = request.get("stoker_upstream_status", 499) if taps[0].answer_whole() else 499
            raise
        finally:
            for t in taps:
                t.finish(status)

    async def _forward_to_engine(self, request: web.Request, path: str, body: bytes, key: str | None,
                                 taps: tuple, *, load: bool = True) -> web.StreamResponse:
        route, error = await self.lease(request, path, key, load=load)
        if error is not None:
            return error
        assert route is not None  # lease gives a route or an error, never neither
        session = self._session
        if session is None:  # the gateway is stopping
            return self._error(path, 503, "Stoker's endpoint is stopping; try again in a moment.", request=request)
        routes = self._sup.routes
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        headers["Accept-Encoding"] = "identity"
        if route.engine_key:
            headers["Authorization"] = f"Bearer {route.engine_key}"
        url = route.endpoint + request.path_qs
        response: web.StreamResponse | None = None
        upstream = None
        try:
            try:
                upstream = await send_to_engine(session, request.method, url, headers=headers,
                                                  data=body if body else None)
            except UPSTREAM_ERRORS as exc:
                return await self._crashed(request, path, route, exc)
            ctype = upstream.headers.get("Content-Type", "")
            out_headers = {k: v for k, v in upstream.headers.items() if k.lower() not in RESPONSE_DROP}
            self._cors_headers(request, out_headers)
            if "text/event-stream" in ctype or upstream.headers.get("Content-Length") is None:
                out_headers["X-Accel-Buffering"] = "no"
                out_headers.setdefault("Cache-Control", "no-cache")
                request["stoker_upstream_status"] = upstream.status
                response = web.StreamResponse(status=upstream.status, headers=out_headers)
                response.enable_chunked_encoding()
                await response.prepare(request)
                while True:
                    # Only the read is the engine's: a failed write is the client leaving (below).
                    try:
                        chunk = await upstream.content.readany()
                    except UPSTREAM_ERRORS as exc:
                        await self._stream_broke(request, response, path, route, exc)
                        return response
                    if not chunk:
                        break
                    for t in taps:
                        t.chunk(chunk)
                    await response.write(chunk)
                await response.write_eof()
                return response
            try:
                data = await upstream.read()
            except UPSTREAM_ERRORS as exc:
                return await self._crashed(request, path, route, exc)
            for t in taps:
                t.chunk(data)
            return web.Response(status=upstream.status, body=data, headers=out_headers)
        except (ConnectionResetError, asyncio.CancelledError):
            # The client left: `finally` closes the upstream request at once, and an engine
            # that cannot cancel it inside is stopped (not when it had the whole answer).
            if not taps[0].answer_whole():
                cancel_if_engine_cannot(self._sup, route, "the client left before the answer")
            raise
        finally:
            if upstream is not None:
                upstream.close()
            routes.release(route)

    async def _crashed(self, request, path: str, route, exc) -> web.Response:
        """The engine went away under a request that has sent nothing yet: 502 with the incident."""
        log.warning("%s %s: the engine at %s failed: %r", request.method, path, route.endpoint, exc)
        sentence = await self.incident_for(route)
        return self._error(path, 502, f"the model's engine stopped while answering: {sentence}",
                           request=request)

    async def _stream_broke(self, request: web.Request, response: web.StreamResponse, path: str, route,
                            exc: BaseException) -> None:
        """The engine went away mid-stream: one log line, and the stream ends with the error
        event its API defines (OpenAI: a `data:` error object; Anthropic: `event: error`)."""
        log.warning("%s %s: the engine at %s stopped mid-answer: %r", request.method, path, route.endpoint, exc)
        sentence = await self.incident_for(route)
        body = error_body(path, 502, f"the model's engine stopped while answering: {sentence}")
        try:
            if path in ANTHROPIC_PATHS:
                await response.write(b"event: error\ndata: " + json.dumps(body).encode() + b"\n\n")
            else:
                await response.write(b"data: " + json.dumps(body).encode() + b"\n\n")
            await response.write_eof()
        except (ConnectionResetError, RuntimeError):
            pass  # the client has gone too

    async def incident_for(self, route) -> str:
        """The incident the supervisor records for this engine's exit (waits briefly for it)."""
        deadline = time.monotonic() + CRASH_WAIT_S
        while time.monotonic() < deadline:
            snap = self._sup.snapshot()
            for inc in reversed(snap.incidents):
                if inc.model_path == route.key and inc.at >= time.time() - 10:
                    return f"{inc.summary} ({inc.kind}); {inc.action}"
            await asyncio.sleep(0.05)
        return "it closed the connection; Stoker restarts it on the next request"
