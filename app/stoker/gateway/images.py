"""The gateway's image requests: OpenAI's `/v1/images/generations` mapped onto sd-server's
`/sdapi/v1/txt2img` and back, the choice of image model when a request names none, and the
cancel that stops an engine which cannot cancel a request it has started.

Kept out of stoker/gateway/server.py so the gateway's handler stays the shape it is (it moves into a
child process): these functions use only what the handler already has, `gw._sup.snapshot()`,
`gw._sup.submit(command)`, `gw._sup.routes`, `gw._catalog.current`, its session and its
error helpers. The mapping rules themselves are stoker/engines/sd_server.py; what may be cancelled is
stoker/engines/kind.py. It decides nothing about memory or lifecycles.
"""

from __future__ import annotations

import asyncio
import json
import logging

from aiohttp import web

from stoker.engines.kind import describe
from stoker.engines.sd_server import ImageRequestError, openai_to_txt2img, plan_image_launch, txt2img_to_openai
from stoker.fleet import commands as cmd
from stoker.fleet.snapshot import EngineState
from stoker.gateway.rules import IMAGES_GENERATIONS
from stoker.gateway.upstream import UPSTREAM_ERRORS, send_to_engine
from stoker.library.image_parts import ImageModel
from stoker.library.model_ids import CatalogEntry, ModelKind

log = logging.getLogger(__name__)


def cancel_if_engine_cannot(sup, route, reason: str) -> None:
    """A request left before its answer: an engine that cannot cancel it inside (sd-server
    renders on whatever happens) is stopped, an expected exit, so it does not go on using the
    machine for nobody; the next request starts it again. Other engines stop the work when
    the upstream connection closes, which the caller does anyway."""
    if route is not None and not describe(route.kind).cancellable_in_engine:
        sup.submit(cmd.CancelRender(model_path=route.key, reason=reason))


def image_model_for(gw, entry: CatalogEntry | None) -> CatalogEntry | str:
    """The image model a request goes to: the one it names, else the loaded one, else the only
    one there is; or the sentence saying what to name."""
    if entry is not None:
        return entry
    images = gw._catalog.current.serving(ModelKind.IMAGE)
    ready = {e.model_path for e in gw._sup.snapshot().engines if e.state is EngineState.READY}
    loaded = [e for e in images if e.path in ready]
    if loaded:
        return loaded[0]
    if len(images) == 1:
        return images[0]
    if not images:
        return ("no image model is installed; put a diffusion model GGUF with its VAE and text encoder "
                "in one folder of the library, then name it as `model`.")
    return f"name the image model as `model`: {', '.join(e.id for e in images[:5])}."


async def serve_image_request(gw, request: web.Request, path: str, body: bytes,
                              entry: CatalogEntry | None) -> web.StreamResponse:
    """`/v1/images/generations` mapped onto sd-server; `/sdapi/v1/*` passed through as is."""
    chosen = image_model_for(gw, entry)
    if isinstance(chosen, str):
        return gw._error(path, 400, chosen, param="model", request=request)
    if path != IMAGES_GENERATIONS:
        return await gw.forwarder.forward(request, path, body, chosen.path)
    try:
        obj = json.loads(body or b"{}")
        call = openai_to_txt2img(obj, plan_image_launch(chosen.image or ImageModel(chosen.id, checkpoint=chosen.path)))
    except (ValueError, UnicodeDecodeError) as exc:
        message = str(exc) if isinstance(exc, ImageRequestError) else "the request body must be JSON"
        return gw._error(path, 400, message, request=request)
    route, error = await gw.forwarder.lease(request, path, chosen.path)
    if error is not None:
        return error
    upstream = None
    try:
        try:
            upstream = await send_to_engine(gw._session, "POST", route.endpoint + call.path, json=call.body)
            reply = await upstream.read()
        except UPSTREAM_ERRORS:
            sentence = await gw.forwarder.incident_for(route)
            return gw._error(path, 502, f"the image engine stopped before the render finished: {sentence}",
                             request=request)
        try:
            answer = json.loads(reply)
        except ValueError:
            answer = None
        if upstream.status != 200 or not isinstance(answer, dict):
            return web.Response(status=upstream.status if upstream.status >= 400 else 502, body=reply,
                                content_type="application/json")
        try:
            return gw._json(request, txt2img_to_openai(answer))
        except ImageRequestError as exc:
            return gw._error(path, 502, str(exc), request=request)
    except (ConnectionResetError, asyncio.CancelledError):
        cancel_if_engine_cannot(gw._sup, route, "the client left mid-render")
        raise
    finally:
        if upstream is not None:
            upstream.close()
        gw._sup.routes.release(route)
