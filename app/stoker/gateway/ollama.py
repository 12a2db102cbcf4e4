"""Ollama's API on the gateway's port: each request translated onto llama-server's own endpoints.

The apps that speak only Ollama's API (see stoker/gateway/ollama_rules.py) get the same
names, residency, key and browser rules as the OpenAI routes: the gateway's handler has
already checked Host, Origin and the key before a request reaches `OllamaApi.serve`, and
the model is leased and loaded on demand as every request is (`gw.forwarder.lease`). What the
request means is translated by ollama_rules (pure); this module only reads the body,
sends llama-server's request on the gateway's session, and writes the answer back as JSON
or NDJSON lines. A request's keep_alive and num_ctx become supervisor commands
(KeepAlive, UnloadModel, WidenContext): this module decides nothing about memory.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time

from aiohttp import ClientConnectionError, ClientError, web

from stoker.fleet import commands as cmd
from stoker.fleet.snapshot import AppSnapshot, EngineState, EngineView
from stoker.gateway import ollama_rules as rules
from stoker.gateway.rules import wrong_kind_message
from stoker.gateway.seams import GatewayCore
from stoker.gateway.upstream import send_to_engine
from stoker.library.model_ids import CatalogEntry, ModelKind

log = logging.getLogger(__name__)

WIDEN_WAIT_S = 30.0  # how long a num_ctx request waits for the supervisor's decision
CHAT, GENERATE, EMBED, EMBEDDINGS = "/api/chat", "/api/generate", "/api/embed", "/api/embeddings"


class OllamaApi:
    """The /api/* routes of one gateway."""

    def __init__(self, gw: GatewayCore) -> None:
        self._gw = gw
        self._planned: dict[str, int] = {}  # model path → its last plan's context per slot

    async def serve(self, request: web.Request, path: str) -> web.StreamResponse:
        try:
            if path == "/api/version" and request.method == "GET":
                return self._json(request, {"version": rules.OLLAMA_API_VERSION, "stoker": True})
            if path == "/api/tags" and request.method == "GET":
                return self._json(request, {"models": [rules.tag_entry(e) for e in self._listed()]})
            if path == "/api/ps" and request.method == "GET":
                return self._json(request, {"models": self._ps()})
            if path in rules.NOT_SUPPORTED or path.startswith(rules.BLOB_PREFIX):
                what = rules.NOT_SUPPORTED.get(path, "uploading model blobs")
                return self._error(request, 501, f"Stoker does not support {what}; it runs GGUF files from "
                                   "its library and added folders as they are.")
            if request.method != "POST" and not (path == "/api/delete" and request.method == "DELETE"):
                return self._error(request, 404 if path not in _ROUTES else 405,
                                   f"{request.method} {path} is not an Ollama endpoint Stoker serves.")
            body = rules.parse_body(await request.read())
            if path == "/api/pull":
                return await self._pull(request, body)
            if path == "/api/delete":
                return await self._delete(request, body)
            if path == "/api/show":
                return await self._show(request, body)
            if path in (CHAT, GENERATE, EMBED, EMBEDDINGS):
                return await self._answer(request, path, body)
            return self._error(request, 404, f"{request.method} {path} is not an Ollama endpoint Stoker serves.")
        except rules.OllamaRequestError as exc:
            return self._error(request, 400, str(exc))

    # ------------------------------------------------------------------ listings

    async def _entry(self, name: object) -> CatalogEntry | None:
        """The model an Ollama client's name means (see ollama_rules.name_candidates)."""
        if not isinstance(name, str) or not name.strip():
            return None
        for candidate in rules.name_candidates(name):
            entry = await self._gw._resolve(candidate)
            if entry is not None:
                return entry
        return None

    def _listed(self) -> list[CatalogEntry]:
        return [e for e in self._gw._catalog.current.entries if e.kind in (ModelKind.CHAT, ModelKind.EMBEDDING)]

    def _views(self) -> dict[str, EngineView]:
        views = {v.model_path: v for v in self._gw._sup.snapshot().engines if v.model_path}
        self.planned_contexts(views)
        return views

    def planned_contexts(self, views: dict) -> dict[str, int]:
        """Each model's context per slot in its latest plan, kept after it is unloaded (a
        listing then still says what a request will get)."""
        for key, v in views.items():
            if key and v.ctx_per_slot:
                self._planned[key] = v.ctx_per_slot
        return self._planned

    def _ps(self) -> list[dict]:
        now = time.time()
        out = []
        catalog = self._gw._catalog.current
        for key, v in self._views().items():
            entry = catalog.by_path(key)
            if entry is None or v.state is not EngineState.READY:
                continue
            in_flight, last_used = self._gw._sup.routes.usage(key)
            expires = rules.expires_at(last_used or v.last_used_at, v.idle_timeout_s, now, in_flight)
            out.append(rules.ps_entry(entry, v.bytes_by_device, v.ctx_per_slot, expires))
        return out

    async def _show(self, request: web.Request, body: dict) -> web.Response:
        name = body.get("model") or body.get("name")
        entry = await self._entry(name)
        if entry is None:
            return self._error(request, 404, rules.not_found(str(name or "")))
        view = self._views().get(entry.path)
        ctx = (view.ctx_per_slot if view is not None else None) or self._planned.get(entry.path)
        return self._json(request, rules.show_answer(entry, ctx))

    async def _pull(self, request: web.Request, body: dict) -> web.StreamResponse:
        """hf.co/OWNER/REPO[:QUANT] pulled as `stoker pull` does, in Stoker's process; progress
        in Ollama's stream shape ({status, digest, total, completed} lines, then success)."""
        name = str(body.get("model") or body.get("name") or "")
        refusal = rules.pull_refusal(name)
        if refusal is not None:
            return self._error(request, 400, refusal)
        library = self._gw._library
        if library is None:  # an in-process gateway (tests, benches) has no process of Stoker's to ask
            return self._error(request, 501, "pulls and deletes over the API need Stoker's gateway process; "
                               "use `stoker pull` or `stoker remove` instead.")
        lines: asyncio.Queue = asyncio.Queue()
        loop = asyncio.get_running_loop()
        def heard(m) -> None:  # on the link's reader thread
            loop.call_soon_threadsafe(lines.put_nowait, m)

        library.library("pull", name, heard)
        if body.get("stream") is False:
            while not (last := await lines.get()).done:
                pass
            if last.error:
                return self._error(request, 400, last.error)
            return self._json(request, {"status": "success"})
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/x-ndjson",
                                                           "X-Accel-Buffering": "no"})
        self._gw._cors_headers(request, response.headers)
        response.enable_chunked_encoding()
        await response.prepare(request)
        while True:
            m = await lines.get()
            if m.done:
                await response.write(_line(rules.error(m.error) if m.error else {"status": "success"}))
                break
            line: dict = {"status": m.status}
            if m.total is not None:
                line.update(digest=m.status.removeprefix("pulling "), total=m.total, completed=m.completed or 0)
            await response.write(_line(line))
        await response.write_eof()
        return response

    async def _delete(self, request: web.Request, body: dict) -> web.Response:
        """Only what Stoker pulled is deleted (its engine is stopped first); anything else is refused."""
        name = body.get("model") or body.get("name")
        entry = await self._entry(name)
        if entry is None:
            return self._error(request, 404, rules.not_found(str(name or "")))
        if entry.origin != "pulled":  # said before its engine is touched; Stoker's process checks again
            return self._error(request, 400, f"{entry.id} was not pulled by Stoker (it comes from {entry.origin}), "
                               "so it is not deleted; remove it with the tool that put it there.")
        library = self._gw._library
        if library is None:  # an in-process gateway (tests, benches) has no process of Stoker's to ask
            return self._error(request, 501, "pulls and deletes over the API need Stoker's gateway process; "
                               "use `stoker pull` or `stoker remove` instead.")
        self._gw._sup.submit(cmd.UnloadModel(entry.path))  # once its requests end; its files go now
        loop = asyncio.get_running_loop()
        ended: asyncio.Future = loop.create_future()

        def settle(m) -> None:
            if m.done and not ended.done():
                ended.set_result(m)

        def heard(m) -> None:  # on the link's reader thread
            loop.call_soon_threadsafe(settle, m)

        library.library("delete", entry.path, heard)
        m = await ended
        if m.error:
            return self._error(request, 400, f"{entry.id}: {m.error}")
        return self._json(request, {"status": "success"})

    # ------------------------------------------------------------------ generation

    async def _answer(self, request: web.Request, path: str, body: dict) -> web.StreamResponse:
        gw = self._gw
        name = body.get("model")
        entry = await self._entry(name)
        if entry is None:
            return self._error(request, 404 if name else 400,
                               rules.not_found(name) if name else "The request names no model; name one in `model`.")
        want = ModelKind.EMBEDDING if path in (EMBED, EMBEDDINGS) else ModelKind.CHAT
        if entry.kind is not want:
            able = tuple(e.id for e in gw._catalog.current.serving(want))
            return self._error(request, 400, wrong_kind_message(entry.id, entry.kind,
                                                                "/v1/embeddings" if want is ModelKind.EMBEDDING
                                                                else "/v1/chat/completions", able))
        keep = rules.request_keep_alive(body)
        num_ctx = rules.requested_num_ctx(body)
        empty = (path == CHAT and not body.get("messages")) or (path == GENERATE and not body.get("prompt")
                                                                 and not body.get("suffix"))
        if empty and keep is not None and keep.unload_after:
            # Open WebUI's and Ollama's own "unload now": no generation, nothing is loaded for it.
            gw._sup.submit(cmd.UnloadModel(entry.path))
            return self._json(request, {"model": entry.id, "created_at": rules.iso_time(time.time()),
                                        "response": "", "done": True, "done_reason": "unload"})
        if not empty:
            _translate(path, body, entry, _streams(path, body))  # a request it cannot be is refused before a load
        started = time.monotonic()
        route, error = await gw.forwarder.lease(request, path, entry.path)
        if error is not None:
            return error
        assert route is not None  # lease gives a route or an error, never neither
        note = None
        if num_ctx is not None:
            route, note, error = await self._widen(request, path, entry, route, num_ctx)
            if error is not None:
                return error
        load_s = time.monotonic() - started
        try:
            if keep is not None and not keep.unload_after:
                gw._sup.submit(cmd.KeepAlive(entry.path, keep.seconds))
            if empty:  # a load without a prompt: Ollama's way to preload a model
                return self._json(request, {"model": entry.id, "created_at": rules.iso_time(time.time()),
                                            "response": "", "done": True, "done_reason": "load"})
            return await self._forward(request, path, body, entry, route, started, load_s, note)
        finally:
            gw._sup.routes.release(route)
            if keep is not None and keep.unload_after:
                gw._sup.submit(cmd.UnloadModel(entry.path))

    async def _widen(self, request: web.Request, path: str, entry: CatalogEntry, route, num_ctx: int):
        """num_ctx above the running plan: ask the supervisor to plan again with it and wait
        for its decision; re-planned means the route closed and the reloaded one is leased."""
        gw = self._gw
        view = self._views().get(entry.path)
        have = view.ctx_per_slot if view is not None else None
        if have is None or num_ctx <= have:
            return route, None, None
        if view is not None and view.context_asked is not None and view.context_asked[0] == num_ctx:
            return route, view.context_asked[1], None  # decided before, for this engine: clamped
        loop = asyncio.get_running_loop()
        decided: asyncio.Future = loop.create_future()

        def settle(note: str) -> None:
            if not decided.done():
                decided.set_result(note)

        def on_snapshot(snap: AppSnapshot) -> None:  # on the link's reader thread
            for v in snap.engines:
                if v.model_path == entry.path and v.context_asked and v.context_asked[0] == num_ctx:
                    loop.call_soon_threadsafe(settle, v.context_asked[1])

        unsubscribe = gw._sup.subscribe(on_snapshot)
        gw._sup.routes.release(route)  # the supervisor may restart it: nothing of ours in flight
        try:
            gw._sup.submit(cmd.WidenContext(entry.path, num_ctx))
            try:
                note = await asyncio.wait_for(decided, WIDEN_WAIT_S)
            except TimeoutError:
                note = f"the context stayed at {have:,} tokens per slot (Stoker did not decide in time)"
        finally:
            unsubscribe()
        route, error = await gw.forwarder.lease(request, path, entry.path)
        return route, note, error

    async def _forward(self, request: web.Request, path: str, body: dict, entry: CatalogEntry, route,
                       started: float, load_s: float, note: str | None) -> web.StreamResponse:
        stream = _streams(path, body)
        upstream_path, payload = _translate(path, body, entry, stream)
        headers = {"Content-Type": "application/json", "Accept-Encoding": "identity"}
        if route.engine_key:
            headers["Authorization"] = f"Bearer {route.engine_key}"
        # A header carries Latin-1 only; the body's `stoker_context` keeps the sentence whole.
        extra = {"X-Stoker-Context": note.encode("latin-1", "replace").decode("latin-1")} if note else {}
        session = self._gw._session
        if session is None:  # the gateway is stopping
            return self._error(request, 503, "Stoker's endpoint is stopping; try again in a moment.")
        try:
            upstream = await send_to_engine(session, "POST", route.endpoint + upstream_path,
                                            data=json.dumps(payload), headers=headers)
        except (TimeoutError, ClientConnectionError) as exc:
            log.warning("%s: the engine at %s failed: %r", path, route.endpoint, exc)
            return self._error(request, 502, "the model's engine stopped while answering; Stoker restarts it "
                               "on the next request.")
        try:
            if upstream.status >= 400:
                return self._error(request, upstream.status, _upstream_message(await upstream.read()))
            if stream:
                return await self._stream(request, upstream, upstream_path, entry, started, load_s, extra, note)
            try:
                data = json.loads(await upstream.read())
            except (ClientError, ValueError) as exc:
                log.warning("%s: the engine's answer could not be read: %r", path, exc)
                return self._error(request, 502, "the model's engine stopped while answering; Stoker restarts it "
                                   "on the next request.")
            now, total = time.time(), time.monotonic() - started
            if path in (EMBED, EMBEDDINGS):
                out = rules.embed_answer(data, entry.id, total, load_s, legacy=path == EMBEDDINGS,
                                         dimensions=body.get("dimensions") if isinstance(body.get("dimensions"),
                                                                                         int) else None)
            elif upstream_path == "/v1/chat/completions":
                out = rules.chat_answer(data, entry.id, now, total, load_s, generate=path == GENERATE)
            else:
                out = rules.completion_answer(data, entry.id, now, total, load_s)
            if note:
                out["stoker_context"] = note
            return self._json(request, out, headers=extra)
        finally:
            upstream.close()

    async def _stream(self, request: web.Request, upstream, upstream_path: str, entry: CatalogEntry,
                      started: float, load_s: float, extra: dict, note: str | None) -> web.StreamResponse:
        generate = upstream_path != "/v1/chat/completions"
        chat_generate = request.path == GENERATE
        headers = {"Content-Type": "application/x-ndjson", "X-Accel-Buffering": "no", "Cache-Control": "no-cache",
                   **extra}
        self._gw._cors_headers(request, headers)
        response = web.StreamResponse(status=200, headers=headers)
        response.enable_chunked_encoding()
        await response.prepare(request)
        state = rules.ChatStream()
        last_native: dict = {}
        try:
            async for raw in upstream.content:
                line = raw.strip()
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    break
                try:
                    event = json.loads(data)
                except ValueError:
                    log.warning("%s: the engine sent a line that is not JSON: %r", request.path, data[:200])
                    continue
                if "error" in event:
                    message = event["error"].get("message") if isinstance(event["error"], dict) else event["error"]
                    await response.write(_line(rules.error(str(message))))
                    await response.write_eof()
                    return response
                if generate:
                    if event.get("stop"):
                        last_native = event
                        if event.get("content"):
                            await response.write(_line(rules.completion_stream_line(event, entry.id, time.time())))
                        break
                    await response.write(_line(rules.completion_stream_line(event, entry.id, time.time())))
                    continue
                state, lines = rules.chat_stream_step(state, event, entry.id, time.time(), generate=chat_generate)
                for out in lines:
                    await response.write(_line(out))
        except ClientError:  # the connection broke, or the chunked body did
            await response.write(_line(rules.error("the model's engine stopped while answering; Stoker restarts "
                                                   "it on the next request.")))
            await response.write_eof()
            return response
        now, total = time.time(), time.monotonic() - started
        if generate:
            final = rules.completion_answer({**last_native, "content": ""}, entry.id, now, total, load_s)
            if note:
                final["stoker_context"] = note
            await response.write(_line(final))
        else:
            for out in rules.chat_stream_end(state, entry.id, now, total, load_s, generate=chat_generate):
                if out.get("done") and note:
                    out["stoker_context"] = note
                await response.write(_line(out))
        await response.write_eof()
        return response

    # ------------------------------------------------------------------ helpers

    def _json(self, request: web.Request, obj: dict, status: int = 200, headers: dict | None = None) -> web.Response:
        out = dict(headers or {})
        self._gw._cors_headers(request, out)
        return web.json_response(obj, status=status, headers=out)

    def _error(self, request: web.Request, status: int, message: str) -> web.Response:
        return self._json(request, rules.error(message), status)


def _keep_alive_of(body: bytes) -> rules.KeepAlive | None:
    # Most requests have neither field: look before parsing the body a second time.
    if b'"keep_alive"' not in body and b'"ttl"' not in body:
        return None
    try:
        obj = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    return rules.request_keep_alive(obj) if isinstance(obj, dict) else None


def keep_alive_refusal(body: bytes) -> str | None:
    """On the OpenAI routes: the sentence for a keep_alive / ttl that is not a duration."""
    try:
        _keep_alive_of(body)
    except rules.OllamaRequestError as exc:
        return str(exc)
    return None


def submit_keep_alive(sup, model_path: str, body: bytes) -> None:
    """After an OpenAI-route answer: the request's keep_alive / ttl for its model (0: unload)."""
    keep = _keep_alive_of(body)
    if keep is None:
        return
    sup.submit(cmd.UnloadModel(model_path) if keep.unload_after else cmd.KeepAlive(model_path, keep.seconds))


_ROUTES = frozenset({"/api/version", "/api/tags", "/api/ps", "/api/show", "/api/pull", "/api/delete",
                     CHAT, GENERATE, EMBED, EMBEDDINGS})


def _streams(path: str, body: dict) -> bool:
    return body.get("stream", True) is not False and path in (CHAT, GENERATE)


def _translate(path: str, body: dict, entry: CatalogEntry, stream: bool) -> tuple[str, dict]:
    """(llama-server path, body) for an Ollama request; OllamaRequestError when it cannot be."""
    vision = bool(entry.facts and entry.facts.projector)
    if path == CHAT:
        return "/v1/chat/completions", rules.chat_request(body, entry.id, vision=vision, stream=stream)
    if path == GENERATE:
        return rules.generate_request(body, entry.id, vision=vision, stream=stream)
    return "/v1/embeddings", rules.embed_request(body, entry.id, legacy=path == EMBEDDINGS)


def _line(obj: dict) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


def _upstream_message(raw: bytes) -> str:
    """llama-server's error sentence from its JSON error body (or the text as it came)."""
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return raw.decode("utf-8", "replace").strip()[:500] or "the engine refused the request"
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict):
        return str(err.get("message") or err)
    return str(err or body)
